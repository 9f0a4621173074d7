#!/usr/bin/env bash
# Device call 1: the one-launch decode (decode_fused.cu). Checks (cuda_check under the stream and
# auto tiers, conformance), then graph-timed A/B (FMCU_FUSED=1/0, alternating processes; 0 runs the
# plan + stream GEMM1 + fused tail chain) at Qwen3-30B-A3B M=1 and 2, then ncu of one forward.
set -uo pipefail
exec > >(tee $OUT/log-go1.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-fused}
mkdir -p /tmp/bF && rm -rf /tmp/bF/b && tar -C /tmp/bF -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bF/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bF/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cc() { echo "== cuda_check tier $1 FMCU_FUSED=$2"; FMCU_FUSED=$2 FMOE_CUDA_TIER=$1 timeout 90 $B/tests/cuda/cuda_check $R > $OUT/cc-$1-$2.txt 2>&1; echo rc=$?;
       grep -v "^PASS" $OUT/cc-$1-$2.txt | head -8; grep -c "^PASS" $OUT/cc-$1-$2.txt; }
cc stream 1
cc auto 1
echo "== conform (fused on)"
timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -12
echo "t=$(( $(date +%s) - T0 ))s"
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_FUSED=$1 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --tokens 1,2 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|F$1 ${2%%:*} |" | tee -a $OUT/bench1.txt; }
: > $OUT/bench1.txt
for v in 1 0 1 0 1 0; do bench $v $CH; done
for v in 1 0 1 0; do bench $v bf16; done
echo "t=$(( $(date +%s) - T0 ))s"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for s in $CH bf16; do
  timeout 100 $NCU --cache-control none --clock-control none -k regex:'fused|plan|quant|stream_gemm|combine|tail|amax' -c 20 --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme $s --shape qwen3-30b-a3b --tokens 1 \
    --max-gib 24 --no-reference --iters 3 > $OUT/ncu1-${s%%:*}.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 bench/cuda/decode-2026-11-22/agg.py $OUT/ncu1-${s%%:*}.csv "qwen3 ${s%%:*} M=1 fused"
done
echo "t=$(( $(date +%s) - T0 ))s"; date -u
