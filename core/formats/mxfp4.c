/*
 * core/formats/mxfp4.c - MXFP4: e2m1 codes, one UE8M0 scale per 32 elements
 * (spec/formats.md §3.1, §3.3). Contracts in fusedmoe/formats.h.
 *
 * Two quantization recipes, because they pick different scales for the same
 * block and the SM100 path must reproduce DeepGEMM's:
 *  - OCP MX v1.0: scale = 2^(floor(log2 amax) - 2), so amax lands in [4, 8)
 *    and the part above 6 saturates; codes rounded to nearest even.
 *  - DeepGEMM per_token_cast_to_fp4: scale = the power of two at or above
 *    amax/6, so nothing saturates; codes with ties toward zero.
 * Dividing by a power of two is exact in f32 (down to subnormals), so both
 * recipes only round once, in the e2m1 encoder.
 * Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

#include "fusedmoe/kit/half.h"

#define MX_BLOCK 32

/* DeepGEMM clamps amax to this (in f32) before deriving the scale. */
#define DEEPGEMM_AMAX_FLOOR 1e-4f

/* OCP: floor(log2(amax)) - emax(e2m1) + bias, clamped to the byte range that
 * is not NaN. floor(log2) of a normal f32 is its unbiased exponent; f32
 * subnormals (and zero) are far below 2^-125 and clamp to 0 anyway. */
static uint8_t ocp_scale_byte(float amax)
{
    uint32_t exp_field = (fmoe_f32_bits(amax) >> 23) & 0xFFu;
    int32_t byte = (int32_t)exp_field - 127 - 2 + 127;
    if (exp_field == 0 || byte < 0)
        return 0;
    return (uint8_t)(byte > 254 ? 254 : byte);
}

static void quantize_block(const float *x, int32_t recipe, uint8_t *scale, uint8_t *codes)
{
    float amax = 0.0f;
    for (int i = 0; i < MX_BLOCK; i++) {
        float a = fabsf(x[i]);
        if (a > amax)
            amax = a;
    }
    if (recipe == FMOE_MXFP4_RECIPE_OCP) {
        *scale = ocp_scale_byte(amax);
        float s = fmoe_ue8m0_decode(*scale);
        for (int i = 0; i < MX_BLOCK; i++)
            codes[i] = fmoe_fp4_e2m1_encode(x[i] / s);
        return;
    }
    float a = amax > DEEPGEMM_AMAX_FLOOR ? amax : DEEPGEMM_AMAX_FLOOR;
    *scale = fmoe_ue8m0_encode_ceil(a / 6.0f);
    float s = fmoe_ue8m0_decode(*scale);
    for (int i = 0; i < MX_BLOCK; i++)
        codes[i] = fmoe_fp4_e2m1_encode_ties_to_zero(x[i] / s);
}

fmoe_status fmoe_mxfp4_quantize(int64_t rows, int64_t cols, int32_t recipe, const float *x, uint8_t *packed,
                                uint8_t *scales)
{
    if (rows <= 0 || cols <= 0 || cols % MX_BLOCK != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    if (recipe != FMOE_MXFP4_RECIPE_OCP && recipe != FMOE_MXFP4_RECIPE_DEEPGEMM)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int64_t blocks = rows * cols / MX_BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        uint8_t codes[MX_BLOCK];
        quantize_block(x + b * MX_BLOCK, recipe, &scales[b], codes);
        fmoe_fp4_pack(codes, MX_BLOCK, packed + b * (MX_BLOCK / 2));
    }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_mxfp4_dequantize(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *scales, float *x)
{
    if (rows <= 0 || cols <= 0 || cols % MX_BLOCK != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int64_t blocks = rows * cols / MX_BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        float s = fmoe_ue8m0_decode(scales[b]);
        uint8_t codes[MX_BLOCK];
        fmoe_fp4_unpack(packed + b * (MX_BLOCK / 2), MX_BLOCK, codes);
        for (int i = 0; i < MX_BLOCK; i++)
            x[b * MX_BLOCK + i] = fmoe_fp4_e2m1_decode(codes[i]) * s;
    }
    return FMOE_STATUS_OK;
}
