#!/usr/bin/env bash
# Device call 1: the plan over many blocks (plan_count_kernel + plan_scatter_kernel, kernels.cu)
# and per-token activation rows a warp each (act_token_warp_kernel, prefill_act.cu), one build,
# A/B by environment: FMCU_PLAN_WIDE=0 (the one-block plan) and FMCU_PF_ACT_WARP=0 (a block per
# row) give main's kernels. Checks first (FMCU_PLAN_WIDE=1: the wide plan on every conformance
# case, every tier), then prefill_check --bench A/B (stage times, output hashes), ncu of the plan
# kernels, and `fusedmoe bench` A/B.
set -uo pipefail
D=.devrun-plan; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== prefill_check"; timeout 300 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -30
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check prefill, FMCU_PLAN_WIDE=1"; FMCU_PLAN_WIDE=1 FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
for t in auto tiled stream prefill; do
  echo "== conform $t tier, FMCU_PLAN_WIDE=1"
  FMCU_PLAN_WIDE=1 FMOE_CUDA_TIER=$t timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done
} 2>&1 | tee $OUT/check.txt
bench() { # SHAPE M SCHEMES
  for w in 0 8; do
    echo "== FMCU_PF_ACT_WARP=$w $1 M=$2 $3"
    FMCU_PF_ACT_WARP=$w PREFILL_BENCH_M=$2 PREFILL_BENCH_SCHEMES=$3 timeout 120 $B/tests/cuda/prefill_check $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"
  done
}
{
bench qwen3-30b 8192 channel
bench qwen3-30b 1024 channel
bench deepseek 8192 channel
} 2>&1 | tee $OUT/bench.txt
FP8=fp8e4m3:channel/fp8e4m3:token:dynamic
timeout 120 $NCU --cache-control none --clock-control none -k regex:plan_ -c 6 --csv --page raw \
  --metrics gpu__time_duration.sum $B/cli/fusedmoe --plugin $C bench --backend cuda \
  --scheme $FP8 --shape qwen3-30b-a3b --tokens 8192 --max-gib 24 --no-reference 2>&1 \
  | grep '^"' > $OUT/ncu-plan-qwen3-fp8-8192.csv
echo "== ncu plan: $(grep -o '"[a-z_]*kernel[^"]*"\|"[0-9,.]*"$' $OUT/ncu-plan-qwen3-fp8-8192.csv | tr '\n' ' ')"
for v in "0 0" "1 8"; do
  set -- $v
  echo "== FMCU_PLAN_WIDE=$1 FMCU_PF_ACT_WARP=$2"
  for sh in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
    FMCU_PLAN_WIDE=$([ $1 = 1 ] && echo 8192 || echo 0) FMCU_PF_ACT_WARP=$2 timeout 200 $B/cli/fusedmoe --plugin $C bench \
      --backend cuda --scheme $FP8 --shape $sh --tokens 1024,8192 --max-gib 24 --no-reference 2>&1 | tail -3
  done
done 2>&1 | tee $OUT/fusedmoe-bench.txt
