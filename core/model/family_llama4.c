/*
 * core/model/family_llama4.c - Llama-4 (Llama4ForConditionalGeneration,
 * whose text model's keys are under "text_config" and whose checkpoint
 * names start with "language_model.", and the text-only Llama4ForCausalLM).
 *
 * Checked against vLLM models/llama4.py: Llama4MoE = router
 * "feed_forward.router" (no bias) + FusedMoE(num_local_experts,
 * num_experts_per_tok, intermediate_size, custom_routing_function = top-k
 * of the logits then sigmoid of the chosen logits, renormalize=False,
 * apply_router_weight_on_input=True) + "feed_forward.shared_expert" (a silu
 * MLP of intermediate_size); a decoder layer is a MoE layer iff
 * (layer + 1) % interleave_moe_layer_step == 0, else a dense MLP of
 * intermediate_size_mlp. Its loader takes "experts.gate_up_proj" [E, H, 2I]
 * by chunk(2, dim=-1) (gate = first half: concatenated, not interleaved)
 * and transpose(-1, -2), and "experts.down_proj" [E, I, H] transposed; the
 * per-expert names (experts.<e>.gate_proj ...) go through the ordinary
 * expert mapping. transformers' Llama4TextConfig derives moe_layers from
 * the same step when absent; when present it must agree with the step
 * (vLLM ignores it, transformers uses it).
 *
 * apply_router_weight_on_input needs top-1, so num_experts_per_tok other
 * than 1 is UNSUPPORTED (vLLM asserts). Defaults: interleave_moe_layer_step
 * 1. Llama4TextConfig has no attribute_map (transformers 5.23): the expert
 * count is read as "num_local_experts" only; a "num_experts" there is an
 * unknown key to transformers (which would use its default, 16).
 *
 * Routing is scoring SIGMOID with plain top-k and no bias: the reference
 * router (core/routing.c) then ranks the logits themselves, as
 * transformers' Llama4Router does (top-k of the logits, then sigmoid), so
 * logits that all saturate sigmoid to 1.0f still pick the largest.
 */
#include <stdio.h>

#include "core/model/model.h"

/* moe_layers, when given, must list exactly the layers the step selects. */
static fmoe_status check_moe_layers(model_reader *r, uint32_t layers, uint32_t step)
{
    json_t *arr = NULL;
    int given = 0;
    fmoe_status st = qjson_array(&r->j, r->obj, "moe_layers", 0, &arr, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t expected = layers / step, n = json_array_size(arr);
    size_t mark = qjson_enter_key(&r->j, "moe_layers");
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++) {
        json_t *v = json_array_get(arr, i);
        long long want = (long long)((i + 1) * step - 1);
        if (i >= expected || !json_is_integer(v) || json_integer_value(v) != want) {
            size_t at = qjson_enter_index(&r->j, i);
            char what[96];
            if (i < expected)
                snprintf(what, sizeof what, "%lld (interleave_moe_layer_step = %u)", want, step);
            else
                snprintf(what, sizeof what, "no more than %zu entries (interleave_moe_layer_step = %u)", expected,
                         step);
            st = qjson_expected(&r->j, v, what);
            qjson_leave(&r->j, at);
        }
    }
    if (st == FMOE_STATUS_OK && n < expected)
        st = qjson_fail(&r->j, FMOE_STATUS_INVALID_ARGUMENT,
                        "lists %zu layers, expected %zu (interleave_moe_layer_step = %u)", n, expected, step);
    qjson_leave(&r->j, mark);
    return st;
}

static fmoe_status read_llama4(model_reader *r)
{
    fmoe_model *m = r->model;
    fmoe_layer_config *c = &m->cfg;
    uint32_t layers = 0, step = 1;
    fmoe_status st;
    if ((st = mjson_uint(&r->j, r->obj, "num_hidden_layers", 1, 1, MODEL_MAX_LAYERS, &layers)) ||
        (st = mjson_uint(&r->j, r->obj, "num_local_experts", 1, 1, MODEL_MAX_EXPERTS, &c->num_experts)) ||
        (st = mjson_uint(&r->j, r->obj, "num_experts_per_tok", 1, 1, MODEL_MAX_TOP_K, &c->top_k)) ||
        (st = mjson_uint(&r->j, r->obj, "hidden_size", 1, 1, MODEL_MAX_HIDDEN, &c->hidden_size)) ||
        (st = mjson_uint(&r->j, r->obj, "intermediate_size", 1, 1, MODEL_MAX_INTERMEDIATE, &c->intermediate_size)) ||
        (st = mjson_uint(&r->j, r->obj, "interleave_moe_layer_step", 0, 1, MODEL_MAX_LAYERS, &step)) ||
        (st = mjson_require_silu(&r->j, r->obj)) ||
        (st = model_check_top_k(r, "num_local_experts", "num_experts_per_tok")) ||
        (st = check_moe_layers(r, layers, step)))
        return st;
    if (c->top_k != 1)
        return mjson_fail_at(&r->j, "num_experts_per_tok", FMOE_STATUS_UNSUPPORTED,
                             "%u is not supported; Llama-4 applies the router weight on the input, which needs 1",
                             c->top_k);
    c->scoring = FMOE_SCORING_SIGMOID;
    c->renormalize = 0;
    c->apply_router_weight_on_input = 1;
    m->shared_count = 1;
    m->shared_intermediate = c->intermediate_size;
    if ((st = model_set_layers(m, layers)) != FMOE_STATUS_OK)
        return st;
    for (uint32_t i = 0; i < layers; i++)
        m->is_moe[i] = (i + 1) % step == 0;
    snprintf(m->pattern, sizeof m->pattern, "interleave_moe_layer_step = %u", step);
    return FMOE_STATUS_OK;
}

static const char *const cg_archs[] = {"Llama4ForConditionalGeneration", NULL};
static const char *const cg_types[] = {"llama4", NULL};
static const char *const text_archs[] = {"Llama4ForCausalLM", NULL};
static const char *const text_types[] = {"llama4_text", NULL};

static const model_naming cg_naming = {
    .layer_prefix = "language_model.model.layers",
    .block = "feed_forward",
    .router = "router",
    .experts = &model_experts_proj,
    .fused = 1,
    .shared = "shared_expert",
};

static const model_naming text_naming = {
    .layer_prefix = "model.layers",
    .block = "feed_forward",
    .router = "router",
    .experts = &model_experts_proj,
    .fused = 1,
    .shared = "shared_expert",
};

const model_family fmoe_family_llama4 = {
    .name = "llama4",
    .architectures = cg_archs,
    .model_types = cg_types,
    .text_config = "text_config",
    .naming = &cg_naming,
    .read = read_llama4,
};

const model_family fmoe_family_llama4_text = {
    .name = "llama4_text",
    .architectures = text_archs,
    .model_types = text_types,
    .naming = &text_naming,
    .read = read_llama4,
};
