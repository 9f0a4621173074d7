/*
 * core/model/family_deepseek.c - DeepSeek-V2 (DeepseekV2ForCausalLM, V2 and
 * V2-Lite) and DeepSeek-V3 (DeepseekV3ForCausalLM; also Kimi-K2, which
 * ships model_type "kimi_k2" with the V3 architecture).
 *
 * Checked against vLLM models/deepseek_v2.py (DeepseekV2MoE, used for both):
 * FusedMoE(n_routed_experts, num_experts_per_tok, moe_intermediate_size,
 * renormalize=norm_topk_prob, use_grouped_topk=True, num_expert_group=
 * n_group (default 1), topk_group (default 1), scoring_func (default
 * softmax), routed_scaling_factor (default 1.0), e_score_correction_bias
 * on "mlp.gate" iff topk_method == "noaux_tc"); hidden_act must be silu;
 * shared experts "mlp.shared_experts" of moe_intermediate_size *
 * n_shared_experts when n_shared_experts is not None; a decoder layer is a
 * MoE layer iff n_routed_experts is set, layer >= first_k_dense_replace and
 * layer % moe_layer_freq == 0. And against transformers' DeepseekV2/V3
 * MoEGate: "greedy" is top-k over all experts (groups unused),
 * "group_limited_greedy" keeps the topk_group groups with the best max
 * score, "noaux_tc" (V3) the groups with the best sum of their top-2
 * biased scores; the bias only selects, weights are the unbiased scores;
 * renormalize then multiply by routed_scaling_factor.
 *
 * With n_group = 1 the grouping is the identity, so the layer config says
 * grouped_topk = 0 (vLLM's router factory falls through to plain top-k the
 * same way).
 *
 * Defaults of absent keys (transformers DeepseekV2Config / V3Config):
 *   key                    V2          V3
 *   n_group, topk_group    1, 1        8, 4
 *   topk_method            greedy      noaux_tc
 *   scoring_func           softmax     sigmoid
 *   norm_topk_prob         false       true
 *   routed_scaling_factor  1.0         2.5
 *   first_k_dense_replace  0           3
 *   moe_layer_freq         1           1
 * n_shared_experts must be present (null: none), since the two classes'
 * defaults differ from what released checkpoints have.
 *
 * The expert count is n_routed_experts, which the classes' attribute_map
 * also reads as "num_experts" (V2) or "num_local_experts" (V3); each
 * class's other spelling is an unknown key to it and is not read
 * (transformers 5.23).
 */
#include <float.h>
#include <stdio.h>
#include <string.h>

#include "core/model/model.h"

#define MAX_U32 2147483647u

typedef struct deepseek_defaults {
    const char *const *experts_keys; /* n_routed_experts and its alias */
    uint32_t n_group, topk_group, first_k_dense;
    const char *topk_method, *scoring_func;
    int norm_topk_prob;
    double routed_scaling_factor;
} deepseek_defaults;

static const char *const v2_experts_keys[] = {"n_routed_experts", "num_experts", NULL};
static const char *const v3_experts_keys[] = {"n_routed_experts", "num_local_experts", NULL};

static const deepseek_defaults v2_defaults = {v2_experts_keys, 1, 1, 0, "greedy", "softmax", 0, 1.0};
static const deepseek_defaults v3_defaults = {v3_experts_keys, 8, 4, 3, "noaux_tc", "sigmoid", 1, 2.5};

static fmoe_status read_string_default(model_reader *r, const char *key, const char *def, const char **out)
{
    *out = def;
    return qjson_string(&r->j, r->obj, key, 0, out, NULL);
}

static fmoe_status read_routing(model_reader *r, const deepseek_defaults *d, const char *experts_key)
{
    fmoe_layer_config *c = &r->model->cfg;
    const char *method = NULL, *scoring = NULL;
    uint32_t G = d->n_group, TG = d->topk_group;
    int renorm = d->norm_topk_prob;
    double rsf = d->routed_scaling_factor;
    fmoe_status st;
    if ((st = read_string_default(r, "topk_method", d->topk_method, &method)) ||
        (st = read_string_default(r, "scoring_func", d->scoring_func, &scoring)) ||
        (st = mjson_uint(&r->j, r->obj, "n_group", 0, 1, MODEL_MAX_EXPERTS, &G)) ||
        (st = mjson_uint(&r->j, r->obj, "topk_group", 0, 1, MODEL_MAX_EXPERTS, &TG)) ||
        (st = qjson_bool(&r->j, r->obj, "norm_topk_prob", 0, &renorm, NULL)) ||
        (st = mjson_real(&r->j, r->obj, "routed_scaling_factor", 0, &rsf, NULL)))
        return st;

    if (strcmp(scoring, "softmax") == 0)
        c->scoring = FMOE_SCORING_SOFTMAX;
    else if (strcmp(scoring, "sigmoid") == 0)
        c->scoring = FMOE_SCORING_SIGMOID;
    else
        return mjson_fail_at(&r->j, "scoring_func", FMOE_STATUS_UNSUPPORTED,
                             "\"%s\" is not supported; expected \"softmax\" or \"sigmoid\"", scoring);

    if (!(rsf > 0.0) || rsf > FLT_MAX)
        return mjson_expected_at(&r->j, r->obj, "routed_scaling_factor", "a number > 0");
    c->routed_scaling_factor = (float)rsf;
    c->renormalize = (uint32_t)renorm;

    if (TG > G)
        return mjson_fail_at(&r->j, "topk_group", FMOE_STATUS_INVALID_ARGUMENT, "%u exceeds n_group = %u", TG, G);
    if (c->num_experts % G != 0)
        return mjson_fail_at(&r->j, "n_group", FMOE_STATUS_INVALID_ARGUMENT, "%u does not divide %s = %u", G,
                             experts_key, c->num_experts);

    int grouped;
    if (strcmp(method, "greedy") == 0) {
        /* transformers ignores the groups here and vLLM applies them: we
         * cannot be both, unless the groups select everything. */
        if (TG < G)
            return mjson_fail_at(&r->j, "topk_method", FMOE_STATUS_UNSUPPORTED,
                                 "\"greedy\" with n_group = %u and topk_group = %u: transformers ignores the groups, "
                                 "vLLM applies them; expected topk_group = n_group or \"group_limited_greedy\"",
                                 G, TG);
        grouped = 0;
    } else if (strcmp(method, "group_limited_greedy") == 0) {
        grouped = 1;
    } else if (strcmp(method, "noaux_tc") == 0) {
        grouped = 1;
        c->has_correction_bias = 1;
    } else {
        return mjson_fail_at(&r->j, "topk_method", FMOE_STATUS_UNSUPPORTED,
                             "\"%s\" is not supported; expected \"greedy\", \"group_limited_greedy\" or \"noaux_tc\"",
                             method);
    }
    if (grouped && G > 1) {
        uint64_t selectable = (uint64_t)TG * (c->num_experts / G);
        if (c->top_k > selectable)
            return mjson_fail_at(&r->j, "num_experts_per_tok", FMOE_STATUS_INVALID_ARGUMENT,
                                 "%u exceeds the %llu experts in topk_group = %u groups of %u", c->top_k,
                                 (unsigned long long)selectable, TG, c->num_experts / G);
        c->grouped_topk = 1;
        c->num_expert_group = G;
        c->topk_group = TG;
    }
    return FMOE_STATUS_OK;
}

fmoe_status model_read_shared_count(model_reader *r)
{
    fmoe_model *m = r->model;
    if (!json_object_get(r->obj, "n_shared_experts"))
        return qjson_fail(&r->j, FMOE_STATUS_INVALID_ARGUMENT,
                          "missing required key \"n_shared_experts\" (null if the model has none)");
    uint32_t n = 0;
    fmoe_status st = mjson_uint(&r->j, r->obj, "n_shared_experts", 0, 0, 1024, &n);
    if (st != FMOE_STATUS_OK)
        return st;
    uint64_t size = (uint64_t)n * m->cfg.intermediate_size;
    if (size > MAX_U32)
        return mjson_fail_at(&r->j, "n_shared_experts", FMOE_STATUS_INVALID_ARGUMENT,
                             "%u shared experts of moe_intermediate_size = %u exceed %u", n, m->cfg.intermediate_size,
                             MAX_U32);
    m->shared_count = n;
    m->shared_intermediate = (uint32_t)size;
    return FMOE_STATUS_OK;
}

static fmoe_status read_deepseek(model_reader *r, const deepseek_defaults *d)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0, first_dense = d->first_k_dense, freq = 1;
    const char *experts_key = NULL;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = model_uint_spellings(r, d->experts_keys, 1, 1, MODEL_MAX_EXPERTS, &c->num_experts, &experts_key)) ||
        (st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MODEL_MAX_TOP_K, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "moe_intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE,
                         &c->intermediate_size)) ||
        (st = mjson_uint(&r->j, r->obj, "first_k_dense_replace", 0, 0, layers, &first_dense)) ||
        (st = mjson_uint(&r->j, r->obj, "moe_layer_freq", 0, 1, MODEL_MAX_LAYERS, &freq)) ||
        (st = mjson_require_silu(&r->j, r->obj)) || (st = model_check_top_k(r, experts_key, "num_experts_per_tok")) ||
        (st = model_read_shared_count(r)) || (st = read_routing(r, d, experts_key)))
        return st;
    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK)
        return st;
    for (uint32_t i = 0; i < layers; i++)
        m->is_moe[i] = i >= first_dense && i % freq == 0;
    snprintf(m->pattern, sizeof m->pattern, "first_k_dense_replace = %u, moe_layer_freq = %u", first_dense, freq);
    return FMOE_STATUS_OK;
}

static fmoe_status read_v2(model_reader *r)
{
    return read_deepseek(r, &v2_defaults);
}

static fmoe_status read_v3(model_reader *r)
{
    return read_deepseek(r, &v3_defaults);
}

static const char *const v2_archs[] = {"DeepseekV2ForCausalLM", NULL};
static const char *const v2_types[] = {"deepseek_v2", NULL};
static const char *const v3_archs[] = {"DeepseekV3ForCausalLM", NULL};
static const char *const v3_types[] = {"deepseek_v3", "kimi_k2", NULL};

static const model_naming naming = {
    .layer_prefix = "model.layers",
    .block = "mlp",
    .router = "gate",
    .experts = &model_experts_proj,
    .shared = "shared_experts",
};

const model_family fmoe_family_deepseek_v2 = {
    .name = "deepseek_v2",
    .architectures = v2_archs,
    .model_types = v2_types,
    .naming = &naming,
    .read = read_v2,
};

const model_family fmoe_family_deepseek_v3 = {
    .name = "deepseek_v3",
    .architectures = v3_archs,
    .model_types = v3_types,
    .naming = &naming,
    .read = read_v3,
};
