#!/usr/bin/env bash
# Device call 3: the tail with one bulk copy per weight row and only where its CTAs fit in one
# wave (Qwen3-30B-A3B at M=1 on the H100). Checks, then graph-timed A/B (FMCU_TAIL=1/0,
# alternating processes) at Qwen3 M=1 and 2, then ncu kernel durations of one forward with the tail.
set -uo pipefail
exec > >(tee $OUT/log-go3.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-tail}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier $1 FMCU_TAIL=$2"; FMCU_TAIL=$2 FMOE_CUDA_TIER=$1 timeout 60 $B/tests/cuda/cuda_check $R > $OUT/cc-$1-$2.txt 2>&1; echo rc=$?;
       grep -v "^PASS" $OUT/cc-$1-$2.txt | head -8; grep -c "^PASS" $OUT/cc-$1-$2.txt; }
cc stream 1
cc auto 1
echo "== conform (tail on)"
timeout 90 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -12
echo "t=$(( $(date +%s) - T0 ))s"
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { FMCU_TAIL=$1 timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --tokens 1,2 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|T$1 ${2%%:*} |" | tee -a $OUT/bench3.txt; }
: > $OUT/bench3.txt
for v in 1 0 1 0 1 0; do bench $v $CH; done
for v in 1 0 1 0; do bench $v bf16; done
echo "t=$(( $(date +%s) - T0 ))s"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for s in $CH bf16; do
  FMCU_TAIL=1 timeout 100 $NCU --cache-control none --clock-control none -k regex:'plan|quant|stream_gemm|combine|tail|amax' -c 30 --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme $s --shape qwen3-30b-a3b --tokens 1 \
    --max-gib 24 --no-reference --iters 3 > $OUT/ncu3-${s%%:*}.csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
  python3 bench/cuda/decode-2026-11-22/agg.py $OUT/ncu3-${s%%:*}.csv "qwen3 ${s%%:*} M=1 FMCU_TAIL=1"
done
echo "t=$(( $(date +%s) - T0 ))s"; date -u
