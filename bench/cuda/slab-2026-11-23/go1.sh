#!/usr/bin/env bash
# Device call 1: main's build (a68bab7) graph-timed at the stream tier's points, then per-kernel
# durations and DRAM bytes under ncu (serialized: no PDL overlap there).
set -uo pipefail
D=.devrun-m; . bench/cuda/devrun_env.sh
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { # scheme shape tokens
  $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$1" --shape "$2" --tokens "$3" \
    --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== graph-timed"
for s in $CH bf16; do for sh in qwen3-30b-a3b gpt-oss-120b; do echo "$s"; bench $s $sh 1,16,128; done; done
echo "== ncu"
for pt in qwen3-fp8-16 qwen3-fp8-128 qwen3-bf16-128 gptoss-fp8-1 gptoss-fp8-16 gptoss-fp8-128 mixtral-fp8-128; do
  IFS=- read -r model sch m <<< "$pt"
  shape=qwen3-30b-a3b; [ $model = gptoss ] && shape=gpt-oss-120b; [ $model = mixtral ] && shape=mixtral-8x7b
  key=bf16; [ $sch = fp8 ] && key=$CH
  timeout 150 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream|combine|gemm|amax|act|tail|fused|gather|pos|setup' \
    -c 40 --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$key" --shape $shape --tokens $m \
    --max-gib 24 --no-reference --iters 3 > /tmp/ncu.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 bench/cuda/decode-2026-11-22/agg.py /tmp/ncu.csv "$pt"
done
