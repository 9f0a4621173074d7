#!/usr/bin/env bash
# Device call 1: what bounds the prefill activation kernel (act_kernel). ncu's speed-of-light,
# occupancy, launch and warp-state sections for one act_kernel launch per case, M = 8192.
set -uo pipefail
D=.devrun-amax; . bench/cuda/devrun_env.sh
for c in "qwen3-30b channel" "qwen3-30b bf16" "deepseek channel" "mixtral channel"; do
  set -- $c
  echo "===== $1 $2 M=8192"
  PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=$2 timeout 150 $NCU --cache-control none --clock-control none \
    -k regex:act_kernel -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    $B/tests/cuda/prefill_check $R $E --bench $1 2>&1 | grep -vE "^(BENCH|      forward|device|all passed)" | grep -E "^\s+[A-Z]|=====|act_kernel" | head -90
done 2>&1 | tee $OUT/ncu-act.txt
