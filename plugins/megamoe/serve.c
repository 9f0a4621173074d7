/*
 * plugins/megamoe/serve.c - which layers the MegaMoE kernels' contract
 * covers (megamoe.h): DeepGEMM fp8_fp4_mega_moe's host checks
 * (csrc/apis/mega.hpp) and vLLM DeepseekV4MegaMoEExperts', each refusal
 * one line naming the rule.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/megamoe.h"
#include "plugins/megamoe/sm100_plan.h"

static int scheme_is_ours(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->w_strategy == FMOE_QSTRATEGY_GROUP && s->w_group_size == 32 &&
           s->w_scale_dtype == FMOE_DTYPE_UE8M0 && s->w_actorder == FMOE_ACTORDER_NONE &&
           s->a_dtype == FMOE_DTYPE_FP8_E4M3FN && s->a_strategy == FMOE_QSTRATEGY_GROUP && s->a_group_size == 32 &&
           s->a_dynamic && s->a_symmetric;
}

static int refuse(char *why, size_t cap, const char *text)
{
    snprintf(why, cap, "%s", text);
    return -1;
}

/* The rules both paths share, in the order the query names them. */
static int common_rules(const fmoe_layer_config *c, const fmoe_scheme *s, char *why, size_t cap)
{
    if (!scheme_is_ours(s))
        return refuse(why, cap, "MegaMoE serves " MM_SCHEME_KEY " only (MXFP4 weights x FP8 per-32 activations)");
    if (!c->gated || c->activation != FMOE_ACT_SILU)
        return refuse(why, cap, "MegaMoE: the epilogue is SwiGLU (gated silu, optional swiglu_limit) only");
    if (c->act_dtype != FMOE_DTYPE_BF16)
        return refuse(why, cap, "MegaMoE: activations and output are bf16");
    if (c->has_bias)
        return refuse(why, cap, "MegaMoE: no expert biases");
    if (c->apply_router_weight_on_input)
        return refuse(why, cap, "MegaMoE: the router weight is applied after SwiGLU, not on the input");
    if (c->tp_size > 1)
        return refuse(why, cap, "MegaMoE: tensor parallelism inside the layer is not supported (EP only)");
    if (c->ep_size > 1 && c->placement == FMOE_PLACEMENT_ROUND_ROBIN)
        return refuse(why, cap,
                      "MegaMoE: experts are placed in contiguous ranges (rank = id / experts per rank); round_robin "
                      "placement is not supported");
    if (c->max_num_tokens == 0)
        return refuse(why, cap, "MegaMoE: max_num_tokens must be set (the symmetric buffer is sized by it)");
    return 0;
}

int mm_layer_supported(const fmoe_layer_config *c, const fmoe_scheme *s, uint32_t ring, mm_dims *d, char *why,
                       size_t cap)
{
    if (common_rules(c, s, why, cap) != 0)
        return -1;
    uint32_t ranks = c->ep_size ? c->ep_size : 1;
    *d = (mm_dims){.ranks = ranks,
                   .experts = c->num_experts + c->num_redundant_experts,
                   .max_tokens = c->max_num_tokens,
                   .topk = c->top_k,
                   .hidden = c->hidden_size,
                   .inter = c->intermediate_size};
    mm_layout l;
    return mm_layout_plan(d, ring, &l, why, cap);
}

int mm_sm90_layer_supported(const fmoe_layer_config *c, const fmoe_scheme *s, mm90_plan *plan, char *why, size_t cap)
{
    if (common_rules(c, s, why, cap) != 0)
        return -1;
    return mm90_plan_make(c->num_experts + c->num_redundant_experts, c->hidden_size, c->intermediate_size, c->top_k,
                          c->max_num_tokens, plan, why, cap);
}

int mm_choose_path(const mm_state *st, const fmoe_layer_config *c, const fmoe_scheme *s, int32_t index, mm90_plan *plan,
                   char *why, size_t cap)
{
    if (common_rules(c, s, why, cap) != 0)
        return -1;
    int major = 0, minor = 0;
    if (!st->path)
        return refuse(why, cap, "MegaMoE: this build has no device path");
    if (st->path->capability(index, &major, &minor, why, cap) != 0)
        return -1;
    if (major == 9 && minor == 0)
        return mm_sm90_layer_supported(c, s, plan, why, cap) == 0 ? MM_PATH_SM90 : -1;
    if (major == 10) {
        mm_dims d;
        if (mm_layer_supported(c, s, st->ring_tokens, &d, why, cap) != 0)
            return -1;
        if (!st->sm100_unverified)
            return refuse(why, cap,
                          "MegaMoE: the layer fits the SM100 kernel's contract, but the SM100 kernel "
                          "(sm100_forward.cu) has never run on an SM100 device and is not served yet (the megamoe "
                          "option sm100_unverified = true runs it anyway)");
        if (!st->path->create100)
            return refuse(why, cap, "MegaMoE: this build has no SM100 kernel");
        if (d.ranks > 1)
            return refuse(why, cap,
                          "MegaMoE SM100: EP groups need the peers' symmetric windows, not wired yet (ep_size 1 only)");
        mm100_shape shape;
        if (mm100_shape_make(128, d.experts / d.ranks, &shape, why, cap) != 0)
            return -1;
        return MM_PATH_SM100;
    }
    snprintf(why, cap, "MegaMoE: compute capability %d.%d has no path (SM90 = 9.0 runs; SM100 = 10.x is planned)",
             major, minor);
    return -1;
}
