#!/usr/bin/env bash
# Run the cpu_arm plugin's tests and `fusedmoe conform` in an aarch64 build
# directory (cross-built with tools/cross/aarch64-linux-gnu.ini) under
# qemu-user, once per emulated CPU so that every micro-kernel path runs
# (docs/CPU_ARM.md):
#   max          SDOT + SMMLA  -> i8mm kernels
#   neoverse-n1  SDOT, no I8MM -> dotprod kernels (the fallback)
#   cortex-a72   neither       -> portable kernels
#   max with FMOE_ARM_ISA=portable: the override (unit tests; conform ran on
#                the portable kernels under cortex-a72 already)
# Usage: tools/cross/test_cpu_arm.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: $0 BUILD_DIR}
# shellcheck source=tools/cross/conform_qemu.sh
. tools/cross/conform_qemu.sh
conform() { conform_qemu "$build" "$build/plugins/cpu_arm/cpu_arm.toml"; }

# run CPU EXPECTED_HWCAP_LEVEL yes|no(conform) [VAR=value ...]
run() {
  local cpu=$1 expect=$2 with_conform=$3
  shift 3
  echo "-- qemu -cpu $cpu (HWCAP: $expect) $*"
  (
    export QEMU_CPU="$cpu" FMOE_ARM_EXPECT_ISA="$expect" "$@"
    meson test -C "$build" --no-rebuild --suite cpu_arm --print-errorlogs | grep -vE '^(Ninja|Expected|Unexpected|Skipped|Timeout|Full log|$)'
    if [ "$with_conform" = yes ]; then conform; fi
  )
}

run max i8mm yes
run neoverse-n1 dotprod yes
run cortex-a72 portable yes
run max i8mm no FMOE_ARM_ISA=portable
