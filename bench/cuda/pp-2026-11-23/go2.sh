#!/usr/bin/env bash
# Device call 2: the GEMM2 tile width on Qwen3-30B-A3B (K = I = 768), which call 1's
# grouped_gemm_check --bench found fastest at 128 columns (fp8) and 192 (bf16) against the
# prefill tier's 256: the forward with FMCU_PF_OWN overriding GEMM2's kind, alternating.
set -uo pipefail
D=.devrun-pp; . bench/cuda/devrun_env.sh
bench() { # SHAPE M SCHEMES OWN...
  local sh=$1 m=$2 sc=$3; shift 3
  for o in "$@"; do
    echo "== FMCU_PF_OWN=$o $sh M=$m $sc"
    FMCU_PF_OWN=$o PREFILL_BENCH_M=$m PREFILL_BENCH_SCHEMES=$sc timeout 120 $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed"
  done
}
{
bench qwen3-30b 8192 channel default 13 default 13 default 13
bench qwen3-30b 8192 bf16 default 24 23 default 24 23
bench qwen3-30b 1024 channel default 13
} 2>&1 | tee $OUT/prefill-bench-width.txt
