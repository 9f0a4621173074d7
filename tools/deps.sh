#!/usr/bin/env bash
# Debian packages fusedmoe builds and tests with (DESIGN.md, Dependencies).
set -euo pipefail
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  build-essential meson ninja-build pkg-config check libsubunit-dev \
  libtomlplusplus-dev libjansson-dev python3 \
  libdnnl-dev gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null

# --- cpu_arm: aarch64 builds of the libraries, for the cross build run under
# qemu-user (tools/cross/aarch64-linux-gnu.ini, docs/CPU_ARM.md) ------------
$sudo_cmd dpkg --add-architecture arm64
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  libjansson-dev:arm64 libtomlplusplus-dev:arm64 check:arm64 libsubunit-dev:arm64 >/dev/null
