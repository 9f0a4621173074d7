#!/usr/bin/env bash
# Session "dec", call 2: the schedule variants of stream_gemm_v2 (FMCU_DEC bits:
# 1 new schedule, 2 epilogue loads hoisted, 4 evict-first weights, 8 one token
# tile when pairs <= 8, 16 with it 8 chunks a batch); 0 = the committed kernel.
set -uo pipefail
exec > >(tee $OUT/log-go2.txt) 2>&1
date -u
D=.devrun-dec
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier $1 FMCU_DEC=$2"; FMCU_DEC=$2 FMOE_CUDA_TIER=$1 timeout 100 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?; grep -v "^PASS" /tmp/cc.txt | head -20; grep -c "^PASS" /tmp/cc.txt; }
cc stream 1; cc stream 3; cc stream 15; cc stream 27; cc auto 11
echo "== conform FMCU_DEC=11"
FMCU_DEC=11 timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform-11.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform-11.txt | head -20
date -u
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_DEC=$1 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --shape gpt-oss-120b --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss)|rror" | sed "s|^|D$1 ${2%%:*} |"; }
for v in 0 1 3 11 27 15 0 11; do bench $v $CH 1,16; done
date -u
for v in 0 11 3 0; do bench $v bf16 1,16; done
date -u
