#!/usr/bin/env bash
# Device call 5: as call 4, with the plan kernel's quantizing blocks back on the scalar loop
# (quant_row<false>; build .devrun-s4, this directory's commit), against call 1's plugin (b1):
# cuda_check bits in the auto tier, then bf16 and fp8 M=1 points alternating, two rounds, and
# ncu of the bf16 Qwen3-30B-A3B M=1 chain with both plugins.
set -uo pipefail
D=.devrun-s4; . bench/cuda/devrun_env.sh; B2=$B
B1=/tmp/devrun-old/b; rm -rf /tmp/devrun-old && mkdir -p /tmp/devrun-old && cp -a $B2 $B1
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-s1old/libfmoe-cuda.so.xz $B1/plugins/cuda/libfmoe-cuda.so
L1=$B1:$PWD/.devrun-s4/lib; L2=$B2:$PWD/.devrun-s4/lib
for n in 1 2; do
  eval BB=\$B$n LL=\$L$n
  LD_LIBRARY_PATH=$LL timeout 150 $BB/tests/cuda/cuda_check $BB/plugins/reference/reference.toml \
    $BB/plugins/cuda/cuda.toml $E > /tmp/cc-$n.txt 2>&1; echo "auto build $n rc=$? pass=$(grep -c '^PASS' /tmp/cc-$n.txt)"
done
grep -o "bits=[0-9a-f]*" /tmp/cc-1.txt > /tmp/b1; grep -o "bits=[0-9a-f]*" /tmp/cc-2.txt > /tmp/b2
echo "auto: $(wc -l < /tmp/b1) hashes, $(diff /tmp/b1 /tmp/b2 | grep -c '^<') differ"
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
echo "== graph-timed (b1 = call 1's plugin, b2 = this build)"
for r in 1 2; do
  for pt in "bf16 qwen3-30b-a3b 1" "bf16 gpt-oss-120b 1" "$CH mixtral-8x7b 1"; do
    set -- $pt
    for n in 1 2; do
      eval BB=\$B$n LL=\$L$n
      LD_LIBRARY_PATH=$LL $BB/cli/fusedmoe --plugin $BB/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" \
        --shape $2 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror" \
        | sed "s/^/r$r b$n ${1%%/*} /"
    done
  done
done
for n in 1 2; do
  eval BB=\$B$n LL=\$L$n
  LD_LIBRARY_PATH=$LL timeout 100 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream|combine|tail' \
    -c 30 --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $BB/cli/fusedmoe --plugin $BB/plugins/cuda/cuda.toml bench --backend cuda --scheme bf16 --shape qwen3-30b-a3b --tokens 1 \
    --max-gib 24 --no-reference --iters 3 > /tmp/ncu.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 bench/cuda/decode-2026-11-22/agg.py /tmp/ncu.csv "b$n bf16 qwen3-30b-a3b M=1" | grep -v "^units"
done
