/*
 * plugins/reference/method_w4a8.c - int4 weights with 8-bit activations:
 *
 *   int4:group<g>/fp8e4m3:token:dynamic   (Hopper mixed-input CUTLASS, vLLM
 *       CompressedTensorsW4A8Fp8MoEMethod): activations e4m3 per token;
 *       w13_weight_packed int32 [E, rI, H/8], w2_weight_packed [E, H, I/8]
 *       (compressed-tensors layout, not transposed), w13_weight_scale
 *       [E, rI, H/g], w2_weight_scale [E, H, I/g].
 *   int4:channel|group<g>:scale-bf16/int8:token:dynamic:asym   (Arm,
 *       KleidiAI, vLLM CompressedTensorsW4A8Int8MoEMethod): activations int8
 *       per row, asymmetric (qai8dx); w13_weight int8 [E, rI, H] and
 *       w2_weight [E, H, I] holding int4 values in [-8, 7] (checked at
 *       finalize); scales [E, rI, 1] f32 (channel) or [E, rI, H/g] bf16
 *       (group), and the w2 equivalents.
 * Both: w = q * scale[n, k / g], symmetric weights.
 */
#include "fusedmoe/formats.h"
#include "plugins/reference/quant.h"

#define PF4 8 /* int4 values per int32 word */

static int int4_weights(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_INT4 && s->w_symmetric && s->w_actorder == FMOE_ACTORDER_NONE &&
           (s->w_scale_dtype == FMOE_DTYPE_F32 || s->w_scale_dtype == FMOE_DTYPE_BF16 ||
            s->w_scale_dtype == FMOE_DTYPE_F16);
}

static int w4a8_fp8_serves(const fmoe_scheme *s)
{
    return int4_weights(s) && s->w_strategy == FMOE_QSTRATEGY_GROUP && s->a_dtype == FMOE_DTYPE_FP8_E4M3FN &&
           s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic && s->a_symmetric;
}

static int w4a8_int_serves(const fmoe_scheme *s)
{
    return int4_weights(s) && (s->w_strategy == FMOE_QSTRATEGY_GROUP || s->w_strategy == FMOE_QSTRATEGY_CHANNEL) &&
           s->a_dtype == FMOE_DTYPE_INT8 && s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic && !s->a_symmetric;
}

static int grouped(const refq_instance *in)
{
    return in->scheme.w_strategy == FMOE_QSTRATEGY_GROUP;
}

static fmoe_status check_group(refq_instance *in, fmoe_error *err)
{
    uint32_t g = in->scheme.w_group_size;
    if (grouped(in) && (in->hidden % g || in->inter % g))
        return refq_size_error(in, err,
                               "W4A8: group_size %u must divide hidden_size %u and intermediate_size_per_partition %u",
                               g, in->hidden, in->inter);
    return FMOE_STATUS_OK;
}

/* Scales [E, rI, G13] and [E, H, G2] (G = 1 per channel). */
static void declare_scales(refq_instance *in)
{
    int g = grouped(in);
    uint32_t G13 = g ? in->hidden / in->scheme.w_group_size : 1, G2 = g ? in->inter / in->scheme.w_group_size : 1;
    int32_t kind = g ? FMOE_SCALE_GROUP : FMOE_SCALE_CHANNEL;
    fmoe_dtype sd = in->scheme.w_scale_dtype;
    refq_param(in, "w13_weight_scale", sd, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, kind, 0, 0, 3,
               (int64_t)in->r * in->inter, G13);
    refq_param(in, "w2_weight_scale", sd, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, kind, g ? 1 : -1, 0, 3, in->hidden, G2);
}

static fmoe_status w4a8_fp8_declare(refq_instance *in, fmoe_error *err)
{
    fmoe_status st = check_group(in, err);
    if (st != FMOE_STATUS_OK)
        return st;
    if (in->hidden % PF4 || in->inter % PF4)
        return refq_size_error(in, err,
                               "W4A8: hidden_size %u and intermediate_size_per_partition %u must be multiples of the "
                               "int32 pack factor %u",
                               in->hidden, in->inter, PF4);
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    refq_param(in, "w13_weight_packed", FMOE_DTYPE_INT32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0, 3, rI,
               H / PF4);
    refq_param(in, "w2_weight_packed", FMOE_DTYPE_INT32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3, H,
               I / PF4);
    declare_scales(in);
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

static fmoe_status w4a8_int_declare(refq_instance *in, fmoe_error *err)
{
    fmoe_status st = check_group(in, err);
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    refq_param(in, "w13_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0, 3, rI, H);
    refq_param(in, "w2_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3, H, I);
    declare_scales(in);
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

static void shape(const refq_instance *in, refq_matrix *m, uint32_t rows, uint32_t cols)
{
    int g = grouped(in);
    *m = (refq_matrix){.format = REFQ_W_INT,
                       .experts = in->local_experts,
                       .rows = rows,
                       .cols = cols,
                       .group = g ? in->scheme.w_group_size : cols};
    m->groups = cols / m->group;
}

static fmoe_status finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err, int packed)
{
    uint32_t rI = in->r * in->inter, H = in->hidden, I = in->inter;
    refq_matrix *ms[2] = {&in->w13, &in->w2};
    uint32_t rows[2] = {rI, H}, cols[2] = {H, I};
    for (int i = 0; i < 2; i++) {
        shape(in, ms[i], rows[i], cols[i]);
        int rc = packed ? refq_int_values_nk(ms[i], 4, p[i]->data) : refq_int_values_int8(ms[i], p[i]->data, 4);
        if (rc != 0)
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s: %s", in->descs[i].name,
                                       packed ? "out of memory" : "int4 values must be in [-8, 7]");
        if (refq_int_scales(ms[i], p[2 + i]->data, p[2 + i]->dtype, 0) != 0)
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    return FMOE_STATUS_OK;
}

static fmoe_status w4a8_fp8_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_TOKEN};
    return finalize(in, p, err, 1);
}

static fmoe_status w4a8_int_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_INT8_ASYM};
    return finalize(in, p, err, 0);
}

const refq_family refq_family_w4a8_fp8 = REFQ_FAMILY("w4a8_fp8", "w4a8_fp8", w4a8_fp8_serves, w4a8_fp8_declare,
                                                     w4a8_fp8_finalize);

const refq_family refq_family_w4a8_int = REFQ_FAMILY("w4a8_int8", "w4a8_int8", w4a8_int_serves, w4a8_int_declare,
                                                     w4a8_int_finalize);
