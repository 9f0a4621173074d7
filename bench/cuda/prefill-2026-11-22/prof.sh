#!/usr/bin/env bash
# Stage profile of the prefill path: prefill_check_tune (tuning build) on the
# four grid shapes, bf16 and fp8 channel, M = 1024 and 8192, per kernel variant.
set -uo pipefail
B=/tmp/bI/b
R=$B/plugins/reference/reference.toml; E=$PWD/tests/conformance/empty.toml
P=/tmp/bI/prefill_check_tune
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
export PREFILL_BENCH_M=1024,8192
for s in ${SHAPES:-qwen3-30b mixtral gpt-oss deepseek}; do
  for v in ${BF16_VARIANTS:-00 11 10 01}; do
    echo "== $s bf16 FMCU_PF_BF16=$v"
    FMCU_PF_BF16=$v PREFILL_BENCH_SCHEMES=bf16 timeout 120 $P $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
  done
  for v in ${FP8_VARIANTS:-20 23 10 13}; do
    echo "== $s fp8 channel FMCU_PF_FP8=$v"
    FMCU_PF_FP8=$v PREFILL_BENCH_SCHEMES=channel timeout 120 $P $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
  done
done
