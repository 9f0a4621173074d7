#!/usr/bin/env bash
# Device call 2: the activation kernels with 1-8 chunks of 8 columns a thread in registers (loads
# first), the per-token row without shared memory, the block scheme by half-warps. Against main
# at 3488263 (.devrun-old): hashes and stage times; the new check cases (I = 1152, 2304, 4736,
# SiLU with a limit); the fused epilogue's check old and new; ncu of act_kernel; and the
# kernels of one `fusedmoe bench` forward (Qwen3 fp8 M=8192), for what the stage sum leaves out.
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
for v in old new; do
  P=$B/tests/cuda/prefill_check; [ $v = old ] && P=${P}_old
  echo "== $v prefill_check FMCU_PF_FUSE=2 --check 'tensor dynamic'"
  FMCU_PF_FUSE=2 timeout 100 $P $R $E --check "tensor dynamic" 2>&1 | tail -4
done
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
for r in 1 2; do
  echo "== conform auto, fresh seed ($r)"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|result)|seed"
done
} 2>&1 | tee $OUT/check.txt
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__thread_inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__block_size"
for s in qwen3-30b:channel qwen3-30b:bf16 deepseek:channel mixtral:channel; do
  PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=${s#*:} timeout 150 $NCU --cache-control none --clock-control none \
    -k regex:"act_kernel" -c 2 --csv --page raw --metrics $M $B/tests/cuda/prefill_check $R $E --bench ${s%:*} 2>&1 \
    | grep '^"' > $OUT/ncu-act-${s/:/-}.csv
  echo "== ncu act $s: $(wc -l < $OUT/ncu-act-${s/:/-}.csv) lines"
done
timeout 200 $NCU --cache-control none --clock-control none -c 60 --csv --page raw --metrics gpu__time_duration.sum \
  $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme fp8e4m3:channel/fp8e4m3:token:dynamic \
  --shape qwen3-30b-a3b --tokens 8192 --max-gib 24 --no-reference 2>&1 | grep '^"' > $OUT/ncu-forward-qwen3-fp8-8192.csv
echo "== ncu forward: $(wc -l < $OUT/ncu-forward-qwen3-fp8-8192.csv) lines"
