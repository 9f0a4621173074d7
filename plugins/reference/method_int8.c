/*
 * plugins/reference/method_int8.c - INT8 W8A8:
 *   int8:channel|tensor/int8:token:dynamic
 * Weights int8 with one f32 scale per output row (channel) or per expert and
 * half (tensor); activations quantized per token, symmetric, dynamic
 * (vLLM dynamic_scaled_int8_quant: s = amax/127, q = rint(x * 127/amax)).
 * Asymmetric activations are refused by the query (vLLM: "Only symmetric
 * quantization is supported for MoE").
 *
 * Parameters: w13_weight [E, rI, H], w2_weight [E, H, I] int8;
 *   channel: w13_weight_scale [E, rI, 1], w2_weight_scale [E, H, 1]
 *   tensor:  w13_weight_scale [E, 2] (gated) or [E], w2_weight_scale [E];
 *            no kernel requantizes int8 halves to one scale, so each half
 *            keeps its own.
 */
#include <string.h>

#include "plugins/reference/quant.h"

static int int8_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_INT8 && s->w_symmetric && s->w_scale_dtype == FMOE_DTYPE_F32 &&
           (s->w_strategy == FMOE_QSTRATEGY_CHANNEL || s->w_strategy == FMOE_QSTRATEGY_TENSOR) &&
           s->w_actorder == FMOE_ACTORDER_NONE && s->a_dtype == FMOE_DTYPE_INT8 &&
           s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic && s->a_symmetric;
}

static int channel(const refq_instance *in)
{
    return in->scheme.w_strategy == FMOE_QSTRATEGY_CHANNEL;
}

static fmoe_status int8_declare(refq_instance *in, fmoe_error *err)
{
    (void)err;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    fmoe_dtype i8 = FMOE_DTYPE_INT8;
    refq_param(in, "w13_weight", i8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0, 3, rI, H);
    refq_param(in, "w2_weight", i8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3, H, I);
    if (channel(in)) {
        refq_param(in, "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, 0,
                   0, 3, rI, 1);
        refq_param(in, "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, -1,
                   0, 3, H, 1);
    } else {
        refq_param_tensor(in, "w13_weight_scale", FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE);
        refq_param_tensor(in, "w2_weight_scale", FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE);
    }
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

/* Per-row scales [E, N] from per-expert (and per-half) ones: row n of a
 * gated W13 takes the scale of its half. */
static const float *row_scales(refq_instance *in, int slot, const float *s, uint32_t rows, uint32_t halves)
{
    uint32_t E = in->local_experts;
    float *out = refq_floats(in, slot, (size_t)E * rows);
    if (!out)
        return NULL;
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t n = 0; n < rows; n++)
            out[(size_t)e * rows + n] = s[(size_t)e * halves + n / (rows / halves)];
    return out;
}

static fmoe_status int8_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    uint32_t E = in->local_experts, rI = in->r * in->inter, H = in->hidden, I = in->inter;
    const float *s13 = p[2]->data, *s2 = p[3]->data;
    if (!channel(in)) {
        s13 = row_scales(in, 0, s13, rI, in->r);
        s2 = row_scales(in, 1, s2, H, 1);
        if (!s13 || !s2)
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    in->w13 = (refq_matrix){.format = REFQ_W_INT,
                            .experts = E,
                            .rows = rI,
                            .cols = H,
                            .groups = 1,
                            .group = H,
                            .values = p[0]->data,
                            .scales = s13};
    in->w2 = (refq_matrix){.format = REFQ_W_INT,
                           .experts = E,
                           .rows = H,
                           .cols = I,
                           .groups = 1,
                           .group = I,
                           .values = p[1]->data,
                           .scales = s2};
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_INT8_TOKEN};
    return FMOE_STATUS_OK;
}

const refq_family refq_family_int8 = REFQ_FAMILY("int8", "int8_w8a8", int8_serves, int8_declare, int8_finalize);
