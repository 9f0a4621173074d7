/*
 * cli/synth/int8.c - INT8 W8A8 checkpoints (int8:channel|tensor with int8
 * per-token activations), compressed-tensors `int-quantized`:
 *   weight        int8 [n, k], symmetric
 *   weight_scale  f32 [n, 1] = row amax / 127 (channel), or a scalar
 *                 amax / 127 per projection (tensor)
 * Activations are quantized dynamically: no input scale.
 */
#include "cli/synth/family.h"

#include <float.h>
#include <math.h>

static int int8_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_INT8 && s->w_symmetric && s->w_actorder == FMOE_ACTORDER_NONE &&
           (s->w_strategy == FMOE_QSTRATEGY_CHANNEL || s->w_strategy == FMOE_QSTRATEGY_TENSOR) &&
           s->w_scale_dtype == FMOE_DTYPE_F32 && s->a_dtype == FMOE_DTYPE_INT8 && s->a_strategy != FMOE_QSTRATEGY_NONE;
}

static fmoe_status int8_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                 uint32_t k)
{
    int8_t *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_INT8, 2, n, k);
    if (!q)
        return FMOE_STATUS_OUT_OF_MEMORY;
    if (synth_scheme(ck)->w_strategy == FMOE_QSTRATEGY_CHANNEL) {
        float *sc = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_F32, 2, n, 1);
        if (!sc)
            return FMOE_STATUS_OUT_OF_MEMORY;
        return synth_int_quantize(n, k, k, NULL, 8, 0, FMOE_DTYPE_F32, w, q, sc, NULL);
    }
    float s = synth_amax(w, (size_t)n * k) / 127.0f;
    s = s >= FLT_MIN ? s : FLT_MIN;
    for (size_t i = 0; i < (size_t)n * k; i++) {
        float v = rintf(w[i] / s);
        q[i] = (int8_t)(v > 127.0f ? 127.0f : v < -128.0f ? -128.0f : v);
    }
    return synth_add_scalar(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, s);
}

const synth_family synth_family_int8 = {"int8", int8_serves, NULL, int8_quantize};
