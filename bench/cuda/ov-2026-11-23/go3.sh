#!/usr/bin/env bash
# Device call 3: L2 prefetch in the decode kernels (prefetch.patch). FMCU_FUSED_PREFETCH=n: the
# one-launch decode's copy warp starts each GEMM1 group's first n units of W13 into L2;
# FMCU_STREAM_PREFETCH=1: every split-K stream-GEMM CTA starts its whole slab into L2 before its first
# batch. Checks with both on (results must not move: a prefetch is a hint), then `fusedmoe bench`
# points, one process per line, settings alternating. ~6 min.
set -uo pipefail
D=.devrun-ov; . bench/cuda/devrun_env.sh
{
echo "== cuda_check tier stream, both prefetches on"
FMCU_FUSED_PREFETCH=6 FMCU_STREAM_PREFETCH=1 FMOE_CUDA_TIER=stream timeout 120 $B/tests/cuda/cuda_check $R $C $E 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -5
echo "== conform, both prefetches on"
FMCU_FUSED_PREFETCH=6 FMCU_STREAM_PREFETCH=1 timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "FAIL|result" | head -5
echo "== conform FMCU_FUSED=1 FMCU_FUSED_PREFETCH=2"
FMCU_FUSED=1 FMCU_FUSED_PREFETCH=2 timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "FAIL|result" | head -5
} 2>&1 | tee $OUT/prefetch-check.txt
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
# bench SHAPE M SCHEME ENV...: one fusedmoe bench process with the given settings
bench() { local sh=$1 m=$2 sc=$3; shift 3
  env "$@" timeout 60 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$sc" --shape $sh --tokens $m \
    --max-gib 24 --no-reference 2>&1 | grep -E "^($sh)|rror" | sed "s|^|[$*] ${sc%%:*} |"; }
{
echo "== one-launch decode: Qwen3-30B-A3B M=1 fp8 over FMCU_FUSED_PREFETCH, then bf16 (FMCU_FUSED=1) against the chain"
for r in 1 2 3; do for n in 0 1 2 6; do bench qwen3-30b-a3b 1 $CH FMCU_FUSED_PREFETCH=$n; done; done
for r in 1 2; do for n in 0 1 2; do bench qwen3-30b-a3b 1 bf16 FMCU_FUSED=1 FMCU_FUSED_PREFETCH=$n; done
  bench qwen3-30b-a3b 1 bf16 FMCU_STREAM_PREFETCH=0; bench qwen3-30b-a3b 1 bf16 FMCU_STREAM_PREFETCH=1; done
echo "== stream chain: FMCU_STREAM_PREFETCH 0 / 1"
for r in 1 2; do for p in 0 1; do
  bench gpt-oss-120b 1 $CH FMCU_STREAM_PREFETCH=$p; bench gpt-oss-120b 1 bf16 FMCU_STREAM_PREFETCH=$p
  bench mixtral-8x7b 1 $CH FMCU_STREAM_PREFETCH=$p; bench deepseek-v3 1 $CH FMCU_STREAM_PREFETCH=$p
  bench qwen3-30b-a3b 16 $CH FMCU_STREAM_PREFETCH=$p; bench qwen3-30b-a3b 16 bf16 FMCU_STREAM_PREFETCH=$p
done; done
} 2>&1 | tee $OUT/prefetch-bench.txt
