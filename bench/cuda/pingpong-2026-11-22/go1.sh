#!/usr/bin/env bash
# Device call 1: the grouped GEMM's ping-pong kinds (each consumer warp group its own 64-row
# tiles, the two in turn) against the cooperative ones (128-row tiles shared by both).
# Correctness of every kind first (grouped_gemm_check), then each kind alone on the model
# shapes (grouped_gemm_check --bench, fp8 and bf16), then the whole prefill forward with the
# kinds chosen by FMCU_PF_OWN (prefill_check --bench; "12"/"22" = the committed choice).
set -uo pipefail
exec > >(tee $OUT/log-go1.txt) 2>&1
T0=$(date +%s); date -u
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-pp}
mkdir -p /tmp/bP && rm -rf /tmp/bP/b && tar -C /tmp/bP -xzf $D/b.tar.gz
B=/tmp/bP/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== grouped_gemm_check"; timeout 120 $B/tests/cuda/grouped_gemm_check > $OUT/ggc.txt 2>&1; echo rc=$?
grep -v "^PASS " $OUT/ggc.txt | head -20; grep -c "^PASS " $OUT/ggc.txt
echo "t=$(( $(date +%s) - T0 ))s"
echo "== kinds alone, fp8"; GG_BENCH_M=1024,8192 timeout 150 $B/tests/cuda/grouped_gemm_check --bench 2>&1 | tee $OUT/gg-bench-fp8.txt
echo "t=$(( $(date +%s) - T0 ))s"
echo "== kinds alone, bf16"; GG_BENCH_BF16=1 GG_BENCH_M=1024,8192 timeout 150 $B/tests/cuda/grouped_gemm_check --bench 2>&1 | tee $OUT/gg-bench-bf16.txt
echo "t=$(( $(date +%s) - T0 ))s"
export PREFILL_BENCH_M=1024,8192
fw() { echo "== forward $1 $2 FMCU_PF_OWN=$3"; FMCU_PF_OWN=$3 PREFILL_BENCH_SCHEMES=$2 timeout 100 $B/tests/cuda/prefill_check $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"; }
for s in qwen3-30b gpt-oss; do
  for o in 12 64 14 62; do fw $s channel $o; done
  for o in 22 44; do fw $s bf16 $o; done
  echo "t=$(( $(date +%s) - T0 ))s"
done 2>&1 | tee $OUT/fw.txt
date -u
