#!/usr/bin/env bash
# Decode-chain profile: graph-timed totals (fusedmoe bench) and per-kernel durations (ncu).
# usage (device, repo root, after unpacking into /tmp/bI/b): bash .devrun-st/prof.sh TAG "NCU_POINTS" [MIXTRAL_TIERS]
#   NCU_POINTS: e.g. "qwen3-fp8-1 gptoss-bf16-16"
set -uo pipefail
TAG=$1; POINTS=${2:-}; MTIERS=${3:-auto}
B=/tmp/bI/b
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
bench() { # scheme shape tokens
  $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" --shape "$2" --tokens "$3" \
    --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror"
}
echo "== graph-timed ($TAG)"
[ -z "${NOGRAPH:-}" ] && for s in bf16 $CH; do for sh in qwen3-30b-a3b gpt-oss-120b; do echo "$s"; bench $s $sh 1,16; done; done
for t in $MTIERS; do [ $t = none ] && continue; echo "mixtral fp8 tier $t"; FMOE_CUDA_TIER=$t bench $CH mixtral-8x7b 128; done
echo "== ncu ($TAG)"
for pt in $POINTS; do
  IFS=- read -r model sch m <<< "$pt"
  shape=qwen3-30b-a3b; [ $model = gptoss ] && shape=gpt-oss-120b; [ $model = mixtral ] && shape=mixtral-8x7b
  key=bf16; [ $sch = fp8 ] && key=$CH
  timeout 120 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream_gemm|combine|moe_gemm|amax|device_kernel|gather|act_kernel|pos_kernel|setup' -c 36 --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$key" --shape $shape --tokens $m \
    --max-gib 24 --no-reference --iters 3 > /tmp/ncu.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 .devrun-st/agg.py /tmp/ncu.csv "$TAG $pt"
done
