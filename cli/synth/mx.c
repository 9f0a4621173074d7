/*
 * cli/synth/mx.c - OCP microscaling checkpoints: one UE8M0 scale per 32
 * elements along K.
 *   MXFP8 (fp8e4m3:group32:scale-ue8m0): weight e4m3fn [n, k], weight_scale
 *       [n, k/32] UE8M0, the smallest power of two holding the group
 *       (fmoe_fp8_quantize_blocks with 1 x 32 blocks, DeepGEMM's rule);
 *   MXFP4 (fp4:group32:scale-ue8m0): weight_packed [n, k/2] e2m1 pairs,
 *       weight_scale [n, k/32] UE8M0, the OCP recipe (floor(log2 amax) - 2),
 *       as gpt-oss and llm-compressor write them. The same tensors serve
 *       every activation of MXFP4 weights: none (W4A16), MXFP4 (W4A4) and
 *       FP8 per 32 (fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic,
 *       DeepSeek-V4's experts; the loader matches them by role to that
 *       method's w13_weight / w13_weight_scale).
 * Activations are quantized dynamically, so there is no input scale.
 */
#include "cli/synth/family.h"

#include <stddef.h>
#include <stdlib.h>

#define GROUP 32

static int mx_scales(const fmoe_scheme *s)
{
    return s->w_strategy == FMOE_QSTRATEGY_GROUP && s->w_group_size == GROUP && s->w_scale_dtype == FMOE_DTYPE_UE8M0;
}

static int mxfp8_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_FP8_E4M3FN && mx_scales(s);
}

static int mxfp4_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_FP4_E2M1X2 && mx_scales(s);
}

static fmoe_status need_groups(synth_ckpt *ck, uint32_t k, const char *name)
{
    return synth_why(ck, FMOE_STATUS_INVALID_ARGUMENT, "%s: K = %u is not a multiple of the scale group of %u", name, k,
                     GROUP);
}

static fmoe_status mxfp8_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                  uint32_t k)
{
    if (k % GROUP)
        return need_groups(ck, k, "MXFP8");
    uint8_t *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_FP8_E4M3FN, 2, n, k);
    uint8_t *b = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_UE8M0, 2, n, k / GROUP);
    float *sc = malloc((size_t)n * (k / GROUP) * sizeof *sc);
    fmoe_status st = q && b && sc ? FMOE_STATUS_OK : synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == FMOE_STATUS_OK)
        st = fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_UE8M0, n, k, 1, GROUP, w, q, sc);
    for (size_t i = 0; st == FMOE_STATUS_OK && i < (size_t)n * (k / GROUP); i++)
        b[i] = fmoe_ue8m0_encode_floor(sc[i]); /* exact: powers of two */
    free(sc);
    return st;
}

static fmoe_status mxfp4_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                  uint32_t k)
{
    if (k % GROUP)
        return need_groups(ck, k, "MXFP4");
    uint8_t *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_FP4_E2M1X2, 2, n, k / 2);
    uint8_t *b = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_UE8M0, 2, n, k / GROUP);
    if (!q || !b)
        return FMOE_STATUS_OUT_OF_MEMORY;
    return fmoe_mxfp4_quantize(n, k, FMOE_MXFP4_RECIPE_OCP, w, q, b);
}

const synth_family synth_family_mxfp8 = {"mxfp8", mxfp8_serves, NULL, mxfp8_quantize};
const synth_family synth_family_mxfp4 = {"mxfp4", mxfp4_serves, NULL, mxfp4_quantize};
