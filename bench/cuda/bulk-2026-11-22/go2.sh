#!/usr/bin/env bash
# Device call 2 (a new session: call 1's bench output did not survive it): the same build as
# go1.sh's, rebuilt. Output bits of the stream tier with and without bulk slabs, conformance,
# then graph-timed A/B at the decode points, bulk (FMCU_STREAM_BULK unset) against the register
# batches (FMCU_STREAM_BULK=0), interleaved 0 1 0 1 so drift shows.
set -uo pipefail
exec > >(tee $OUT/log-go2.txt) 2>&1
T0=$(date +%s); date -u
D=${DEVRUN:-.devrun-bulk}
mkdir -p /tmp/bI && rm -rf /tmp/bI/b && tar -C /tmp/bI -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
cc() { echo "== cuda_check tier $1 FMCU_STREAM_BULK=$2"; FMCU_STREAM_BULK=$2 FMOE_CUDA_TIER=$1 timeout 60 $B/tests/cuda/cuda_check $R > $OUT/cc-$1-$2.txt 2>&1; echo rc=$?;
       grep -v "^PASS" $OUT/cc-$1-$2.txt | head -8; grep -c "^PASS" $OUT/cc-$1-$2.txt; }
bits() { grep -o "^PASS.*bits=[0-9a-f]*" $OUT/cc-stream-$1.txt | sed 's/ nmse.*bits=/ /' > $OUT/bits-$1.txt; }
cc stream 0; bits 0
cc stream 1; bits 1
echo "bits bulk vs registers: $(diff $OUT/bits-0.txt $OUT/bits-1.txt > /dev/null && echo SAME || echo DIFFER) ($(wc -l < $OUT/bits-1.txt) lines)"
echo "== grouped_gemm_check (mbarrier.cuh now shared)"; timeout 60 $B/tests/cuda/grouped_gemm_check | grep -v "^PASS "
echo "== conform"
timeout 90 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml > $OUT/conform.txt 2>&1; echo rc=$?
grep -E "FAIL|^cuda|result" $OUT/conform.txt | head -12
echo "t=$(( $(date +%s) - T0 ))s"
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
BL=fp8e4m3:block128x128/fp8e4m3:group128:dynamic
bench() { FMCU_STREAM_BULK=$1 timeout 80 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    $4 --tokens $3 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|gpt-oss|mixtral|deepseek)|rror" | sed "s|^|B$1 ${2%%/*} |" | tee -a $OUT/bench.txt; }
ALL="--shape qwen3-30b-a3b --shape gpt-oss-120b --shape mixtral-8x7b --shape deepseek-v3"
: > $OUT/bench.txt
for v in 0 1 0 1; do bench $v $CH 1,16 "$ALL"; echo "t=$(( $(date +%s) - T0 ))s"; done
for v in 0 1; do bench $v $BL 1,16 "$ALL"; echo "t=$(( $(date +%s) - T0 ))s"; done
for v in 0 1; do bench $v bf16 1,16 "$ALL"; echo "t=$(( $(date +%s) - T0 ))s"; done
date -u
