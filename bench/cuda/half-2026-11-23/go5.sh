#!/usr/bin/env bash
# Device call 5: our grouped GEMMs alone (grouped_gemm_check --bench, random routing, M = 1024 and
# 8192, the kinds the prefill tier uses) in the four settings of go4.sh, two rounds, fp8 and bf16.
set -uo pipefail
D=.devrun-half3; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
{
for round in 1 2; do
  for bf in 0 1; do
    for cfg in "fixed 1" "counter 0" "counter 1" "fixed 0"; do
      set -- $cfg
      echo "== bf16=$bf order=$1 whole=$2"
      GG_BENCH_BF16=$bf GG_BENCH_ROUTING=random GG_BENCH_ORDER=$1 GG_BENCH_WHOLE=$2 \
        GG_BENCH_KINDS=$([ $bf = 1 ] && echo 234 || echo 123) timeout 100 $B/tests/cuda/grouped_gemm_check --bench 2>&1
    done
  done
done
} > $OUT/gemms.txt 2>&1
