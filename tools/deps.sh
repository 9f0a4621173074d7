#!/usr/bin/env bash
# Debian packages fusedmoe builds and tests with (DESIGN.md, Dependencies).
set -euo pipefail
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  build-essential meson ninja-build pkg-config check libsubunit-dev \
  libtomlplusplus-dev libjansson-dev python3 python3-venv python3-pip clang-format \
  libdnnl-dev gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null

# --- bounded fuzzing in CI (tests/fuzz/run_ci.sh): clang's libFuzzer runtime
$sudo_cmd apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null

# --- CUDA plugin: CUTLASS headers (plugins/cuda, docs/CUDA.md) -------------
# The pinned nvidia-cutlass wheel, unpacked into the user's cache where
# plugins/cuda/meson.build finds it (or pass -Dcutlass_include=DIR). Only
# when nvcc is there; a failed download does not fail the dependencies.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cutlass_dir="${XDG_CACHE_HOME:-$HOME/.cache}/fusedmoe/nvidia-cutlass-4.2.0.0"
  if [ ! -f "$cutlass_dir/include/cutlass/cutlass.h" ]; then
    tmp=$(mktemp -d)
    if python3 -m pip download -q nvidia-cutlass==4.2.0.0 --no-deps -d "$tmp" >/dev/null 2>&1 &&
       python3 - "$tmp"/nvidia_cutlass-4.2.0.0-*.whl "$cutlass_dir" <<'PY'
import sys, zipfile, os
whl, dest = sys.argv[1], sys.argv[2]
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            out = os.path.join(dest, "include", n[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(n))
PY
    then
      echo "CUTLASS 4.2.0.0 headers in $cutlass_dir/include"
    else
      echo "warning: could not fetch nvidia-cutlass==4.2.0.0 (the cuda plugin builds without it)" >&2
    fi
    rm -rf "$tmp"
  fi
fi

# --- cpu_arm and cpu on aarch64: aarch64 builds of the libraries, for the
# cross build run under qemu-user (tools/cross/aarch64-linux-gnu.ini,
# docs/CPU_ARM.md, docs/CPU.md). oneDNN's runtime only: libdnnl-dev:arm64
# cannot be installed beside libdnnl-dev (tools/cross/dnnl_arm64.sh unpacks
# its headers into a cache folder instead) ---------------------------------
$sudo_cmd dpkg --add-architecture arm64
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends \
  libjansson-dev:arm64 libtomlplusplus-dev:arm64 check:arm64 libsubunit-dev:arm64 libdnnl2:arm64 >/dev/null

# --- rocm: Debian's HIP compiler and runtime headers (plugins/rocm,
# docs/ROCM.md), for compiling the plugin's HIP sources for gfx90a/gfx940.
# No AMD GPU is needed; the plugin loads libamdhip64 with dlopen at probe
# time and reports "no AMD GPU" where there is none ------------------------
$sudo_cmd apt-get install -y -qq --no-install-recommends hipcc libamdhip64-dev >/dev/null
