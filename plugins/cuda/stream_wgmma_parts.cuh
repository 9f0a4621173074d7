/*
 * plugins/cuda/stream_wgmma_parts.cuh - what the fp8 stream tier's wgmma
 * GEMMs (stream_wgmma.cu: GEMM2 on FP8 wgmma; stream_g1_wgmma.cu: GEMM1 on
 * f16 wgmma) share around their MMAs: a slot's release, the block
 * scales' promotion of a stage's partial sums and the scaling of a
 * finished sum. A thread's
 * accumulator 4 j + t (+ 2) is its row lo (hi) and pair 8 j + 2 tg + t of
 * the tile, as wgmma's m64nN fragments are. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_STREAM_WGMMA_PARTS_CUH
#define FMOE_PLUGIN_CUDA_STREAM_WGMMA_PARTS_CUH

#include <stdint.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mbarrier.cuh"

namespace fmcu_swg {

/* A consumer warp's release of a ring slot, its lanes done with it: one
 * arrival a warp on the slot's empty barrier. */
__device__ __forceinline__ void release(uint32_t empty, int lane)
{
    __syncwarp();
    if (lane == 0)
        fmcu_async::mbar_arrive(empty);
}

/* The stage's activation scales of a thread's 2 SL pairs, from the
 * stage's scale slots at shared address `at` (one f32 a pair). */
template <int SL> __device__ __forceinline__ void stage_scales(uint32_t at, int tg, float (&sa)[SL][2])
{
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++)
            sa[j][t] = __uint_as_float(fmcu_async::lds32(at + (uint32_t)(8 * j + 2 * tg + t) * 4));
}

/* acc += part * (s_w * s_a): a stage's 128 x 128 block sums promoted with
 * the rows' weight scales (w_lo, w_hi) and the pairs' activation scales. */
template <int SL>
__device__ __forceinline__ void promote(float (&acc)[SL * 4], const float (&part)[SL * 4], const float (&sa)[SL][2],
                                        float w_lo, float w_hi)
{
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            acc[4 * j + t] = fmaf(part[4 * j + t], w_lo * sa[j][t], acc[4 * j + t]);
            acc[4 * j + 2 + t] = fmaf(part[4 * j + 2 + t], w_hi * sa[j][t], acc[4 * j + 2 + t]);
        }
}

/* A finished sum x of weight row `row` (valid: ok) of expert e and pair
 * `pair`: times its tensor, channel or token scales unless BLOCK (block
 * sums come promoted), plus the bias, rounded to the activation dtype as
 * stream_gemm.cu's epilogue does. */
template <bool BLOCK>
__device__ __forceinline__ float finish(const fmcu_gemm_args &p, float x, int e, int row, bool ok, int pair)
{
    if constexpr (!BLOCK) {
        const float sa = p.a_scale ? p.a_scale[(int64_t)(pair / p.a_row_div) * p.a_scale_ld] : 1.0f;
        x *= p.w_scale && ok ? sa * p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)row * p.w_scale_n] : sa;
    }
    if (p.bias && ok)
        x += fmcu_dev::load_act(p.act_dtype, p.bias, (int64_t)e * p.n_rows + row);
    return fmcu_dev::round_act(p.act_dtype, x);
}

} // namespace fmcu_swg

#endif
