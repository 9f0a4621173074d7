/*
 * core/formats/minifloat.h - the one rounding routine behind every small
 * binary float encoder (fp8 e4m3fn/e4m3fnuz/e5m2, fp4 e2m1) and its exact
 * inverse. Internal; the public entry points are in fusedmoe/formats.h.
 *
 * A format is (mantissa bits M, exponent bias B, largest finite magnitude
 * code). Codes here are magnitudes only: sign, NaN and inf belong to each
 * format's wrapper, because that is where the formats differ. Normal codes
 * are (e + B) << M | m, subnormals (exponent field 0) step by 2^(1-B-M).
 *
 * Rounding works on the f32 bit pattern, so it is exact and independent of
 * the FPU: round to nearest, ties to even, directly from f32 (a detour
 * through f16 or bf16 would round twice). Header-only, libc/libm only.
 */
#ifndef FMOE_CORE_FORMATS_MINIFLOAT_H
#define FMOE_CORE_FORMATS_MINIFLOAT_H

#include <math.h>
#include <stdint.h>

#include "fusedmoe/kit/half.h"

typedef struct fmoe_minifloat {
    uint32_t man_bits;
    int32_t bias;
    uint32_t max_code; /* magnitude code of the largest finite value */
} fmoe_minifloat;

/* Magnitude code nearest to |a| (ties to even), for 0 <= a <= the format's
 * largest finite value; the caller has saturated larger values and handled
 * NaN. Rounding never carries past max_code because max is representable. */
static inline uint32_t fmoe_minifloat_round(float a, const fmoe_minifloat *f)
{
    uint32_t u = fmoe_f32_bits(a) & 0x7FFFFFFFu;
    uint32_t exp = u >> 23;
    uint32_t mant = u & 0x7FFFFFu;
    /* f32 zero and subnormals (< 2^-126) are far below half of the smallest
     * subnormal of any format here (2^-17 for e5m2): they round to 0. */
    if (exp == 0)
        return 0;
    int32_t e = (int32_t)exp - 127;
    int32_t emin = 1 - f->bias;
    if (e >= emin) {
        /* Normal: keep M mantissa bits. A carry out of the mantissa lands in
         * the exponent field, which is the correct next binade. */
        return ((uint32_t)(e + f->bias) << f->man_bits) + fmoe_shift_rne(mant, 23u - f->man_bits);
    }
    /* Subnormal: the value in units of 2^(emin - M) is the 24-bit significand
     * shifted right by (23 - M) + (emin - e). Past 24 bits of shift even the
     * largest significand is below half a unit. Rounding up to 1 << M is the
     * smallest normal, again correct. */
    uint32_t shift = (23u - f->man_bits) + (uint32_t)(emin - e);
    if (shift > 24u)
        return 0;
    return fmoe_shift_rne(mant | 0x800000u, shift);
}

/* Exact value of a magnitude code (no NaN/inf codes: the caller checks). */
static inline float fmoe_minifloat_value(uint32_t code, const fmoe_minifloat *f)
{
    uint32_t e = code >> f->man_bits;
    uint32_t m = code & ((1u << f->man_bits) - 1u);
    int32_t emin = 1 - f->bias;
    if (e == 0)
        return ldexpf((float)m, emin - (int32_t)f->man_bits);
    return ldexpf((float)((1u << f->man_bits) | m), (int32_t)e - f->bias - (int32_t)f->man_bits);
}

/* Value of the magnitude code limit, as a float (the saturation bound). */
static inline float fmoe_minifloat_max(const fmoe_minifloat *f)
{
    return fmoe_minifloat_value(f->max_code, f);
}

#endif
