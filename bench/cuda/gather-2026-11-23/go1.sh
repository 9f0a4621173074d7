#!/usr/bin/env bash
# Device call 1: our grouped GEMM1 reading its A rows by pair id (gathered A, no gather pass)
# against the gather pass (FMCU_PF_GATHER=0), same build, one process after the other. Checks
# first (grouped_gemm_check with its gathered cases, prefill_check, cuda_check on the prefill
# tier, conformance), then the GEMM1 alone both ways and the prefill forward at M = 1024 and 8192.
set -uo pipefail
D=.devrun-gather; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== grouped_gemm_check"; timeout 120 $B/tests/cuda/grouped_gemm_check 2>&1 | grep -v "^PASS"
for g in 1 0; do
  [ $g = 0 ] && export FMCU_PF_GATHER=0 || unset FMCU_PF_GATHER
  echo "== prefill_check gather=$g"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -3
done
unset FMCU_PF_GATHER
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
echo "== conform prefill seed 1"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed 1 2>&1 | grep -E "^(FAIL|cuda |result)"
} 2>&1 | tee $OUT/check.txt
{
for bf in 0 1; do
  for ga in 0 1; do
    echo "== GEMM1 alone bf16=$bf gathered=$ga"
    GG_BENCH_BF16=$bf GG_BENCH_GATHER=$ga GG_BENCH_KINDS=$([ $bf = 1 ] && echo 2 || echo 1) timeout 100 \
      $B/tests/cuda/grouped_gemm_check --bench 2>&1 | grep GEMM1
  done
done
} 2>&1 | tee $OUT/gemm1.txt
export PREFILL_BENCH_M=1024,8192
{
for s in qwen3-30b gpt-oss deepseek mixtral; do
  for sch in channel bf16; do
    for g in 1 0; do
      [ $g = 0 ] && export FMCU_PF_GATHER=0 || unset FMCU_PF_GATHER
      echo "== $s $sch gather=$g"
      PREFILL_BENCH_SCHEMES=$sch timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
    done
  done
done
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="gather") g=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "gather", g, "g1", g1, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt | tee $OUT/bench-summary.txt
