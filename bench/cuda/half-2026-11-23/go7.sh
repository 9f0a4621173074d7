#!/usr/bin/env bash
# Device call 7: go6.sh's A/B again (its file did not come back): prefill_check --bench with main's
# former setting (fixed order, whole tiles) and the default, each shape twice, alternating.
set -uo pipefail
D=.devrun-half4; . bench/cuda/devrun_env.sh
for r in 1 2; do
for sh in qwen3-30b mixtral gpt-oss deepseek; do
  for cfg in "FMCU_GG_ORDER=fixed FMCU_GG_HALF=0" "FMCU_GG_ORDER=default"; do
    echo "== $cfg $sh"
    env $cfg PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=bf16,channel timeout 120 \
      $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed" | sed -E 's/mma.sync.*out/out/'
  done
done
done > $OUT/prefill-ab.txt 2>&1
grep -E "^==|forward" $OUT/prefill-ab.txt | awk '/^==/{t=$2" "$NF; next}{print t, $5}' | paste - - - -
