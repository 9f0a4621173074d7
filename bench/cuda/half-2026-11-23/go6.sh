#!/usr/bin/env bash
# Device call 6 (the final build: tile order by kind): grouped_gemm_check's whole report, then the grid at M = 128, 1024, 8192 with
# conformance and cuda_check (bench/cuda/grid/final11) on the build of call 6.
set -uo pipefail
export DEVRUN=.devrun-half4
D=$DEVRUN; . bench/cuda/devrun_env.sh
timeout 150 $B/tests/cuda/grouped_gemm_check > $OUT/grouped_gemm_check.txt 2>&1; echo grouped_gemm_check rc=$?
tail -1 $OUT/grouped_gemm_check.txt
bash bench/cuda/grid/final/go.sh 128,1024,8192 final11-b conform
# The same call's A/B: prefill_check --bench with main's former setting (fixed order, whole tiles) and the default.
for sh in qwen3-30b mixtral gpt-oss deepseek; do
  for cfg in "FMCU_GG_ORDER=fixed FMCU_GG_HALF=0" "FMCU_GG_ORDER=default"; do
    echo "== $cfg $sh"
    env $cfg PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=bf16,channel timeout 120 \
      $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed" | sed -E 's/mma.sync.*out/out/'
  done
done > $OUT/prefill-ab.txt 2>&1
