/*
 * plugins/cuda/tail_ops.cuh - the steps of the fused decode tail that the
 * tail kernel (decode_tail.cu) and the one-launch decode (decode_fused.cu)
 * both run on the W2 rows and GEMM2 inputs they staged in shared memory:
 * GEMM2 over a 128-byte K unit, the block-scale promotion, and the combine
 * of a CTA's 16 output columns. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_TAIL_OPS_CUH
#define FMOE_PLUGIN_CUDA_TAIL_OPS_CUH

#include <stdint.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/tier.h"

namespace fmcu_tail_ops {

constexpr int UNIT = 128; /* K bytes of one unit: a K group of block scales holds whole units */

/* d += W2 rows (g, g + 8) x input over K bytes [u0, u0 + UNIT) of a pair:
 * stream_gemm.cu's fragment trick on shared memory (wrow: this thread's row
 * g of the pair's staged rows, rowb apart; arow: the pair's staged input,
 * Ib bytes), the input in every B column. */
template <bool FP8>
__device__ __forceinline__ void unit_mma(uint32_t wrow, uint32_t rowb, uint32_t arow, uint32_t u0, uint32_t Ib, int c4,
                                         float d[4])
{
#pragma unroll
    for (int ch = 0; ch < UNIT / 64; ch++) {
        const uint32_t off = u0 + ch * 64 + c4 * 16;
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo, b = lo;
        if (off < Ib) {
            lo = fmcu_dev::lds128(wrow + off);
            hi = fmcu_dev::lds128(wrow + 8 * rowb + off);
            b = fmcu_dev::lds128(arow + off);
        }
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
        const uint32_t b0[2] = {b.x, b.y}, b1[2] = {b.z, b.w};
        fmcu_dev::mma<FP8>(d, a0, b0);
        fmcu_dev::mma<FP8>(d, a1, b1);
    }
}

/* Block scales: a unit's partial sums into acc (rows g: sa * slo, g + 8: sa * shi). */
__device__ __forceinline__ void promote(float acc[4], float part[4], float sa, float slo, float shi)
{
#pragma unroll
    for (int q = 0; q < 2; q++) {
        acc[q] += part[q] * (sa * slo);
        acc[2 + q] += part[2 + q] * (sa * shi);
        part[q] = part[2 + q] = 0.0f;
    }
}

/* out[t, c0 + r] = round(sum_j y[t*k + j, r] * weight(t*k + j)) in slot order
 * (combine_kernel's arithmetic: f32, no FMA), for the CTA's nrows columns;
 * pairs with e[p] < 0 add nothing. (token, row) items over the threads. */
template <class Weight>
__device__ void combine_rows(int threads, int tokens, int k, int nrows, const int *e, const float *ybuf, Weight weight,
                             int32_t dtype, void *out, int64_t ldo, int c0)
{
    constexpr int R = FMCU_TAIL_ROWS;
    for (int i = threadIdx.x; i < tokens * R; i += threads) {
        const int t = i / R, r = i % R;
        if (r >= nrows)
            continue;
        float sum = 0.0f;
        for (int j = 0; j < k; j++) {
            const int p = t * k + j;
            if (e[p] < 0)
                continue;
            sum = __fadd_rn(sum, __fmul_rn(ybuf[p * R + r], weight(p)));
        }
        fmcu_dev::store_act(dtype, out, (int64_t)t * ldo + c0 + r, sum);
    }
}

} // namespace fmcu_tail_ops

#endif
