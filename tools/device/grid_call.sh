#!/usr/bin/env bash
# One device call of a grid record (bench/cuda/README.md, "Record the grid"):
# run_grid.sh with its files gathered into one archive, $OUT/$TAG.tgz, since
# the device tool returns at most 8 files and a call writes up to 11 (the
# JSON of each scheme and peer, the peaks, logs, conformance, cuda_check).
# run_grid.sh's variables (TAG, TOKENS, SCHEMES, CONFORM, DEVRUN, ...) pass
# through; LIMIT (default 570 s) stops it before the device tool's 600-s
# call limit, so that the archive is written either way.
#
#   TOKENS=1,16 TAG=g1 CONFORM=1 SCHEMES="bf16 fp8 fp8block" bash tools/device/grid_call.sh   # there
#   mkdir c1 && tar -C c1 -xzf g1.tgz                                                         # here
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${TAG:?grid_call.sh: set TAG, the name of the call (its files are TAG-*)}"
final=${OUT:-$PWD/out}
work=$(mktemp -d)
OUT=$work timeout "${LIMIT:-570}" bash tools/device/run_grid.sh > "$work/$TAG-run.log" 2>&1
rc=$?
mkdir -p "$final"
tar -C "$work" -czf "$final/$TAG.tgz" .
echo "run_grid.sh: rc $rc; $(find "$work" -type f | wc -l) files in $final/$TAG.tgz"
grep -E '^(conform|cuda_check|device)' "$work/$TAG-log.txt" 2>/dev/null
tail -n 5 "$work/$TAG-run.log"
rm -rf "$work"
exit "$rc"
