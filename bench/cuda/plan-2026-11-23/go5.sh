#!/usr/bin/env bash
# Device call 5: after the refactor that moved block_max into device_math.cuh, made act_math.cuh use
# device_math.cuh's activations and gave the two plans one count_pairs: the checks and the hashes.
set -uo pipefail
D=.devrun-gc; . bench/cuda/devrun_env.sh
{
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed"
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
echo "== conform FMCU_PLAN_WIDE=1"; FMCU_PLAN_WIDE=1 timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=bf16,channel timeout 120 $B/tests/cuda/prefill_check $R $E --bench qwen3-30b 2>&1 | grep -v "^device\|^all passed"
} 2>&1 | tee $OUT/check.txt
