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
 * Keys: num_local_experts (or num_experts), num_experts_per_tok (or the
 * older experts_per_token; both must agree when present), hidden_size,
 * intermediate_size, num_hidden_layers, swiglu_limit (default 7.0, must be
 * > 0), swiglu_alpha (default 1.702; transformers' newer config carries
 * it). hidden_act is not read: the experts' activation is fixed by the
 * model code, whatever hidden_act says (the released configs say "silu").
 */
#include <float.h>

#include "core/model/model.h"

/* GptOssConfig's attribute_map reads "num_experts" as num_local_experts;
 * "experts_per_token" is the top-k of OpenAI's original config (transformers
 * does not read it, but released configs carried it). */
static const char *const experts_keys[] = {"num_local_experts", "num_experts", NULL};
static const char *const top_k_keys[] = {"num_experts_per_tok", "experts_per_token", NULL};

static fmoe_status read_gpt_oss(model_reader *r)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0;
    double limit = 7.0, alpha = 1.702;
    const char *experts_key = NULL, *top_k_key = NULL;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = model_uint_spellings(r, experts_keys, 1, 1, MODEL_MAX_EXPERTS, &c->num_experts, &experts_key)) ||
        (st = model_uint_spellings(r, top_k_keys, 1, 1, MODEL_MAX_TOP_K, &c->top_k, &top_k_key)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE, &c->intermediate_size)) ||
        (st = mjson_real(&r->j, r->obj, "swiglu_limit", 0, &limit, NULL)) ||
        (st = mjson_real(&r->j, r->obj, "swiglu_alpha", 0, &alpha, NULL)) ||
        (st = model_check_top_k(r, experts_key, top_k_key)))
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
    model_all_layers_moe(m, "every layer is a MoE layer");
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
