/*
 * plugins/cuda/prefill_rows.cu - the prefill tier's row kernels around its
 * GEMMs (prefill_rows.h): the amax of x for a dynamic per-tensor GEMM1
 * input scale, each pair's sorted position, the gather of x rows (+
 * quantization) into expert-sorted order and the combine of the sorted
 * GEMM2 rows back into tokens. Their arithmetic is quantize.cu's and
 * combine.cu's (prefill_sm90.cu says which); compiled for sm_90a only, like
 * the tier.
 */
#include "plugins/cuda/prefill_rows.h"

#include "plugins/cuda/nvfp4_quant.cuh"

#include <cuda_bf16.h>
#include <stdint.h>

namespace fmcu_pf {

namespace {

__global__ void amax_rows_kernel(const bf16 *x, int64_t ld, uint32_t cols, uint32_t *amax)
{
    __shared__ float red[32];
    const bf16 *row = x + (int64_t)blockIdx.x * ld;
    float m = 0.0f;
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x)
        m = amax_step(m, __bfloat162float(row[c]));
    m = block_max(m, red);
    if (threadIdx.x == 0)
        atomicMax(amax, __float_as_uint(m));
}

/* ------------------------------------------------------------------------ */
/* Gather + quantize: x rows -> A1 in sorted order                           */
/* ------------------------------------------------------------------------ */

/* pos[sorted[i]] = i for the R sorted rows. */
__global__ void pos_kernel(const int32_t *sorted, const int32_t *total, int32_t *pos)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *total)
        pos[sorted[i]] = i;
}

/* NVFP4 W4A4's GEMM1 input (gather_args.in_glob): a lane 8 values, a lane
 * pair a block of 16 whose vmax is the token's; each of the token's n
 * pairs gets the block quantized with its expert's global g[r] into its
 * sorted row. This was a per-pair staging kernel writing m * k rows that
 * the gather then copied (bench/cuda/RESULTS.md at 7426a60, "4-bit input staging and
 * the e2m1 scratch"). */
__device__ void gather_nvfp4(const gather_args &a, const bf16 *row, int n, const int *rows, const float *g)
{
    constexpr int V = fmcu_nvfp4::LANE_VALUES;
    const uint32_t units = a.H / V, lane = threadIdx.x % 32;
    for (uint32_t base = threadIdx.x - lane; base < units; base += blockDim.x) {
        const uint32_t u = base + lane;
        const bool on = u < units;
        float x[V];
        if (on)
            load8(row + u * V, true, x);
        const float vmax = fmcu_nvfp4::pair_vmax(x, on);
        if (!on)
            continue;
        for (int r = 0; r < n; r++) {
            float v[V];
            fmcu_nvfp4::quantize8(x, fmcu_nvfp4::scale_of(vmax, g[r], 1.0f / g[r]), v);
            store8((bf16 *)a.dst + (int64_t)rows[r] * a.H + u * V, true, v);
        }
    }
}

/* One block per token: its row is read and quantized once and written to
 * the sorted row of each of its local pairs. */
__global__ void __launch_bounds__(256) gather_kernel(const gather_args a)
{
    __shared__ float red[32];
    __shared__ int s_row[32], s_off[32], s_rows[32];
    __shared__ float s_g[32];
    __shared__ int s_n;
    const int64_t t = blockIdx.x;
    if (threadIdx.x == 0) {
        int n = 0;
        for (uint32_t j = 0; j < a.k; j++) {
            int e = a.pair_local[t * a.k + j];
            if (e < 0)
                continue;
            s_row[n] = a.pos[t * a.k + j];
            s_off[n] = a.offsets[e];
            s_rows[n] = a.offsets[e + 1] - a.offsets[e];
            s_g[n] = a.in_glob ? a.in_glob[e] : 0.0f;
            n++;
        }
        s_n = n;
    }
    __syncthreads();
    const int n = s_n;
    if (a.mode == QM_TENSOR && !a.static_scale && t == 0 && threadIdx.x == 0)
        *a.tensor_scale = scale_f32(__uint_as_float(*a.amax));
    if (n == 0)
        return;
    const uint32_t H = a.H;
    const bf16 *row = a.x + t * a.x_ld;
    const bool vec = a.vec != 0;
    if (a.mode == QM_BF16 && a.in_glob) {
        gather_nvfp4(a, row, n, s_row, s_g);
        return;
    }
    if (a.mode == QM_BF16) {
        for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
            float v[8];
            load8(row + c, vec, v);
            for (int r = 0; r < n; r++)
                store8((bf16 *)a.dst + (int64_t)s_row[r] * H + c, true, v);
        }
        return;
    }
    uint8_t *q = (uint8_t *)a.dst;
    if (a.mode == QM_GROUP) {
        const uint32_t groups = H / GROUP;
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
        for (uint32_t g = warp; g < groups; g += warps) {
            const uint32_t c = g * GROUP + lane * 4;
            float v[4];
            load4(row + c, vec, v);
            float m = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++)
                m = amax_step(m, v[j]);
            m = warp_max(m);
            const float s = a.ue8m0 ? scale_ue8m0(m) : scale_f32(m);
            for (int r = 0; r < n; r++) {
                if (lane == 0)
                    a.scale[(int64_t)s_off[r] * groups + (int64_t)g * s_rows[r] + (s_row[r] - s_off[r])] = s;
                store_q4(q + (int64_t)s_row[r] * H + c, v, s);
            }
        }
        return;
    }
    float s;
    if (a.mode == QM_TOKEN) {
        float m = 0.0f;
        for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
            float v[8];
            load8(row + c, vec, v);
#pragma unroll
            for (int j = 0; j < 8; j++)
                m = amax_step(m, v[j]);
        }
        s = scale_f32(block_max(m, red));
        if (threadIdx.x < (unsigned)n)
            a.scale[s_row[threadIdx.x]] = s;
    } else if (a.static_scale) {
        s = *a.static_scale;
    } else {
        s = scale_f32(__uint_as_float(*a.amax));
    }
    for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
        float v[8];
        load8(row + c, vec, v);
        for (int r = 0; r < n; r++)
            store_q8(q + (int64_t)s_row[r] * H + c, v, s);
    }
}

__global__ void __launch_bounds__(256) combine_kernel(const combine_args a)
{
    const int64_t t = blockIdx.x;
    const bool vec = a.vec != 0;
    for (uint32_t c = threadIdx.x * 8; c < a.H; c += blockDim.x * 8) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (uint32_t j = 0; j < a.k; j++) {
            int64_t p = t * a.k + j;
            if (a.pair_local[p] < 0)
                continue;
            float y[8];
            load8(a.y + (int64_t)a.pos[p] * a.H + c, true, y);
            const float w = a.w[p];
#pragma unroll
            for (int q = 0; q < 8; q++)
                acc[q] = __fadd_rn(acc[q], __fmul_rn(y[q], w));
        }
#pragma unroll
        for (int q = 0; q < 8; q++)
            acc[q] = round_bf16(acc[q]);
        store8(a.out + t * a.ldo + c, vec, acc);
    }
}

} // namespace

cudaError_t amax_rows_launch(const bf16 *x, int64_t ld, uint32_t cols, uint32_t *amax, int64_t m, cudaStream_t st)
{
    amax_rows_kernel<<<(unsigned)m, 256, 0, st>>>(x, ld, cols, amax);
    return cudaGetLastError();
}

cudaError_t pos_launch(const int32_t *sorted, const int32_t *total, int32_t *pos, unsigned pairs, cudaStream_t st)
{
    pos_kernel<<<(pairs + 255) / 256, 256, 0, st>>>(sorted, total, pos);
    return cudaGetLastError();
}

cudaError_t gather_launch(const gather_args &a, int64_t m, cudaStream_t st)
{
    gather_kernel<<<(unsigned)m, 256, 0, st>>>(a);
    return cudaGetLastError();
}

cudaError_t combine_launch(const combine_args &a, int64_t m, cudaStream_t st)
{
    combine_kernel<<<(unsigned)m, 256, 0, st>>>(a);
    return cudaGetLastError();
}

} // namespace fmcu_pf
