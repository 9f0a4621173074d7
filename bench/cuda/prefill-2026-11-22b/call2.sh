#!/usr/bin/env bash
# Device call 2 (tuning build with -DFMCU_PF_FP8_G1_ACT=4, .devrun-pf3t): fp8 channel,
# the four grid shapes. GEMM1 variant 4 = 64x192x128 ping-pong promoted (cluster 2x1):
# unfused (FMCU_PF_FP8=43 at M=8192, 40 at M=1024) and as the fused GEMM1 (FMCU_PF_FUSE=2:
# activation in its epilogue, then token_kernel quantizes the bf16 rows); token_kernel at 1
# chunk per thread (FMCU_PF_ACT_CPT=1) and the former act_kernel (FMCU_PF_ACT_OLD=1).
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
mkdir -p /tmp/bT && rm -rf /tmp/bT/b && tar -C /tmp/bT -xzf .devrun-pf3t/b.tar.gz
B=/tmp/bT/b; R=$B/plugins/reference/reference.toml; P=$B/tests/cuda/prefill_check
export LD_LIBRARY_PATH=$B:$PWD/.devrun-pf3/lib FMOE_CONFIG=$E PREFILL_BENCH_SCHEMES=channel
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
run() { echo "== $1"; shift; env "$@" 2>&1 | grep -v "^device\|^all passed"; }
{
echo "== check FUSE=2"; FMCU_PF_FUSE=2 timeout 200 $P $R $E 2>&1 | grep -E "FAIL|passed|fp8" | tail -14
echo "== check FP8=43"; FMCU_PF_FP8=43 timeout 200 $P $R $E --check fp8 2>&1 | grep -E "FAIL|passed" | tail -4
echo "== check FP8=40"; FMCU_PF_FP8=40 timeout 200 $P $R $E --check fp8 2>&1 | grep -E "FAIL|passed" | tail -4
for s in qwen3-30b mixtral gpt-oss deepseek; do
  run "$s default" PREFILL_BENCH_M=1024,8192 timeout 120 $P $R $E --bench $s
  run "$s g1=4 unfused" PREFILL_BENCH_M=8192 FMCU_PF_FP8=43 timeout 120 $P $R $E --bench $s
  run "$s g1=4 unfused" PREFILL_BENCH_M=1024 FMCU_PF_FP8=40 timeout 120 $P $R $E --bench $s
  run "$s fused g1=4" PREFILL_BENCH_M=1024,8192 FMCU_PF_FUSE=2 timeout 120 $P $R $E --bench $s
  run "$s act cpt=1" PREFILL_BENCH_M=8192 FMCU_PF_ACT_CPT=1 timeout 120 $P $R $E --bench $s
  run "$s act old" PREFILL_BENCH_M=8192 FMCU_PF_ACT_OLD=1 timeout 120 $P $R $E --bench $s
done
} 2>&1 | tee $OUT/call2.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/call2.txt
