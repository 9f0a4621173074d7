#!/usr/bin/env bash
# Device call 1: the fused decode tail (plugins/cuda/decode_tail.cu) against the quant + GEMM2 +
# combine chain (FMCU_TAIL=0), same build. Checks first (cuda_check both ways and auto,
# grouped_gemm_check for the shared mbarrier header, conformance with the tail on), then
# graph-timed A/B at M=1 and 2, one process after the other.
set -uo pipefail
exec > >(tee $OUT/log-go1.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-tail}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
cc() { echo "== cuda_check tier $1 FMCU_TAIL=$2"; FMCU_TAIL=$2 FMOE_CUDA_TIER=$1 timeout 60 $B/tests/cuda/cuda_check $R > $OUT/cc-$1-$2.txt 2>&1; echo rc=$?;
       grep -v "^PASS" $OUT/cc-$1-$2.txt | head -8; grep -c "^PASS" $OUT/cc-$1-$2.txt; }
cc stream 1
cc stream 0
cc auto 1
echo "== grouped_gemm_check"; timeout 60 $B/tests/cuda/grouped_gemm_check | grep -v "^PASS " | head
echo "== conform (tail on)"
timeout 90 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -12
echo "t=$(( $(date +%s) - T0 ))s"
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_TAIL=$1 timeout 100 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    $4 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|T$1 ${2%%:*} |" | tee -a $OUT/bench.txt; }
ALL="--shape qwen3-30b-a3b --shape gpt-oss-120b --shape mixtral-8x7b --shape deepseek-v3"
: > $OUT/bench.txt
for v in 1 0 1 0; do bench $v $CH 1,2 "$ALL"; echo "t=$(( $(date +%s) - T0 ))s"; done
for v in 1 0; do bench $v bf16 1,2 "$ALL"; echo "t=$(( $(date +%s) - T0 ))s"; done
date -u
