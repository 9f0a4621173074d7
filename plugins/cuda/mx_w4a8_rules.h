/*
 * plugins/cuda/mx_w4a8_rules.h - the per-value rules of the MXFP4 x FP8
 * (MegaMoE) row kernels (mx_w4a8.cu), as plain functions that compile for
 * the host and the device, so that tests/cuda/test_cuda_mx_w4a8.c checks
 * on the host, without a GPU, the very arithmetic the kernels run against
 * the core library and the reference's worked example (spec E18). Only the
 * e4m3 conversion itself is the device's (__nv_cvt_float_to_fp8, RNE,
 * saturating; the fp8 schemes' quantization uses it too).
 *
 * Every product, sum and quotient is written with the rounding intrinsics
 * on the device: nvcc contracts a * b + c into one FMA by default, which
 * would round 1 + expf(-g) (expf ends in a product) once where the
 * reference (C11, no contraction) rounds twice.
 */
#ifndef FMOE_PLUGIN_CUDA_MX_W4A8_RULES_H
#define FMOE_PLUGIN_CUDA_MX_W4A8_RULES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define FMCU_MX_HD static inline __host__ __device__
#else
#define FMCU_MX_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define FMCU_MX_ADD(a, b) __fadd_rn((a), (b))
#define FMCU_MX_MUL(a, b) __fmul_rn((a), (b))
#define FMCU_MX_DIV(a, b) __fdiv_rn((a), (b))
#else
#define FMCU_MX_ADD(a, b) ((a) + (b))
#define FMCU_MX_MUL(a, b) ((a) * (b))
#define FMCU_MX_DIV(a, b) ((a) / (b))
#endif

#define FMCU_MX_GROUP   32     /* values per scale */
#define FMCU_MX_FP8_MAX 448.0f /* e4m3fn */

FMCU_MX_HD uint32_t fmcu_mx_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

FMCU_MX_HD float fmcu_mx_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* 2^e for e in [-127, 127] (e = -127: 0, the all-zero group's sf). */
FMCU_MX_HD float fmcu_mx_pow2(int32_t e)
{
    return fmcu_mx_float((uint32_t)(e + 127) << 23);
}

/* GEMM1 input scale of a 32-group with max |x| = amax (NaN skipped by the
 * caller): 2^ceil(log2(max(amax, 1e-4) / 448)), exponent byte clamped to
 * [1, 254] (formats.h FMOE_FP8_SCALE_UE8M0; at least 2^-22). */
FMCU_MX_HD float fmcu_mx_input_scale(float amax)
{
    const float a = amax > 1e-4f ? amax : 1e-4f;
    const uint32_t u = fmcu_mx_bits(FMCU_MX_DIV(a, FMCU_MX_FP8_MAX));
    uint32_t e = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    e = e < 1 ? 1 : e > 254 ? 254 : e;
    return fmcu_mx_float(e << 23);
}

/* GEMM2 input requantization of a 32-group with finite max |a| = amax: the
 * exponent e of sf = 2^e, from the bits of amax * (1/448): its exponent
 * field, plus one if the mantissa is not zero; no floor (amax 0: e = -127,
 * sf 0, and the quotients a * 2^-e are 0). DeepGEMM's
 * get_e4m3_sf_and_sf_inv as method_megamoe.c requantize_group has it. */
FMCU_MX_HD int32_t fmcu_mx_requant_exponent(float amax)
{
    const uint32_t bits = fmcu_mx_bits(FMCU_MX_MUL(amax, 1.0f / FMCU_MX_FP8_MAX));
    return (int32_t)(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0);
}

/* a = (silu(g) * u) * w of the bf16 gate g and up u, clamped first when
 * clamp is set (c = bf16(swiglu_limit): g = min(g, c), u = clamp(u, +-c)),
 * in f32 with expf and a true division (the kernel's non-fast-math path). */
FMCU_MX_HD float fmcu_mx_swiglu(float g, float u, int clamp, float c, float w)
{
    if (clamp) {
        g = g < c ? g : c;
        u = u < -c ? -c : u > c ? c : u;
    }
    const float denom = FMCU_MX_ADD(1.0f, expf(-g));
    return FMCU_MX_MUL(FMCU_MX_MUL(FMCU_MX_DIV(g, denom), u), w);
}

#ifdef __cplusplus
}
#endif
#endif
