#!/usr/bin/env bash
# Device call 3: GEMM2 on the 192-column fast kind where I <= 4096 (own_kinds), against the
# kinds before (FMCU_PF_OWN=12 fp8 / 22 bf16), whole prefill forward at M=8192 where the
# choice changed (Qwen3-30B-A3B, gpt-oss-120b, DeepSeek-V3); checks first.
set -uo pipefail
exec > >(tee $OUT/log-go3.txt) 2>&1
T0=$(date +%s); date -u
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-gg}
mkdir -p /tmp/bP && rm -rf /tmp/bP/b && tar -C /tmp/bP -xzf $D/b.tar.gz
B=/tmp/bP/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -3
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E > $OUT/cuda_check.txt 2>&1; tail -1 $OUT/cuda_check.txt
echo "== conform"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C > $OUT/conform.txt 2>&1; grep -E "^(FAIL|cuda |result)" $OUT/conform.txt
echo "t=$(( $(date +%s) - T0 ))s"
export PREFILL_BENCH_M=8192
fw() { echo "== forward $1 $2 FMCU_PF_OWN=${3:-default}"; env ${3:+FMCU_PF_OWN=$3} PREFILL_BENCH_SCHEMES=$2 timeout 100 $B/tests/cuda/prefill_check $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"; }
for s in qwen3-30b gpt-oss deepseek; do
  for o in 12 "" 12 ""; do fw $s channel "$o"; done
  for o in 22 ""; do fw $s bf16 "$o"; done
  echo "t=$(( $(date +%s) - T0 ))s"
done 2>&1 | tee $OUT/fw3.txt
date -u
