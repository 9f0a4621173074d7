/*
 * core/model/family_qwen.c - Qwen2-MoE (Qwen2MoeForCausalLM: Qwen1.5-MoE,
 * Qwen2-57B-A14B) and Qwen3-MoE (Qwen3MoeForCausalLM).
 *
 * Checked against vLLM models/qwen2_moe.py and qwen3_moe.py: the sparse
 * block is FusedMoE(num_experts, num_experts_per_tok,
 * moe_intermediate_size, renormalize=norm_topk_prob), softmax scoring, the
 * router "mlp.gate" without bias; a decoder layer is a MoE layer iff it is
 * not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0 (else
 * a dense MLP of intermediate_size). Qwen2-MoE adds one shared expert of
 * shared_expert_intermediate_size ("mlp.shared_expert", silu MLP) whose
 * output is scaled by sigmoid(mlp.shared_expert_gate(x)); Qwen3-MoE has
 * none. Expert checkpoint names gate_proj/up_proj/down_proj.
 *
 * The expert count: Qwen2MoeConfig reads "num_experts" only (a
 * "num_local_experts" there is an unknown key: transformers would use its
 * default, 60, so it is not read); Qwen3MoeConfig maps "num_experts" to
 * "num_local_experts" (attribute_map) and saves the latter, so both are
 * read (transformers 5.23).
 *
 * Defaults of absent keys (transformers Qwen2MoeConfig / Qwen3MoeConfig):
 * norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers []. The
 * sizes, and Qwen2's shared_expert_intermediate_size (whose class default,
 * 5632, would invent a shared expert), are required.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/model/model.h"

static const char *const qwen2_experts_keys[] = {"num_experts", NULL};
static const char *const qwen3_experts_keys[] = {"num_local_experts", "num_experts", NULL};

/* mlp_only_layers: a list of layer indices, each in [0, layers). Marks
 * them in dense[] and describes the list in `text`. */
static fmoe_status read_mlp_only(model_reader *r, uint32_t layers, uint8_t *dense, char *text, size_t cap)
{
    json_t *arr = NULL;
    int given = 0;
    snprintf(text, cap, "[]");
    fmoe_status st = qjson_array(&r->j, r->obj, "mlp_only_layers", 0, &arr, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t mark = qjson_enter_key(&r->j, "mlp_only_layers");
    size_t len = (size_t)snprintf(text, cap, "[");
    int cut = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t layer = json_is_integer(v) ? json_integer_value(v) : -1;
        if (layer < 0 || layer >= (json_int_t)layers) {
            size_t at = qjson_enter_index(&r->j, i);
            char what[64];
            snprintf(what, sizeof what, "a layer index in [0, %u]", layers - 1);
            st = qjson_expected(&r->j, v, what);
            qjson_leave(&r->j, at);
            break;
        }
        dense[layer] = 1;
        char item[32];
        int n = snprintf(item, sizeof item, "%s%lld", i ? ", " : "", (long long)layer);
        if (!cut && len + (size_t)n + 6 < cap) {
            memcpy(text + len, item, (size_t)n + 1);
            len += (size_t)n;
        } else if (!cut) {
            memcpy(text + len, ", ...", 6);
            len += 5;
            cut = 1;
        }
    }
    qjson_leave(&r->j, mark);
    memcpy(text + len, "]", 2);
    return st;
}

static fmoe_status read_qwen(model_reader *r, int has_shared, const char *const *experts_keys)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0, step = 1;
    int renorm = 0;
    const char *experts_key = NULL;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = model_uint_spellings(r, experts_keys, 1, 1, MODEL_MAX_EXPERTS, &c->num_experts, &experts_key)) ||
        (st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MODEL_MAX_TOP_K, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "moe_intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE,
                         &c->intermediate_size)) ||
        (st = qjson_bool(&r->j, r->obj, "norm_topk_prob", 0, &renorm, NULL)) ||
        (st = mjson_uint(&r->j, r->obj, "decoder_sparse_step", 0, 1, MODEL_MAX_LAYERS, &step)) ||
        (st = mjson_require_silu(&r->j, r->obj)) || (st = model_check_top_k(r, experts_key, "num_experts_per_tok")))
        return st;
    if (has_shared) {
        uint32_t shared = 0;
        st = mjson_uint(&r->j, r->obj, "shared_expert_intermediate_size", 1, 0, MODEL_MAX_INTERMEDIATE, &shared);
        if (st != FMOE_STATUS_OK)
            return st;
        m->shared_count = shared > 0;
        m->shared_intermediate = shared;
        m->shared_gated = shared > 0;
    }
    c->scoring = FMOE_SCORING_SOFTMAX;
    c->renormalize = (uint32_t)renorm;

    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK)
        return st;
    uint8_t *dense = calloc(layers, 1);
    if (!dense)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    char list[96];
    st = read_mlp_only(r, layers, dense, list, sizeof list);
    for (uint32_t i = 0; st == FMOE_STATUS_OK && i < layers; i++)
        m->is_moe[i] = !dense[i] && (i + 1) % step == 0;
    free(dense);
    snprintf(m->pattern, sizeof m->pattern, "decoder_sparse_step = %u, mlp_only_layers = %s", step, list);
    return st;
}

static fmoe_status read_qwen2_moe(model_reader *r)
{
    return read_qwen(r, 1, qwen2_experts_keys);
}

static fmoe_status read_qwen3_moe(model_reader *r)
{
    return read_qwen(r, 0, qwen3_experts_keys);
}

static const char *const qwen2_archs[] = {"Qwen2MoeForCausalLM", NULL};
static const char *const qwen2_types[] = {"qwen2_moe", NULL};
static const char *const qwen3_archs[] = {"Qwen3MoeForCausalLM", NULL};
static const char *const qwen3_types[] = {"qwen3_moe", NULL};

static const model_naming qwen2_naming = {
    .layer_prefix = "model.layers",
    .block = "mlp",
    .router = "gate",
    .experts = &model_experts_proj,
    .shared = "shared_expert",
    .shared_gate = "shared_expert_gate",
};

static const model_naming qwen3_naming = {
    .layer_prefix = "model.layers",
    .block = "mlp",
    .router = "gate",
    .experts = &model_experts_proj,
};

const model_family fmoe_family_qwen2_moe = {
    .name = "qwen2_moe",
    .architectures = qwen2_archs,
    .model_types = qwen2_types,
    .naming = &qwen2_naming,
    .read = read_qwen2_moe,
};

const model_family fmoe_family_qwen3_moe = {
    .name = "qwen3_moe",
    .architectures = qwen3_archs,
    .model_types = qwen3_types,
    .naming = &qwen3_naming,
    .read = read_qwen3_moe,
};
