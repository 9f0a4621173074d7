#!/usr/bin/env bash
# Device call 1: the warp-per-row activation kernel (act_warp_kernel) against the block-per-row
# one (FMCU_PF_ACT=block), same build, one process after the other. Checks first, then the
# prefill forward at M = 1024 and 8192, fp8 channel and bf16.
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-act}
mkdir -p /tmp/bN && rm -rf /tmp/bN/b && tar -C /tmp/bN -xzf $D/b.tar.gz
B=/tmp/bN/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
for a in warp block; do
  [ $a = block ] && export FMCU_PF_ACT=block || unset FMCU_PF_ACT
  echo "== prefill_check act=$a"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -3
done
unset FMCU_PF_ACT
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
echo "== conform prefill seed 1"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed 1 2>&1 | grep -E "^(FAIL|cuda |result)"
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192
{
for s in qwen3-30b gpt-oss deepseek mixtral; do
  for sch in channel bf16; do
    for a in warp block; do
      [ $a = block ] && export FMCU_PF_ACT=block || unset FMCU_PF_ACT
      echo "== $s $sch act=$a"
      PREFILL_BENCH_SCHEMES=$sch timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
    done
  done
done
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt | tee $OUT/bench-summary.txt
