#!/usr/bin/env bash
# Device call 1: the overlapped kind of our grouped GEMM (n128-fast-ov, kind 5: two accumulators,
# the next tile's first stages issued before this tile's epilogue). grouped_gemm_check (every kind
# against the double reference, the new kind's bits against n128-fast), --bench, then prefill_check
# with FMCU_PF_OWN selecting it (checks; --bench A/B with output hashes).
set -uo pipefail
D=.devrun-ov; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== grouped_gemm_check"; timeout 200 $B/tests/cuda/grouped_gemm_check 2>&1 | grep -E "FAIL|-ov|passed|failed|<--|seed" | tail -40
} 2>&1 | tee $OUT/gg-check.txt
{
echo "== grouped_gemm_check --bench e4m3"; GG_BENCH_KINDS=12345 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
echo "== grouped_gemm_check --bench bf16"; GG_BENCH_BF16=1 GG_BENCH_KINDS=2345 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
} 2>&1 | tee $OUT/gg-bench.txt
{
echo "== prefill_check FMCU_PF_OWN=15"; FMCU_PF_OWN=15 timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed"
echo "== prefill_check FMCU_PF_OWN=55 bf16"; FMCU_PF_OWN=55 timeout 200 $B/tests/cuda/prefill_check $R $E --check bf16 2>&1 | grep -E "FAIL|passed"
} 2>&1 | tee $OUT/prefill-check.txt
{
pf_bench_own qwen3-30b 8192 channel default 15 default 15
pf_bench_own qwen3-30b 8192 bf16 default 25 55 default 25 55
pf_bench_own qwen3-30b 1024 channel default 15
pf_bench_own deepseek 8192 channel default 15
pf_bench_own gpt-oss 8192 channel default 15
pf_bench_own mixtral 8192 channel default 15
} 2>&1 | tee $OUT/prefill-bench.txt
