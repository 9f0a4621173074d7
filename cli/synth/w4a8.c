/*
 * cli/synth/w4a8.c - int4 weights for 8-bit activations, symmetric:
 *   int4:group<g>/fp8e4m3:token:dynamic  (compressed-tensors W4A8-FP8)
 *       weight_packed int32 [n, k/8] (packed along K, not transposed),
 *       weight_scale [n, k/g] in the scheme's scale dtype;
 *   int4:channel|group<g>/int8:token:dynamic:asym  (Arm, KleidiAI)
 *       weight int8 [n, k] holding the int4 values in [-8, 7],
 *       weight_scale [n, 1] (channel, f32) or [n, k/g] (group, bf16).
 * Scales are rounded to their storage dtype before the values are
 * quantized with them.
 */
#include "cli/synth/family.h"

#include <stdlib.h>

static int w4a8_serves(const fmoe_scheme *s)
{
    fmoe_dtype sd = s->w_scale_dtype;
    return s->w_dtype == FMOE_DTYPE_INT4 && s->w_symmetric && s->w_actorder == FMOE_ACTORDER_NONE &&
           (s->w_strategy == FMOE_QSTRATEGY_GROUP || s->w_strategy == FMOE_QSTRATEGY_CHANNEL) &&
           (sd == FMOE_DTYPE_F32 || sd == FMOE_DTYPE_BF16 || sd == FMOE_DTYPE_F16) &&
           (s->a_dtype == FMOE_DTYPE_FP8_E4M3FN || s->a_dtype == FMOE_DTYPE_INT8) &&
           s->a_strategy != FMOE_QSTRATEGY_NONE;
}

static fmoe_status w4a8_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                 uint32_t k)
{
    const fmoe_scheme *s = synth_scheme(ck);
    int packed = s->a_dtype == FMOE_DTYPE_FP8_E4M3FN;
    uint32_t g = s->w_strategy == FMOE_QSTRATEGY_GROUP ? s->w_group_size : k, G = k / g;
    if (k % g || (packed && k % 8))
        return synth_why(ck, FMOE_STATUS_INVALID_ARGUMENT, "W4A8: K = %u does not split into groups of %u%s", k, g,
                         packed ? " and int32 words of 8" : "");
    float *sc = malloc((size_t)n * G * sizeof *sc);
    int8_t *q = packed ? malloc((size_t)n * k) : synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_INT8, 2, n, k);
    void *scales = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, s->w_scale_dtype, 2, n, G);
    fmoe_status st = sc && q && scales ? FMOE_STATUS_OK : FMOE_STATUS_OUT_OF_MEMORY;
    if (st == FMOE_STATUS_OK)
        st = synth_int_quantize(n, k, g, NULL, 4, 0, s->w_scale_dtype, w, q, sc, NULL);
    if (st == FMOE_STATUS_OK)
        synth_store_scales(s->w_scale_dtype, scales, sc, (size_t)n * G);
    if (st == FMOE_STATUS_OK && packed) {
        uint32_t *words = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_INT32, 2, n, k / 8);
        st = words ? fmoe_int_pack_int32(4, (int64_t)n * k, q, words) : FMOE_STATUS_OUT_OF_MEMORY;
    }
    if (packed)
        free(q);
    free(sc);
    return st;
}

const synth_family synth_family_w4a8 = {"w4a8", w4a8_serves, NULL, w4a8_quantize};
