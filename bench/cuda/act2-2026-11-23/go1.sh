#!/usr/bin/env bash
# Device call 1: the packed activation kernel (plugins/cuda/prefill_act.cu) against main at
# 3488263 (its prefill_check, carried in .devrun-old): the prefill forward's output hash and
# stage times per shape and scheme, old and new in turn on the same GPU; then correctness of the
# new build (prefill_check, with the fused epilogue too, cuda_check, conform) and ncu of act_kernel.
set -uo pipefail
D=.devrun-act; . bench/cuda/devrun_env.sh
tar -C $B/tests/cuda -xzf .devrun-old/prefill_check_3488263.tar.gz --transform 's/prefill_check/prefill_check_old/'
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
bench() { # SHAPE M SCHEMES
  for v in old new; do
    P=$B/tests/cuda/prefill_check; [ $v = old ] && P=${P}_old
    echo "== $v $1 M=$2 $3"
    PREFILL_BENCH_M=$2 PREFILL_BENCH_SCHEMES=$3 timeout 120 $P $R $E --bench $1 2>&1 | grep -v "^device\|^all passed"
  done
}
{
bench qwen3-30b 8192 bf16,channel,block,tensor:dyn
bench qwen3-30b 1024 bf16,channel
bench deepseek 8192 bf16,channel,block
bench mixtral 8192 bf16,channel
} 2>&1 | tee $OUT/bench.txt
{
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|^ok" | tail -30
echo "== prefill_check FMCU_PF_FUSE=2"; FMCU_PF_FUSE=2 timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -8
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
for r in 1 2; do
  echo "== conform auto, fresh seed ($r)"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done
} 2>&1 | tee $OUT/check.txt
