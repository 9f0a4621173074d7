#!/usr/bin/env bash
# Device call 3 (instrumented build, not committed): stamps at every 50th call (printed by CTAs
# 0, 16, ...); FMCU_FUSED_DBG = 10 + n: the same without the cooperative launch attribute.
set -uo pipefail
exec > >(tee $OUT/log-go3.txt) 2>&1
D=${DEVRUN:-.devrun-stamps}
mkdir -p /tmp/bS && rm -rf /tmp/bS/b && tar -C /tmp/bS -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bS/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bS/b
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
run() { echo "== $1 dbg=$2"; FMCU_FUSED_DBG=$2 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference > /tmp/o.txt 2>&1; grep -E "^(qwen3)|rror" /tmp/o.txt; grep -c STAMP /tmp/o.txt; grep STAMP /tmp/o.txt | tail -12; }
run $CH 0
run $CH 10
run $CH 11
run $CH 12
run bf16 0
run bf16 10
