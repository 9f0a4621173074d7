#!/usr/bin/env bash
# Device call 3: grouped_gemm_check's whole report, then the grid at M = 128, 1024, 8192 with
# conformance and cuda_check (bench/cuda/grid/final11) on the build of call 2.
set -uo pipefail
export DEVRUN=.devrun-half2
D=$DEVRUN; . bench/cuda/devrun_env.sh
timeout 150 $B/tests/cuda/grouped_gemm_check > $OUT/grouped_gemm_check.txt 2>&1; echo grouped_gemm_check rc=$?
tail -1 $OUT/grouped_gemm_check.txt
bash bench/cuda/grid/final/go.sh 128,1024,8192 final11-a conform
