/*
 * core/formats/fp8_blocks.c - FP8 dynamic quantization with one scale per
 * block of a matrix, its dequantization, and the per-tensor W13
 * requantization (spec/formats.md §1.2, §1.4, §1.5, §3.3). Contracts in
 * fusedmoe/formats.h.
 *
 * One routine serves every granularity, because per-tensor, per-token,
 * 1x128 groups, 128x128 weight blocks and DeepGEMM's 1x32 groups differ only
 * in the block shape. Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

/* DeepGEMM clamps amax to this before deriving a UE8M0 scale (in f32). */
#define UE8M0_AMAX_FLOOR 1e-4f

float fmoe_fp8_dynamic_scale(float amax, float fp8_max, int32_t rule)
{
    switch (rule) {
    case FMOE_FP8_SCALE_F32: {
        /* vLLM's min_scaling_factor keeps an all-zero row from giving a zero
         * scale (and x/0 downstream). */
        float s = amax / fp8_max;
        float floor = 1.0f / (fp8_max * 512.0f);
        return s > floor ? s : floor;
    }
    case FMOE_FP8_SCALE_UE8M0: {
        float a = amax > UE8M0_AMAX_FLOOR ? amax : UE8M0_AMAX_FLOOR;
        return fmoe_ue8m0_decode(fmoe_ue8m0_encode_ceil(a / fp8_max));
    }
    default:
        return NAN;
    }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int valid_max(fmoe_dtype fp8, float fp8_max)
{
    return fp8_max > 0.0f && fp8_max <= fmoe_fp8_max(fp8); /* false for NaN and non-FP8 dtypes */
}

/* Max |x| over rows [r0, r1) x cols [c0, c1) of a row-major matrix with
 * `cols` columns. NaN is skipped (a comparison with NaN is false). */
static float block_amax(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
{
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
            float a = fabsf(x[r * cols + c]);
            if (a > amax)
                amax = a;
        }
    return amax;
}

static uint8_t quantize_one(fmoe_dtype fp8, float fp8_max, float v)
{
    if (v > fp8_max)
        v = fp8_max;
    else if (v < -fp8_max)
        v = -fp8_max;
    return fmoe_fp8_encode(fp8, v);
}

fmoe_status fmoe_fp8_quantize_blocks(fmoe_dtype fp8, float fp8_max, int32_t rule, int64_t rows, int64_t cols,
                                     int64_t block_rows, int64_t block_cols, const float *x, uint8_t *q, float *scales)
{
    if (!valid_max(fp8, fp8_max) || (rule != FMOE_FP8_SCALE_F32 && rule != FMOE_FP8_SCALE_UE8M0))
        return FMOE_STATUS_INVALID_ARGUMENT;
    if (rows <= 0 || cols <= 0 || block_rows <= 0 || block_cols <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;

    int64_t scale_cols = ceil_div(cols, block_cols);
    for (int64_t br = 0; br < ceil_div(rows, block_rows); br++) {
        int64_t r0 = br * block_rows;
        int64_t r1 = r0 + block_rows < rows ? r0 + block_rows : rows;
        for (int64_t bc = 0; bc < scale_cols; bc++) {
            int64_t c0 = bc * block_cols;
            int64_t c1 = c0 + block_cols < cols ? c0 + block_cols : cols;
            float s = fmoe_fp8_dynamic_scale(block_amax(x, cols, r0, r1, c0, c1), fp8_max, rule);
            scales[br * scale_cols + bc] = s;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    q[r * cols + c] = quantize_one(fp8, fp8_max, x[r * cols + c] / s);
        }
    }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_fp8_dequantize_blocks(fmoe_dtype fp8, int64_t rows, int64_t cols, int64_t block_rows,
                                       int64_t block_cols, const uint8_t *q, const float *scales, float *x)
{
    if (fmoe_fp8_max(fp8) == 0.0f || rows <= 0 || cols <= 0 || block_rows <= 0 || block_cols <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int64_t scale_cols = ceil_div(cols, block_cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float s = scales[(r / block_rows) * scale_cols + c / block_cols];
            x[r * cols + c] = fmoe_fp8_decode(fp8, q[r * cols + c]) * s;
        }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_fp8_requantize_w13(fmoe_dtype fp8, float fp8_max, int64_t shard_elems, uint8_t *q,
                                    const float shard_scales[2], float *scale_out)
{
    if (!valid_max(fp8, fp8_max) || shard_elems < 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int i = 0; i < 2; i++)
        if (!(shard_scales[i] > 0.0f && isfinite(shard_scales[i])))
            return FMOE_STATUS_INVALID_ARGUMENT;

    float s = shard_scales[0] > shard_scales[1] ? shard_scales[0] : shard_scales[1];
    /* Both shards go through the same steps, as in vLLM. For the shard that
     * already has scale s, (v * s) / s is within an f32 ulp of v, which
     * re-encodes to the same byte: only the clamp to fp8_max can change it. */
    for (int shard = 0; shard < 2; shard++) {
        uint8_t *p = q + (int64_t)shard * shard_elems;
        for (int64_t i = 0; i < shard_elems; i++) {
            float dq = fmoe_fp8_decode(fp8, p[i]) * shard_scales[shard];
            p[i] = quantize_one(fp8, fp8_max, dq / s);
        }
    }
    *scale_out = s;
    return FMOE_STATUS_OK;
}
