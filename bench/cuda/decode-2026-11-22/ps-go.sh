#!/usr/bin/env bash
# Persistent stream GEMM (FMCU_STREAM_PERSIST): correctness, then A/B timing.
set -uo pipefail
exec > >(tee $OUT/log-ps.txt) 2>&1
date -u
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf .devrun-ps/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/.devrun-ps/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier $1 persist=$2"; FMCU_STREAM_PERSIST=$2 FMOE_CUDA_TIER=$1 timeout 60 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?; grep -v "^PASS" /tmp/cc.txt | head -20; grep -c "^PASS" /tmp/cc.txt; }
cc stream 1; cc stream 3; cc auto 1; cc stream 0
echo "== conform"
timeout 60 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform-ps.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform-ps.txt | head -20
date -u
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_STREAM_PERSIST=$1 timeout 45 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --shape gpt-oss-120b --tokens 1,16 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss)|rror" | sed "s/^/P$1 $2 /"; }
for s in $CH bf16 $CH; do for pm in 0 1; do bench $pm $s; date -u; done; done
