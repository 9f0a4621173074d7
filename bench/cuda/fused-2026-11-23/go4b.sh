#!/usr/bin/env bash
# Device call 4b (after 4a: go4a.sh): the kernel with x loaded before the weight streams, a copy warp for the W2 copies
# and GEMM2's epilogue operands, the plan by warp shuffles. First the instrumented build
# (.devrun-stamps: phase stamps), then the clean one (.devrun-fused): checks, conformance, A/B.
set -uo pipefail
exec > >(tee $OUT/log-go4b.txt) 2>&1
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
export FMOE_CONFIG=$PWD/tests/conformance/empty.toml
D=.devrun-fused
mkdir -p /tmp/bF && rm -rf /tmp/bF/b && tar -C /tmp/bF -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bF/b:$PWD/$D/lib
B=/tmp/bF/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier $1"; FMOE_CUDA_TIER=$1 timeout 90 $B/tests/cuda/cuda_check $R > $OUT/cc-$1.txt 2>&1; echo rc=$?;
       grep -v "^PASS" $OUT/cc-$1.txt | head -8; grep -c "^PASS" $OUT/cc-$1.txt; }
cc stream
cc auto
echo "== conform"
timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -12
bench() { FMCU_FUSED=$1 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --tokens 1,2 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|F$1 ${2%%:*} |" | tee -a $OUT/bench4.txt; }
: > $OUT/bench4.txt
for v in 1 0 1 0; do bench $v $CH; done
for v in 1 0 1 0; do bench $v bf16; done
