/*
 * core/formats/fp4.c - FP4 e2m1 scalars and nibble packing (spec/formats.md
 * §2.1, §2.2). Contracts in fusedmoe/formats.h.
 *
 * Two encoders, because the kernels and DeepGEMM's reference disagree at the
 * seven midpoints: hardware (cvt.rn.satfinite.e2m1x2.f32) rounds ties to
 * even and keeps the sign of zero; DeepGEMM's _quantize_to_fp4_e2m1 counts
 * the midpoints below |x|, so ties go toward zero and -0 never appears.
 * Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

#include "core/formats/minifloat.h"

static const fmoe_minifloat E2M1 = {1, 1, 0x7}; /* 6.0 */

uint8_t fmoe_fp4_e2m1_encode(float x)
{
    /* e2m1 has no NaN; satfinite conversions give the largest finite value. */
    if (isnan(x))
        return 0x7;
    uint8_t sign = signbit(x) ? 0x8 : 0x0;
    float a = fabsf(x);
    if (a > 6.0f)
        a = 6.0f;
    return sign | (uint8_t)fmoe_minifloat_round(a, &E2M1);
}

uint8_t fmoe_fp4_e2m1_encode_ties_to_zero(float x)
{
    static const float midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    float a = fabsf(x);
    uint8_t code = 0;
    for (int i = 0; i < 7; i++)
        if (a > midpoints[i]) /* false for NaN: NaN gives code 0 */
            code++;
    if (x < 0.0f && code != 0)
        code |= 0x8;
    return code;
}

float fmoe_fp4_e2m1_decode(uint8_t code)
{
    float v = fmoe_minifloat_value(code & 0x7u, &E2M1);
    return (code & 0x8) ? -v : v;
}

void fmoe_fp4_pack(const uint8_t *codes, int64_t n, uint8_t *packed)
{
    for (int64_t i = 0; i < n / 2; i++)
        packed[i] = (uint8_t)((codes[2 * i] & 0xF) | (codes[2 * i + 1] & 0xF) << 4);
    if (n % 2)
        packed[n / 2] = codes[n - 1] & 0xF;
}

void fmoe_fp4_unpack(const uint8_t *packed, int64_t n, uint8_t *codes)
{
    for (int64_t i = 0; i < n; i++)
        codes[i] = (i % 2) ? (uint8_t)(packed[i / 2] >> 4) : (uint8_t)(packed[i / 2] & 0xF);
}
