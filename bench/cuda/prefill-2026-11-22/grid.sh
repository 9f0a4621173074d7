#!/usr/bin/env bash
# Final grid: the new build (b.tar.gz) through run_grid.sh (peaks, ours, torch peers), the old
# build (old.tar.gz, the tree before this work) with the same peaks, then conformance of the old
# build with the prefill tier forced at seed 3 (is the block m1 failure older than this work?).
set -uo pipefail
export DEVRUN=.devrun-pf
S="${SHAPES:-qwen3-30b-a3b mixtral-8x7b gpt-oss-120b deepseek-v3}"
T=${TOKENS:-128,1024,8192}
G=/tmp/gridout; rm -rf $G; mkdir -p $G
OUT=$G SHAPES="$S" TOKENS=$T TAG=after bash bench/cuda/run_grid.sh > $G/after-log-full.txt 2>&1
peak() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_tflops'][sys.argv[2]])" "$G/after-peaks.json" "$1"; }
rm -rf /tmp/bO && mkdir -p /tmp/bO && tar -C /tmp/bO -xzf .devrun-pf/old.tar.gz
O=/tmp/bO/b
export LD_LIBRARY_PATH=$O:$PWD/.devrun-pf/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
shape_args=$(for s in $S; do printf -- '--shape %s ' "$s"; done)
for scheme in bf16 fp8; do
  key=bf16; [ $scheme = fp8 ] && key=fp8e4m3:channel/fp8e4m3:token:dynamic
  timeout 400 $O/cli/fusedmoe --plugin $O/plugins/cuda/cuda.toml bench --backend cuda --scheme "$key" $shape_args \
    --tokens "$T" --max-gib 24 --no-reference --gemm-peak "$(peak $scheme)" --json "$G/before-cuda-$scheme.json" \
    > $G/before-log-$scheme.txt 2>&1
done
echo "== old build, conform prefill seed 3"
FMOE_CUDA_TIER=prefill timeout 120 $O/cli/fusedmoe --plugin $O/plugins/reference/reference.toml conform \
  --plugin $O/plugins/cuda/cuda.toml --mode test --seed 3 2>&1 | grep -E "^(FAIL|cuda |result)" | tee $G/conform-old-seed3.txt
if [ -n "${SASS:-}" ]; then
  cuobjdump -sass -fun '_ZN7fmcu_pf10act_kernelENS_8act_argsE' /tmp/bI/b/plugins/cuda/libfmoe-cuda.so > $G/act.sass 2>&1
fi
tar -C $G -czf $OUT/grid-files.tgz . && ls $G
python3 - $G <<'PY'
import json, sys, os
g = sys.argv[1]
for dt in ("bf16", "fp8"):
    a = {(p["shape"], p["tokens"]): p for p in json.load(open(f"{g}/after-cuda-{dt}.json"))["points"]}
    b = {(p["shape"], p["tokens"]): p for p in json.load(open(f"{g}/before-cuda-{dt}.json"))["points"]}
    pp = f"{g}/after-peers-{dt}.json"
    peers = {}
    if os.path.exists(pp):
        for p in json.load(open(pp))["points"]:
            peers[(p["experts"], p["tokens"])] = p.get("us")
    for k, p in a.items():
        q = b.get(k, {})
        print(f"{dt} {k[0]:14s} M={k[1]:5d} before {q.get('us', 0):9.1f} ({q.get('us', 0) / p['floor_us']:.2f}) after {p['us']:9.1f} ({p['us'] / p['floor_us']:.2f}) floor {p['floor_us']:8.1f} peer {peers.get((p['experts'], k[1])) or 0:9.1f}")
PY
