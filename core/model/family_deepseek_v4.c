/*
 * core/model/family_deepseek_v4.c - DeepSeek-V4 (DeepseekV4ForCausalLM,
 * model_type "deepseek_v4": V4-Flash, V4-Pro) as its original checkpoints
 * name and store the routed experts.
 *
 * Checked against vLLM models/deepseek_v4.py (DeepseekV4MoE: every decoder
 * layer's "ffn" is a MoE; fused_topk_bias with scoring_func (default
 * "sqrtsoftplus"), renormalize = norm_topk_prob, routed_scaling_factor, a
 * selection bias "ffn.gate.bias" iff topk_method == "noaux_tc", hash
 * routing "ffn.gate.tid2eid" [vocab, k] on layers < num_hash_layers;
 * swiglu_limit clamps the routed and the shared experts; shared experts
 * "ffn.shared_experts" of n_shared_experts * moe_intermediate_size when
 * n_shared_experts is not None; checkpoint names "layers.N.ffn.experts.
 * <e>.w1|w3|w2" with "weight" and "scale", the scale loaded as the
 * parameter's weight_scale) and transformers' DeepseekV4Config /
 * modeling_deepseek_v4 (5.23: the defaults below; DeepseekV4TopKRouter:
 * s = sqrtsoftplus(logits), top-k of s + bias, weights = s of the chosen
 * experts / (sum + 1e-20) * routed_scaling_factor; mlp_layer_types, or the
 * legacy num_hash_layers, mark the hash-routed layers).
 *
 *   key                    default (transformers)   read as
 *   n_routed_experts       (num_local_experts)      required
 *   moe_intermediate_size  (intermediate_size)      required
 *   scoring_func           "sqrtsoftplus"           sqrtsoftplus or sigmoid (no
 *                                                   "softmax": transformers'
 *                                                   ACT2FN has none)
 *   topk_method            -                        "noaux_tc": bias; absent
 *                                                   or "greedy": none
 *   norm_topk_prob         true                     must be true
 *   routed_scaling_factor  1.5                      > 0
 *   swiglu_limit           10.0                     > 0, the clamp
 *   n_shared_experts       1                        required (null: none)
 *   num_hash_layers /      3 hash layers            one of them required
 *   mlp_layer_types
 *
 * Where the two disagree we refuse instead of picking one: transformers
 * renormalizes whatever norm_topk_prob says (vLLM honours it), and routes
 * with its zero-initialised bias buffer whatever topk_method says (vLLM
 * only with "noaux_tc"; a checkpoint that has the bias tensor while the
 * config says no bias is refused by the loader). The default hash-layer
 * count and shared experts are structure a checkpoint may not have, so
 * they must be stated (as for DeepSeek-V2/V3's n_shared_experts).
 *
 * Hash-routed layers pick their experts by token id (tid2eid[input_ids]),
 * which a layer routed from router logits cannot do: they are MoE layers
 * whose names are given, but whose layer config is refused with the reason
 * (model.c); the other layers are served.
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "core/model/model.h"

static const char *const experts_keys[] = {"n_routed_experts", "num_local_experts", NULL};
static const char *const inter_keys[] = {"moe_intermediate_size", "intermediate_size", NULL};

#define DEFAULT_SCALING 1.5
#define DEFAULT_LIMIT   10.0

static fmoe_status read_routing(model_reader *r)
{
    fmoe_layer_config *c = &r->model->cfg;
    const char *scoring = "sqrtsoftplus", *method = NULL;
    int renorm = 1;
    double rsf = DEFAULT_SCALING;
    fmoe_status st;
    if ((st = qjson_string(&r->j, r->obj, "scoring_func", 0, &scoring, NULL)) ||
        (st = qjson_string(&r->j, r->obj, "topk_method", 0, &method, NULL)) ||
        (st = qjson_bool(&r->j, r->obj, "norm_topk_prob", 0, &renorm, NULL)) ||
        (st = mjson_real(&r->j, r->obj, "routed_scaling_factor", 0, &rsf, NULL)))
        return st;
    if (strcmp(scoring, "sqrtsoftplus") == 0)
        c->scoring = FMOE_SCORING_SQRTSOFTPLUS;
    else if (strcmp(scoring, "sigmoid") == 0)
        c->scoring = FMOE_SCORING_SIGMOID;
    else
        return mjson_fail_at(&r->j, "scoring_func", FMOE_STATUS_UNSUPPORTED,
                             "\"%s\" is not supported; expected \"sqrtsoftplus\" or \"sigmoid\"", scoring);
    if (method && strcmp(method, "noaux_tc") == 0)
        c->has_correction_bias = 1;
    else if (method && strcmp(method, "greedy") != 0)
        return mjson_fail_at(&r->j, "topk_method", FMOE_STATUS_UNSUPPORTED,
                             "\"%s\" is not supported; expected \"noaux_tc\" (top-k with the selection bias) or "
                             "\"greedy\" (without)",
                             method);
    if (!renorm)
        return mjson_fail_at(&r->j, "norm_topk_prob", FMOE_STATUS_UNSUPPORTED,
                             "false is not supported: transformers renormalizes the top-k weights whatever it says, "
                             "vLLM does not; expected true");
    if (!(rsf > 0.0) || rsf > FLT_MAX)
        return mjson_expected_at(&r->j, r->obj, "routed_scaling_factor", "a number > 0");
    c->renormalize = 1;
    c->routed_scaling_factor = (float)rsf;
    return FMOE_STATUS_OK;
}

/* mlp_layer_types [num_layers] of "hash_moe" / "moe", or num_hash_layers
 * (the first n layers hash-routed); both given: they must agree. */
static fmoe_status read_hash_layers(model_reader *r, uint32_t layers)
{
    fmoe_model *m = r->model;
    uint32_t n = 0;
    int has_n = qjson_member(r->obj, "num_hash_layers") != NULL;
    json_t *types = NULL;
    int has_types = 0;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hash_layers", 0, 0, layers, &n)) ||
        (st = qjson_array(&r->j, r->obj, "mlp_layer_types", 0, &types, &has_types)))
        return st;
    if (!has_n && !has_types)
        return qjson_fail(&r->j, FMOE_STATUS_INVALID_ARGUMENT,
                          "missing required key \"num_hash_layers\" (or \"mlp_layer_types\"): which layers route by "
                          "token id (transformers would assume the first 3)");
    if (has_types && json_array_size(types) != layers)
        return mjson_fail_at(&r->j, "mlp_layer_types", FMOE_STATUS_INVALID_ARGUMENT,
                             "%zu entries, expected num_hidden_layers = %u", json_array_size(types), layers);
    for (uint32_t i = 0; i < layers; i++) {
        int hash = i < n;
        if (has_types) {
            const json_t *v = json_array_get(types, i);
            const char *s = json_is_string(v) ? json_string_value(v) : NULL;
            size_t mark = qjson_enter_key(&r->j, "mlp_layer_types");
            qjson_enter_index(&r->j, i);
            if (!s || (strcmp(s, "hash_moe") != 0 && strcmp(s, "moe") != 0))
                st = qjson_expected(&r->j, v, "\"hash_moe\" or \"moe\"");
            else if (has_n && (strcmp(s, "hash_moe") == 0) != hash)
                st = qjson_fail(&r->j, FMOE_STATUS_INVALID_ARGUMENT, "\"%s\" disagrees with num_hash_layers = %u", s,
                                n);
            qjson_leave(&r->j, mark);
            if (st != FMOE_STATUS_OK)
                return st;
            hash = strcmp(s, "hash_moe") == 0;
        }
        m->hash_routed[i] = (uint8_t)hash;
    }
    snprintf(m->hash_key, sizeof m->hash_key, "%s", has_types ? "mlp_layer_types" : "num_hash_layers");
    return FMOE_STATUS_OK;
}

static fmoe_status read_deepseek_v4(model_reader *r)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0;
    double limit = DEFAULT_LIMIT;
    const char *experts_key = NULL;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = model_uint_spellings(r, experts_keys, 1, 1, MODEL_MAX_EXPERTS, &c->num_experts, &experts_key)) ||
        (st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MODEL_MAX_TOP_K, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = model_uint_spellings(r, inter_keys, 1, 1, MODEL_MAX_INTERMEDIATE, &c->intermediate_size, NULL)) ||
        (st = mjson_real(&r->j, r->obj, "swiglu_limit", 0, &limit, NULL)) || (st = mjson_require_silu(&r->j, r->obj)) ||
        (st = model_check_top_k(r, experts_key, "num_experts_per_tok")) || (st = model_read_shared_count(r)) ||
        (st = read_routing(r)))
        return st;
    if (!(limit > 0.0) || limit > FLT_MAX)
        return mjson_expected_at(&r->j, r->obj, "swiglu_limit", "a number > 0");
    c->activation = FMOE_ACT_SILU;
    c->gated = 1;
    c->swiglu_limit = (float)limit;
    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK || (st = read_hash_layers(r, layers)) != FMOE_STATUS_OK)
        return st;
    model_all_layers_moe(m, "every DeepSeek-V4 decoder layer is a MoE layer");
    return FMOE_STATUS_OK;
}

static const char *const archs[] = {"DeepseekV4ForCausalLM", NULL};
static const char *const types[] = {"deepseek_v4", NULL};

/* The original checkpoint's names (vLLM maps them onto its own modules;
 * transformers converts them while loading). */
static const model_naming naming = {
    .layer_prefix = "layers",
    .block = "ffn",
    .router = "gate",
    .correction_bias = "bias",
    .experts = &model_experts_w1_w3_w2,
    .shared = "shared_experts",
};

const model_family fmoe_family_deepseek_v4 = {
    .name = "deepseek_v4",
    .architectures = archs,
    .model_types = types,
    .naming = &naming,
    .read = read_deepseek_v4,
};
