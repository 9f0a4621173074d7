/*
 * core/reference_quant/refq_prep.c - the post-load steps of the float
 * schemes that change numbers (spec/interface.md §8.4, spec/formats.md
 * §1.4-1.5, §2.3), so the oracle multiplies what the kernels multiply:
 *
 *  - FP8 per-tensor W13: one scale per expert, max(s_w1, s_w3), the other
 *    half requantized (in f32; vLLM dequantizes in fp16, docs/FORMATS.md);
 *  - static input scales: one per GEMM, the max over experts (and halves);
 *  - NVFP4 W13 global: the gate's, whatever the up half says;
 *  - NVFP4 input global: the larger dequant scale of the two halves.
 */
#include <math.h>
#include <stdlib.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"

static int positive(float v)
{
    return isfinite(v) && v > 0.0f;
}

int refq_fp8_requant_w13(uint8_t *q, uint32_t experts, uint32_t inter, uint32_t cols, const float *pair_scales,
                         float *scale_out)
{
    int64_t shard = (int64_t)inter * cols;
    for (uint32_t e = 0; e < experts; e++) {
        const float *s = pair_scales + 2 * (size_t)e;
        if (!positive(s[0]) || !positive(s[1]))
            return -1;
        if (fmoe_fp8_requantize_w13(FMOE_DTYPE_FP8_E4M3FN, fmoe_fp8_max(FMOE_DTYPE_FP8_E4M3FN), shard,
                                    q + 2 * shard * (int64_t)e, s, &scale_out[e]) != FMOE_STATUS_OK)
            return -1;
    }
    return 0;
}

int refq_max_scale(const float *v, size_t n, float *out, int *unequal)
{
    float best = 0.0f;
    *unequal = 0;
    for (size_t i = 0; i < n; i++) {
        if (!positive(v[i]))
            return -1;
        if (i && v[i] != v[0])
            *unequal = 1;
        best = v[i] > best ? v[i] : best;
    }
    *out = best;
    return 0;
}

float *refq_ue8m0_to_f32(const uint8_t *b, size_t n)
{
    float *out = malloc((n ? n : 1) * sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = fmoe_ue8m0_decode(b[i]);
    return out;
}

int refq_nvfp4_weight_global(const float *pairs, uint32_t experts, uint32_t r, float *out, int *differ)
{
    *differ = 0;
    for (uint32_t e = 0; e < experts; e++) {
        const float *g = pairs + (size_t)e * r;
        for (uint32_t h = 0; h < r; h++)
            if (!positive(g[h]))
                return -1;
        if (r == 2 && g[0] != g[1])
            *differ = 1;
        out[e] = g[0];
    }
    return 0;
}

int refq_nvfp4_input_global(const float *pairs, uint32_t experts, uint32_t r, int32_t convention, float *out)
{
    for (uint32_t e = 0; e < experts; e++) {
        const float *g = pairs + (size_t)e * r;
        float pick = g[0];
        for (uint32_t h = 0; h < r; h++) {
            if (!positive(g[h]))
                return -1;
            /* A quant multiplier is 1/dequant: the smaller one quantizes
             * with the larger step, which both halves' ranges fit. */
            if (convention == FMOE_NVFP4_GLOBAL_QUANT ? g[h] < pick : g[h] > pick)
                pick = g[h];
        }
        out[e] = pick;
    }
    return 0;
}
