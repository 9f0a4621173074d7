#!/usr/bin/env bash
# Device call 2 (instrumented build, not committed: globaltimer stamps per phase printed by
# CTAs 0, 16, ..., at their 300th call; FMCU_FUSED_DBG=1 leaves out the W2 copies, =2 GEMM1's units:
# wrong outputs, timing only).
set -uo pipefail
exec > >(tee $OUT/log-go2.txt) 2>&1
D=${DEVRUN:-.devrun-stamps}
mkdir -p /tmp/bS && rm -rf /tmp/bS/b && tar -C /tmp/bS -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bS/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bS/b
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
run() { echo "== $1 dbg=$2"; FMCU_FUSED_DBG=$2 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3)|rror|STAMP" | sort -k3 -n | head -30; }
run $CH 0
run $CH 1
run $CH 2
run bf16 0
