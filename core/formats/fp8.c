/*
 * core/formats/fp8.c - FP8 e4m3fn / e4m3fnuz / e5m2 scalars, static-scale
 * quantization and the e4m3fn -> e4m3fnuz normalization (spec/formats.md
 * §1.1-§1.3). Contracts in fusedmoe/formats.h.
 *
 * The three formats share the rounding (core/formats/minifloat.h); they differ
 * only in their special codes, which is all the wrappers below handle:
 *  - e4m3fn: S.1111.111 is NaN, so 448 (S.1111.110) is the largest value and
 *    there is no inf; -0 exists.
 *  - e4m3fnuz: bias 8, the only NaN is 0x80 (the would-be -0), so a negative
 *    result that rounds to zero must come out as +0.
 *  - e5m2: IEEE-like; inf exists but the encoder saturates (vLLM clamps
 *    before every cast, so a kernel never stores inf).
 * Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

#include "core/formats/minifloat.h"

static const fmoe_minifloat E4M3FN = {3, 7, 0x7E};   /* 448 */
static const fmoe_minifloat E4M3FNUZ = {3, 8, 0x7F}; /* 240 */
static const fmoe_minifloat E5M2 = {2, 15, 0x7B};    /* 57344 */

/* Saturate |x| to the format's max (inf included) and round. NaN excluded. */
static uint8_t magnitude(float x, const fmoe_minifloat *f)
{
    float a = fabsf(x);
    float max = fmoe_minifloat_max(f);
    if (a > max)
        a = max;
    return (uint8_t)fmoe_minifloat_round(a, f);
}

uint8_t fmoe_fp8_e4m3fn_encode(float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x))
        return sign | 0x7F;
    return sign | magnitude(x, &E4M3FN);
}

float fmoe_fp8_e4m3fn_decode(uint8_t b)
{
    float sign = (b & 0x80) ? -1.0f : 1.0f;
    if ((b & 0x7F) == 0x7F)
        return copysignf(NAN, sign);
    return copysignf(fmoe_minifloat_value(b & 0x7Fu, &E4M3FN), sign);
}

uint8_t fmoe_fp8_e4m3fnuz_encode(float x)
{
    if (isnan(x))
        return 0x80;
    uint8_t mag = magnitude(x, &E4M3FNUZ);
    if (mag == 0)
        return 0x00; /* 0x80 would be NaN: there is no -0 */
    return (uint8_t)((signbit(x) ? 0x80 : 0x00) | mag);
}

float fmoe_fp8_e4m3fnuz_decode(uint8_t b)
{
    if (b == 0x80)
        return NAN;
    float v = fmoe_minifloat_value(b & 0x7Fu, &E4M3FNUZ);
    return (b & 0x80) ? -v : v;
}

uint8_t fmoe_fp8_e5m2_encode(float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x))
        return sign | 0x7E; /* the quiet NaN: top mantissa bit set */
    return sign | magnitude(x, &E5M2);
}

float fmoe_fp8_e5m2_decode(uint8_t b)
{
    float sign = (b & 0x80) ? -1.0f : 1.0f;
    uint8_t mag = b & 0x7F;
    if (mag == 0x7C)
        return copysignf(INFINITY, sign);
    if (mag > 0x7C)
        return copysignf(NAN, sign);
    return copysignf(fmoe_minifloat_value(mag, &E5M2), sign);
}

uint8_t fmoe_fp8_encode(fmoe_dtype fp8, float x)
{
    switch (fp8) {
    case FMOE_DTYPE_FP8_E4M3FN:
        return fmoe_fp8_e4m3fn_encode(x);
    case FMOE_DTYPE_FP8_E4M3FNUZ:
        return fmoe_fp8_e4m3fnuz_encode(x);
    case FMOE_DTYPE_FP8_E5M2:
        return fmoe_fp8_e5m2_encode(x);
    default:
        return 0;
    }
}

float fmoe_fp8_decode(fmoe_dtype fp8, uint8_t b)
{
    switch (fp8) {
    case FMOE_DTYPE_FP8_E4M3FN:
        return fmoe_fp8_e4m3fn_decode(b);
    case FMOE_DTYPE_FP8_E4M3FNUZ:
        return fmoe_fp8_e4m3fnuz_decode(b);
    case FMOE_DTYPE_FP8_E5M2:
        return fmoe_fp8_e5m2_decode(b);
    default:
        return NAN;
    }
}

float fmoe_fp8_max(fmoe_dtype fp8)
{
    switch (fp8) {
    case FMOE_DTYPE_FP8_E4M3FN:
        return fmoe_minifloat_max(&E4M3FN);
    case FMOE_DTYPE_FP8_E4M3FNUZ:
        return fmoe_minifloat_max(&E4M3FNUZ);
    case FMOE_DTYPE_FP8_E5M2:
        return fmoe_minifloat_max(&E5M2);
    default:
        return 0.0f;
    }
}

fmoe_status fmoe_fp8_quantize(fmoe_dtype fp8, float fp8_max, float scale, const float *x, int64_t n, uint8_t *q)
{
    /* Written so that NaN arguments fail the checks. */
    if (!(fp8_max > 0.0f && fp8_max <= fmoe_fp8_max(fp8)) || !(scale > 0.0f && isfinite(scale)) || n < 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] / scale;
        /* Clamp as the kernels do; comparisons are false for NaN, which
         * therefore reaches the encoder and becomes the format's NaN. */
        if (v > fp8_max)
            v = fp8_max;
        else if (v < -fp8_max)
            v = -fp8_max;
        q[i] = fmoe_fp8_encode(fp8, v);
    }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_fp8_dequantize(fmoe_dtype fp8, float scale, const uint8_t *q, int64_t n, float *x)
{
    if (fmoe_fp8_max(fp8) == 0.0f || n < 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n; i++)
        x[i] = fmoe_fp8_decode(fp8, q[i]) * scale;
    return FMOE_STATUS_OK;
}

void fmoe_fp8_e4m3fn_to_fnuz(uint8_t *q, int64_t n, float *scales, int64_t num_scales)
{
    /* The bits stay; only 0x80 changes, because FN's -0 is FNUZ's NaN. Every
     * other byte decodes to half its FN value (bias 8 instead of 7), which
     * the doubled scale undoes exactly. */
    for (int64_t i = 0; i < n; i++)
        if (q[i] == 0x80)
            q[i] = 0x00;
    for (int64_t i = 0; i < num_scales; i++)
        scales[i] *= 2.0f;
}
