/*
 * plugins/reference/method_nvfp4.c - NVFP4: e2m1 weights, one e4m3 scale per
 * 16 K elements, one f32 global factor per expert and projection;
 *   fp4:tgroup16:scale-fp8e4m3                      W4A16
 *   fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic W4A4: activations
 *       quantized per 16 with the expert's input global factor.
 *
 * Which number the checkpoint stores as the global factor depends on the
 * producer (spec/formats.md §2.3); the parameter names say which, chosen by
 * the plugin option nvfp4_globals:
 *   "quant" (default, compressed-tensors): quant multipliers g = 2688/amax
 *       w13_weight_packed, w13_weight_global_scale [E, 2|1],
 *       w13_input_global_scale [E, 2|1] (W4A4), and the w2_ ones [E];
 *   "dequant" (ModelOpt): dequant scales 1/g
 *       w13_weight, w13_weight_scale_2, w13_input_scale, and the w2_ ones.
 * Both: w13_weight_scale [E, rI, H/16], w2_weight_scale [E, H, I/16] e4m3fn;
 * packed weights [E, rI, H/2], [E, H, I/2].
 *
 * finalize (vLLM CompressedTensorsW4A4Nvfp4MoEMethod / ModelOpt): the W13
 * weight global is the gate's for both halves (logged when up's differs);
 * the input global is, per expert, the one with the larger dequant scale.
 */
#include "fusedmoe/formats.h"
#include "plugins/reference/quant.h"

#define GROUP 16

static int nvfp4_serves(const fmoe_scheme *s)
{
    int w = s->w_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP &&
            s->w_group_size == GROUP && s->w_scale_dtype == FMOE_DTYPE_FP8_E4M3FN &&
            s->w_actorder == FMOE_ACTORDER_NONE;
    int a = s->a_strategy == FMOE_QSTRATEGY_NONE ||
            (s->a_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->a_strategy == FMOE_QSTRATEGY_TENSOR_GROUP &&
             s->a_group_size == GROUP && s->a_dynamic && s->a_symmetric);
    return w && a;
}

static int a4(const refq_instance *in)
{
    return in->scheme.a_strategy != FMOE_QSTRATEGY_NONE;
}

static fmoe_status nvfp4_declare(refq_instance *in, fmoe_error *err)
{
    if (in->hidden % GROUP)
        return refq_size_error(in, err, "NVFP4: hidden_size %u is not divisible by the scale group of %u", in->hidden,
                               GROUP);
    if (in->inter % GROUP)
        return refq_size_error(in, err,
                               "NVFP4: intermediate_size_per_partition %u is not divisible by the scale group of %u "
                               "(a group would straddle gate/up or a TP shard)",
                               in->inter, GROUP);
    int dq = in->nvfp4_dequant;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    fmoe_dtype fp4 = FMOE_DTYPE_FP4_E2M1X2, e4m3 = FMOE_DTYPE_FP8_E4M3FN;
    refq_param(in, dq ? "w13_weight" : "w13_weight_packed", fp4, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0,
               3, rI, H / 2);
    refq_param(in, dq ? "w2_weight" : "w2_weight_packed", fp4, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3,
               H, I / 2);
    refq_param(in, "w13_weight_scale", e4m3, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 0, 0, 3, rI,
               H / GROUP);
    refq_param(in, "w2_weight_scale", e4m3, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 1, 0, 3, H,
               I / GROUP);
    refq_param_tensor(in, dq ? "w13_weight_scale_2" : "w13_weight_global_scale", FMOE_PROJ_W13,
                      FMOE_ROLE_WEIGHT_GLOBAL_SCALE);
    refq_param_tensor(in, dq ? "w2_weight_scale_2" : "w2_weight_global_scale", FMOE_PROJ_W2,
                      FMOE_ROLE_WEIGHT_GLOBAL_SCALE);
    if (a4(in)) {
        refq_param_tensor(in, dq ? "w13_input_scale" : "w13_input_global_scale", FMOE_PROJ_W13,
                          FMOE_ROLE_INPUT_GLOBAL_SCALE);
        refq_param_tensor(in, dq ? "w2_input_scale" : "w2_input_global_scale", FMOE_PROJ_W2,
                          FMOE_ROLE_INPUT_GLOBAL_SCALE);
    }
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

static fmoe_status bad_global(refq_instance *in, fmoe_error *err, int which)
{
    return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s: every value must be finite and > 0",
                               in->descs[which].name);
}

static fmoe_status nvfp4_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    uint32_t E = in->local_experts;
    int32_t conv = in->nvfp4_dequant ? FMOE_NVFP4_GLOBAL_DEQUANT : FMOE_NVFP4_GLOBAL_QUANT;
    float *g13 = refq_floats(in, 0, E), *g2 = refq_floats(in, 1, E);
    if (!g13 || !g2)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    int differ = 0, unused = 0;
    if (refq_nvfp4_weight_global(p[4]->data, E, in->r, g13, &differ) != 0)
        return bad_global(in, err, 4);
    if (refq_nvfp4_weight_global(p[5]->data, E, 1, g2, &unused) != 0)
        return bad_global(in, err, 5);
    if (differ)
        refq_log(in, FMOE_PLUGIN_LOG_WARN,
                 "%s: gate and up global scales differ for some experts; both halves use the gate's (column 0), as "
                 "the kernels do",
                 in->descs[4].name);
    in->w13 = (refq_matrix){.format = REFQ_W_NVFP4,
                            .experts = E,
                            .rows = in->r * in->inter,
                            .cols = in->hidden,
                            .values = p[0]->data,
                            .sf = p[2]->data,
                            .global = g13,
                            .global_convention = conv};
    in->w2 = (refq_matrix){.format = REFQ_W_NVFP4,
                           .experts = E,
                           .rows = in->hidden,
                           .cols = in->inter,
                           .values = p[1]->data,
                           .sf = p[3]->data,
                           .global = g2,
                           .global_convention = conv};
    if (!a4(in)) {
        in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_NONE};
        return FMOE_STATUS_OK;
    }
    float *i13 = refq_floats(in, 2, E), *i2 = refq_floats(in, 3, E);
    if (!i13 || !i2)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (refq_nvfp4_input_global(p[6]->data, E, in->r, conv, i13) != 0)
        return bad_global(in, err, 6);
    if (refq_nvfp4_input_global(p[7]->data, E, 1, conv, i2) != 0)
        return bad_global(in, err, 7);
    in->a1 = (refq_actq){.kind = REFQ_A_NVFP4, .scale = i13, .convention = conv};
    in->a2 = (refq_actq){.kind = REFQ_A_NVFP4, .scale = i2, .convention = conv};
    return FMOE_STATUS_OK;
}

const refq_family refq_family_nvfp4 = REFQ_FAMILY("nvfp4", "nvfp4", nvfp4_serves, nvfp4_declare, nvfp4_finalize);
