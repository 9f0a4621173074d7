#!/usr/bin/env bash
# Device call 3: bf16 M=1 points (which run the plan kernel, whose registers went 36 -> 64 with the
# register path inlined, but no quantization) and two fp8 M=1 points, call 1's plugin (b1) against
# this change (b2), two rounds alternating; then ncu of the Mixtral fp8 M=1 chain with b2.
set -uo pipefail
D=.devrun-s2; . bench/cuda/devrun_env.sh; B2=$B
B1=/tmp/devrun-old/b; rm -rf /tmp/devrun-old && mkdir -p /tmp/devrun-old && cp -a $B2 $B1
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-s1old/libfmoe-cuda.so.xz $B1/plugins/cuda/libfmoe-cuda.so
L1=$B1:$PWD/.devrun-s2/lib; L2=$B2:$PWD/.devrun-s2/lib
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
for r in 1 2; do
  for pt in "bf16 qwen3-30b-a3b 1" "bf16 gpt-oss-120b 1" "$CH gpt-oss-120b 1" "$CH mixtral-8x7b 1"; do
    set -- $pt
    for n in 1 2; do
      eval BB=\$B$n LL=\$L$n
      LD_LIBRARY_PATH=$LL $BB/cli/fusedmoe --plugin $BB/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" \
        --shape $2 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror" \
        | sed "s/^/r$r b$n ${1%%/*} /"
    done
  done
done
echo "== ncu (b2)"
LD_LIBRARY_PATH=$L2 timeout 150 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream|combine' \
  -c 40 --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  $B2/cli/fusedmoe --plugin $B2/plugins/cuda/cuda.toml bench --backend cuda --scheme "$CH" --shape mixtral-8x7b --tokens 1 \
  --max-gib 24 --no-reference --iters 3 > /tmp/ncu.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
python3 bench/cuda/decode-2026-11-22/agg.py /tmp/ncu.csv "fp8 channel mixtral-8x7b M=1" | grep -v "^units"
