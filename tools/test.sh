#!/usr/bin/env bash
# Build and test everything, the way CI does (dependencies installed by
# .ci/run or tools/deps.sh):
#   1. release-style build (warnings are errors) and `meson test`;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. install to a prefix, build examples/vendor-plugin out of tree against
#      the installed SDK, and check the registry serves it through a TOML file;
#   4. cross-build for aarch64 and run the cpu_arm plugin's tests and conform
#      under qemu-user on three emulated CPUs (docs/CPU_ARM.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

echo "== build + unit tests"
rm -rf build build-asan
meson setup build -Dwerror=true --prefix="$root/_install" >/dev/null
meson compile -C build -j "$jobs"
meson test -C build --print-errorlogs --num-processes "$jobs"

echo "== sanitizers (address, undefined)"
meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbuildtype=debug >/dev/null
meson compile -C build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --num-processes "$jobs"

echo "== install + out-of-tree vendor plugin"
meson install -C build --quiet
bash tests/example_vendor.sh "$root/_install"

echo "== aarch64 cross build + cpu_arm under qemu-user (docs/CPU_ARM.md)"
rm -rf build-arm
meson setup build-arm --cross-file tools/cross/aarch64-linux-gnu.ini -Dwerror=true -Dtests=true \
  -Dcpu_arm=enabled -Dcpu=disabled -Dcuda=disabled >/dev/null
meson compile -C build-arm -j "$jobs" cli/fusedmoe fmoe-reference fmoe-cpu_arm test_cpu_arm_kernels test_cpu_arm_plugin
bash tools/cross/test_cpu_arm.sh build-arm
echo "all tests passed"
