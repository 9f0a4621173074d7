#!/usr/bin/env bash
# Device call 3: bf16 on our grouped kernel (fp8_grouped_sm90.cu with bf16 operands) in the
# prefill tier, both GEMMs, the activation kernel between them (FMCU_PF_FUSE=0: no
# interleaved W13, so CUTLASS's fused GEMM1 is not used). Checks with FUSE=0 and default,
# then the bf16 forward at M = 1024 and 8192: default (CUTLASS, fused GEMM1), fuse0 (ours),
# fuse0cc (CUTLASS, unfused); and fp8 channel default (ours, for the hashes of call 2).
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
D=${DEVRUN:-.devrun-own}
mkdir -p /tmp/bN && rm -rf /tmp/bN/b && tar -C /tmp/bN -xzf $D/b.tar.gz
B=/tmp/bN/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
{
echo "== fp8_grouped_check"; timeout 60 $B/tests/cuda/fp8_grouped_check | grep -v "^PASS "
for f in 0 1; do
  export FMCU_PF_FUSE=$f
  echo "== FUSE=$f prefill_check"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|bf16" | tail -8
  echo "== FUSE=$f cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -1
  echo "== FUSE=$f conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
  echo "== FUSE=$f conform prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed 3 2>&1 | grep -E "^(FAIL|cuda |result)"
done
unset FMCU_PF_FUSE
} 2>&1 | tee $OUT/check.txt
export PREFILL_BENCH_M=1024,8192
{
for s in qwen3-30b gpt-oss mixtral deepseek; do
  for v in default fuse0 fuse0cc; do
    echo "== $s bf16 $v"
    case $v in fuse0) export FMCU_PF_FUSE=0;; fuse0cc) export FMCU_PF_FUSE=0 FMCU_PF_OWN=cc;; esac
    PREFILL_BENCH_SCHEMES=bf16 timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
    unset FMCU_PF_FUSE FMCU_PF_OWN
  done
  echo "== $s channel default"
  PREFILL_BENCH_SCHEMES=channel timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
done
} 2>&1 | tee $OUT/bench.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++){ if($i=="act") a=$(i+1); if($i=="GEMM1") g1=$(i+1); if($i=="GEMM2") g2=$(i+1)}} /forward \(graph/{print h, m, "g1", g1, "act", a, "g2", g2, "graph", $5, "hash", $NF}' $OUT/bench.txt | tee $OUT/bench-summary.txt
