/*
 * core/reference_quant/refq_act.c - quantization of a GEMM input row, the
 * way the kernels of each scheme do it, as fake quantization: the row is
 * encoded with the codecs of include/fusedmoe/formats.h and decoded again
 * in place, so the GEMM multiplies exactly the values the kernel's integer
 * or low-precision dot product sees (times its scales).
 *
 *   FP8_TENSOR  q = e4m3(clamp(x / s, +-448)), s static or dynamic per call
 *   FP8_TOKEN   s = max(amax_row / 448, 1 / (448 * 512))           (vLLM)
 *   FP8_GROUP   the same per `group` columns, or s = 2^ceil(log2(amax/448))
 *               for UE8M0 scales (DeepGEMM); a partial last group is its own group
 *   NVFP4       16-element blocks with the expert's global factor (formats.h)
 *   MXFP4       32-element blocks, OCP scale choice (floor(log2 amax) - 2)
 *   INT8_TOKEN  s = amax / 127, q = clamp(rint(x * (127 / amax)), -128, 127)
 *               (vLLM dynamic_scaled_int8_quant: multiplies by the inverse)
 *   INT8_ASYM   KleidiAI qai8dx per row (fmoe_w4a8_quantize_activations)
 */
#include <math.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"

#define FP8         FMOE_DTYPE_FP8_E4M3FN
#define NVFP4_BLOCK 16
#define MX_BLOCK    32

float refq_fp8_tensor_scale(float amax)
{
    return fmoe_fp8_dynamic_scale(amax, fmoe_fp8_max(FP8), FMOE_FP8_SCALE_F32);
}

uint32_t refq_actq_multiple(const refq_actq *q)
{
    switch (q->kind) {
    case REFQ_A_NVFP4:
        return NVFP4_BLOCK;
    case REFQ_A_MXFP4:
        return MX_BLOCK;
    default:
        return 1;
    }
}

static int fp8_blocks(const refq_actq *q, uint32_t group, float *x, uint32_t n, uint8_t *scratch)
{
    uint8_t *codes = scratch;
    float *scales = (float *)(scratch + (((size_t)n + 7u) & ~(size_t)7u));
    float max = fmoe_fp8_max(FP8);
    int32_t rule = q->rule ? q->rule : FMOE_FP8_SCALE_F32;
    if (fmoe_fp8_quantize_blocks(FP8, max, rule, 1, n, 1, group, x, codes, scales) != FMOE_STATUS_OK)
        return -1;
    return fmoe_fp8_dequantize_blocks(FP8, 1, n, 1, group, codes, scales, x) == FMOE_STATUS_OK ? 0 : -1;
}

static int fp8_tensor(float scale, float *x, uint32_t n, uint8_t *codes)
{
    /* An inf or NaN anywhere in a dynamic per-tensor input makes the one
     * scale non-finite: every value a kernel computes from it is NaN, so
     * the oracle says NaN rather than failing the forward. */
    if (!(scale > 0.0f) || !isfinite(scale)) {
        for (uint32_t i = 0; i < n; i++)
            x[i] = NAN;
        return 0;
    }
    if (fmoe_fp8_quantize(FP8, fmoe_fp8_max(FP8), scale, x, n, codes) != FMOE_STATUS_OK)
        return -1;
    return fmoe_fp8_dequantize(FP8, scale, codes, n, x) == FMOE_STATUS_OK ? 0 : -1;
}

static int nvfp4(float global, int32_t convention, float *x, uint32_t n)
{
    uint8_t packed[NVFP4_BLOCK / 2], sf;
    if (n % NVFP4_BLOCK)
        return -1;
    for (uint32_t c = 0; c < n; c += NVFP4_BLOCK) {
        if (fmoe_nvfp4_quantize(1, NVFP4_BLOCK, x + c, global, convention, packed, &sf) != FMOE_STATUS_OK ||
            fmoe_nvfp4_dequantize(1, NVFP4_BLOCK, packed, &sf, global, convention, x + c) != FMOE_STATUS_OK)
            return -1;
    }
    return 0;
}

static int mxfp4(float *x, uint32_t n)
{
    uint8_t packed[MX_BLOCK / 2], sf;
    if (n % MX_BLOCK)
        return -1;
    for (uint32_t c = 0; c < n; c += MX_BLOCK) {
        if (fmoe_mxfp4_quantize(1, MX_BLOCK, FMOE_MXFP4_RECIPE_OCP, x + c, packed, &sf) != FMOE_STATUS_OK ||
            fmoe_mxfp4_dequantize(1, MX_BLOCK, packed, &sf, x + c) != FMOE_STATUS_OK)
            return -1;
    }
    return 0;
}

static void int8_token(float *x, uint32_t n)
{
    float amax = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    if (amax == 0.0f)
        return; /* all zero: q = 0 whatever the scale */
    float scale = amax / 127.0f, inv = 127.0f / amax;
    for (uint32_t i = 0; i < n; i++) {
        float q = rintf(x[i] * inv);
        q = q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q;
        x[i] = q * scale;
    }
}

static int int8_asym(float *x, uint32_t n, uint8_t *scratch)
{
    int8_t *q = (int8_t *)scratch;
    int32_t offset;
    float scale;
    if (fmoe_w4a8_quantize_activations(1, n, x, q, &offset, &scale) != FMOE_STATUS_OK)
        return -1;
    return fmoe_w4a8_dequantize_activations(1, n, q, &offset, &scale, x) == FMOE_STATUS_OK ? 0 : -1;
}

int refq_actq_row(const refq_actq *q, uint32_t expert, float tensor_scale, float *x, uint32_t n, uint8_t *scratch)
{
    if (n == 0)
        return 0;
    switch (q->kind) {
    case REFQ_A_NONE:
        return 0;
    case REFQ_A_FP8_TENSOR:
        return fp8_tensor(tensor_scale, x, n, scratch);
    case REFQ_A_FP8_TOKEN:
        return fp8_blocks(q, n, x, n, scratch);
    case REFQ_A_FP8_GROUP:
        return q->group ? fp8_blocks(q, q->group, x, n, scratch) : -1;
    case REFQ_A_NVFP4:
        return nvfp4(q->scale[expert], q->convention, x, n);
    case REFQ_A_MXFP4:
        return mxfp4(x, n);
    case REFQ_A_INT8_TOKEN:
        int8_token(x, n);
        return 0;
    case REFQ_A_INT8_ASYM:
        return int8_asym(x, n, scratch);
    default:
        return -1;
    }
}
