#!/usr/bin/env bash
# Run plugins/cpu's tests and `fusedmoe conform` in an aarch64 build
# directory (cross-built with tools/cross/aarch64-linux-gnu.ini and the
# machine file of tools/cross/dnnl_arm64.sh) under qemu-user, and check the
# selection between plugins/cpu and plugins/cpu_arm (docs/CPU.md, "aarch64").
# On aarch64 plugins/cpu has its portable kernels only, so one emulated CPU
# (max) covers its paths; oneDNN picks its own (NEON/SVE) code under it.
# Usage: tools/cross/test_cpu.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: $0 BUILD_DIR}
# shellcheck source=tools/cross/conform_qemu.sh
. tools/cross/conform_qemu.sh
export QEMU_CPU=max

echo "-- qemu -cpu max: plugins/cpu tests"
meson test -C "$build" --no-rebuild --suite cpu --no-suite cpu_arm --print-errorlogs |
  grep -vE '^(Ninja|Expected|Unexpected|Skipped|Timeout|Full log|$)'
echo "-- qemu -cpu max: conform --plugin cpu"
# OMP_NUM_THREADS=1: under qemu oneDNN's OpenMP team only adds emulated
# spinning (the unit tests above run with it too).
OMP_NUM_THREADS=1 conform_qemu "$build" "$build/plugins/cpu/cpu.toml"

# With both plugins loaded: W4A8 goes to cpu_arm (NEON kernels, 10-30)
# rather than plugins/cpu's portable ones (5); bf16, which cpu_arm does not
# serve, to plugins/cpu.
explain() {
  fusedmoe_qemu "$build" --plugin "$build/plugins/reference/reference.toml" --plugin "$build/plugins/cpu/cpu.toml" \
    --plugin "$build/plugins/cpu_arm/cpu_arm.toml" explain "$@"
}
expect_chosen() {
  local want=$1 scheme=$2 out
  shift 2
  out=$(explain --scheme "$scheme" "$@")
  if ! grep -q "^selected: $want/" <<<"$out"; then
    echo "explain --scheme $scheme: expected $want to be chosen:"; echo "$out"; return 1
  fi
  echo "explain --scheme $scheme: $want"
}
expect_chosen cpu_arm 'int4:group32:scale-bf16/int8:token:dynamic:asym' --dtype f32
expect_chosen cpu 'int8:channel/int8:token:dynamic' --dtype f32
expect_chosen cpu bf16
