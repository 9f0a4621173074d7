/*
 * plugins/reference/method_fp8.c - FP8 W8A8 (e4m3fn weights and activations):
 *
 *   fp8e4m3:tensor/fp8e4m3:tensor[:dynamic]   one scale per expert (w13: one
 *       per half on disk, requantized to their max at finalize); input scale
 *       static (checkpoint, max over experts) or dynamic (amax of the call);
 *   fp8e4m3:channel/fp8e4m3:token:dynamic     one scale per output row,
 *       activations per token;
 *   fp8e4m3:blockNxK[:scale-ue8m0]/fp8e4m3:groupK:dynamic   one scale per
 *       N x K tile, activations per 1 x K group (UE8M0 scales on both sides
 *       with scale-ue8m0, DeepGEMM's recipe).
 *
 * Parameters (spec/interface.md §8.4, compressed-tensors names; Fp8Config's
 * `weight_scale_inv` is the same dequant multiplier under another name):
 *   w13_weight [E, rI, H], w2_weight [E, H, I]  e4m3fn
 *   tensor:  w13_weight_scale [E, 2] (gated) or [E], w2_weight_scale [E]
 *            static: w13_input_scale [E, 2] or [E], w2_input_scale [E]
 *   channel: w13_weight_scale [E, rI, 1], w2_weight_scale [E, H, 1]
 *   block:   w13_weight_scale [E, r*I/bn, ceil(H/bk)], w2_weight_scale
 *            [E, ceil(H/bn), ceil(I/bk)]   f32 or ue8m0
 */
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/reference/quant.h"

#define FP8 FMOE_DTYPE_FP8_E4M3FN

static uint32_t ceil_div(uint32_t a, uint32_t b)
{
    return (a + b - 1) / b;
}

static int fp8_serves(const fmoe_scheme *s)
{
    if (s->w_dtype != FP8 || s->a_dtype != FP8 || s->w_actorder != FMOE_ACTORDER_NONE || !s->a_symmetric)
        return 0;
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        return s->w_scale_dtype == FMOE_DTYPE_F32 && s->a_strategy == FMOE_QSTRATEGY_TENSOR;
    case FMOE_QSTRATEGY_CHANNEL:
        return s->w_scale_dtype == FMOE_DTYPE_F32 && s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic;
    case FMOE_QSTRATEGY_BLOCK:
        return (s->w_scale_dtype == FMOE_DTYPE_F32 || s->w_scale_dtype == FMOE_DTYPE_UE8M0) &&
               s->a_strategy == FMOE_QSTRATEGY_GROUP && s->a_dynamic && s->a_group_size == s->w_block_k;
    default:
        return 0;
    }
}

/* vLLM validate_fp8_block_shape: a block never straddles gate/up or a TP shard. */
static fmoe_status check_blocks(refq_instance *in, fmoe_error *err)
{
    uint32_t bn = in->scheme.w_block_n, bk = in->scheme.w_block_k;
    if (in->inter % bn)
        return refq_size_error(in, err,
                               "The output_size of gate's and up's weight = %u is not divisible by weight quantization "
                               "block_n = %u.",
                               in->inter, bn);
    if (in->cfg.tp_size > 1 && in->inter % bk)
        return refq_size_error(in, err,
                               "The input_size of down's weight = %u is not divisible by weight quantization block_k "
                               "= %u.",
                               in->inter, bk);
    return FMOE_STATUS_OK;
}

static fmoe_status fp8_declare(refq_instance *in, fmoe_error *err)
{
    const fmoe_scheme *s = &in->scheme;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    if (s->w_strategy == FMOE_QSTRATEGY_BLOCK) {
        fmoe_status st = check_blocks(in, err);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    refq_param(in, "w13_weight", FP8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0, 3, rI, H);
    refq_param(in, "w2_weight", FP8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3, H, I);
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        refq_param_tensor(in, "w13_weight_scale", FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE);
        refq_param_tensor(in, "w2_weight_scale", FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE);
        if (!s->a_dynamic) {
            refq_param_tensor(in, "w13_input_scale", FMOE_PROJ_W13, FMOE_ROLE_INPUT_SCALE);
            refq_param_tensor(in, "w2_input_scale", FMOE_PROJ_W2, FMOE_ROLE_INPUT_SCALE);
        }
        break;
    case FMOE_QSTRATEGY_CHANNEL:
        refq_param(in, "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, 0,
                   0, 3, rI, 1);
        refq_param(in, "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, -1,
                   0, 3, H, 1);
        break;
    default: {
        uint32_t bn = s->w_block_n, bk = s->w_block_k;
        refq_param(in, "w13_weight_scale", s->w_scale_dtype, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_BLOCK, 0,
                   0, 3, (int64_t)in->r * (in->inter / bn), ceil_div(in->hidden, bk));
        refq_param(in, "w2_weight_scale", s->w_scale_dtype, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_BLOCK, 1,
                   0, 3, ceil_div(in->hidden, bn), ceil_div(in->inter, bk));
    }
    }
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

static void matrix(refq_matrix *m, uint32_t experts, uint32_t rows, uint32_t cols, uint32_t bn, uint32_t bk,
                   const void *values, const float *scales)
{
    memset(m, 0, sizeof *m);
    *m = (refq_matrix){.format = REFQ_W_FP8,
                       .experts = experts,
                       .rows = rows,
                       .cols = cols,
                       .fp8_dtype = FP8,
                       .bn = bn,
                       .bk = bk,
                       .values = values,
                       .scales = scales};
}

/* One static input scale per GEMM: the max over the local experts (and
 * halves), as vLLM; every expert's entry holds it. */
static fmoe_status input_scale(refq_instance *in, fmoe_error *err, const fmoe_tensor *t, int slot, const char *name,
                               refq_actq *q)
{
    size_t n = (size_t)(t->shape[0] * (t->ndim > 1 ? t->shape[1] : 1));
    float best;
    int unequal;
    if (refq_max_scale(t->data, n, &best, &unequal) != 0)
        return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s: every value must be finite and > 0", name);
    if (unequal)
        refq_log(in, FMOE_PLUGIN_LOG_INFO, "%s differs across experts; using the max %g for all of them", name,
                 (double)best);
    float *per = refq_floats(in, slot, in->local_experts);
    if (!per)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t e = 0; e < in->local_experts; e++)
        per[e] = best;
    *q = (refq_actq){.kind = REFQ_A_FP8_TENSOR, .scale = per};
    return FMOE_STATUS_OK;
}

static fmoe_status finalize_tensor(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    uint32_t E = in->local_experts, rI = in->r * in->inter, H = in->hidden, I = in->inter;
    const float *s13 = p[2]->data;
    if (in->r == 2) {
        /* The kernels take one scale per expert: requantize a copy. */
        size_t bytes = (size_t)E * rI * H;
        uint8_t *q = malloc(bytes ? bytes : 1);
        float *one = refq_floats(in, 0, E);
        if (!q || !one) {
            free(q);
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(q, p[0]->data, bytes);
        matrix(&in->w13, E, rI, H, rI, H, q, one);
        refq_matrix_own(&in->w13, q);
        if (refq_fp8_requant_w13(q, E, in->inter, H, s13, one) != 0)
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                       "w13_weight_scale: every value must be finite and > 0");
    } else {
        matrix(&in->w13, E, rI, H, rI, H, p[0]->data, s13);
    }
    matrix(&in->w2, E, H, I, H, I, p[1]->data, p[3]->data);
    if (in->scheme.a_dynamic) {
        in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_TENSOR, .dynamic = 1};
        return FMOE_STATUS_OK;
    }
    fmoe_status st = input_scale(in, err, p[4], 1, "w13_input_scale", &in->a1);
    return st != FMOE_STATUS_OK ? st : input_scale(in, err, p[5], 2, "w2_input_scale", &in->a2);
}

static fmoe_status finalize_block(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    const fmoe_scheme *s = &in->scheme;
    uint32_t E = in->local_experts, rI = in->r * in->inter, H = in->hidden, I = in->inter;
    uint32_t bn = s->w_block_n, bk = s->w_block_k;
    int ue8m0 = s->w_scale_dtype == FMOE_DTYPE_UE8M0;
    const float *s13 = p[2]->data, *s2 = p[3]->data;
    float *c13 = NULL, *c2 = NULL;
    if (ue8m0) {
        c13 = refq_ue8m0_to_f32(p[2]->data, (size_t)(p[2]->shape[0] * p[2]->shape[1] * p[2]->shape[2]));
        c2 = refq_ue8m0_to_f32(p[3]->data, (size_t)(p[3]->shape[0] * p[3]->shape[1] * p[3]->shape[2]));
        s13 = c13;
        s2 = c2;
    }
    matrix(&in->w13, E, rI, H, bn, bk, p[0]->data, s13);
    matrix(&in->w2, E, H, I, bn, bk, p[1]->data, s2);
    refq_matrix_own(&in->w13, c13);
    refq_matrix_own(&in->w2, c2);
    if (ue8m0 && (!c13 || !c2))
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_GROUP,
                                  .group = bk,
                                  .rule = ue8m0 ? FMOE_FP8_SCALE_UE8M0 : FMOE_FP8_SCALE_F32};
    return FMOE_STATUS_OK;
}

static fmoe_status fp8_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    uint32_t E = in->local_experts, rI = in->r * in->inter, H = in->hidden, I = in->inter;
    switch (in->scheme.w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        return finalize_tensor(in, p, err);
    case FMOE_QSTRATEGY_CHANNEL:
        matrix(&in->w13, E, rI, H, 1, H, p[0]->data, p[2]->data);
        matrix(&in->w2, E, H, I, 1, I, p[1]->data, p[3]->data);
        in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_TOKEN};
        return FMOE_STATUS_OK;
    default:
        return finalize_block(in, p, err);
    }
}

const refq_family refq_family_fp8 = REFQ_FAMILY("fp8", "fp8_w8a8", fp8_serves, fp8_declare, fp8_finalize);
