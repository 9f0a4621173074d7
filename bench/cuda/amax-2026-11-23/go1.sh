#!/usr/bin/env bash
# Device call 1: the exact amax of the dynamic per-tensor GEMM2 input (amax_exact_kernel).
# Conformance with fresh seeds (4 runs) and seeds 1-8 on the prefill tier, prefill_check's NMSE
# per case, cuda_check on the prefill tier, the forward of the scheme at M = 1024 and 8192, and
# ncu of the new kernel inside those forwards.
set -uo pipefail
D=.devrun-amax; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
for r in 1 2 3 4; do
  echo "== conform auto, fresh seed ($r)"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done
for s in 1 2 3 4 5 6 7 8; do
  echo "== conform prefill tier seed $s"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed $s 2>&1 | grep -E "^(FAIL|result)"
done
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "tensor dyn|FAIL|passed"
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192
{
for s in qwen3-30b deepseek; do
  echo "== $s tensor dynamic"
  PREFILL_BENCH_SCHEMES=tensor:dyn timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
done
} 2>&1 | tee $OUT/bench.txt
for s in qwen3-30b deepseek; do
  PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=tensor:dyn timeout 200 $NCU --cache-control none --clock-control none \
    -k regex:"amax_|act_kernel|quant_staged" -c 12 --csv --page raw --metrics gpu__time_duration.sum \
    $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep '^"' > $OUT/ncu-$s.csv
  echo "== ncu $s: $(wc -l < $OUT/ncu-$s.csv) lines"
done
