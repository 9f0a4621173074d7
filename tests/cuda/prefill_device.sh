#!/usr/bin/env bash
# The Hopper prefill path (plugins/cuda/prefill.h) on the workplace's GPU
# machine, from a build carried as .devrun-prefill/ (git-ignored: add
# `/.devrun-prefill/` to .git/info/exclude).
#
#   here:   meson setup /tmp/b-prefill -Dwerror=true
#           flock -s /tmp/fmoe-quiet.lock ninja -C /tmp/b-prefill
#           bash tests/cuda/prefill_device.sh pack [BUILD]
#   there:  bash tests/cuda/prefill_device.sh [all|check|cuda_check|sanitize|bench [SHAPE [--m M]]|conform|regs]
#
# check: prefill_check against the reference; cuda_check: the plugin's own
# checks (packed with PREFILL_CUDA_CHECK=1); sanitize: compute-sanitizer
# memcheck on two small cases and the wgmma count of the SASS; bench: the
# model shapes (`bench qwen3-30b --m 8192`: one shape, one M); conform:
# `fusedmoe conform` on the plugin, the fp8 schemes forced onto the prefill
# tier (the plugin's option tier = "prefill" through the host's FMOE_OPTIONS,
# CONFORM_SEEDS seeds) then everything under auto; regs: registers, stack
# and local memory of the GEMM kernels (spills).
# Logs go to $OUT (or ./out).
set -uo pipefail
D=$PWD/.devrun-prefill
step=${1:-all}

if [ "$step" = pack ]; then
  # Only what the runs need, compressed (the tree that travels is limited to
  # 64 MiB).
  B=${2:-/tmp/b-prefill}
  S=$(mktemp -d)
  mkdir -p "$S/b/tests/cuda" "$S/b/plugins/reference" "$S/b/plugins/cuda" "$S/b/cli" "$S/lib"
  find "$B" -maxdepth 1 -name "libfusedmoe.so*" ! -type d -exec cp -a {} "$S/b/" \;
  cp -a "$B/tests/cuda/prefill_check" "$S/b/tests/cuda/"
  [ -n "${PREFILL_CUDA_CHECK:-}" ] && cp -a "$B/tests/cuda/cuda_check" "$S/b/tests/cuda/"
  cp -a "$B"/plugins/cuda/*.so "$B/plugins/cuda/cuda.toml" "$S/b/plugins/cuda/"
  cp -a "$B/cli/fusedmoe" "$S/b/cli/"
  cp -a "$B"/plugins/reference/*.so "$B/plugins/reference/reference.toml" "$S/b/plugins/reference/"
  # Debug info is most of the size (the carried tree is limited to 64 MiB).
  find "$S/b" -type f \( -name "*.so*" -o -perm -u+x \) -exec strip --strip-debug {} + 2>/dev/null || true
  for l in libjansson.so.4 libtomlplusplus.so.3; do
    cp -L "$(ldconfig -p | awk -v l=$l '$1 == l {print $NF; exit}')" "$S/lib/$l"
  done
  rm -rf "$D" && mkdir -p "$D"
  tar -C "$S" -cf - b lib | xz -6 -T2 > "$D/bundle.tar.xz"
  rm -rf "$S"
  du -sh "$D"
  exit 0
fi

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
U=/tmp/prefill-devrun
rm -rf "$U" && mkdir -p "$U"
xz -dc "$D/bundle.tar.xz" 2>/dev/null | tar -C "$U" -xf - ||
  python3 -c 'import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
    "$D/bundle.tar.xz" "$U"
B=$U/b
export LD_LIBRARY_PATH=$B:$U/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
R=$B/plugins/reference/reference.toml
E=$PWD/tests/conformance/empty.toml
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ "$step" = all ] || [ "$step" = check ]; then
  echo "== prefill_check"
  timeout 200 "$B/tests/cuda/prefill_check" "$R" "$E" 2>&1 | tee "$OUT/prefill_check.txt"
fi
if [ "$step" = all ] && [ -x "$B/tests/cuda/cuda_check" ] || [ "$step" = cuda_check ]; then
  echo "== cuda_check"
  timeout 120 "$B/tests/cuda/cuda_check" "$R" "$B/plugins/cuda/cuda.toml" "$E" 2>&1 | tail -22 | tee "$OUT/cuda_check.txt"
fi
if [ "$step" = all ] || [ "$step" = bench ]; then
  echo "== prefill_check --bench"
  timeout 400 "$B/tests/cuda/prefill_check" "$R" "$E" --bench "${@:2}" 2>&1 | tee "$OUT/prefill_bench.txt"
fi
if [ "$step" = all ] || [ "$step" = conform ]; then
  C=$B/plugins/cuda/cuda.toml
  for seed in ${CONFORM_SEEDS:-1 2 3}; do
    echo "== conform, fp8 schemes on the prefill tier, seed $seed"
    FMOE_CONFIG=$E FMOE_OPTIONS=cuda.tier=prefill timeout 120 "$B/cli/fusedmoe" --plugin "$R" conform --plugin "$C" \
      --scheme 'fp8e4m3*' --mode test --seed "$seed" 2>&1 | grep -E "^(FAIL|cuda |result)" | tail -12
  done 2>&1 | tee "$OUT/conform_prefill.txt"
  echo "== conform, auto tier"
  FMOE_CONFIG=$E timeout 120 "$B/cli/fusedmoe" --plugin "$R" conform --plugin "$C" 2>&1 \
    | grep -E "^(FAIL|cuda |result|PLUGIN)" | tail -12 | tee "$OUT/conform.txt"
fi
if [ "$step" = regs ]; then
  echo "== GEMM kernels: registers, stack, local memory"
  F=$(command -v cu++filt || command -v c++filt || echo cat)
  cuobjdump --dump-resource-usage "$B/tests/cuda/prefill_check" 2>/dev/null |
    awk '/Function/ {f = $2} /REG:/ && f ~ /device_kernel/ {sub(":$", "", f); print f; print $0}' |
    while read -r f && read -r r; do
      n=$(echo "$f" | "$F")
      echo "$(echo "$n" | grep -oE "Kernel[A-Za-z0-9]*(Pingpong|Cooperative)[A-Za-z0-9]*" | head -1)" \
        "$(echo "$n" | grep -oE "C<[0-9]+>, cute::C<[0-9]+>, cute::C<[0-9]+>" | sort -u | tr "\n" " ")" \
        "$(echo "$r" | grep -oE "REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+")"
    done | tee "$OUT/regs.txt"
fi
if [ "$step" = all ] || [ "$step" = sanitize ]; then
  echo "== compute-sanitizer memcheck"
  for c in "bf16 M=7" "fp8 block half"; do
    timeout 90 compute-sanitizer --tool memcheck --print-limit 5 "$B/tests/cuda/prefill_check" "$R" "$E" --check "$c" 2>&1 \
      | tail -6
  done | tee "$OUT/sanitize.txt"
  echo "== wgmma in the SASS (QGMMA fp8, HGMMA bf16)"
  cuobjdump --dump-sass "$B/tests/cuda/prefill_check" 2>/dev/null | grep -oE "QGMMA|HGMMA" | sort | uniq -c | tee -a "$OUT/sanitize.txt"
fi
