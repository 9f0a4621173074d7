#!/usr/bin/env bash
# Device call 3: the tail's act rows held two pieces a thread in the bulk kernel (HOLD_ACT; go2's
# stamps showed the GEMM2 input staged in 2.6-3 µs after the barrier against 1.7 with six groups).
# A/B: .devrun-w13 (commit 9d4dbcd) against .devrun-w13c (with HOLD_ACT), one process per line,
# alternating. The two builds differ in libfmoe-cuda.so alone, so (for the carried tree's 64 MiB)
# .devrun-w13 is made there from .devrun-w13c and the old plugin in .devrun-old. ~2 min.
set -uo pipefail
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
TS=fp8e4m3:tensor/fp8e4m3:tensor:dynamic
BL=fp8e4m3:block128x128/fp8e4m3:group128:dynamic
for D in .devrun-w13 .devrun-w13c; do mkdir -p /tmp/u$D && tar -C /tmp/u$D -xzf .devrun-w13c/b.tar.gz; done
gunzip -c .devrun-old/libfmoe-cuda.so.gz > /tmp/u.devrun-w13/b/plugins/cuda/libfmoe-cuda.so
mkdir -p .devrun-w13 && ln -sfn $PWD/.devrun-w13c/lib .devrun-w13/lib
export FMOE_CONFIG=$PWD/tests/conformance/empty.toml
{
for r in 1 2 3; do for s in $CH $TS $BL; do for D in .devrun-w13 .devrun-w13c; do
  LD_LIBRARY_PATH=/tmp/u$D/b:$PWD/$D/lib timeout 60 /tmp/u$D/b/cli/fusedmoe --plugin /tmp/u$D/b/plugins/cuda/cuda.toml \
    bench --backend cuda --scheme $s --shape qwen3-30b-a3b --tokens 1 --max-gib 24 --no-reference 2>&1 \
    | grep -E "^qwen3|rror" | sed "s|^|[$D] ${s%%/*} |"
done; done; done
echo "== cuda_check (new)"
D=.devrun-w13c; B=/tmp/u$D/b
LD_LIBRARY_PATH=$B:$PWD/$D/lib timeout 100 $B/tests/cuda/cuda_check $B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $FMOE_CONFIG 2>&1 | grep -E "FAIL|passed|failed|seed" | tail -4
echo "== conform (new)"
LD_LIBRARY_PATH=$B:$PWD/$D/lib timeout 100 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform --plugin $B/plugins/cuda/cuda.toml 2>&1 | grep -E "FAIL|result" | head -4
} 2>&1 | tee $OUT/log-go3.txt
