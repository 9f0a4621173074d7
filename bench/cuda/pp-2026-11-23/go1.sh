#!/usr/bin/env bash
# Device call 1: ping-pong kinds of our grouped GEMM (64-row tiles, the two consumer warp groups in
# turn; kinds 5-7, plugins/cuda/grouped_gemm_sm90.cu). grouped_gemm_check (every kind against the
# double reference, and each ping-pong kind's bits against its cooperative twin), its --bench on the
# grid's shapes (uniform routing), then prefill_check with the prefill tier's GEMMs swapped by
# FMCU_PF_OWN (checks, then --bench A/B: stage times and output hashes).
set -uo pipefail
D=.devrun-pp; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== grouped_gemm_check"; timeout 200 $B/tests/cuda/grouped_gemm_check 2>&1 | grep -E "FAIL|pp|passed|failed|<--|seed" | tail -60
} 2>&1 | tee $OUT/gg-check.txt
{
echo "== grouped_gemm_check --bench e4m3"; GG_BENCH_KINDS=1234567 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
echo "== grouped_gemm_check --bench bf16"; GG_BENCH_BF16=1 GG_BENCH_KINDS=234567 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
} 2>&1 | tee $OUT/gg-bench.txt
{
echo "== prefill_check FMCU_PF_OWN=15"; FMCU_PF_OWN=15 timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed"
echo "== prefill_check FMCU_PF_OWN=55 bf16"; FMCU_PF_OWN=55 timeout 200 $B/tests/cuda/prefill_check $R $E --check bf16 2>&1 | grep -E "FAIL|passed"
} 2>&1 | tee $OUT/prefill-check.txt
bench() { # SHAPE M SCHEMES OWN...
  local sh=$1 m=$2 sc=$3; shift 3
  for o in "$@"; do
    echo "== FMCU_PF_OWN=$o $sh M=$m $sc"
    FMCU_PF_OWN=$o PREFILL_BENCH_M=$m PREFILL_BENCH_SCHEMES=$sc timeout 120 $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed"
  done
}
{
bench qwen3-30b 8192 channel default 15 default 15
bench qwen3-30b 8192 bf16 default 25 55 default 25 55
bench deepseek 8192 channel default 15
bench gpt-oss 8192 channel default 17 15
bench qwen3-30b 1024 channel default 15
} 2>&1 | tee $OUT/prefill-bench.txt
