#!/usr/bin/env bash
# Device call 3: the gather's slots read in one load wave with the first columns loaded before them,
# and the combine's y loads of 8 slots in flight at once (prefill_sm90.cu). prefill_check of call 2's
# build (.devrun-old2, "old") against this one ("new"): stage times and output hashes; then the
# checks and `fusedmoe bench` on Qwen3-30B-A3B.
set -uo pipefail
D=.devrun-gc; . bench/cuda/devrun_env.sh
tar -C $B/tests/cuda -xzf .devrun-old2/prefill_check_plan.tar.gz --transform 's/prefill_check/prefill_check_old/'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
bench() { # SHAPE M SCHEMES
  for v in old new old new; do
    P=$B/tests/cuda/prefill_check; [ $v = old ] && P=${P}_old
    echo "== $v $1 M=$2 $3"
    PREFILL_BENCH_M=$2 PREFILL_BENCH_SCHEMES=$3 timeout 120 $P $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"
  done
}
{
bench qwen3-30b 8192 bf16,channel
bench qwen3-30b 1024 channel
bench deepseek 8192 channel
bench mixtral 8192 channel
} 2>&1 | tee $OUT/bench.txt
{
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed"
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
echo "== conform prefill tier"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
} 2>&1 | tee $OUT/check.txt
for sc in fp8e4m3:channel/fp8e4m3:token:dynamic bf16; do
  timeout 200 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme $sc --shape qwen3-30b-a3b \
    --tokens 1024,8192 --max-gib 24 --no-reference 2>&1 | tail -3
done 2>&1 | tee $OUT/fusedmoe-bench.txt
