/*
 * core/model/family_gpt_oss.c - gpt-oss (GptOssForCausalLM).
 *
 * Checked against vLLM models/gpt_oss.py (MLPBlock: router =
 * Linear(hidden_size, num_local_experts) with bias, FusedMoE(
 * num_local_experts, num_experts_per_tok, intermediate_size,
 * renormalize=True, has_bias, activation "swigluoai"), every layer; the
 * loader's MXFP4 branch views gate_up_proj_blocks as [E, 2I, ...] and
 * slices rows 2*start..2*end per TP rank (rows interleaved, not
 * transposed), down_proj_blocks as [E, H, I/2]) and transformers'
 * modeling_gpt_oss (GptOssExperts: gate_up_proj [E, H, 2I] used as
 * x @ W, gate = [..., ::2], up = [..., 1::2], gate clamped above at
 * limit, up to [-limit, limit], out = (up + 1) * gate * sigmoid(alpha *
 * gate); down_proj [E, I, H]; biases gate_up_proj_bias [E, 2I],
 * down_proj_bias [E, H]; GptOssTopKRouter: top-k of the logits, then
 * softmax over the k, which equals softmax, top-k, renormalize).
 *
 * Keys: num_local_experts, num_experts_per_tok (the older spelling
 * experts_per_token must agree when both are present), hidden_size,
 * intermediate_size, num_hidden_layers, swiglu_limit (default 7.0, must be
 * > 0), swiglu_alpha (default 1.702; transformers' newer config carries
 * it). hidden_act is not read: the experts' activation is fixed by the
 * model code, whatever hidden_act says (the released configs say "silu").
 */
#include <float.h>
#include <stdio.h>

#include "core/model/model.h"

#define MAX_U32 2147483647u

static fmoe_status read_top_k(model_reader *r, uint32_t *top_k)
{
    uint32_t older = 0;
    int has_new = json_object_get(r->obj, "num_experts_per_tok") != NULL;
    fmoe_status st = mjson_uint(&r->j, r->obj, "experts_per_token", 0, 1, MAX_U32, &older);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!has_new && older) {
        *top_k = older;
        return FMOE_STATUS_OK;
    }
    st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MAX_U32, top_k);
    if (st == FMOE_STATUS_OK && older && older != *top_k)
        st = mjson_fail_at(&r->j, "experts_per_token", FMOE_STATUS_INVALID_ARGUMENT,
                           "%u disagrees with num_experts_per_tok = %u", older, *top_k);
    return st;
}

static fmoe_status read_gpt_oss(model_reader *r)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0;
    double limit = 7.0, alpha = 1.702;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = mjson_uint(&r->j, r->obj, "num_local_experts", 1, 1, MAX_U32, &c->num_experts)) ||
        (st = read_top_k(r, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MAX_U32, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "intermediate_size", 1, 1, MAX_U32, &c->intermediate_size)) ||
        (st = mjson_real(&r->j, r->obj, "swiglu_limit", 0, &limit, NULL)) ||
        (st = mjson_real(&r->j, r->obj, "swiglu_alpha", 0, &alpha, NULL)) ||
        (st = model_check_top_k(r, "num_local_experts", "num_experts_per_tok")))
        return st;
    if (!(limit > 0.0) || limit > FLT_MAX)
        return mjson_expected_at(&r->j, r->obj, "swiglu_limit", "a number > 0");
    if (alpha > FLT_MAX || alpha < -FLT_MAX)
        return mjson_expected_at(&r->j, r->obj, "swiglu_alpha", "a number in the float range");
    c->activation = FMOE_ACT_SWIGLUOAI;
    c->gated = 1;
    c->has_bias = 1;
    c->swiglu_limit = (float)limit;
    c->swiglu_alpha = (float)alpha;
    c->scoring = FMOE_SCORING_SOFTMAX;
    c->renormalize = 1;
    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK)
        return st;
    for (uint32_t i = 0; i < layers; i++)
        m->is_moe[i] = 1;
    snprintf(m->pattern, sizeof m->pattern, "every layer is a MoE layer");
    return FMOE_STATUS_OK;
}

static const char *const archs[] = {"GptOssForCausalLM", NULL};
static const char *const types[] = {"gpt_oss", NULL};

static const model_naming naming = {
    .layer_prefix = "model.layers",
    .block = "mlp",
    .router = "router",
    .router_bias = 1,
    .fused = 1,
    .fused_bias = 1,
    .fused_interleaved = 1,
    .mxfp4 = 1,
};

const model_family fmoe_family_gpt_oss = {
    .name = "gpt_oss",
    .architectures = archs,
    .model_types = types,
    .naming = &naming,
    .read = read_gpt_oss,
};
