#!/usr/bin/env bash
# The device side of this record: unpack the carried build, optionally run
# conformance and cuda_check, then run_grid.sh on TOKENS under TAG; files to $OUT.
# usage (device, repo root): bash bench/cuda/grid/final/go.sh TOKENS TAG [conform]
set -uo pipefail
TOK=$1; TAG=$2
export DEVRUN=${DEVRUN:-.devrun-final}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $DEVRUN/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$DEVRUN/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b; R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $FMOE_CONFIG"
date -u
if [ "${3:-}" = conform ]; then
  timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform-h100.txt 2>&1; echo conform rc=$?
  grep -E "^cuda|result" $OUT/conform-h100.txt
  timeout 100 $B/tests/cuda/cuda_check $R > $OUT/cuda_check.txt 2>&1; echo cuda_check rc=$?; grep -c "^PASS" $OUT/cuda_check.txt; grep -v "^PASS" $OUT/cuda_check.txt | head
fi
TAG=$TAG TOKENS=$TOK timeout 530 bash bench/cuda/run_grid.sh > $OUT/$TAG-stdout.txt 2>&1; echo grid rc=$?
grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror" $OUT/$TAG-stdout.txt | head -60
date -u
