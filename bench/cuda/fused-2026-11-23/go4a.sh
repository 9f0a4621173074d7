#!/usr/bin/env bash
# Device call 4a (with 4b: go4b.sh): the kernel with x loaded before the weight streams, a copy warp for the W2 copies
# and GEMM2's epilogue operands, the plan by warp shuffles. First the instrumented build
# (.devrun-stamps: phase stamps), then the clean one (.devrun-fused): checks, conformance, A/B.
set -uo pipefail
exec > >(tee $OUT/log-go4a.txt) 2>&1
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
export FMOE_CONFIG=$PWD/tests/conformance/empty.toml
mkdir -p /tmp/bS && rm -rf /tmp/bS/b && tar -C /tmp/bS -xzf .devrun-stamps/b.tar.gz
for s in $CH bf16; do
  echo "== stamps $s"
  LD_LIBRARY_PATH=/tmp/bS/b:$PWD/.devrun-stamps/lib timeout 60 /tmp/bS/b/cli/fusedmoe --plugin /tmp/bS/b/plugins/cuda/cuda.toml bench --backend cuda --scheme "$s" \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference > /tmp/o.txt 2>&1; grep -E "^(qwen3)|rror" /tmp/o.txt; grep STAMP /tmp/o.txt | tail -12
done
