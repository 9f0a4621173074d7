#!/usr/bin/env bash
# Session "dec", call 3: the split-K stream GEMM that holds one token tile and
# walks the tile's token tiles (80-90 registers, 5-6 CTAs per SM), with the
# first weight batch issued as soon as the expert is known. Unset FMCU_DEC =
# the new kernel; FMCU_DEC=0 = the committed (HEAD) kernel, for A/B.
set -uo pipefail
exec > >(tee $OUT/log-go3.txt) 2>&1
date -u
D=.devrun-dec
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier $1 FMCU_DEC=${2:-unset}"; env ${2:+FMCU_DEC=$2} FMOE_CUDA_TIER=$1 timeout 100 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?; grep -v "^PASS" /tmp/cc.txt | head -20; grep -c "^PASS" /tmp/cc.txt; }
cc stream; cc auto; cc stream 0
echo "== conform"
timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform-new.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform-new.txt | head -20
date -u
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { env ${1:+FMCU_DEC=$1} timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    $4 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral)|rror" | sed "s|^|D${1:-new} ${2%%:*} |"; }
QG="--shape qwen3-30b-a3b --shape gpt-oss-120b"
for v in 0 ""; do bench "$v" $CH 1,16 "$QG"; done
date -u
for v in 0 ""; do bench "$v" $CH 1,128 "--shape qwen3-30b-a3b --shape mixtral-8x7b"; done
for v in 0 ""; do bench "$v" bf16 1,16 "$QG"; done
date -u
