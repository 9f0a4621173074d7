/*
 * plugins/megamoe/numerics.cuh - the device numerics both MegaMoE paths
 * share (sm90_forward.cu, sm100_forward.cu), each the reference's rule
 * (plugins/reference/method_megamoe.c, formats.h).
 */
#ifndef FMOE_PLUGIN_MEGAMOE_NUMERICS_CUH
#define FMOE_PLUGIN_MEGAMOE_NUMERICS_CUH

#include <cuda_fp8.h>
#include <stdint.h>

namespace mm_num {

constexpr float FP8_MAX = 448.0f;

/* max(m, |v|); a NaN v never wins (the reference's amax skips NaN). */
__device__ __forceinline__ float amax_step(float m, float v)
{
    const float a = fabsf(v);
    return a > m ? a : m;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o; o >>= 1) {
        const float x = __shfl_xor_sync(0xffffffffu, v, o);
        v = x > v ? x : v;
    }
    return v;
}

/* DeepGEMM's input scale (formats.h FMOE_FP8_SCALE_UE8M0): the exponent
 * byte of 2^ceil(log2(max(amax, 1e-4) / 448)), clamped to [1, 254]. */
__device__ __forceinline__ uint32_t input_sf_byte(float amax)
{
    const float a = amax > 1e-4f ? amax : 1e-4f;
    const uint32_t u = __float_as_uint(a / FP8_MAX);
    uint32_t e = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    return e < 1 ? 1 : e > 254 ? 254 : e;
}

/* The same scale as a float. */
__device__ __forceinline__ float scale_ue8m0(float amax)
{
    return __uint_as_float(input_sf_byte(amax) << 23);
}

__device__ __forceinline__ uint8_t e4m3_sat(float v)
{
    v = v > FP8_MAX ? FP8_MAX : v < -FP8_MAX ? -FP8_MAX : v;
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

/* The SwiGLU output's requantization: ex = ceil(log2(amax / 448)) from the
 * bits of amax * (1/448) (an all-zero group: -127, scale byte 0); false
 * when amax is not finite (the reference makes the whole group NaN: codes
 * 0x7F, scale NaN). */
__device__ __forceinline__ bool act_exponent(float amax, int32_t &ex)
{
    if (!isfinite(amax))
        return false;
    const uint32_t bits = __float_as_uint(amax * (1.0f / FP8_MAX));
    ex = (int32_t)(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0);
    return true;
}

/* a's e4m3 code at scale 2^ex. */
__device__ __forceinline__ uint8_t act_code(float a, int32_t ex)
{
    return e4m3_sat(a * __uint_as_float((uint32_t)(127 - ex) << 23));
}

} // namespace mm_num

#endif
