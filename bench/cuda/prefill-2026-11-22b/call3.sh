#!/usr/bin/env bash
# Device call 3: the committed build (.devrun-pf3: fp8 GEMM1 64x192x128 ping-pong at 128-511
# rows per expert) checked, then graph-timed against the build before it (.devrun-pf3b:
# prefill_check of 0357599), fp8 channel, M = 1024 and 8192, twice each, alternating.
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
unpack() { mkdir -p /tmp/$1 && rm -rf /tmp/$1/b && tar -C /tmp/$1 -xzf $2/b.tar.gz; }
unpack bN .devrun-pf3; unpack bO .devrun-pf3b
export LD_LIBRARY_PATH=$PWD/.devrun-pf3/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
B=/tmp/bN/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
{
echo "== prefill_check"; LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|fp8 (channel|tensor)" | tail -12
echo "== FUSE=2 prefill_check"; LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH FMCU_PF_FUSE=2 timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -4
echo "== cuda_check auto"; timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
echo "== conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
for seed in 1 2; do echo "== conform prefill seed $seed"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed $seed 2>&1 | grep -E "^(FAIL|cuda |result)"; done
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=channel
{
for s in gpt-oss mixtral deepseek qwen3-30b; do
  reps="1 2"; [ $s = qwen3-30b ] && reps=1
  for r in $reps; do
    for b in bO bN; do
      echo "== $s $b $r"
      LD_LIBRARY_PATH=/tmp/$b/b:$LD_LIBRARY_PATH timeout 120 /tmp/$b/b/tests/cuda/prefill_check /tmp/$b/b/plugins/reference/reference.toml $E --bench $s 2>&1 | grep -v "^device\|^all passed"
    done
  done
done
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt
