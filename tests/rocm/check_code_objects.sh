#!/bin/sh
# tests/rocm/check_code_objects.sh BUNDLER OBJECT ARCH... - the HIP object
# built by hipcc carries a code object for each ARCH (gfx90a, gfx940): its
# .hip_fatbin section is an offload bundle whose targets are listed.
set -eu
bundler=$1 obj=$2
shift 2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
objcopy --dump-section .hip_fatbin="$tmp" "$obj"
targets=$("$bundler" --list --type=o --input="$tmp")
for arch in "$@"; do
  echo "$targets" | grep -qx "hipv4-amdgcn-amd-amdhsa--$arch" || {
    echo "not ok - $obj has no code object for $arch (bundle: $targets)"
    exit 1
  }
done
echo "ok - $obj: code objects for $*"
