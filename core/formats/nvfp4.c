/*
 * core/formats/nvfp4.c - NVFP4: e2m1 codes, one e4m3fn scale per 16
 * elements, one f32 global factor (spec/formats.md §2.3, §2.4). Contracts in
 * fusedmoe/formats.h.
 *
 * Quantization is vLLM's cvt_warp_fp16_to_fp4 / ref_nvfp4_quant step by step
 * in f32, reciprocals included: the block scale is chosen in "scaled" units
 * (g * vmax / 6, so the largest element lands near 6 after scaling), stored
 * as e4m3fn, and the elements are multiplied by g / sf written as
 * 1 / (sf * (1/g)), which is not always the same f32 as g / sf.
 *
 * The global factor arrives in either storage convention (quant multiplier g
 * from compressed-tensors, dequant value 1/g from ModelOpt); we turn it into
 * g once, and dequantize with the form each convention's consumer uses.
 * Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

#define NVFP4_BLOCK 16

float fmoe_nvfp4_global_from_amax(float amax)
{
    return (448.0f * 6.0f) / amax;
}

static int valid_args(int64_t rows, int64_t cols, float global, int32_t convention)
{
    if (rows <= 0 || cols <= 0 || cols % NVFP4_BLOCK != 0)
        return 0;
    if (convention != FMOE_NVFP4_GLOBAL_QUANT && convention != FMOE_NVFP4_GLOBAL_DEQUANT)
        return 0;
    return global > 0.0f && isfinite(global);
}

/* One block of 16: its scale byte and 16 codes. */
static void quantize_block(const float *x, float g, float rcp_g, uint8_t *sf_out, uint8_t *codes)
{
    float vmax = 0.0f;
    for (int i = 0; i < NVFP4_BLOCK; i++) {
        float a = fabsf(x[i]);
        if (a > vmax)
            vmax = a;
    }
    uint8_t sf = fmoe_fp8_e4m3fn_encode(g * (vmax * (1.0f / 6.0f)));
    float sfq = fmoe_fp8_e4m3fn_decode(sf);
    float out_scale = sfq != 0.0f ? 1.0f / (sfq * rcp_g) : 0.0f;
    *sf_out = sf;
    for (int i = 0; i < NVFP4_BLOCK; i++)
        codes[i] = fmoe_fp4_e2m1_encode(x[i] * out_scale);
}

fmoe_status fmoe_nvfp4_quantize(int64_t rows, int64_t cols, const float *x, float global, int32_t convention,
                                uint8_t *packed, uint8_t *block_scales)
{
    if (!valid_args(rows, cols, global, convention))
        return FMOE_STATUS_INVALID_ARGUMENT;
    float g = convention == FMOE_NVFP4_GLOBAL_QUANT ? global : 1.0f / global;
    float rcp_g = 1.0f / g;
    int64_t blocks = rows * cols / NVFP4_BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        uint8_t codes[NVFP4_BLOCK];
        quantize_block(x + b * NVFP4_BLOCK, g, rcp_g, &block_scales[b], codes);
        fmoe_fp4_pack(codes, NVFP4_BLOCK, packed + b * (NVFP4_BLOCK / 2));
    }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_nvfp4_dequantize(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *block_scales,
                                  float global, int32_t convention, float *x)
{
    if (!valid_args(rows, cols, global, convention))
        return FMOE_STATUS_INVALID_ARGUMENT;
    int64_t blocks = rows * cols / NVFP4_BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        float sfq = fmoe_fp8_e4m3fn_decode(block_scales[b]);
        float block_scale = convention == FMOE_NVFP4_GLOBAL_QUANT ? sfq / global : sfq * global;
        uint8_t codes[NVFP4_BLOCK];
        fmoe_fp4_unpack(packed + b * (NVFP4_BLOCK / 2), NVFP4_BLOCK, codes);
        for (int i = 0; i < NVFP4_BLOCK; i++)
            x[b * NVFP4_BLOCK + i] = fmoe_fp4_e2m1_decode(codes[i]) * block_scale;
    }
    return FMOE_STATUS_OK;
}
