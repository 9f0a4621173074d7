#!/bin/sh
# tests/rocm/check_code_objects.sh BUNDLER OBJECT ARCH... [-- OBJDUMP ARCH=INSTR...]
# The HIP object built by hipcc carries a code object for each ARCH (gfx90a,
# gfx940): its .hip_fatbin section is an offload bundle whose targets are
# listed. After `--`, each ARCH=INSTR pair: the ARCH code object, unbundled
# and disassembled with OBJDUMP (llvm-objdump of hipcc's LLVM), contains
# the instruction INSTR (the MFMA kernels' v_mfma_*).
set -eu
bundler=$1 obj=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objcopy --dump-section .hip_fatbin="$tmp/bundle" "$obj"
targets=$("$bundler" --list --type=o --input="$tmp/bundle")
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  arch=$1
  shift
  echo "$targets" | grep -qx "hipv4-amdgcn-amd-amdhsa--$arch" || {
    echo "not ok - $obj has no code object for $arch (bundle: $targets)"
    exit 1
  }
  echo "ok - $obj: code object for $arch"
done
[ $# -gt 0 ] || exit 0
shift
objdump=$1
shift
for pair in "$@"; do
  arch=${pair%%=*} instr=${pair#*=}
  "$bundler" --unbundle --type=o --input="$tmp/bundle" --targets="hipv4-amdgcn-amd-amdhsa--$arch" \
    --output="$tmp/$arch.co"
  count=$("$objdump" -d --mcpu="$arch" "$tmp/$arch.co" | grep -c "^[[:space:]]*$instr[[:space:]]" || true)
  if [ "$count" -eq 0 ]; then
    echo "not ok - $obj: no $instr in the $arch code object"
    exit 1
  fi
  echo "ok - $obj: $arch code object has $count $instr"
done
