#!/usr/bin/env bash
# Device call 7: go6's kernel with the quantization's amax loops in one helper (same arithmetic):
# checks and a short A/B at Qwen3-30B-A3B fp8 M=1.
set -uo pipefail
exec > >(tee $OUT/log-go7.txt) 2>&1
D=${DEVRUN:-.devrun-tail}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
for t in stream auto; do echo "== cuda_check tier $t"; FMOE_CUDA_TIER=$t timeout 60 $B/tests/cuda/cuda_check $R > $OUT/cc-$t.txt 2>&1; echo rc=$?; grep -v "^PASS" $OUT/cc-$t.txt | head -4; done
timeout 90 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo conform rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -8
for v in 1 0 1 0; do FMCU_TAIL=$v timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda \
  --scheme fp8e4m3:channel/fp8e4m3:token:dynamic --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference 2>&1 | grep -E "^qwen3|rror" | sed "s|^|T$v |"; done
