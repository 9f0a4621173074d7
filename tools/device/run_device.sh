#!/usr/bin/env bash
# Run the CUDA plugin's checks and timings on a GPU machine from a build
# carried as .devrun/ (made by tools/device/pack.sh BUILD_DIR): host-side tests, the
# correctness driver against the reference, the graph-replay timings, and
# `fusedmoe conform` on the plugin. Logs go to $OUT (or ./out).
# usage (device): bash tools/device/run_device.sh [all|check|bench|conform|run]
set -uo pipefail
cd "$(dirname "$0")/../.."   # the repository root: DEVRUN and tests/ are relative to it
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" /tmp/bI
. tools/device/unpack.sh && fmoe_unpack "${DEVRUN:-.devrun}" /tmp/bI  # any path: binaries use $ORIGIN rpaths
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/${DEVRUN:-.devrun}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=/tmp/bI/b
E=$PWD/tests/conformance/empty.toml
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.txt"
step=${1:-all}
if [ "$step" = all ] || [ "$step" = check ]; then
  echo "== test_cuda_layout"; $B/tests/cuda/test_cuda_layout $B/plugins/reference/libfmoe-reference.so \
    $B/plugins/cuda/libfmoe-cuda.so 2>&1 | tail -3
  echo "== probe"; FMOE_CONFIG=$E $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml probe 2>&1 | tee "$OUT/probe.txt"
  echo "== cuda_check"; timeout 300 $B/tests/cuda/cuda_check $B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $E 2>&1 | tee "$OUT/check.txt"
fi
if [ "$step" = all ] || [ "$step" = bench ]; then
  echo "== bench"; timeout 300 $B/tests/cuda/cuda_check $B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $E --bench 2>&1 | tee "$OUT/bench.txt"
fi
if [ "$step" = all ] || [ "$step" = conform ]; then
  echo "== conform (support mode, bf16)"
  FMOE_CONFIG=$E timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform \
    --plugin $B/plugins/cuda/cuda.toml --mode support --scheme bf16 2>&1 | tail -25 | tee "$OUT/conform.txt"
fi
if [ "$step" = all ] || [ "$step" = run ]; then
  echo "== fusedmoe run on the checkpoint fixtures and a synthetic layer, backend cuda (device tensors, ABI 1.1)"
  for m in bf16 fp8-tensor fp8-channel fp8-block; do
    FMOE_CONFIG=$E timeout 60 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml \
      --plugin $B/plugins/cuda/cuda.toml run --model tests/data/models/$m --backend cuda 2>&1 | tail -6
  done 2>&1 | tee "$OUT/run.txt"
  FMOE_CONFIG=$E timeout 60 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml \
    --plugin $B/plugins/cuda/cuda.toml run --backend cuda --scheme bf16 --experts 64 --top-k 6 --hidden 2048 \
    --intermediate 1408 --tokens 64 2>&1 | tail -8 | tee -a "$OUT/run.txt"
fi
