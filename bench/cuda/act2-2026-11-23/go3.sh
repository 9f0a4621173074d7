#!/usr/bin/env bash
# Device call 3: act_shape from calls 1-2 (1, 2 or 4 chunks a thread up to 512 chunks, then 256
# threads of 2 a pass with a long per-token row staged in shared memory) and plan_kernel taking 8
# pairs a thread per step, loads first. Against main at 3488263 (.devrun-old): hashes and stage
# times; prefill_check (with the fused epilogue's quantize pass too), cuda_check, conform; the plan
# kernel in one `fusedmoe bench` forward; `fusedmoe bench` on Qwen3-30B-A3B at M = 1024, 8192.
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
bench gpt-oss 8192 bf16,channel
} 2>&1 | tee $OUT/bench.txt
{
echo "== prefill_check"; timeout 300 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|I=" | tail -30
echo "== prefill_check FMCU_PF_FUSE=2 channel"; FMCU_PF_FUSE=2 timeout 100 $B/tests/cuda/prefill_check $R $E --check "channel" 2>&1 | grep -E "FAIL|passed|I="
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
for r in 1 2; do
  echo "== conform auto, fresh seed ($r)"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done
for t in tiled stream; do
  echo "== conform $t tier"; FMOE_CUDA_TIER=$t timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)"
done
} 2>&1 | tee $OUT/check.txt
timeout 200 $NCU --cache-control none --clock-control none -k regex:plan_kernel -c 3 --csv --page raw \
  --metrics gpu__time_duration.sum $B/cli/fusedmoe --plugin $C bench --backend cuda \
  --scheme fp8e4m3:channel/fp8e4m3:token:dynamic --shape qwen3-30b-a3b --tokens 8192 --max-gib 24 --no-reference 2>&1 \
  | grep '^"' > $OUT/ncu-plan-qwen3-fp8-8192.csv
echo "== ncu plan: $(grep -o '"[0-9,]*"$' $OUT/ncu-plan-qwen3-fp8-8192.csv | tr '\n' ' ')"
for sc in bf16 fp8e4m3:channel/fp8e4m3:token:dynamic; do
  timeout 200 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme $sc --shape qwen3-30b-a3b \
    --tokens 1024,8192 --max-gib 24 --no-reference 2>&1 | tail -6
done 2>&1 | tee $OUT/fusedmoe-bench.txt
