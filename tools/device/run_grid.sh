#!/usr/bin/env bash
# spec/performance.md's grid on the GPU machine, in one call: `fusedmoe bench`
# on the cuda plugin (bf16 and fp8 per-channel x per-token, M = 1..8192, the
# forwards timed by the plugin in CUDA graphs, floor = max(bytes / the higher
# of the device's read and copy rates, flops / GEMM peak)), then the torch
# peers and the GEMM peaks (tools/bench_peers.py) on the same shapes, expert
# counts included.
#
#   bash tools/device/pack.sh BUILD_DIR                              # here, then carry .devrun
#   TOKENS=1,16 TAG=grid-a CONFORM=1 bash tools/device/run_grid.sh   # there (bench/cuda/README.md)
#
# SCHEMES (default "bf16 fp8") picks the schemes: also fp8block (DeepSeek's
# 128 x 128 weight blocks with 1 x 128 dynamic activation groups, issue 35;
# fp8 peak, no torch peer), and
# int4g128, mxfp4 and nvfp4 (W4A4), issue 31's grid. Those run bf16 MMAs, so
# their compute floor is the bf16 peak; they have no torch peer (vLLM's W4A16
# kernel is measured apart: bench/cuda/RESULTS.md).
#
# The whole grid does not fit one device call (10 minutes): run each scheme
# group as two calls (M = 1,16 and M = 128,1024,8192; bf16 fp8 fp8block, then
# int4g128 mxfp4 nvfp4: four calls, bench/cuda/README.md) and merge them with
# tools/device/merge_grid.py. The device tool returns at most 8 files, fewer
# than a call writes: run each call through tools/device/grid_call.sh, which
# gathers them into one archive. CONFORM=1 first runs `fusedmoe conform` against
# the reference plugin and cuda_check (with the defaults, then with
# prefill_dequant_fused = off), into $OUT/conform.txt, $OUT/cuda_check.txt and
# $OUT/cuda_check_unfused.txt, so that a record's correctness comes from its build.
#
# VLLM=1 also times vLLM's Triton fused MoE (tools/bench_vllm_triton.py, the
# files of tools/device/fetch_vllm_peer.sh carried in .peer) for bf16, fp8 and
# fp8block on the same layers, into $OUT/$TAG-vllm-SCHEME.json: about 50-120 s
# a scheme group and call, so fewer schemes a call. tools/bench_plot.py takes
# the faster of it and the torch peer at each point.
#
# SEED (default 1) is our bench's --seed and the peers' --routing-seed: every
# layer, ours and the peers', is timed on the same routing sets (the bench's,
# drawn again in Python by tools/bench_routing.py), so a point compares two
# layers reading the same experts; tools/bench_plot.py checks that they touched
# as many. SEED=none leaves each to its own draws (the records before 2026-12-02).
#
# MAX_GIB (default 24) caps one layer's weights; at 24 every model runs with
# all its experts (DeepSeek-V3 bf16 is 21 GiB). The weights are synthesized on
# the host in parallel (docs/BENCH.md "The weights": on the H100 machine's
# 16 cores ~0.3 s per GiB in bf16, ~2.5 s in fp8; before: ~10 and ~57 s).
# Loading and finalizing full-size layers add to each scheme's 540 s; if they
# do not fit, a smaller MAX_GIB scales the expert count down (the JSON and
# table say how many). Files go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."   # the repository root: DEVRUN, tests/ and tools/ are relative to it
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" /tmp/bI
. tools/device/unpack.sh && fmoe_unpack "${DEVRUN:-.devrun}" /tmp/bI  # any path: binaries use $ORIGIN rpaths
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/${DEVRUN:-.devrun}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=/tmp/bI/b
export FMOE_CONFIG=$PWD/tests/conformance/empty.toml
SHAPES=${SHAPES:-"qwen3-30b-a3b mixtral-8x7b gpt-oss-120b deepseek-v3"}
TOKENS=${TOKENS:-1,16,128,1024,8192}
MAX_GIB=${MAX_GIB:-24}
TAG=${TAG:-grid}
SCHEMES=${SCHEMES:-"bf16 fp8"}
SEED=${SEED:-1}
seed_args=; routing_args=
if [ "$SEED" != none ]; then seed_args="--seed $SEED"; routing_args="--routing-seed $SEED"; fi
scheme_key() {
  case $1 in
    bf16) echo bf16 ;;
    fp8) echo fp8e4m3:channel/fp8e4m3:token:dynamic ;;
    fp8block) echo fp8e4m3:block128x128/fp8e4m3:group128:dynamic ;;
    int4g128) echo int4:group128 ;;
    mxfp4) echo fp4:group32:scale-ue8m0 ;;
    nvfp4) echo fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic ;;
    *) echo "run_grid.sh: unknown scheme '$1' (bf16, fp8, fp8block, int4g128, mxfp4, nvfp4)" >&2; return 1 ;;
  esac
}
for scheme in $SCHEMES; do scheme_key "$scheme" > /dev/null || exit 2; done
shape_args=$(for s in $SHAPES; do printf -- '--shape %s ' "$s"; done)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/$TAG-log.txt"
date -u | tee -a "$OUT/$TAG-log.txt"

if [ "${CONFORM:-0}" = 1 ]; then
  timeout 120 $B/cli/fusedmoe --plugin $B/plugins/reference/reference.toml conform \
    --plugin $B/plugins/cuda/cuda.toml > "$OUT/conform.txt" 2>&1
  rc=$?; echo "conform rc=$rc: $(grep -E '^result' "$OUT/conform.txt")" | tee -a "$OUT/$TAG-log.txt"
  timeout 100 $B/tests/cuda/cuda_check $B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml \
    "$FMOE_CONFIG" > "$OUT/cuda_check.txt" 2>&1
  rc=$?; echo "cuda_check rc=$rc: $(tail -1 "$OUT/cuda_check.txt")" | tee -a "$OUT/$TAG-log.txt"
  # e2m1 layers take the fused prefill form by default; without it their wgmma kernel and the
  # dequantized scratch from 150 rows an expert run (the paths the default run no longer reaches).
  timeout 100 $B/tests/cuda/cuda_check $B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml \
    "$FMOE_CONFIG" --option prefill_dequant_fused=off > "$OUT/cuda_check_unfused.txt" 2>&1
  rc=$?; echo "cuda_check unfused rc=$rc: $(tail -1 "$OUT/cuda_check_unfused.txt")" | tee -a "$OUT/$TAG-log.txt"
fi

# GEMM peaks first (the compute floor our bench needs), with the copy rate.
python3 tools/bench_peers.py $shape_args --tokens 1 --reps 1 --peaks-only --json "$OUT/$TAG-peaks.json" \
  2>&1 | tee -a "$OUT/$TAG-log.txt"
peak() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_tflops'][sys.argv[2]])" "$OUT/$TAG-peaks.json" "$1"; }

for scheme in $SCHEMES; do
  key=$(scheme_key "$scheme")
  case $scheme in fp8*) peak_of=fp8 ;; *) peak_of=bf16 ;; esac   # 4-bit weights run bf16 MMAs
  timeout 540 $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$key" $shape_args \
    --tokens "$TOKENS" --max-gib "$MAX_GIB" --no-reference --gemm-peak "$(peak $peak_of)" $seed_args \
    --json "$OUT/$TAG-cuda-$scheme.json" 2>&1 | tee -a "$OUT/$TAG-log.txt"
done

# The peers run on the same layers: the expert counts our bench ran with, per scheme.
layers_of() {
  python3 -c "
import json, sys
seen = {}
for p in json.load(open(sys.argv[1]))['points']:
    seen[(p['experts'], p['top_k'], p['hidden'], p['intermediate'])] = 1
print(' '.join('--shape %d,%d,%d,%d' % s for s in seen))" "$OUT/$TAG-cuda-$1.json"
}

# The torch peers.
for scheme in $SCHEMES; do
  case $scheme in bf16|fp8) ;; *) continue ;; esac
  python3 tools/bench_peers.py $(layers_of "$scheme") --dtype $scheme --tokens "$TOKENS" $routing_args \
    --json "$OUT/$TAG-peers-$scheme.json" 2>&1 | tee -a "$OUT/$TAG-log.txt"
done

# vLLM's Triton fused MoE (VLLM=1).
if [ "${VLLM:-0}" = 1 ]; then
  for scheme in $SCHEMES; do
    case $scheme in bf16|fp8|fp8block) ;; *) continue ;; esac
    python3 tools/bench_vllm_triton.py --scheme $scheme $(layers_of "$scheme") --tokens "$TOKENS" $routing_args \
      --json "$OUT/$TAG-vllm-$scheme.json" 2>&1 | tee -a "$OUT/$TAG-log.txt"
  done
fi
