/*
 * plugins/rocm/device_math.h - the device-side number formats and helpers
 * every kernel of the plugin shares, written once against dialect.h:
 *
 *   bf16 <-> f32 (round to nearest even, as the reference's rounding);
 *   e4m3fnuz decode and encode (spec/formats.md §1.3). Activations are
 *   quantized as the reference does with e4m3fn and max 448, expressed in
 *   fnuz: a fnuz code is worth half the fn code of the same bits, so the
 *   scale is doubled and the clamp halved (224), and round-to-nearest-even
 *   picks the same code (the fnuz grid is the fn grid halved exactly,
 *   subnormals included);
 *   the dynamic scale rule (vLLM's, with its floor), doubled for fnuz;
 *   the 16x16 pre-shuffle's index (shuffle.c, same formula);
 *   the gated activations (kit/activation.h's formulas, in double).
 */
#ifndef FMOE_PLUGINS_ROCM_DEVICE_MATH_H
#define FMOE_PLUGINS_ROCM_DEVICE_MATH_H

#include <math.h>
#include <stdint.h>

#include "plugins/rocm/dialect.h"
#include "plugins/rocm/kernels.h"

#define FMRO_FN_MAX   448.0f /* e4m3fn's largest finite value: the reference quantizes to it */
#define FMRO_FNUZ_Q   224.0f /* the same codes read as e4m3fnuz */
#define FMRO_FNUZ_NAN 0x80u

__device__ inline float fmro_bf16_to_f32(uint16_t b)
{
    return __uint_as_float((unsigned int)b << 16);
}

__device__ inline uint16_t fmro_f32_to_bf16(float f)
{
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ inline float fmro_round_bf16(float f)
{
    return fmro_bf16_to_f32(fmro_f32_to_bf16(f));
}

/* e4m3fnuz: bias 8, no infinity, no -0; 0x80 is the only NaN. */
__device__ inline float fmro_fnuz_decode(uint8_t b)
{
    if (b == FMRO_FNUZ_NAN)
        return __uint_as_float(0x7FC00000u);
    int e = (b >> 3) & 15, m = b & 7;
    float v = e ? ldexpf(1.0f + (float)m * 0.125f, e - 8) : ldexpf((float)m, -10);
    return (b & 0x80u) ? -v : v;
}

/* Nearest fnuz code of v (ties to even); |v| must be at most 240 or NaN. */
__device__ inline uint8_t fmro_fnuz_encode(float v)
{
    if (v != v)
        return FMRO_FNUZ_NAN;
    unsigned int sign = v < 0.0f ? 0x80u : 0u;
    float a = fabsf(v);
    if (a == 0.0f)
        return 0; /* fnuz has no -0 */
    int e2;
    frexpf(a, &e2); /* a = f * 2^e2, f in [0.5, 1): floor(log2 a) = e2 - 1 */
    int ex = e2 - 1;
    float step = ex < -7 ? ldexpf(1.0f, -10) : ldexpf(1.0f, ex - 3);
    float q = rintf(a / step) * step; /* exact: step is a power of two */
    if (q == 0.0f)
        return 0;
    frexpf(q, &e2);
    ex = e2 - 1;
    unsigned int code;
    if (ex < -7)
        code = (unsigned int)(q * 1024.0f); /* subnormal: q = m * 2^-10 */
    else
        code = ((unsigned int)(ex + 8) << 3) | ((unsigned int)(q / ldexpf(1.0f, ex - 3)) - 8u);
    return (uint8_t)(sign | code);
}

/* The reference's quantize_one for x / s in fn terms, with s the doubled
 * (fnuz) scale: clamp to +-224 keeping NaN, then encode. */
__device__ inline uint8_t fmro_fnuz_quantize(float x, float s)
{
    float v = x / s;
    if (v > FMRO_FNUZ_Q)
        v = FMRO_FNUZ_Q;
    else if (v < -FMRO_FNUZ_Q)
        v = -FMRO_FNUZ_Q;
    return fmro_fnuz_encode(v);
}

/* fmoe_fp8_dynamic_scale(amax, 448, F32) doubled: the fnuz scale. */
__device__ inline float fmro_fnuz_dynamic_scale(float amax)
{
    float s = amax / FMRO_FN_MAX;
    float floor_s = 1.0f / (FMRO_FN_MAX * 512.0f);
    return 2.0f * (s > floor_s ? s : floor_s);
}

/* Element index of (row, col) in a 16x16 pre-shuffled [rows, k] matrix of
 * `eb`-byte elements (shuffle.c's fmro_shuffle_index). */
__device__ inline size_t fmro_shuffled_at(uint32_t k, uint32_t eb, uint32_t row, uint32_t col)
{
    uint32_t vec = 16u / eb;
    size_t nb = row / 16u, n = row % 16u, kb = col / 32u, kk = (col % 32u) / vec, j = col % vec;
    return (nb * (k / 32u) + kb) * 512u + kk * 16u * vec + n * vec + j;
}

__device__ inline double fmro_min_keep_nan(double x, double hi)
{
    return x > hi ? hi : x;
}

__device__ inline double fmro_clamp_keep_nan(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* act(g, u) of a gated expert (kit/activation.h). */
__device__ inline float fmro_activation(int32_t act, float alpha, float limit, float gf, float uf)
{
    double g = gf, u = uf;
    if (limit > 0.0f && (act == FMRO_ACT_SILU || act == FMRO_ACT_SWIGLUOAI)) {
        g = fmro_min_keep_nan(g, limit);
        u = fmro_clamp_keep_nan(u, -(double)limit, limit);
    }
    switch (act) {
    case FMRO_ACT_SILU:
        return (float)(g / (1.0 + exp(-g)) * u);
    case FMRO_ACT_GELU:
        return (float)(0.5 * g * erfc(-g * 0.70710678118654752440) * u);
    default: /* FMRO_ACT_SWIGLUOAI */
        return (float)(g * (1.0 / (1.0 + exp(-(double)alpha * g))) * (u + 1.0));
    }
}

#endif /* FMOE_PLUGINS_ROCM_DEVICE_MATH_H */
