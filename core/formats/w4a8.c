/*
 * core/formats/w4a8.c - Arm KleidiAI-style W4A8: dynamic asymmetric int8
 * activations per row (qai8dx) times symmetric int4 weights with per-channel
 * f32 or per-group bf16 scales (spec/formats.md §5.1, §5.2, §5.4).
 * Contracts in fusedmoe/formats.h.
 *
 * The activation quantizer reproduces kai_lhs_quant_pack_qai8dxp_f32 in f32
 * operation by operation, including its two different roundings: the zero
 * point with rintf (ties to even) and the values with roundf (ties away from
 * zero), so a plugin that calls KleidiAI gets the same int8 rows as the
 * reference. The range always includes 0 so that 0 is exactly representable
 * (padding and ReLU zeros stay zeros).
 *
 * The weights' nibble layout here is the *input* of KleidiAI's packers
 * (uint8 [N, K/2], value + 8, even k low); the packed blob itself (XOR 0x88,
 * k/k+16 pairing, row sums) is the cpu_arm plugin's business.
 * Only libc/libm: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "fusedmoe/kit/half.h"
#include "fusedmoe/kit/w4a8_row.h"

void fmoe_w4a8_row_params(float mn, float mx, float *s0_out, int32_t *nzp)
{
    float rmin = mn < 0.0f ? mn : 0.0f;
    float rmax = mx > 0.0f ? mx : 0.0f;
    float s0 = rmin == rmax ? 1.0f : 255.0f / (rmax - rmin);
    float dmin = rmin * s0;
    float dmax = rmax * s0;
    /* Pick the zero point from whichever end loses less to the clamp. */
    float from_min = -128.0f + dmin;
    float from_max = 127.0f + dmax;
    float zp = from_min + from_max > 0.0f ? -128.0f - dmin : 127.0f - dmax;
    if (zp < -128.0f)
        zp = -128.0f;
    if (zp > 127.0f)
        zp = 127.0f;
    *s0_out = s0;
    *nzp = (int32_t)rintf(zp);
}

static void quantize_row(const float *x, int64_t k, int8_t *q, int32_t *offset, float *scale)
{
    float mn = FLT_MAX, mx = -FLT_MAX;
    int finite = 1;
    for (int64_t i = 0; i < k; i++) {
        finite &= isfinite(x[i]) != 0;
        if (x[i] > mx)
            mx = x[i];
        if (x[i] < mn)
            mn = x[i];
    }
    /* A NaN or inf gives the row no range: codes 0, offset 0 and a NaN
     * scale, so the row dequantizes to NaN (and stays the only one). */
    if (!finite) {
        memset(q, 0, (size_t)k);
        *offset = 0;
        *scale = NAN;
        return;
    }
    float s0;
    int32_t nzp;
    fmoe_w4a8_row_params(mn, mx, &s0, &nzp);
    for (int64_t i = 0; i < k; i++) {
        /* In float, clamped before the conversion: exact for these small
         * integers, and never an out-of-range float-to-int conversion. */
        float v = roundf(x[i] * s0) + (float)nzp;
        q[i] = (int8_t)(v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v);
    }
    *offset = -nzp;
    *scale = 1.0f / s0;
}

fmoe_status fmoe_w4a8_quantize_activations(int64_t rows, int64_t k, const float *x, int8_t *q, int32_t *offsets,
                                           float *scales)
{
    if (rows < 0 || k <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t r = 0; r < rows; r++)
        quantize_row(x + r * k, k, q + r * k, &offsets[r], &scales[r]);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_w4a8_dequantize_activations(int64_t rows, int64_t k, const int8_t *q, const int32_t *offsets,
                                             const float *scales, float *x)
{
    if (rows < 0 || k <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < k; i++)
            x[r * k + i] = (float)(q[r * k + i] + offsets[r]) * scales[r];
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_w4a8_pack_weights(int64_t n, int64_t k, const int8_t *w, uint8_t *packed)
{
    if (n < 0 || k <= 0 || k % 2 != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n * k; i++)
        if (w[i] < -8 || w[i] > 7)
            return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n * k / 2; i++)
        packed[i] = (uint8_t)((w[2 * i] + 8) | (w[2 * i + 1] + 8) << 4);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_w4a8_unpack_weights(int64_t n, int64_t k, const uint8_t *packed, int8_t *w)
{
    if (n < 0 || k <= 0 || k % 2 != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n * k / 2; i++) {
        w[2 * i] = (int8_t)((packed[i] & 0xF) - 8);
        w[2 * i + 1] = (int8_t)((packed[i] >> 4) - 8);
    }
    return FMOE_STATUS_OK;
}

static int8_t weight_at(const uint8_t *row, int64_t i)
{
    uint8_t byte = row[i / 2];
    return (int8_t)(((i % 2) ? byte >> 4 : byte & 0xF) - 8);
}

/* Integer dot product of activation row (with its offset) and weight row over
 * [k0, k1). |terms| <= 255 * 8, so int64 never overflows; KleidiAI uses int32,
 * which gives the same value for every k a model has. */
static int64_t dot(const int8_t *q, int32_t offset, const uint8_t *w_row, int64_t k0, int64_t k1)
{
    int64_t acc = 0;
    for (int64_t i = k0; i < k1; i++)
        acc += (int64_t)(q[i] + offset) * weight_at(w_row, i);
    return acc;
}

fmoe_status fmoe_w4a8_matmul(int64_t m, int64_t n, int64_t k, const int8_t *q, const int32_t *offsets,
                             const float *scales, const uint8_t *w_packed, int64_t group_size, const void *w_scales,
                             fmoe_dtype w_scale_dtype, float *out)
{
    if (m < 0 || n < 0 || k <= 0 || k % 2 != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int channelwise = group_size == k;
    if (channelwise && w_scale_dtype != FMOE_DTYPE_F32)
        return FMOE_STATUS_INVALID_ARGUMENT;
    if (!channelwise &&
        (w_scale_dtype != FMOE_DTYPE_BF16 || group_size <= 0 || group_size % 32 != 0 || k % group_size != 0))
        return FMOE_STATUS_INVALID_ARGUMENT;

    for (int64_t r = 0; r < m; r++) {
        const int8_t *q_row = q + r * k;
        for (int64_t c = 0; c < n; c++) {
            const uint8_t *w_row = w_packed + c * (k / 2);
            float acc;
            if (channelwise) {
                float ws = ((const float *)w_scales)[c];
                acc = (float)dot(q_row, offsets[r], w_row, 0, k) * ws;
            } else {
                int64_t groups = k / group_size;
                const uint16_t *ws = (const uint16_t *)w_scales + c * groups;
                acc = 0.0f;
                for (int64_t b = 0; b < groups; b++) {
                    float part = (float)dot(q_row, offsets[r], w_row, b * group_size, (b + 1) * group_size);
                    /* Two statements: a compiler may fuse a*b+c into an FMA only
                     * within one expression, and the contract rounds twice. */
                    float term = part * fmoe_bf16_to_f32(ws[b]);
                    acc += term;
                }
            }
            out[r * n + c] = acc * scales[r];
        }
    }
    return FMOE_STATUS_OK;
}
