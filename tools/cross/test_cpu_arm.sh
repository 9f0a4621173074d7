#!/usr/bin/env bash
# Run the cpu_arm plugin's tests and `fusedmoe conform` in an aarch64 build
# directory (cross-built with tools/cross/aarch64-linux-gnu.ini) under
# qemu-user, once per emulated CPU so that every micro-kernel path runs
# (docs/CPU_ARM.md):
#   max          SDOT + SMMLA  -> i8mm kernels
#   neoverse-n1  SDOT, no I8MM -> dotprod kernels (the fallback)
#   cortex-a72   neither       -> portable kernels
#   max with the option isa = "portable" from a configuration file: the
#                probe and the query through the CLI (the unit tests set
#                every level through the option already; conform ran on
#                the portable kernels under cortex-a72)
# Usage: tools/cross/test_cpu_arm.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: $0 BUILD_DIR}
# shellcheck source=tools/cross/conform_qemu.sh
. tools/cross/conform_qemu.sh
conform() { conform_qemu "$build" "$build/plugins/cpu_arm/cpu_arm.toml"; }

# run CPU EXPECTED_HWCAP_LEVEL yes|no(conform): every test of the suite gets
# --expect-hwcap, so a QEMU_CPU that did not take fails instead of covering
# another path.
run() {
  local cpu=$1 expect=$2 with_conform=$3
  echo "-- qemu -cpu $cpu (HWCAP: $expect)"
  (
    export QEMU_CPU="$cpu"
    meson test -C "$build" --no-rebuild --suite cpu_arm --print-errorlogs --test-args="--expect-hwcap=$expect" |
      grep -vE '^(Ninja|Expected|Unexpected|Skipped|Timeout|Full log|$)'
    if [ "$with_conform" = yes ]; then conform; fi
  )
}

run max i8mm yes
run neoverse-n1 dotprod yes
run cortex-a72 portable yes

# The option isa through the host, as a user sets it: a configuration file
# with [plugins.cpu_arm.options] isa = "portable" under -cpu max (i8mm). The
# probe and the query must both name the portable kernels.
echo "-- qemu -cpu max, option isa = \"portable\" from a configuration file"
(
  export QEMU_CPU=max
  cfg=$(mktemp)
  trap 'rm -f "$cfg"' EXIT
  printf '[plugins.cpu_arm.options]\nisa = "portable"\n' >"$cfg"
  expect_line() {
    if ! grep -qF "$1" <<<"$2"; then echo "expected '$1' in:"; echo "$2"; exit 1; fi
    echo "$1"
  }
  out=$(fusedmoe_qemu "$build" --config "$cfg" --plugin "$build/plugins/cpu_arm/cpu_arm.toml" probe)
  expect_line 'W4A8 kernels: portable (from HWCAP: i8mm); option isa = "portable": using portable' "$out"
  out=$(fusedmoe_qemu "$build" --config "$cfg" --plugin "$build/plugins/reference/reference.toml" \
    --plugin "$build/plugins/cpu_arm/cpu_arm.toml" explain --scheme 'int4:group32:scale-bf16/int8:token:dynamic:asym' \
    --dtype f32)
  expect_line 'selected: cpu_arm/' "$out"
  expect_line 'portable kernels' "$out"
)
