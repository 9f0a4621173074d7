#!/usr/bin/env bash
# Device call 1 for W13 by bulk copies in the one-launch decode (FMCU_FUSED_W13=bulk; README.md):
# checks with it on (cuda_check, conformance, also with FMCU_FUSED=1 for bf16 where its slots fit),
# then Qwen3-30B-A3B M=1 `fusedmoe bench` points, one process per line, regs and bulk alternating. ~5 min.
set -uo pipefail
D=.devrun-w13; . bench/cuda/devrun_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
{
echo "== test_cuda_layout"; $B/tests/cuda/test_cuda_layout 2>&1 | tail -1
for f in "" 1; do
  echo "== cuda_check FMCU_FUSED_W13=bulk FMCU_FUSED=$f"
  FMCU_FUSED=$f FMCU_FUSED_W13=bulk timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -8
  echo "== conform FMCU_FUSED_W13=bulk FMCU_FUSED=$f"
  FMCU_FUSED=$f FMCU_FUSED_W13=bulk timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "FAIL|result|seed" | head -8
done
} 2>&1 | tee $OUT/checks.txt
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
TS=fp8e4m3:tensor/fp8e4m3:tensor:dynamic
BL=fp8e4m3:block128x128/fp8e4m3:group128:dynamic
bench() { local sh=$1 m=$2 sc=$3; shift 3
  env "$@" timeout 60 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$sc" --shape $sh --tokens $m \
    --max-gib 24 --no-reference 2>&1 | grep -E "^($sh)|rror" | sed "s|^|[$*] ${sc%%/*} |"; }
{
for r in 1 2 3 4; do for s in $CH $TS $BL; do
  bench qwen3-30b-a3b 1 $s FMCU_FUSED_W13=regs; bench qwen3-30b-a3b 1 $s FMCU_FUSED_W13=bulk
done; done
} 2>&1 | tee $OUT/bench.txt
