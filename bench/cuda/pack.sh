#!/usr/bin/env bash
# Copy what run_device.sh needs from a build directory into .devrun/ (git-ignored),
# the folder the device tool carries to the GPU machine:
#   bash bench/cuda/pack.sh BUILD_DIR
# Binaries find libfusedmoe through $ORIGIN rpaths; the Debian libraries the
# GPU machine lacks go into .devrun/lib.
set -euo pipefail
B=${1:?usage: pack.sh BUILD_DIR}
D=.devrun/b
rm -rf "$D" && mkdir -p "$D"/cli "$D"/tests/cuda "$D"/plugins/reference "$D"/plugins/cuda .devrun/lib
cp -a "$B"/libfusedmoe.so* "$D"/
cp "$B"/cli/fusedmoe "$D"/cli/
cp "$B"/tests/cuda/cuda_check "$B"/tests/cuda/test_cuda_layout "$D"/tests/cuda/
cp "$B"/plugins/reference/libfmoe-reference.so "$B"/plugins/reference/reference.toml "$D"/plugins/reference/
cp "$B"/plugins/cuda/libfmoe-cuda.so "$B"/plugins/cuda/cuda.toml "$D"/plugins/cuda/
for lib in libjansson.so.4 libtomlplusplus.so.3 libsubunit.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .devrun/lib/ 2>/dev/null || true
done
du -sh .devrun
