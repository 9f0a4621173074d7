#!/usr/bin/env bash
# Device call 2: the final form (warp rows up to 4 chunks a lane, I <= 1024): prefill_check
# (3 new warp-row cases), then spec/performance.md's grid at M = 1024 and 8192 with conformance and
# cuda_check (bench/cuda/grid/final/go.sh; files under bench/cuda/grid/final9/).
set -uo pipefail
D=.devrun-plan; . bench/cuda/devrun_env.sh
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|warp" | tee $OUT/prefill_check.txt
DEVRUN=.devrun-plan bash bench/cuda/grid/final/go.sh 1024,8192 final9-b conform
