#!/usr/bin/env bash
# Device call 6: after the tail's GEMM2 unit, promotion and combine moved into tail_ops.cuh
# (shared by decode_tail.cu and decode_fused.cu). Checks (default, FMCU_FUSED=1 and =0: the tail),
# conformance both ways, and Qwen3 M=1 timings of both kernels against go5.
set -uo pipefail
exec > >(tee $OUT/log-go6.txt) 2>&1
D=.devrun-fused
mkdir -p /tmp/bF && rm -rf /tmp/bF/b && tar -C /tmp/bF -xzf $D/b.tar.gz
export LD_LIBRARY_PATH=/tmp/bF/b:$PWD/$D/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bF/b
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
cc() { echo "== cuda_check tier stream FMCU_FUSED=$1"; env ${1:+FMCU_FUSED=$1} FMOE_CUDA_TIER=stream timeout 90 $B/tests/cuda/cuda_check $R > /tmp/cc.txt 2>&1; echo rc=$?;
       grep -v "^PASS" /tmp/cc.txt | head -4; grep -c "^PASS" /tmp/cc.txt; }
cc ""; cc 1; cc 0
for f in "" 1 0; do
  echo "== conform FMCU_FUSED=$f"
  env ${f:+FMCU_FUSED=$f} timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml 2>&1 | grep -E "FAIL|result" | head -4
done
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
bench() { env ${1:+FMCU_FUSED=$1} timeout 60 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$2" \
    --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3)|rror" | sed "s|^|F${1:--} ${2%%:*} |"; }
for v in "" 0 "" 0; do bench "$v" $CH; done
for v in "" ""; do bench "$v" bf16; done
