#!/usr/bin/env bash
# Build and test everything, the way CI does (dependencies installed by
# .ci/run or tools/deps.sh):
#   1. release-style build (warnings are errors) and `meson test`;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the per-layer lock and the reference plugin's EP groups (ranks as threads) under
#      ThreadSanitizer (tests/registry/test_layer_threads.c, tests/ep/test_ep_reference.c),
#      and each fuzz harness for 40 s (tests/fuzz/run_ci.sh);
#   4. install to a prefix, build examples/vendor-plugin out of tree against
#      the installed SDK, check the registry serves it through a TOML file and
#      that it passes every conformance mode; then the Python package's tests
#      against that install (tests/python/run.sh);
#   5. cross-build for aarch64 (everything, warnings are errors) and run under
#      qemu-user the cpu_arm plugin's tests and conform on three emulated CPUs
#      (docs/CPU_ARM.md), then plugins/cpu's tests and conform and the choice
#      between the two (docs/CPU.md, "aarch64").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

echo "== formatting: every C/C++ source as .clang-format says (tools/check_format.sh)"
bash tools/check_format.sh

echo "== build + unit tests"
rm -rf build build-asan
meson setup build -Dwerror=true --prefix="$root/_install" >/dev/null
meson compile -C build -j "$jobs"
meson test -C build --print-errorlogs --num-processes "$jobs"

echo "== sanitizers (address, undefined)"
meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbuildtype=debug >/dev/null
meson compile -C build-asan -j "$jobs"
# tests/cpu/meson.build narrows LeakSanitizer's roots for the cpu pool tests
# (a GCC 12 runtime fault; the reason is written there).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --num-processes "$jobs"

echo "== ThreadSanitizer: one layer forwarded from several threads (fusedmoe.h, Threads)"
rm -rf build-tsan
meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug \
  -Dcuda=disabled -Dcpu=disabled -Dcpu_arm=disabled >/dev/null
ninja -C build-tsan -j "$jobs" plugins/reference/libfmoe-reference.so tests/registry/test_layer_threads \
  tests/ep/test_ep_reference tests/plugins/libfixture_device_v10.so tests/plugins/libfixture_ok.so >/dev/null
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/registry/test_layer_threads build-tsan/plugins/reference/reference.toml
# EP ranks as threads of one process (the reference plugin's groups, docs/EP.md).
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/ep/test_ep_reference build-tsan/plugins/reference/reference.toml \
  build-tsan/tests/plugins/libfixture_device_v10.so build-tsan/tests/plugins/libfixture_ok.so

echo "== fuzzing: each harness for a bounded time (clang libFuzzer, tests/fuzz/run_ci.sh)"
bash tests/fuzz/run_ci.sh 40

echo "== install + out-of-tree vendor plugin"
meson install -C build --quiet
bash tests/example_vendor.sh "$root/_install"

echo "== Python package: pip install ./python, pytest tests/python (docs/PYTHON.md)"
bash tests/python/run.sh "$root/_install"

echo "== aarch64 cross build + cpu_arm and cpu under qemu-user (docs/CPU_ARM.md, docs/CPU.md)"
rm -rf build-arm
# The second machine file points the build at oneDNN's aarch64 headers.
meson setup build-arm --cross-file tools/cross/aarch64-linux-gnu.ini \
  --cross-file "$(bash tools/cross/dnnl_arm64.sh)" -Dwerror=true -Dtests=true \
  -Dcpu_arm=enabled -Dcpu=enabled -Dcuda=disabled >/dev/null
meson compile -C build-arm -j "$jobs"
bash tools/cross/test_cpu_arm.sh build-arm
bash tools/cross/test_cpu.sh build-arm
echo "all tests passed"
