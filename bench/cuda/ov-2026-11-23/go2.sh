#!/usr/bin/env bash
# Device call 2: the overlapped kinds in the forward (prefill_check: correctness with each new kind,
# then --bench stage times and output hashes per FMCU_PF_OWN = GEMM1 kind, GEMM2 kind; "default" is
# main's choice: fp8 1 then 2 (3 below 128 rows, 4 for gpt-oss-120b), bf16 2 then 2). ~7 min.
set -uo pipefail
D=.devrun-ov; . bench/cuda/devrun_env.sh
{
for o in 65 87; do echo "== prefill_check FMCU_PF_OWN=$o"; FMCU_PF_OWN=$o timeout 150 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|failed|seed"; done
for o in 25 27 75; do echo "== prefill_check FMCU_PF_OWN=$o bf16"; FMCU_PF_OWN=$o timeout 150 $B/tests/cuda/prefill_check $R $E --check bf16 2>&1 | grep -E "FAIL|passed|failed|seed"; done
} 2>&1 | tee $OUT/prefill-check.txt
{
pf_bench_own qwen3-30b 8192 channel default 62 82 15 17 65 87 default
pf_bench_own qwen3-30b 8192 bf16 default 25 27 75 default
pf_bench_own qwen3-30b 1024 channel default 62 82 15 default
pf_bench_own deepseek 8192 channel default 62 82 65 default
pf_bench_own gpt-oss 8192 channel default 62 82 65 default
pf_bench_own mixtral 8192 channel default 62 82 65 default
pf_bench_own mixtral 1024 channel default 62 82 default
} 2>&1 | tee $OUT/prefill-bench.txt
