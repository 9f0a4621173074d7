#!/usr/bin/env bash
# Device call 1 for half tiles in our grouped GEMM (README.md): checks (grouped_gemm_check, whose
# every kind runs with whole tiles and with half tiles and must give the same bits; cuda_check and
# conformance with the prefill tier forced and by default), then the GEMMs alone under random
# routing and the prefill forward's stages, FMCU_GG_HALF=0 (whole tiles) against the default.
set -uo pipefail
D=.devrun-half; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
{
echo "== grouped_gemm_check"; timeout 150 $B/tests/cuda/grouped_gemm_check 2>&1 | grep -v "^PASS"
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -4
echo "== conform prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)|seed" | head -8
} 2>&1 | tee $OUT/checks.txt
{
for w in 1 0; do
  echo "== GEMMs alone, random routing, GG_BENCH_WHOLE=$w"
  GG_BENCH_ROUTING=random GG_BENCH_WHOLE=$w GG_BENCH_KINDS=12 timeout 100 $B/tests/cuda/grouped_gemm_check --bench 2>&1
done
} 2>&1 | tee $OUT/gemms.txt
{
for sh in qwen3-30b mixtral gpt-oss; do
  for h in 0 1; do
    echo "== FMCU_GG_HALF=$h $sh"
    FMCU_GG_HALF=$h PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=bf16,channel timeout 120 \
      $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed"
  done
done
} 2>&1 | tee $OUT/prefill.txt
