#!/usr/bin/env bash
# tools/device/conform_rocm.sh [SEED] - on the GPU machine (the device tool's
# working tree, $OUT set): unpack .devrun-rocm (tools/device/pack_rocm.sh) and run
# the conformance suite on the rocm plugin's NVIDIA test build, every mode,
# against the reference plugin. Output: $OUT/conform.txt, $OUT/conform.json,
# $OUT/probe.txt, $OUT/nvidia-smi.txt.
set -uo pipefail
SEED=${1:-1}
R=.devrun-rocm
mkdir -p "$R"/x && tar -C "$R"/x -xzf "$R"/b.tar.gz
export LD_LIBRARY_PATH=$PWD/$R/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$R/x/b
nvidia-smi > "$OUT"/nvidia-smi.txt 2>&1
"$B"/cli/fusedmoe --isolated --plugin "$B"/plugins/rocm/rocm_cuda.toml probe > "$OUT"/probe.txt 2>&1
cat "$OUT"/probe.txt
time "$B"/cli/fusedmoe --isolated --plugin "$B"/plugins/reference/reference.toml conform \
  --plugin "$B"/plugins/rocm/rocm_cuda.toml --seed "$SEED" --json "$OUT"/conform.json > "$OUT"/conform.txt 2>&1
rc=$?
tail -40 "$OUT"/conform.txt
echo "conform exit $rc"
exit $rc
