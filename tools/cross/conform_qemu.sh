# Sourced by the tools/cross/test_*.sh scripts. Both functions run an aarch64
# build's fusedmoe under qemu-user (QEMU_CPU picks the emulated CPU) in the
# conformance suite's clean configuration (tests/conformance/meson.build),
# --isolated so nothing installed on the machine is seen:
#
#   fusedmoe_qemu BUILD ARGS...            fusedmoe ARGS... (a --config in ARGS
#                                          replaces the empty configuration)
#   conform_qemu BUILD MANIFEST [ARGS...]  fusedmoe conform --plugin MANIFEST:
#       every case except abi/probe-no-device, which re-executes the program:
#       qemu-user cannot exec an aarch64 binary without binfmt_misc, which CI
#       machines do not register.
fusedmoe_qemu() {
  local build=$1
  shift
  env FMOE_CONFIG="$PWD/tests/conformance/empty.toml" FMOE_PLUGIN_PATH= FMOE_PLUGIN_FILES= FMOE_BACKENDS= FMOE_OPTIONS= \
    qemu-aarch64 -L / "$build/cli/fusedmoe" --isolated "$@"
}

conform_qemu() {
  local build=$1 manifest=$2
  shift 2
  local common=(--plugin "$build/plugins/reference/reference.toml" conform --plugin "$manifest")
  fusedmoe_qemu "$build" "${common[@]}" --mode support --mode test --mode stress "$@" | tail -n 8
  local f
  for f in abi/exports abi/no-libfusedmoe abi/entry- abi/init abi/probe-twice abi/probe-no-room \
           abi/probe-report-small abi/query abi/method-slots abi/method-guarded abi/host-memory; do
    fusedmoe_qemu "$build" "${common[@]}" --mode abi --filter "$f" >/dev/null ||
      { echo "conform $f failed:"; fusedmoe_qemu "$build" "${common[@]}" --mode abi --filter "$f"; return 1; }
  done
  echo "conform abi: every case but probe-no-device passed"
}
