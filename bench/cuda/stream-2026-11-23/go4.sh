#!/usr/bin/env bash
# Device call 4: the register path with 2 pieces a thread (build .devrun-s3, this directory's
# commit) against call 1's plugin (b1): quant_row_check, conformance, cuda_check bits in the
# stream and auto tiers, then bf16 and fp8 M=1 points alternating, two rounds; ncu of Mixtral fp8 M=1.
set -uo pipefail
D=.devrun-s3; . bench/cuda/devrun_env.sh; B2=$B
B1=/tmp/devrun-old/b; rm -rf /tmp/devrun-old && mkdir -p /tmp/devrun-old && cp -a $B2 $B1
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-s1old/libfmoe-cuda.so.xz $B1/plugins/cuda/libfmoe-cuda.so
L1=$B1:$PWD/.devrun-s3/lib; L2=$B2:$PWD/.devrun-s3/lib
echo "== quant_row_check"
LD_LIBRARY_PATH=$L2 timeout 120 $B2/tests/cuda/quant_row_check; echo rc=$?
echo "== conformance (new)"
LD_LIBRARY_PATH=$L2 timeout 150 $B2/cli/fusedmoe --plugin $B2/plugins/reference/reference.toml conform \
  --plugin $B2/plugins/cuda/cuda.toml > $OUT/conform-h100.txt 2>&1; echo conform rc=$?
grep -E "result" $OUT/conform-h100.txt | tail -1
echo "== cuda_check, old vs new bits"
for T in stream auto; do
  for n in 1 2; do
    eval BB=\$B$n LL=\$L$n
    FMOE_CUDA_TIER=$T LD_LIBRARY_PATH=$LL timeout 150 $BB/tests/cuda/cuda_check $BB/plugins/reference/reference.toml \
      $BB/plugins/cuda/cuda.toml $E > /tmp/cc-$T-$n.txt 2>&1; echo "tier $T build $n rc=$? pass=$(grep -c '^PASS' /tmp/cc-$T-$n.txt)"
  done
  grep -o "bits=[0-9a-f]*" /tmp/cc-$T-1.txt > /tmp/b1; grep -o "bits=[0-9a-f]*" /tmp/cc-$T-2.txt > /tmp/b2
  echo "tier $T: $(wc -l < /tmp/b1) hashes, $(diff /tmp/b1 /tmp/b2 | grep -c '^<') differ"
done
cp /tmp/cc-auto-2.txt $OUT/cuda_check-auto.txt
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
TS=fp8e4m3:tensor/fp8e4m3:tensor:dynamic
echo "== graph-timed (b1 = call 1's plugin, b2 = this build)"
for r in 1 2; do
  for pt in "bf16 qwen3-30b-a3b 1" "$CH mixtral-8x7b 1" "$TS mixtral-8x7b 1"; do
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
