/*
 * plugins/cuda/act_math.cuh - the activations of the prefill tier as
 * gemm.cu's epilogue computes them (double, rounded once to f32 then to
 * bf16), and the f32 SiLU fast path that provably rounds the same
 * (act_bf16_fast: the activation kernel).
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_ACT_MATH_CUH
#define FMOE_PLUGIN_CUDA_ACT_MATH_CUH

#include "plugins/cuda/pf_vec.cuh"

#include "fusedmoe/common.h"

#include <math.h>

namespace fmcu_pf {

/* The activations as gemm.cu's epilogue computes them (device_math.cuh). */
using act_fn = fmcu_dev::act_params;
using fmcu_dev::activate;

/* round_bf16(activate(p, g, u)), faster for SiLU: evaluated in f32 (at most
 * ~8 ulps from the double value rounded to f32: expf 2 ulps, then four
 * correctly rounded operations), which gives the same bf16 unless the f32
 * value lies within 32 ulps of a bf16 rounding midpoint, or is tiny or not
 * finite; those (about 1 in 1000) take the double path. Other activations
 * always take it. */
__device__ __forceinline__ float act_bf16(const act_fn &p, float g, float u)
{
    if (p.activation == FMOE_ACT_SILU) {
        float gg = g, uu = u;
        if (p.gated && p.limit > 0.0f) {
            gg = gg > p.limit ? p.limit : gg;
            uu = uu < -p.limit ? -p.limit : uu > p.limit ? p.limit : uu;
        }
        float f = gg / (1.0f + expf(-gg));
        if (p.gated)
            f *= uu;
        const int low = (int)(__float_as_uint(f) & 0xFFFFu);
        if (isfinite(f) && fabsf(f) >= 1e-30f && abs(low - 0x8000) > 32)
            return round_bf16(f);
    }
    return round_bf16(activate(p, g, u));
}

/* silu(g) * u in f32 for act_bf16's fast path, within ~5 ulps of the
 * double value rounded to f32: expf (2 ulps), 1 + e (the error of e does
 * not grow through it), the reciprocal (rcp.approx: 1 ulp), two products.
 * No IEEE division: its called slow path would save a fused epilogue's live
 * accumulators to the stack (the fp8 kernel spilled in its main loop and
 * ran 5x slower), and __fdividef adds range guards for divisors past 2^126,
 * where this reciprocal flushes to 0: f is then 0 (or NaN), which is
 * rejected unless it is exact (act_bf16_fast's zero clause). */
__device__ __forceinline__ float silu_mul_f32(float g, float u)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + expf(-g)));
    return g * r * u;
}

/* Does f, within 8 ulps of the exact value, round to the same bf16 as the
 * double path? Yes when f is finite, |f| >= 1e-30 (far above bf16's
 * subnormals) and its low 16 bits lie more than 32 ulps from the rounding
 * midpoint 0x8000, as act_bf16 tests. In two multiply-adds and two
 * unsigned compares: b * 2 drops the sign, so tiny <= |f| < inf is one
 * range test; b << 16 keeps the low half, and (low - 0x7FE0) mod 2^16 >
 * 0x40 is |low - 0x8000| > 32. */
__device__ __forceinline__ bool rounds_as_double(float f)
{
    constexpr uint32_t TINY = 0x0DA24260u; /* the bits of 1e-30f */
    constexpr uint32_t INF = 0x7F800000u;
    const uint32_t b = __float_as_uint(f);
    return (b * 2u - 2u * TINY < 2u * (INF - TINY)) & ((b << 16) - 0x7FE00000u > 0x400000u);
}

/* f = silu_mul_f32(g, u) is exact when g or u is zero and f is zero: 0 * x
 * for finite x, with the sign double gives (an infinite other input makes
 * f NaN, rejected). */
__device__ __forceinline__ bool zero_exact(float f, float g, float u)
{
    return (f == 0.0f) & ((g == 0.0f) | (u == 0.0f));
}

/* act_bf16's SiLU fast path alone: branch-free (written for a GEMM1
 * epilogue, which runs on one warp per scheduler, so its speed is the
 * instruction-level parallelism across a fragment's pairs) and call-free.
 * An accepted value rounds to the same bf16 as act_bf16's; zeros of either
 * input are accepted too (padding rows would otherwise all fall back). lim:
 * the SiLU limit, or +inf for none. Returns the f32 value, not rounded;
 * ok = false: the caller must take act_bf16. */
__device__ __forceinline__ float act_bf16_fast(float lim, float g, float u, bool &ok)
{
    const float gg = g > lim ? lim : g;
    const float uu = u < -lim ? -lim : u > lim ? lim : u;
    const float f = silu_mul_f32(gg, uu);
    ok = rounds_as_double(f) | zero_exact(f, gg, uu);
    return f;
}

} // namespace fmcu_pf

#endif
