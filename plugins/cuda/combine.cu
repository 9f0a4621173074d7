/*
 * plugins/cuda/combine.cu - the forward's combine step: out[t] =
 * round(sum_j y[t, j] * w[t, j]) in slot order, f32 without FMA (the
 * reference's arithmetic), zero for tokens with no local expert; with the
 * router weight on the input the weights are 1.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/layout.h"

namespace {

using fmcu_dev::store_act;
using fmcu_fwd::combine_args;

/* Grid (token, column blocks of COMBINE_COLS); a thread sums 8 adjacent
 * columns, reading y with 16-byte loads. The slot data is read once into
 * shared memory, and the y rows of up to SLOTS slots are all loaded before
 * the first is added: loaded one at a time, each waited out its latency
 * (y was just written: L2's). H200, Qwen3-30B-A3B M = 1 (top-8), a forward
 * 0.7-1.2 us shorter for int4 g128, MXFP4 and NVFP4 W4A4 (bench/cuda/
 * RESULTS.md, "4-bit decode at M = 1 and 16"). */
constexpr int COMBINE_THREADS = 128, COMBINE_COLS = COMBINE_THREADS * 8, SLOTS = 8;

__global__ void __launch_bounds__(COMBINE_THREADS) combine_kernel(const combine_args a)
{
    __shared__ int s_pair[FMCU_MAX_TOP_K];
    __shared__ float s_w[FMCU_MAX_TOP_K];
    const int64_t t = blockIdx.x;
    const int k = (int)a.k;
    fmcu_dev::pdl_trigger();
    fmcu_dev::pdl_wait();
    if ((int)threadIdx.x < k) {
        int64_t p = t * k + threadIdx.x;
        s_pair[threadIdx.x] = a.pair_local[p] < 0 ? -1 : (int)p;
        s_w[threadIdx.x] = a.on_input ? 1.0f : a.w[p];
    }
    __syncthreads();
    const uint32_t c0 = blockIdx.y * COMBINE_COLS + threadIdx.x * 8;
    if (c0 >= a.hidden)
        return;
    float acc[8] = {};
    for (int j0 = 0; j0 < k; j0 += SLOTS) {
        uint4 raw[SLOTS];
#pragma unroll
        for (int u = 0; u < SLOTS; u++) {
            const int j = j0 + u;
            raw[u] = j < k && s_pair[j] >= 0
                         ? *(const uint4 *)((const uint16_t *)a.y + (int64_t)s_pair[j] * a.hidden + c0)
                         : make_uint4(0, 0, 0, 0);
        }
        /* In slot order; a slot without a local expert adds nothing. */
#pragma unroll
        for (int u = 0; u < SLOTS; u++) {
            const int j = j0 + u;
            if (j >= k || s_pair[j] < 0)
                continue;
            const uint16_t *h = (const uint16_t *)&raw[u];
#pragma unroll
            for (int q = 0; q < 8; q++) {
                float y = a.dtype == FMOE_DTYPE_F16 ? __half2float(__ushort_as_half(h[q]))
                                                    : __bfloat162float(__ushort_as_bfloat16(h[q]));
                acc[q] = __fadd_rn(acc[q], __fmul_rn(y, s_w[j]));
            }
        }
    }
#pragma unroll
    for (int q = 0; q < 8; q++)
        store_act(a.dtype, a.out, t * a.ldo + c0 + q, acc[q]);
}

} // namespace

cudaError_t fmcu_fwd::combine_launch(const combine_args &a, int64_t m, cudaStream_t st)
{
    return fmcu_dev::launch_overlapped(combine_kernel, dim3((unsigned)m, (a.hidden + COMBINE_COLS - 1) / COMBINE_COLS),
                                       dim3(COMBINE_THREADS), 0, st, a);
}
