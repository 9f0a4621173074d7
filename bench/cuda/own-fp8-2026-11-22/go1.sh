#!/usr/bin/env bash
# Device call 1: our grouped FP8 GEMM (plugins/cuda/fp8_grouped_sm90.cu) in the prefill
# path. Checks (fp8_grouped_check, prefill_check, cuda_check, conformance), then the
# prefill forward, fp8 channel, M = 1024 and 8192, with CUTLASS's kernels
# (FMCU_PF_FP8_OWN=cc), the default (ours from 128 rows per expert) and GEMM2 on n128-fast.
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-own}
mkdir -p /tmp/bN && rm -rf /tmp/bN/b && tar -C /tmp/bN -xzf $D/b.tar.gz
B=/tmp/bN/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== fp8_grouped_check"; timeout 120 $B/tests/cuda/fp8_grouped_check | tail -2
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|fp8 (channel|tensor)" | tail -14
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
echo "== conform prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed 1 2>&1 | grep -E "^(FAIL|cuda |result)"
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=channel
{
for s in qwen3-30b gpt-oss mixtral deepseek; do
  for own in cc default 13; do
    echo "== $s $own"
    if [ $own = default ]; then unset FMCU_PF_FP8_OWN; else export FMCU_PF_FP8_OWN=$own; fi
    timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
  done
done
unset FMCU_PF_FP8_OWN
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt | tee $OUT/bench-summary.txt
