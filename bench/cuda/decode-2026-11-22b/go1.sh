#!/usr/bin/env bash
# Session "dec", call 1: correctness of the prefetch build under every switch,
# then graph-timed A/B of the FMCU_DEC switches (one build, env-selected).
set -uo pipefail
exec > >(tee $OUT/log-go1.txt) 2>&1
date -u
D=.devrun-dec
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
cc() { echo "== cuda_check tier $1 FMCU_DEC=$2"; FMCU_DEC=$2 FMOE_CUDA_TIER=$1 timeout 100 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?; grep -v "^PASS" /tmp/cc.txt | head -20; grep -c "^PASS" /tmp/cc.txt; }
cc stream 63; cc auto 63; cc stream 0
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_DEC=$1 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --shape gpt-oss-120b --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss)|rror" | sed "s|^|D$1 ${2%%:*} |"; }
for v in 0 32 33 34 44 63 47 16 0 63; do bench $v $CH 1,16,128; done
date -u
for v in 0 32 63 47 0 63; do bench $v bf16 1,16; done
date -u
