#!/usr/bin/env bash
# Device call 4: the epilogue's tensor stores (full 64-row halves by TMA, partial ones copied
# by the threads) instead of one bulk copy per row. Checks, then the prefill forward at
# M = 1024 and 8192, fp8 channel and bf16, default settings.
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-own}
mkdir -p /tmp/bN && rm -rf /tmp/bN/b && tar -C /tmp/bN -xzf $D/b.tar.gz
B=/tmp/bN/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== grouped_gemm_check"; timeout 60 $B/tests/cuda/grouped_gemm_check | grep -v "^PASS "
echo "== prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -3
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
for seed in 1 2; do echo "== conform prefill seed $seed"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed $seed 2>&1 | grep -E "^(FAIL|cuda |result)"; done
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192
{
for s in qwen3-30b gpt-oss mixtral deepseek; do
  for sch in channel bf16; do
    echo "== $s $sch"
    PREFILL_BENCH_SCHEMES=$sch timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
  done
done
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt | tee $OUT/bench-summary.txt
