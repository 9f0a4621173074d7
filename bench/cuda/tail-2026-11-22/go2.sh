#!/usr/bin/env bash
# Device call 2: graph-timed A/B of the fused decode tail (FMCU_TAIL=1) against the old chain
# (FMCU_TAIL=0) at M=1 on three shapes (one process after the other, alternating), then ncu
# kernel durations of one Qwen3-30B-A3B fp8 M=1 forward each way.
set -uo pipefail
exec > >(tee $OUT/log-go2.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-tail}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_TAIL=$1 timeout 90 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    $4 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|T$1 ${2%%:*} |" | tee -a $OUT/bench2.txt; }
S3="--shape qwen3-30b-a3b --shape gpt-oss-120b --shape mixtral-8x7b"
: > $OUT/bench2.txt
for v in 1 0 1 0; do bench $v $CH 1 "$S3"; echo "t=$(( $(date +%s) - T0 ))s"; done
for v in 1 0; do bench $v bf16 1 "$S3"; echo "t=$(( $(date +%s) - T0 ))s"; done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for v in 1 0; do
  FMCU_TAIL=$v timeout 100 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream_gemm|combine|tail|amax' -c 30 --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme $CH --shape qwen3-30b-a3b --tokens 1 \
    --max-gib 24 --no-reference --iters 3 > $OUT/ncu-$v.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 bench/cuda/decode-2026-11-22/agg.py $OUT/ncu-$v.csv "qwen3 fp8 M=1 FMCU_TAIL=$v"
  echo "t=$(( $(date +%s) - T0 ))s"
done
date -u
