#!/usr/bin/env bash
# Device call 2: split-K CTAs taking runs of slabs (build .devrun-n1) against main's plugin (b1,
# a68bab7): conformance (default, and every split-K call on runs of 3 slabs, split K up to 16 rows
# per expert), cuda_check bits in the stream and auto tiers, then the stream tier's weak points
# graph-timed under each setting, alternating.
set -uo pipefail
D=.devrun-n1; . bench/cuda/devrun_env.sh; B2=$B
B1=/tmp/devrun-old/b; rm -rf /tmp/devrun-old && mkdir -p /tmp/devrun-old && cp -a $B2 $B1
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-old/libfmoe-cuda.so.xz $B1/plugins/cuda/libfmoe-cuda.so
L1=$B1:$PWD/$D/lib; L2=$B2:$PWD/$D/lib
echo "== conformance (new)"
for envs in "" "FMCU_STREAM_SLABS=3 FMCU_STREAM_SPLITK=16 FMOE_CUDA_TIER=stream"; do
  env $envs LD_LIBRARY_PATH=$L2 timeout 150 $B2/cli/fusedmoe --plugin $B2/plugins/reference/reference.toml conform \
    --plugin $B2/plugins/cuda/cuda.toml > /tmp/conform.txt 2>&1; echo "[$envs] conform rc=$? $(grep -E '^result' /tmp/conform.txt | tail -1)"
  [ -z "$envs" ] && cp /tmp/conform.txt $OUT/conform-h100.txt
done
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
run() { # label build envs scheme shape tokens
  local lab=$1 n=$2 envs=$3; shift 3
  eval BB=\$B$n LL=\$L$n
  env $envs LD_LIBRARY_PATH=$LL timeout 90 $BB/cli/fusedmoe --plugin $BB/plugins/cuda/cuda.toml bench --backend cuda \
    --scheme "$1" --shape $2 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror" \
    | sed "s/^/$lab ${1%%/*} /"
}
echo "== graph-timed"
for r in 1 2; do
  for pt in "$CH qwen3-30b-a3b 16,128" "bf16 qwen3-30b-a3b 16,128" "$CH gpt-oss-120b 1,16" "$CH mixtral-8x7b 1,16"; do
    set -- $pt
    run "r$r old     " 1 "" $1 $2 $3
    run "r$r new     " 2 "" $1 $2 $3
    run "r$r slabs=1 " 2 "FMCU_STREAM_SLABS=1" $1 $2 $3
    [ $r = 1 ] && run "r$r slabs=2 " 2 "FMCU_STREAM_SLABS=2" $1 $2 $3
    [ $r = 1 ] && run "r$r slabs=8 " 2 "FMCU_STREAM_SLABS=8" $1 $2 $3
    [ $r = 1 ] && [ $2 = qwen3-30b-a3b ] && run "r$r splitk16" 2 "FMCU_STREAM_SPLITK=16" $1 $2 128
    [ $r = 1 ] && [ $2 = qwen3-30b-a3b ] && run "r$r sk16,s=1" 2 "FMCU_STREAM_SPLITK=16 FMCU_STREAM_SLABS=1" $1 $2 128
  done
done
