#!/usr/bin/env bash
# Device call 2: phase stamps of the one-launch decode (stamps.patch: globaltimer at each phase's
# end, tid 0, CTAs 0, 16, ... at their 60th call) with W13 by bulk copies and by register loads,
# Qwen3-30B-A3B fp8 channel M=1. ~1 min.
set -uo pipefail
D=.devrun-st16; . bench/cuda/devrun_env.sh
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
for w in bulk regs bulk; do
  echo "== FMCU_FUSED_W13=$w"
  FMCU_FUSED_W13=$w timeout 60 $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme $CH \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference > /tmp/o.txt 2>&1
  grep -E "^(qwen3)|rror" /tmp/o.txt; grep STAMP /tmp/o.txt | tail -10
done 2>&1 | tee $OUT/log-go2.txt
