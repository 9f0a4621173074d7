#!/usr/bin/env bash
# Correctness (cuda_check under each tier, conformance), then graph-timed decode points and ncu.
# usage: bash .devrun-st/check.sh DEVRUN_DIR TAG [full|quick]
set -uo pipefail
D=$1; TAG=$2; MODE=${3:-full}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
TIERS="auto stream tiled"; [ $MODE = quick ] && TIERS=stream
for t in $TIERS; do echo "== $TAG cuda_check tier $t"; FMOE_CUDA_TIER=$t timeout 100 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?; grep -v "^PASS" /tmp/cc.txt; grep -c "^PASS" /tmp/cc.txt; done
if [ $MODE = full ]; then
  echo "== $TAG conform"
  timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform-$TAG.txt 2>&1; echo rc=$?
  grep -E "FAIL|^cuda|result" $OUT/conform-$TAG.txt | head -20
fi
