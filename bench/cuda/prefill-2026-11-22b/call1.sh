#!/usr/bin/env bash
# Device call 1: the args refactor's checks (build A, .devrun-pf3), then the
# token_kernel A/B on a tuning build (.devrun-pf3t): the former act_kernel
# (FMCU_PF_ACT_OLD=1) against token_kernel at 4 and 2 chunks per thread, fp8
# channel, M = 1024 and 8192, the four grid shapes; equal "out" hashes = same bits.
set -uo pipefail
E=$PWD/tests/conformance/empty.toml
unpack() { mkdir -p /tmp/$1 && rm -rf /tmp/$1/b && tar -C /tmp/$1 -xzf $2/b.tar.gz; }
unpack bA .devrun-pf3; unpack bT .devrun-pf3t  # bT: prefill_check + libfusedmoe + the reference plugin only
export LD_LIBRARY_PATH=$PWD/.devrun-pf3/lib FMOE_CONFIG=$E
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
B=/tmp/bA/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
{
echo "== A prefill_check"; LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -5
echo "== A FUSE=2 prefill_check"; LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH FMCU_PF_FUSE=2 timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed" | tail -5
echo "== A cuda_check prefill"; FMOE_CUDA_TIER=prefill timeout 150 $B/tests/cuda/cuda_check $R $C $E 2>&1 | tail -2
echo "== A conform prefill seed 1"; FMOE_CUDA_TIER=prefill timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C --mode test --seed 1 2>&1 | grep -E "^(FAIL|cuda |result)"
echo "== A conform auto"; timeout 150 $B/cli/fusedmoe --plugin $R conform --plugin $C 2>&1 | grep -E "^(FAIL|cuda |result)"
} 2>&1 | tee $OUT/checkA.txt
B=/tmp/bT/b; R=$B/plugins/reference/reference.toml
export LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH PREFILL_BENCH_M=1024,8192 PREFILL_BENCH_SCHEMES=channel
{
echo "== T prefill_check (token_kernel, check mode)"; timeout 200 $B/tests/cuda/prefill_check $R $E 2>&1 | grep -E "FAIL|passed|channel" | tail -12
for s in qwen3-30b mixtral gpt-oss deepseek; do
  for v in old 4 2; do
    echo "== $s act=$v"
    if [ $v = old ]; then FMCU_PF_ACT_OLD=1 timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"
    else FMCU_PF_ACT_CPT=$v timeout 120 $B/tests/cuda/prefill_check $R $E --bench $s 2>&1 | grep -v "^device\|^all passed"; fi
  done
done
} 2>&1 | tee $OUT/actAB.txt
awk '/^==/{h=$0} /^BENCH/{m=$4; for(i=1;i<=NF;i++) if($i=="act") a=$(i+1)} /forward \(graph/{print h, m, "act", a, "graph", $5, "hash", $NF}' $OUT/actAB.txt
echo "== registers"
cuobjdump --dump-resource-usage /tmp/bT/b/tests/cuda/prefill_check 2>/dev/null | grep -A1 -E "Function .*(token_kernel|act_kernel|quant_token)" | grep -oE "Function [^:]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+" | paste - - | cut -c1-160 | tee $OUT/regs.txt
