#!/usr/bin/env bash
# Device call 4: the exact tile bound (build .devrun-t1) against main's plugin (b1, a68bab7):
# cuda_check bits in the stream and auto tiers, M=1 points alternating (two rounds), then
# spec/performance.md's grid at M = 1 and 16 with conformance (grid/final13).
set -uo pipefail
D=.devrun-t1; . bench/cuda/devrun_env.sh; B2=$B
B1=/tmp/devrun-old/b; rm -rf /tmp/devrun-old && mkdir -p /tmp/devrun-old && cp -a $B2 $B1
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-old/libfmoe-cuda.so.xz $B1/plugins/cuda/libfmoe-cuda.so
L1=$B1:$PWD/$D/lib; L2=$B2:$PWD/$D/lib
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
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
run() { # label build scheme shape tokens
  local lab=$1 n=$2; shift 2
  eval BB=\$B$n LL=\$L$n
  LD_LIBRARY_PATH=$LL timeout 90 $BB/cli/fusedmoe --plugin $BB/plugins/cuda/cuda.toml bench --backend cuda \
    --scheme "$1" --shape $2 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror" \
    | sed "s/^/$lab ${1%%/*} /"
}
echo "== graph-timed"
for r in 1 2; do
  for pt in "$CH mixtral-8x7b 1" "$CH gpt-oss-120b 1" "bf16 qwen3-30b-a3b 1" "bf16 gpt-oss-120b 1"; do
    set -- $pt
    run "r$r old" 1 $1 $2 $3
    run "r$r new" 2 $1 $2 $3
  done
done
echo "== grid M=1,16"
DEVRUN=$D bash bench/cuda/grid/final/go.sh 1,16 final13-a conform
