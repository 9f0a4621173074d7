#!/usr/bin/env bash
# Device call 4: GEMM2 on 192 columns only where that pads H less than the base width (128
# below 128 rows per expert, 256 from 128): gpt-oss-120b (H = 2880). Checks, then the forward
# against the kinds before (FMCU_PF_OWN: 13/23 at M=1024, 12/22 at M=8192), twice.
set -uo pipefail
exec > >(tee $OUT/log-go4.txt) 2>&1
T0=$(date +%s); date -u
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-gg}
mkdir -p /tmp/bP && rm -rf /tmp/bP/b && tar -C /tmp/bP -xzf $D/b.tar.gz
B=/tmp/bP/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -3
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E > $OUT/cuda_check4.txt 2>&1; tail -1 $OUT/cuda_check4.txt
echo "== conform"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C > $OUT/conform4.txt 2>&1; grep -E "^(FAIL|cuda |result)" $OUT/conform4.txt
echo "t=$(( $(date +%s) - T0 ))s"
fw() { echo "== forward $1 $2 M=$3 FMCU_PF_OWN=${4:-default}"; env ${4:+FMCU_PF_OWN=$4} PREFILL_BENCH_M=$3 PREFILL_BENCH_SCHEMES=$2 timeout 100 $B/tests/cuda/prefill_check $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"; }
for r in 1 2; do
  fw gpt-oss channel 1024 13; fw gpt-oss channel 1024 ""
  fw gpt-oss channel 8192 12; fw gpt-oss channel 8192 ""
  fw gpt-oss bf16 1024 23; fw gpt-oss bf16 1024 ""
  fw gpt-oss bf16 8192 22; fw gpt-oss bf16 8192 ""
done 2>&1 | tee $OUT/fw4.txt
date -u
