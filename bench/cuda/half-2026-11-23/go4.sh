#!/usr/bin/env bash
# Device call 4: same-process-kind A/B of the tile order and half tiles (the grid of call 3 ran on
# a machine whose peaks differed from final9's by up to 5%). prefill_check --bench (stage times,
# graph-replayed forward, output hash) per setting, two rounds alternating:
#   fixed-whole  FMCU_GG_ORDER=fixed FMCU_GG_HALF=0   (main before this change)
#   counter-whole FMCU_GG_HALF=0
#   counter-halves (the default now)
#   fixed-halves FMCU_GG_ORDER=fixed
# then `fusedmoe bench` on two fp8 M=8192 points, fixed-whole against the default.
set -uo pipefail
D=.devrun-half3; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
timeout 150 $B/tests/cuda/grouped_gemm_check > $OUT/grouped_gemm_check.txt 2>&1; echo grouped_gemm_check rc=$?
grep -v "^PASS" $OUT/grouped_gemm_check.txt; tail -1 $OUT/grouped_gemm_check.txt
run() { local tag=$1 sh=$2; shift 2
  echo "== $tag $sh"
  env "$@" PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=bf16,channel timeout 120 \
    $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed" | sed -E 's/mma.sync.*out/out/'
}
{
for round in 1 2; do
  for sh in qwen3-30b mixtral gpt-oss deepseek; do
    run fixed-whole $sh FMCU_GG_ORDER=fixed FMCU_GG_HALF=0
    run counter-halves $sh FMCU_GG_ORDER=counter
    run counter-whole $sh FMCU_GG_HALF=0
    run fixed-halves $sh FMCU_GG_ORDER=fixed
  done
done
} 2>&1 > $OUT/prefill.txt
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { local sh=$1 m=$2 sc=$3; shift 3
  env "$@" timeout 90 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$sc" --shape $sh --tokens $m \
    --max-gib 24 --no-reference 2>&1 | grep -E "^($sh)|rror" | sed "s|^|[$*] ${sc%%/*} |"; }
{
for r in 1 2; do for sh in qwen3-30b-a3b gpt-oss-120b; do
  bench $sh 8192 $CH FMCU_GG_ORDER=fixed FMCU_GG_HALF=0; bench $sh 8192 $CH FMCU_GG_ORDER=counter
done; done
} 2>&1 | tee $OUT/bench.txt
