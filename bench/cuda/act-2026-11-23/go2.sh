#!/usr/bin/env bash
# Device call 2: which pipe bounds act_kernel (ncu compute-workload and instruction sections,
# per-pipe instruction counts), Qwen3-30B-A3B fp8 channel and bf16 at M = 8192.
set -uo pipefail
D=.devrun-amax; . bench/cuda/devrun_env.sh
for s in channel bf16; do
  echo "===== qwen3-30b $s M=8192"
  PREFILL_BENCH_M=8192 PREFILL_BENCH_SCHEMES=$s timeout 150 $NCU --cache-control none --clock-control none \
    -k regex:act_kernel -c 1 --section ComputeWorkloadAnalysis --section InstructionStats \
    --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_cbu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_adu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
    $B/tests/cuda/prefill_check $R $E --bench qwen3-30b 2>&1 | grep -vE "^(BENCH|      forward|device|all passed)" | grep -E "^\s+[A-Za-z]|=====" | head -60
done 2>&1 | tee $OUT/ncu-act2.txt
