#!/usr/bin/env bash
# Device calls 5 and 6: spec/performance.md's grid on main's exact build (a68bab7, packed as
# .devrun-main): call 5 M = 1 and 16 with conformance and cuda_check, call 6 M = 128, 1024, 8192.
# usage (device): bash bench/cuda/slab-2026-11-23/go5.sh 1,16 final13-a conform
#                 bash bench/cuda/slab-2026-11-23/go5.sh 128,1024,8192 final13-b
set -uo pipefail
DEVRUN=.devrun-main bash bench/cuda/grid/final/go.sh "$@"
