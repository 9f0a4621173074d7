# Sourced by the device scripts (run_device.sh, run_grid.sh, devrun_env.sh):
# fmoe_unpack SRC DEST unpacks the build that tools/device/pack.sh packed into
# SRC (b.tar.xz from SLIM=1, else b.tar.gz) as DEST/b, replacing any earlier one.
fmoe_unpack() {
  mkdir -p "$2" && rm -rf "$2/b" || return
  if [ -f "$1/b.tar.xz" ]; then tar -C "$2" -xJf "$1/b.tar.xz"; else tar -C "$2" -xzf "$1/b.tar.gz"; fi
}
