#!/usr/bin/env bash
# Device call 2 (after the ping-pong kinds were dropped): a 192-column fast-accumulation kind
# (n192-fast) beside the four committed ones; correctness of every kind, then each kind alone on
# the model shapes, fp8 and bf16, M = 128, 1024, 8192.
set -uo pipefail
exec > >(tee $OUT/log-go2.txt) 2>&1
date -u
D=${DEVRUN:-.devrun-pp}
mkdir -p /tmp/bP && rm -rf /tmp/bP/b && tar -C /tmp/bP -xzf $D/b.tar.gz
B=/tmp/bP/b
export LD_LIBRARY_PATH=$B:$PWD/$D/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== grouped_gemm_check"; timeout 120 $B/tests/cuda/grouped_gemm_check > $OUT/ggc2.txt 2>&1; echo rc=$?
grep -v "^PASS " $OUT/ggc2.txt | head -20; grep -c "^PASS " $OUT/ggc2.txt
echo "== kinds alone, fp8"; GG_BENCH_M=128,1024,8192 timeout 200 $B/tests/cuda/grouped_gemm_check --bench 2>&1 | tee $OUT/gg2-bench-fp8.txt
echo "== kinds alone, bf16"; GG_BENCH_BF16=1 GG_BENCH_M=128,1024,8192 timeout 200 $B/tests/cuda/grouped_gemm_check --bench 2>&1 | tee $OUT/gg2-bench-bf16.txt
date -u
