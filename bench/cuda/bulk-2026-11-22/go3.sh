#!/usr/bin/env bash
# Device call 3: the A/B timings go2.sh meant to take. go2's runs (4 shapes per process, 80 s
# timeout) were killed while synthesizing Mixtral's and DeepSeek-V3's weights, and grep saw
# nothing of their block-buffered output. Here: the shapes where a slab fits the 48 KB bulk limit
# (Qwen3-30B-A3B, gpt-oss-120b; DeepSeek-V3's fp8 GEMM2), each process's whole output kept.
# B0 = register batches (FMCU_STREAM_BULK=0), B1 = bulk slabs; each pair one
# process after the other, the fp8 channel pair once more at the end.
set -uo pipefail
exec > >(tee $OUT/log-go3.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-bulk}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
BL=fp8e4m3:block128x128/fp8e4m3:group128:dynamic
n=0
bench() { n=$((n+1)); local f=$OUT/run-$n-B$1-${2%%:*}-$5.txt
  FMCU_STREAM_BULK=$1 stdbuf -oL timeout $6 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    $4 --tokens $3 --max-gib 24 --no-reference > $f 2>&1; echo "rc=$? $f t=$(( $(date +%s) - T0 ))s"
  grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" $f | sed "s|^|B$1 ${2%%/*} |" | tee -a $OUT/bench.txt; }
QG="--shape qwen3-30b-a3b --shape gpt-oss-120b"
: > $OUT/bench.txt
for v in 0 1; do bench $v $CH 1,16 "$QG" qg 100; done
for v in 0 1; do bench $v $BL 1,16 "$QG" qg 100; done
for v in 0 1; do bench $v bf16 1,16 "$QG" qg 100; done
for v in 0 1; do bench $v $CH 1,16 "--shape deepseek-v3" ds 120; done
for v in 0 1; do bench $v $CH 1,16 "$QG" qg 100; done  # again, for drift
date -u
