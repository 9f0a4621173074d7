#!/usr/bin/env bash
# tools/device/pack_rocm.sh BUILD_DIR - pack the NVIDIA test build of the rocm
# plugin (a build configured with -Drocm_cuda_test=true) with the CLI, the
# library and the reference plugin into .devrun-rocm/b.tar.gz (git-ignored),
# the folder the device tool carries; tools/device/conform_rocm.sh unpacks it
# there. The Debian libraries the GPU machine lacks go into .devrun-rocm/lib.
set -euo pipefail
B=${1:?usage: pack_rocm.sh BUILD_DIR}
R=.devrun-rocm
D=$R/b
rm -rf "$R" && mkdir -p "$D"/cli "$D"/plugins/reference "$D"/plugins/rocm "$R"/lib
find "$B" -maxdepth 1 -name "libfusedmoe.so*" ! -type d -exec cp -a {} "$D"/ \;
cp "$B"/cli/fusedmoe "$D"/cli/
cp "$B"/plugins/reference/libfmoe-reference.so "$B"/plugins/reference/reference.toml "$D"/plugins/reference/
cp "$B"/plugins/rocm/libfmoe-rocm_cuda.so "$B"/plugins/rocm/libfmoe-rocm_cuda-kernels.so \
  "$B"/plugins/rocm/rocm_cuda.toml "$D"/plugins/rocm/
for lib in libjansson.so.4 libtomlplusplus.so.3; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$R"/lib/ 2>/dev/null || true
done
find "$D" -type f \( -name "*.so*" -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
tar -C "$R" -czf "$R"/b.tar.gz b && rm -rf "$D"
du -sh "$R"
