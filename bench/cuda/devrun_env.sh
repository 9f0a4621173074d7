# Sourced by the device scripts of bench/cuda/*/go*.sh (from session 12 on): unpacks the build
# that bench/cuda/pack.sh packed into $DEVRUN (default: the caller's D) and sets
#   B  the unpacked build, R/C the reference and cuda manifests, E the empty config,
#   NCU  Nsight Compute's ncu if the machine has one,
# with LD_LIBRARY_PATH and FMOE_CONFIG exported. usage: D=.devrun-x; . bench/cuda/devrun_env.sh
D=${DEVRUN:-$D}
E=$PWD/tests/conformance/empty.toml
U=/tmp/devrun-$(basename "$D")
mkdir -p "$U" && rm -rf "$U/b" && tar -C "$U" -xzf "$D/b.tar.gz"
B=$U/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
# test_cuda_layout dlopens the plugins at the paths of the build it came from, unless told these
export FMCU_TEST_REFERENCE_PLUGIN=$B/plugins/reference/libfmoe-reference.so FMCU_TEST_CUDA_PLUGIN=$B/plugins/cuda/libfmoe-cuda.so
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
# prefill_check --bench SHAPE at M tokens on SCHEMES once per FMCU_PF_OWN value given (the prefill
# tier's GEMM kinds; "default" leaves the variable empty): stage times and output hashes.
# usage: pf_bench_own SHAPE M SCHEMES OWN...
pf_bench_own() {
  local sh=$1 m=$2 sc=$3; shift 3
  for o in "$@"; do
    echo "== FMCU_PF_OWN=$o $sh M=$m $sc"
    FMCU_PF_OWN=$([ "$o" = default ] || echo "$o") PREFILL_BENCH_M=$m PREFILL_BENCH_SCHEMES=$sc timeout 120 \
      $B/tests/cuda/prefill_check $R $E --bench $sh 2>&1 | grep -v "^device\|^all passed"
  done
}
