#!/usr/bin/env bash
# Device call 1 for the overlapped kinds (experiments.patch; README.md): on the build of main plus the
# patch, (a) main's own checks, first run on a GPU since launch_shape.c (session 14): test_cuda_layout,
# cuda_check, prefill_check, conformance; (b) grouped_gemm_check: every kind against the double
# reference, kinds 5-7 bit for bit against their twins, kind 8 reported; (c) --bench of the kinds
# alone on the model shapes. ~6 min.
set -uo pipefail
D=.devrun-ov; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
{
echo "== test_cuda_layout"; $B/tests/cuda/test_cuda_layout 2>&1 | tail -2
echo "== cuda_check"; timeout 240 $B/tests/cuda/cuda_check $R $C $E 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -8
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|failed|seed"
echo "== conform"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | tail -7
} 2>&1 | tee $OUT/main-checks.txt
{
echo "== grouped_gemm_check"
timeout 240 $B/tests/cuda/grouped_gemm_check 2>&1 | grep -E "FAIL|-ov|halves|passed|failed|<--|seed|outside|written"
} 2>&1 | tee $OUT/gg-check.txt
{
echo "== grouped_gemm_check --bench e4m3 (GEMM1: 1 default, 6, 8; GEMM2: 2 default, 3, 5, 7)"
GG_BENCH_KINDS=1235678 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
echo "== grouped_gemm_check --bench bf16 (2 default, 3, 4, 5, 7)"
GG_BENCH_BF16=1 GG_BENCH_KINDS=23457 timeout 150 $B/tests/cuda/grouped_gemm_check --bench
} 2>&1 | tee $OUT/gg-bench.txt
