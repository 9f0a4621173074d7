#!/usr/bin/env bash
# Pack what run_device.sh / run_grid.sh (this folder) need from a build
# directory into .devrun/b.tar.gz (git-ignored), the folder the device tool
# carries to the GPU machine. From the repository root:
#   bash tools/device/pack.sh BUILD_DIR
# DEVRUN=.devrun-x (here and on the device, for the run scripts) names another
# folder, so that two builds can be carried in turn without repacking.
# SLIM=1 leaves out prefill_check and quant_row_check and compresses with xz
# (b.tar.xz, which the run scripts unpack as well): two slim packs of builds
# made with -Dsm100=false (about 12 MB each) fit one call's carried tree
# beside the repository, for an A/B of two builds in the same call.
# Binaries find libfusedmoe through $ORIGIN rpaths; the Debian libraries the
# GPU machine lacks go into .devrun/lib.
set -euo pipefail
B=${1:?usage: pack.sh BUILD_DIR}
R=${DEVRUN:-.devrun}
D=$R/b
rm -rf "$D" && mkdir -p "$D"/cli "$D"/tests/cuda "$D"/plugins/reference "$D"/plugins/cuda "$R"/lib
find "$B" -maxdepth 1 -name "libfusedmoe.so*" ! -type d -exec cp -a {} "$D"/ \;
cp "$B"/cli/fusedmoe "$D"/cli/
cp "$B"/tests/cuda/cuda_check "$B"/tests/cuda/test_cuda_layout "$D"/tests/cuda/
[ -x "$B"/tests/cuda/grouped_gemm_check ] && cp "$B"/tests/cuda/grouped_gemm_check "$D"/tests/cuda/
if [ "${SLIM:-0}" != 1 ]; then
  [ -x "$B"/tests/cuda/prefill_check ] && cp "$B"/tests/cuda/prefill_check "$D"/tests/cuda/
  [ -x "$B"/tests/cuda/quant_row_check ] && cp "$B"/tests/cuda/quant_row_check "$D"/tests/cuda/
fi
cp "$B"/plugins/reference/libfmoe-reference.so "$B"/plugins/reference/reference.toml "$D"/plugins/reference/
cp "$B"/plugins/cuda/libfmoe-cuda.so "$B"/plugins/cuda/cuda.toml "$D"/plugins/cuda/
for lib in libjansson.so.4 libtomlplusplus.so.3 libsubunit.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$R"/lib/ 2>/dev/null || true
done
# Debug info is most of the size, and the carried tree is limited to 64 MiB.
find "$D" -type f \( -name "*.so*" -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
# Compressed: the fatbins (sm_90a + sm_100a code) would not fit the carried tree otherwise.
rm -f "$R"/b.tar.gz "$R"/b.tar.xz
if [ "${SLIM:-0}" = 1 ]; then
  tar -C "$R" -cf - b | xz -9 > "$R"/b.tar.xz
else
  tar -C "$R" -czf "$R"/b.tar.gz b
fi
rm -rf "$D"
du -sh "$R"
