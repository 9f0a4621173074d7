set -uo pipefail
exec > >(tee $OUT/log-final.txt) 2>&1
date -u
bash .devrun-st/check.sh .devrun-st F full
export LD_LIBRARY_PATH=/tmp/bI/b:$PWD/.devrun-st/lib FMOE_CONFIG=$PWD/tests/conformance/empty.toml
B=/tmp/bI/b; CH=fp8e4m3:channel/fp8e4m3:token:dynamic
R="$B/plugins/reference/reference.toml $B/plugins/cuda/cuda.toml $PWD/tests/conformance/empty.toml"
echo "== AQ cuda_check stream"; FMCU_STREAM_AQ=1 FMOE_CUDA_TIER=stream timeout 100 $B/tests/cuda/cuda_check $R | grep -v "^PASS"
bench() { $B/cli/fusedmoe --plugin $B/plugins/cuda/cuda.toml bench --backend cuda --scheme "$1" --shape "$2" --tokens "$3" \
    --max-gib 24 --no-reference 2>&1 | grep -E "^(qwen3|mixtral|gpt-oss|deepseek)|rror"; }
for aq in 1 0; do echo "== FMCU_STREAM_AQ=$aq"; FMCU_STREAM_AQ=$aq bench $CH qwen3-30b-a3b 1,16; FMCU_STREAM_AQ=$aq bench $CH gpt-oss-120b 1,16; done
date -u
DEVRUN=.devrun-st TAG=decode TOKENS=1,16,128 timeout 420 bash bench/cuda/run_grid.sh > /tmp/grid.txt 2>&1; echo grid rc=$?
grep -E "^(qwen3|mixtral|gpt-oss|deepseek|[0-9]+,)|device|rror" /tmp/grid.txt
date -u
