/*
 * core/model/family_mixtral.c - Mixtral (MixtralForCausalLM).
 *
 * Checked against vLLM models/mixtral.py (MixtralMoE: FusedMoE with
 * num_local_experts, num_experts_per_tok, intermediate_size and
 * renormalize=True, no scoring_func: softmax; every decoder layer has
 * block_sparse_moe; expert mapping with ckpt names w1/w2/w3) and
 * transformers' modeling_mixtral (softmax, top-k, divide by the sum;
 * w1 = gate, w3 = up, w2 = down, act ACT2FN[hidden_act]).
 *
 * Keys: num_local_experts (MixtralConfig's attribute_map also reads it as
 * num_experts), num_experts_per_tok, hidden_size, intermediate_size (the
 * expert size: Mixtral has no dense MLP), num_hidden_layers, hidden_act
 * (silu).
 */
#include <stdint.h>

#include "core/model/model.h"

static const char *const experts_keys[] = {"num_local_experts", "num_experts", NULL};

static fmoe_status read_mixtral(model_reader *r)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0;
    const char *experts_key = NULL;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = model_uint_spellings(r, experts_keys, 1, 1, MODEL_MAX_EXPERTS, &c->num_experts, &experts_key)) ||
        (st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MODEL_MAX_TOP_K, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE, &c->intermediate_size)) ||
        (st = mjson_require_silu(&r->j, r->obj)) || (st = model_check_top_k(r, experts_key, "num_experts_per_tok")))
        return st;
    c->scoring = FMOE_SCORING_SOFTMAX;
    c->renormalize = 1;
    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK)
        return st;
    model_all_layers_moe(m, "every layer is a MoE layer");
    return FMOE_STATUS_OK;
}

static const char *const archs[] = {"MixtralForCausalLM", NULL};
static const char *const types[] = {"mixtral", NULL};

static const model_naming naming = {
    .layer_prefix = "model.layers",
    .block = "block_sparse_moe",
    .router = "gate",
    .experts = &model_experts_w1_w3_w2,
};

const model_family fmoe_family_mixtral = {
    .name = "mixtral",
    .architectures = archs,
    .model_types = types,
    .naming = &naming,
    .read = read_mixtral,
};
