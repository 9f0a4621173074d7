/*
 * fusedmoe/kit/half_impl.h - bodies of the inline conversions declared in fusedmoe/kit/half.h.
 * Include fusedmoe/kit/half.h, never this file directly.
 *
 * Everything is done on the bit patterns, in software, so the results do not
 * depend on the compiler, the FPU rounding mode or whether the target has
 * native half-precision support:
 *  - f32 -> bf16 / f16 round to nearest, ties to even;
 *  - NaN stays NaN and comes out quiet (its sign and top payload bits kept);
 *  - f32 -> f16 overflows to +-inf and produces f16 subnormals (rounded)
 *    below 2^-14, as hardware conversions do.
 * Only libc is used (memcpy for type punning), so plugins that do not link
 * libfusedmoe can include this header.
 */
#ifndef FMOE_KIT_HALF_IMPL_H
#define FMOE_KIT_HALF_IMPL_H

#include <math.h>
#include <string.h>

static inline uint32_t fmoe_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float fmoe_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t fmoe_f32_to_bf16(float f)
{
    uint32_t u = fmoe_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it, set the quiet bit */
    /* Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even;
     * a carry out of the mantissa bumps the exponent, up to inf, as it should. */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float fmoe_bf16_to_f32(uint16_t b)
{
    return fmoe_f32_from_bits((uint32_t)b << 16);
}

/* Shift `mant` right by `shift` bits (1..31), rounding to nearest even. */
static inline uint32_t fmoe_shift_rne(uint32_t mant, uint32_t shift)
{
    uint32_t kept = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

static inline uint16_t fmoe_f32_to_f16(float f)
{
    uint32_t u = fmoe_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xFFu;
    uint32_t mant = u & 0x7FFFFFu;

    if (exp == 0xFFu) {
        if (mant == 0)
            return (uint16_t)(sign | 0x7C00u);            /* inf */
        return (uint16_t)(sign | 0x7E00u | (mant >> 13)); /* quiet NaN */
    }
    /* Unbiased exponent; f16 normals cover [-14, 15]. */
    int32_t e = (int32_t)exp - 127;
    if (e > 15)
        return (uint16_t)(sign | 0x7C00u);
    if (e >= -14) {
        /* Normal: round the 23-bit mantissa to 10 bits. A carry into the
         * exponent field is exactly right (it may reach 0x7C00 = inf). */
        uint32_t h = ((uint32_t)(e + 15) << 10) + fmoe_shift_rne(mant, 13);
        return (uint16_t)(sign | h);
    }
    /* Subnormal or zero: value = m * 2^-24 with m = (1.mant) * 2^(e+24).
     * Below 2^-25 everything rounds to zero (2^-25 itself is a tie to 0).
     * f32 subnormals (exp == 0) are far below that. */
    if (e < -25 || exp == 0)
        return sign;
    uint32_t full = mant | 0x800000u;                      /* 24 significant bits */
    uint32_t shift = (uint32_t)(-e - 1);                   /* 14..24 */
    return (uint16_t)(sign | fmoe_shift_rne(full, shift)); /* may round up to the smallest normal */
}

static inline float fmoe_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1Fu;
    uint32_t mant = (uint32_t)h & 0x3FFu;

    if (exp == 0x1Fu) /* inf or NaN; NaN payload kept in the top mantissa bits */
        return fmoe_f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp != 0)
        return fmoe_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return fmoe_f32_from_bits(sign);
    /* Subnormal: exact in f32 as mant * 2^-24. */
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
}

/* Element access goes through memcpy: data from a file (a safetensors
 * tensor) has no alignment promise, and reading a float or uint16_t through
 * a typed pointer at an odd address is undefined behaviour. Compilers turn
 * these fixed-size memcpys into single loads and stores. */
static inline float fmoe_load_float(const void *data, fmoe_dtype dtype, int64_t i)
{
    const unsigned char *p = (const unsigned char *)data;
    switch (dtype) {
    case FMOE_DTYPE_F32: {
        float f;
        memcpy(&f, p + i * 4, sizeof f);
        return f;
    }
    case FMOE_DTYPE_BF16:
    case FMOE_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + i * 2, sizeof h);
        return dtype == FMOE_DTYPE_BF16 ? fmoe_bf16_to_f32(h) : fmoe_f16_to_f32(h);
    }
    default:
        return NAN;
    }
}

static inline void fmoe_store_float(void *data, fmoe_dtype dtype, int64_t i, float v)
{
    unsigned char *p = (unsigned char *)data;
    uint16_t h;
    switch (dtype) {
    case FMOE_DTYPE_F32:
        memcpy(p + i * 4, &v, sizeof v);
        break;
    case FMOE_DTYPE_BF16:
        h = fmoe_f32_to_bf16(v);
        memcpy(p + i * 2, &h, sizeof h);
        break;
    case FMOE_DTYPE_F16:
        h = fmoe_f32_to_f16(v);
        memcpy(p + i * 2, &h, sizeof h);
        break;
    default:
        break; /* not an activation dtype: nothing sensible to write */
    }
}

static inline float fmoe_round_to(fmoe_dtype dtype, float v)
{
    switch (dtype) {
    case FMOE_DTYPE_BF16:
        return fmoe_bf16_to_f32(fmoe_f32_to_bf16(v));
    case FMOE_DTYPE_F16:
        return fmoe_f16_to_f32(fmoe_f32_to_f16(v));
    default:
        return v;
    }
}

#endif
