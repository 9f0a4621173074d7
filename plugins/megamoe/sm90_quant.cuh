/*
 * plugins/megamoe/sm90_quant.cuh - the SM90 path's input quantization, one
 * warp per (token, 32-group): shared by the single-device forward
 * (sm90_forward.cu, into the workspace) and the fused EP send (sm90_ep.cu,
 * into this rank's window), so both make the same bytes.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM90_QUANT_CUH
#define FMOE_PLUGIN_MEGAMOE_SM90_QUANT_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "plugins/megamoe/numerics.cuh"

namespace mm90_dev {

/* The GEMM's weights decode to their values times 2^-6 (sm90_plan.h), so
 * the activation scales are stored times 2^6: p * s_act is then the same
 * f32 product as before, bit for bit (both factors are powers of two
 * apart; no scale reaches 2^121, bf16's range and the requant rule keep
 * them below 2^120). */
constexpr float ACT_SCALE_FOLD = 64.0f;

/* Warp wi's group: token wi / (H/32), group wi % (H/32); nothing past the
 * end. The input rule: 2^ceil(log2(max(amax, 1e-4)/448)) (byte clamped to
 * [1, 254]), e4m3(sat(x / s)). The scales' rows are xs_pitch floats
 * (mm90_xs_pitch). */
__device__ __forceinline__ void quant_group(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                                            uint32_t xs_pitch, uint64_t wi, int lane, uint8_t *__restrict__ xq,
                                            float *__restrict__ xs)
{
    const uint64_t groups = H / 32;
    if (wi >= (uint64_t)m * groups)
        return;
    const uint64_t t = wi / groups, g = wi % groups;
    const float v = __bfloat162float(x[(int64_t)t * x_ld + (int64_t)(g * 32 + lane)]);
    const float s = mm_num::scale_ue8m0(mm_num::warp_max(mm_num::amax_step(0.0f, v)));
    xq[t * H + g * 32 + lane] = mm_num::e4m3_sat(v / s);
    if (lane == 0)
        xs[t * xs_pitch + g] = s * ACT_SCALE_FOLD;
}

} // namespace mm90_dev

#endif
