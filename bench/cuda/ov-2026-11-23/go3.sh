#!/usr/bin/env bash
# Device call 3: the one-launch decode with W13 prefetched into L2 by the copy warp
# (FMCU_FUSED_PREFETCH=n: each GEMM1 group's first n units, experiments.patch). Checks with the
# prefetch on (correctness must not move: a prefetch is a hint), then Qwen3-30B-A3B M=1 fp8 channel
# (fused by default) and bf16 (FMCU_FUSED=1) over n, one process per line, alternating. ~4 min.
set -uo pipefail
D=.devrun-ov; . bench/cuda/devrun_env.sh
{
echo "== cuda_check tier stream FMCU_FUSED_PREFETCH=6"
FMCU_FUSED_PREFETCH=6 FMOE_CUDA_TIER=stream timeout 120 $B/tests/cuda/cuda_check $R $C $E 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -5
echo "== conform FMCU_FUSED_PREFETCH=6"
FMCU_FUSED_PREFETCH=6 timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "FAIL|result" | head -5
echo "== conform FMCU_FUSED=1 FMCU_FUSED_PREFETCH=2"
FMCU_FUSED=1 FMCU_FUSED_PREFETCH=2 timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "FAIL|result" | head -5
} 2>&1 | tee $OUT/prefetch-check.txt
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { env FMCU_FUSED_PREFETCH=$1 ${3:+FMCU_FUSED=$3} timeout 60 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3)|rror" | sed "s|^|P$1 F${3:--} ${2%%:*} |"; }
{
for r in 1 2 3; do for n in 0 1 2 6; do bench $n $CH; done; done
for r in 1 2; do for n in 0 1 2; do bench $n bf16 1; done; bench 0 bf16; done
} 2>&1 | tee $OUT/prefetch-bench.txt
