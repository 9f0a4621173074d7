#!/usr/bin/env bash
# Device call 4: the conformance case that failed in call 3 with FMOE_CUDA_TIER=prefill (fp8 tensor
# static, m=3, seed 2893976155) on the final build (call 2's, .devrun-plan), with the one-block plan
# too, then the prefill tier with fresh seeds.
set -uo pipefail
D=.devrun-plan; . bench/cuda/devrun_env.sh
F=test/fp8e4m3:tensor/fp8e4m3:tensor/tokens:m3.e8.k2.h128.i64.silu.gated
for w in "" 0; do
  echo "== FMCU_PLAN_WIDE=$w prefill tier, seed 2893976155, $F"
  FMCU_PLAN_WIDE=$w FMOE_CUDA_TIER=prefill timeout 60 $B/cli/fusedmoe --plugin $R conform --plugin $C --filter $F --seed 2893976155 2>&1 | grep -E "^(FAIL|result)|nmse"
done
echo "== auto tier, the same seed and case"
timeout 60 $B/cli/fusedmoe --plugin $R conform --plugin $C --filter $F --seed 2893976155 2>&1 | grep -E "^(FAIL|result)|nmse"
for r in 1 2 3 4 5 6; do
  echo "== prefill tier, fresh seed ($r)"
  FMOE_CUDA_TIER=prefill timeout 60 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done 2>&1 | tee $OUT/conform-prefill.txt
