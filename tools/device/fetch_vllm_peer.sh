#!/usr/bin/env bash
# The vLLM files tools/bench_vllm_triton.py reads at run time, into .peer/vllm/
# (git-ignored: no vLLM code is committed here; the harness parses the kernel
# out of the file when it runs). Run here, then carry .peer to the device.
#
#   bash tools/device/fetch_vllm_peer.sh SOURCE
#
# SOURCE is one of
#   - a vLLM git directory (a bare mirror or a checkout's .git): files from HEAD;
#   - a vLLM wheel (vllm-X.Y.Z-*.whl, from `pip download vllm==X.Y.Z --no-deps`),
#     for when the repository is too large to mirror: files from the wheel, the
#     commit from its vllm/_version.py.
#
# Writes .peer/vllm/fused_moe.py (the Triton kernel's module), .peer/vllm/configs/
# (vLLM's tuned H200 configs for the grid's shapes, those that exist, named with
# every character but [A-Za-z0-9._-] as '_', so that no '=', ',' or '[' has to
# travel to the device) and .peer/vllm/COMMIT (line 1: the vLLM commit; line 2:
# where the files came from).
set -euo pipefail
src=${1:?usage: fetch_vllm_peer.sh VLLM_GIT_DIR|VLLM_WHEEL}
cd "$(dirname "$0")/../.."
dest=.peer/vllm
moe=vllm/model_executor/layers/fused_moe

# The grid's (E, N = intermediate size at TP 1) and vLLM's config-name suffixes:
# bf16 has none, fp8 channel x token is fp8_w8a8, fp8 block adds the block shape.
pairs="128,768 8,14336 128,2880 256,2048"
suffixes=",device_name=NVIDIA_H200 ,device_name=NVIDIA_H200,dtype=fp8_w8a8 ,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128]"

if [ -d "$src" ] && git --git-dir="$src" rev-parse --verify -q HEAD > /dev/null; then
  kind=git
  # cat-file, not show: `git show HEAD:name[...]` reads the brackets as a pathspec, prints nothing and succeeds
  get() { git --git-dir="$src" cat-file blob "HEAD:$1" 2> /dev/null; }
  commit=$(git --git-dir="$src" rev-parse HEAD)
  origin="git $src at HEAD ($(git --git-dir="$src" log -1 --format=%cs HEAD))"
elif [ -f "$src" ] && [ "${src%.whl}" != "$src" ]; then
  kind=wheel
  # unzip reads its names as patterns: the brackets of block_shape=[128,128] are escaped
  get() { unzip -p "$src" "$(printf '%s' "$1" | sed 's/[][*?]/\\&/g')" 2> /dev/null; }
  version=$(get vllm/_version.py | sed -n "s/^__version__ = version = '\(.*\)'$/\1/p")
  commit=$(get vllm/_version.py | sed -n "s/^__commit_id__ = commit_id = 'g\{0,1\}\([0-9a-f]*\)'$/\1/p")
  [ -n "$commit" ] || { echo "fetch_vllm_peer: $src: no commit_id in vllm/_version.py" >&2; exit 1; }
  origin="wheel $(basename "$src") (vllm $version; the commit is the wheel's short hash)"
else
  echo "fetch_vllm_peer: $src is neither a git directory nor a .whl file" >&2
  exit 2
fi

rm -rf "$dest"
mkdir -p "$dest/configs"
if ! get "$moe/fused_moe.py" > "$dest/fused_moe.py" || ! grep -q '^def fused_moe_kernel(' "$dest/fused_moe.py"; then
  echo "fetch_vllm_peer: $src ($kind): no 'def fused_moe_kernel(' in $moe/fused_moe.py;" \
    "find where the kernel moved and update this script and tools/bench_vllm_triton.py" >&2
  exit 1
fi
found=0
for p in $pairs; do
  e=${p%,*} n=${p#*,}
  for s in $suffixes; do
    name="E=$e,N=$n$s.json"
    safe=$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_')  # what the harness looks for
    if get "$moe/configs/$name" > "$dest/configs/$safe"; then
      found=$((found + 1))
      echo "  $name -> configs/$safe"
    else
      rm -f "$dest/configs/$safe"
    fi
  done
done
printf '%s\n%s\n' "$commit" "$origin" > "$dest/COMMIT"
echo "fetch_vllm_peer: vLLM $commit ($origin): fused_moe.py and $found tuned H200 configs in $dest," \
  "$(du -sh "$dest" | cut -f1)"
