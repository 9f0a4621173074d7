#!/usr/bin/env bash
# tests/fuzz/run_ci.sh - fuzz every harness of tests/fuzz for a bounded time
# with clang's libFuzzer under ASan + UBSan, starting from the committed
# corpora, and fail on the first crash, leak, undefined behaviour, hang
# (-timeout) or runaway memory (-rss_limit_mb).
#
#   tests/fuzz/run_ci.sh [SECONDS_PER_TARGET]     (default 40; 6 targets)
#
# Needs clang and its runtime (Debian: apt-get install clang libclang-rt-dev;
# bookworm's clang 14 ships the libFuzzer runtime in libclang-rt-14-dev),
# libjansson-dev and libtomlplusplus-dev. Without clang it says so and
# exits 0: the corpora are still replayed by `meson test` (suite fuzz).
# New inputs go to a scratch directory; a crashing input is kept in
# $FUZZ_OUT (default /tmp/fmoe-fuzz) and its path printed, to be added to
# tests/fuzz/corpus/<target>/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
seconds=${1:-40}
out=${FUZZ_OUT:-/tmp/fmoe-fuzz}
CC=${CC_FUZZ:-clang}
CXX=${CXX_FUZZ:-clang++}

if ! command -v "$CC" >/dev/null || ! command -v "$CXX" >/dev/null; then
  echo "run_ci.sh: $CC / $CXX not found; skipping fuzzing (apt-get install clang libclang-rt-dev)"
  exit 0
fi

rm -rf "$out"
mkdir -p "$out/obj" "$out/work"
# clang without its libFuzzer / sanitizer runtime cannot link a harness.
probe='#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n > 1 ? d[0] == 1 : 0; }'
if ! printf '%s\n' "$probe" | "$CC" -fsanitize=fuzzer,address,undefined -x c - -o "$out/probe" >/dev/null 2>&1; then
  echo "run_ci.sh: $CC cannot link -fsanitize=fuzzer,address,undefined (no libclang-rt-dev?); skipping fuzzing"
  exit 0
fi
flags=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
       -D_POSIX_C_SOURCE=200809L -Iinclude -I. -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1
       -DFMOE_INSTALL_PLUGIN_DIR=\"/nonexistent\" -DFMOE_INSTALL_DATA_DIR=\"/nonexistent\"
       -DFMOE_PLUGIN_SUBDIR=\"fusedmoe/plugins\" -DFMOE_VERSION_STRING=\"fuzz\")
link=(-fsanitize=fuzzer,address,undefined -ljansson -ltomlplusplus -ldl -lm -lpthread)

# The readers and what they call, as one archive: each harness pulls what it
# needs.
sources=(base/*.c core/*.c core/model/*.c core/quant/*.c core/formats/*.c core/reference_quant/*.c registry/*.c)
echo "== building the harnesses ($CC)"
pids=()
for src in "${sources[@]}"; do
  obj="$out/obj/$(echo "$src" | tr / _).o"
  "$CC" -std=c11 "${flags[@]}" -c "$src" -o "$obj" &
  pids+=($!)
  if (( ${#pids[@]} >= $(nproc) )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
"$CXX" -std=c++17 "${flags[@]}" -c registry/toml_wrap.cpp -o "$out/obj/toml_wrap.o"
for p in "${pids[@]}"; do wait "$p"; done
rm -f "$out/libfmoe_fuzz.a"
ar rcs "$out/libfmoe_fuzz.a" "$out"/obj/*.o

targets=(safetensors index model_config quant_config config elf)
# Sources a harness needs beyond the library's (the conform tool's ELF reader).
declare -A extra=([elf]=cli/conform/elf_symbols.c)
for t in "${targets[@]}"; do
  objs=("$out/fuzz_$t.o")
  "$CC" -std=c11 "${flags[@]}" -c "tests/fuzz/fuzz_$t.c" -o "$out/fuzz_$t.o"
  if [[ -n "${extra[$t]:-}" ]]; then
    "$CC" -std=c11 "${flags[@]}" -c "${extra[$t]}" -o "$out/fuzz_${t}_extra.o"
    objs+=("$out/fuzz_${t}_extra.o")
  fi
  "$CXX" "${objs[@]}" "$out/libfmoe_fuzz.a" "${link[@]}" -o "$out/fuzz_$t"
done

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t: ${seconds}s from tests/fuzz/corpus/$t"
  mkdir -p "$out/work/$t"
  dict=()
  if [[ -f "tests/fuzz/$t.dict" ]]; then dict=(-dict="$root/tests/fuzz/$t.dict"); fi
  # -timeout: an input taking more than 10 s is a hang (every reader is
  # bounded). -rss_limit_mb: one that allocates 2 GB is unbounded work.
  if ! (cd "$out" && ./"fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
          -print_final_stats=1 "${dict[@]}" "work/$t" "$root/tests/fuzz/corpus/$t" >"$out/fuzz_$t.log" 2>&1); then
    failed=1
    echo "fuzz_$t FAILED; the end of $out/fuzz_$t.log:"
    tail -n 40 "$out/fuzz_$t.log"
    ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null || true
  else
    grep -E "^stat::number_of_executed_runs|^Done" "$out/fuzz_$t.log" || true
  fi
done
if (( failed )); then
  echo "fuzzing found a failure"
  exit 1
fi
echo "fuzzing: no crash, leak, undefined behaviour, hang or runaway memory"
