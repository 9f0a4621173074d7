#!/usr/bin/env bash
# Correctness of a build (prefill tier forced and auto) + the stage bench + ncu of act_kernel.
set -uo pipefail
B=/tmp/bI/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml; E=$PWD/tests/conformance/empty.toml
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
if [ -n "${MARKSTEIN:-}" ]; then
  nvcc -O3 -gencode=arch=compute_90a,code=sm_90a .devrun-pf/markstein.cu -o /tmp/markstein && /tmp/markstein
fi
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|nmse" | tail -40
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -2
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -2
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
for seed in ${SEEDS:-1 2}; do
  echo "== conform prefill seed $seed"
  FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed $seed 2>&1 | grep -E "^(FAIL|cuda |result)"
done
if [ -n "${BENCH:-1}" ]; then
  echo "== bench"
  PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=${BENCH_SCHEMES:-bf16,channel} timeout 300 $B/tests/cuda/prefill_check $R $E --bench ${BENCH_SHAPE:-} 2>&1 | grep -v "^device\|^all passed"
fi
if [ -n "${NCU:-}" ]; then
  echo "== ncu act_kernel"
  PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=channel timeout 200 ncu --kernel-name regex:act_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    $B/tests/cuda/prefill_check $R $E --bench $NCU 2>&1 | grep -vE "^(BENCH|      forward)" | tail -90
fi
if [ -n "${REGS:-}" ]; then
  echo "== registers of the small kernels"
  cuobjdump --dump-resource-usage $B/tests/cuda/prefill_check 2>/dev/null | grep -A1 -E "Function .*(act_kernel|quant_token|fixup|gather|combine)" | grep -oE "Function [^:]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+" | paste - - | cut -c1-160
fi
