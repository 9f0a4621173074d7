# Sourced on the device, from the repository root, by one-off measurement scripts: unpacks the
# build that tools/device/pack.sh packed into $DEVRUN (default: the caller's D) and sets
#   B  the unpacked build, R/C the reference and cuda manifests, E the empty config,
#   NCU  Nsight Compute's ncu if the machine has one,
# with LD_LIBRARY_PATH and FMOE_CONFIG exported. usage: D=.devrun-x; . tools/device/devrun_env.sh
D=${DEVRUN:-$D}
E=$PWD/tests/conformance/empty.toml
U=/tmp/devrun-$(basename "$D")
. tools/device/unpack.sh && fmoe_unpack "$D" "$U"
B=$U/b; R=$B/plugins/reference/reference.toml; C=$B/plugins/cuda/cuda.toml
export LD_LIBRARY_PATH=$B:$PWD/$D/lib FMOE_CONFIG=$E
# test_cuda_layout takes the two plugin libraries as arguments (the unpacked build's, not the
# paths of the build it came from): $B/tests/cuda/test_cuda_layout "$LAYOUT_REF" "$LAYOUT_CUDA"
LAYOUT_REF=$B/plugins/reference/libfmoe-reference.so LAYOUT_CUDA=$B/plugins/cuda/libfmoe-cuda.so
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
