#!/usr/bin/env bash
set -uo pipefail
exec > >(tee $OUT/log-ps2.txt) 2>&1
date -u
[ -x /tmp/bI/b/cli/fusedmoe ] || { mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf .devrun-ps/b.tar.gz; }
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/.devrun-ps/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b; CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_STREAM_PERSIST=$1 timeout 40 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --shape gpt-oss-120b --tokens 1,16 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss)|rror" | sed "s|^|P$1 |"; }
for pm in 0 1 0 1; do bench $pm $CH; done
date -u
