#!/usr/bin/env bash
# Build and test everything, the way CI does (dependencies installed by
# .ci/run or tools/deps.sh):
#   1. release-style build (warnings are errors) and `meson test`;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. install to a prefix, build examples/vendor-plugin out of tree against
#      the installed SDK, and check the registry serves it through a TOML file.
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
echo "all tests passed"
