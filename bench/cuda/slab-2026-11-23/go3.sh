#!/usr/bin/env bash
# Device call 3: why the stream GEMMs of Qwen3-30B-A3B stream slower than gpt-oss-120b's at M=16
# (main's plugin, a68bab7): ncu sections of GEMM1 and GEMM2 (occupancy, warp states, memory).
set -uo pipefail
D=.devrun-n1; . bench/cuda/devrun_env.sh; B2=$B
python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" .devrun-old/libfmoe-cuda.so.xz $B/plugins/cuda/libfmoe-cuda.so
CH=fp8e4m3:channel/fp8e4m3:token:dynamic
for pt in "qwen3-30b-a3b 16" "gpt-oss-120b 16" "qwen3-30b-a3b 128"; do
  set -- $pt
  echo "=================== $1 M=$2"
  timeout 200 $NCU --cache-control none --clock-control none -k regex:stream_gemm --launch-skip 20 -c 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    $B/cli/fusedmoe --plugin $C bench --backend cuda --scheme "$CH" --shape $1 --tokens $2 \
    --max-gib 24 --no-reference --iters 3 2>&1 | grep -v "^==PROF==\|^  *-----\|^$" | \
    grep -E "stream_gemm|Duration|Throughput|Occupancy|Active Warps|Warp Cycles|Issued|Eligible|No Eligible|Block Limit|Registers|Grid Size|Waves|Mem Busy|Max Bandwidth|L2 Hit|Mem Pipes|One or More|Stall|Theoretical|Achieved"
done
