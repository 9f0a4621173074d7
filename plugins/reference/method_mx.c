/*
 * plugins/reference/method_mx.c - the OCP microscaling formats, one UE8M0
 * scale per 32 consecutive K elements:
 *
 *   fp4:group32:scale-ue8m0[/fp4:group32:dynamic]   MXFP4 W4A16 (gpt-oss,
 *       compressed-tensors mxfp4-pack-quantized) and W4A4: activations in
 *       MXFP4 with the OCP scale choice;
 *   fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic   MXFP8: activations
 *       in e4m3 per 32 with a power-of-two scale rounded up (ceil), as the
 *       FlashInfer/TRT-LLM MXFP8 quantizer.
 *
 * Parameters (compressed-tensors names):
 *   MXFP4: w13_weight_packed [E, rI, H/2], w2_weight_packed [E, H, I/2] fp4 pairs
 *   MXFP8: w13_weight [E, rI, H], w2_weight [E, H, I] e4m3fn
 *   both:  w13_weight_scale [E, rI, H/32], w2_weight_scale [E, H, I/32] ue8m0
 */
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/reference/quant.h"

#define MX 32

static int mx_weights(const fmoe_scheme *s, fmoe_dtype w)
{
    return s->w_dtype == w && s->w_strategy == FMOE_QSTRATEGY_GROUP && s->w_group_size == MX &&
           s->w_scale_dtype == FMOE_DTYPE_UE8M0 && s->w_actorder == FMOE_ACTORDER_NONE;
}

static int mx_activations(const fmoe_scheme *s, fmoe_dtype a)
{
    return s->a_dtype == a && s->a_strategy == FMOE_QSTRATEGY_GROUP && s->a_group_size == MX && s->a_dynamic &&
           s->a_symmetric;
}

static int mxfp4_serves(const fmoe_scheme *s)
{
    return mx_weights(s, FMOE_DTYPE_FP4_E2M1X2) &&
           (s->a_strategy == FMOE_QSTRATEGY_NONE || mx_activations(s, FMOE_DTYPE_FP4_E2M1X2));
}

static int mxfp8_serves(const fmoe_scheme *s)
{
    return mx_weights(s, FMOE_DTYPE_FP8_E4M3FN) && mx_activations(s, FMOE_DTYPE_FP8_E4M3FN);
}

static fmoe_status check_sizes(refq_instance *in, fmoe_error *err, const char *what)
{
    if (in->hidden % MX)
        return refq_size_error(in, err, "%s: hidden_size %u is not divisible by the scale group of %u", what,
                               in->hidden, MX);
    if (in->inter % MX)
        return refq_size_error(in, err,
                               "%s: intermediate_size_per_partition %u is not divisible by the scale group of %u "
                               "(a group would straddle gate/up or a TP shard)",
                               what, in->inter, MX);
    return FMOE_STATUS_OK;
}

static fmoe_status mx_declare(refq_instance *in, fmoe_error *err, int fp4)
{
    fmoe_status st = check_sizes(in, err, fp4 ? "MXFP4" : "MXFP8");
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter, per = fp4 ? 2 : 1;
    fmoe_dtype w = fp4 ? FMOE_DTYPE_FP4_E2M1X2 : FMOE_DTYPE_FP8_E4M3FN;
    refq_param(in, fp4 ? "w13_weight_packed" : "w13_weight", w, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0,
               3, rI, H / per);
    refq_param(in, fp4 ? "w2_weight_packed" : "w2_weight", w, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3,
               H, I / per);
    refq_param(in, "w13_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 0, 0,
               3, rI, H / MX);
    refq_param(in, "w2_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 1, 0, 3,
               H, I / MX);
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

static fmoe_status mxfp4_declare(refq_instance *in, fmoe_error *err)
{
    return mx_declare(in, err, 1);
}

static fmoe_status mxfp8_declare(refq_instance *in, fmoe_error *err)
{
    return mx_declare(in, err, 0);
}

static fmoe_status mxfp4_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    (void)err;
    uint32_t E = in->local_experts;
    in->w13 = (refq_matrix){.format = REFQ_W_MXFP4,
                            .experts = E,
                            .rows = in->r * in->inter,
                            .cols = in->hidden,
                            .values = p[0]->data,
                            .sf = p[2]->data};
    in->w2 = (refq_matrix){.format = REFQ_W_MXFP4,
                           .experts = E,
                           .rows = in->hidden,
                           .cols = in->inter,
                           .values = p[1]->data,
                           .sf = p[3]->data};
    int a4 = in->scheme.a_strategy != FMOE_QSTRATEGY_NONE;
    in->a1 = in->a2 = (refq_actq){.kind = a4 ? REFQ_A_MXFP4 : REFQ_A_NONE};
    return FMOE_STATUS_OK;
}

/* MXFP8 weights are FP8 weights on a 1 x 32 grid of (exact) f32 scales. */
static fmoe_status mxfp8_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    uint32_t E = in->local_experts, rI = in->r * in->inter, H = in->hidden, I = in->inter;
    float *s13 = refq_ue8m0_to_f32(p[2]->data, (size_t)E * rI * (H / MX));
    float *s2 = refq_ue8m0_to_f32(p[3]->data, (size_t)E * H * (I / MX));
    in->w13 = (refq_matrix){.format = REFQ_W_FP8,
                            .experts = E,
                            .rows = rI,
                            .cols = H,
                            .fp8_dtype = FMOE_DTYPE_FP8_E4M3FN,
                            .bn = 1,
                            .bk = MX,
                            .values = p[0]->data,
                            .scales = s13};
    in->w2 = (refq_matrix){.format = REFQ_W_FP8,
                           .experts = E,
                           .rows = H,
                           .cols = I,
                           .fp8_dtype = FMOE_DTYPE_FP8_E4M3FN,
                           .bn = 1,
                           .bk = MX,
                           .values = p[1]->data,
                           .scales = s2};
    refq_matrix_own(&in->w13, s13);
    refq_matrix_own(&in->w2, s2);
    if (!s13 || !s2)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_GROUP, .group = MX, .rule = FMOE_FP8_SCALE_UE8M0};
    return FMOE_STATUS_OK;
}

const refq_family refq_family_mxfp4 = REFQ_FAMILY("mxfp4", "mxfp4", mxfp4_serves, mxfp4_declare, mxfp4_finalize);

const refq_family refq_family_mxfp8 = REFQ_FAMILY("mxfp8", "mxfp8", mxfp8_serves, mxfp8_declare, mxfp8_finalize);
