/*
 * plugins/rocm/layout.c - scheme and config acceptance, parameter
 * declaration and workspace layout of the rocm plugin (layout.h).
 */
#include "plugins/rocm/layout.h"

#include <stdio.h>
#include <string.h>

#include "fusedmoe/kit/param_desc.h"
#include "plugins/rocm/sorting.h"

#define FP8 FMOE_DTYPE_FP8_E4M3FN

static int refuse(char *why, size_t cap, const char *text)
{
    snprintf(why, cap, "%s", text);
    return -1;
}

int fmro_scheme_quant(const fmoe_scheme *s, char *why, size_t cap)
{
    if (s->w_strategy == FMOE_QSTRATEGY_NONE && s->a_strategy == FMOE_QSTRATEGY_NONE) {
        if (s->w_dtype != FMOE_DTYPE_BF16)
            return refuse(why, cap, "unquantized: bf16 weights only (AITER QuantType.No)");
        return FMRO_Q_BF16;
    }
    if (s->w_dtype != FP8 || s->a_dtype != FP8)
        return refuse(why, cap, "serves bf16 and fp8 e4m3 W8A8 only (AITER's No, per_Tensor, per_Token, per_128x128)");
    if (s->w_actorder != FMOE_ACTORDER_NONE || !s->a_symmetric || !s->w_symmetric)
        return refuse(why, cap, "fp8: act-order or asymmetric quantization is not served");
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        if (s->w_scale_dtype != FMOE_DTYPE_F32 || s->a_strategy != FMOE_QSTRATEGY_TENSOR)
            return refuse(why, cap, "fp8 per-tensor weights need f32 scales and per-tensor activations");
        return FMRO_Q_TENSOR;
    case FMOE_QSTRATEGY_CHANNEL:
        if (s->w_scale_dtype != FMOE_DTYPE_F32 || s->a_strategy != FMOE_QSTRATEGY_TOKEN || !s->a_dynamic)
            return refuse(why, cap, "fp8 per-channel weights need f32 scales and dynamic per-token activations");
        return FMRO_Q_CHANNEL;
    case FMOE_QSTRATEGY_BLOCK:
        if (s->w_scale_dtype != FMOE_DTYPE_F32)
            return refuse(why, cap, "fp8 blocks: f32 scales only (UE8M0 scales are DeepGEMM's, not AITER's)");
        if (s->w_block_n != 128 || s->w_block_k != 128 || s->a_strategy != FMOE_QSTRATEGY_GROUP || !s->a_dynamic ||
            s->a_group_size != 128)
            return refuse(why, cap,
                          "fp8 blocks: 128x128 weight blocks with dynamic 1x128 activation groups only "
                          "(AITER per_128x128)");
        return FMRO_Q_BLOCK;
    default:
        return refuse(why, cap, "fp8: tensor, channel and 128x128 block weights only");
    }
}

int fmro_check_config(const fmoe_layer_config *cfg, const fmoe_scheme *s, char *why, size_t cap)
{
    if (fmro_scheme_quant(s, why, cap) < 0)
        return -1;
    if (cfg->act_dtype != FMOE_DTYPE_BF16)
        return refuse(why, cap, "bf16 activations only (the kernels read and write bf16 x and out)");
    if (!cfg->gated)
        return refuse(why, cap, "gated experts only (AITER's fused_moe has no non-gated activation)");
    if (cfg->activation != FMOE_ACT_SILU && cfg->activation != FMOE_ACT_GELU && cfg->activation != FMOE_ACT_SWIGLUOAI)
        return refuse(why, cap, "activations: SiLU, GELU and gpt-oss SwiGLU only (AITER's ActivationType)");
    if (cfg->top_k == 0 || cfg->top_k > FMRO_MAX_TOP_K)
        return snprintf(why, cap, "top_k %u: moe_sorting holds the slot in 8 bits (1 to %u)", cfg->top_k,
                        FMRO_MAX_TOP_K),
               -1;
    if (cfg->apply_router_weight_on_input && cfg->top_k != 1)
        return refuse(why, cap, "router weight on the input (doweight_stage1) needs top_k 1, as AITER asserts");
    if (cfg->num_redundant_experts > 0 || cfg->enable_eplb)
        return refuse(why, cap, "EPLB replicas are not served (mask mode maps each global id to one local expert)");
    if (cfg->max_num_tokens == 0)
        return refuse(why, cap, "max_num_tokens must be > 0 (it sizes the workspace)");
    if (cfg->max_num_tokens > FMRO_SORT_MAX_TOKENS)
        return snprintf(why, cap, "max_num_tokens %u: moe_sorting's token ids have 24 bits", cfg->max_num_tokens), -1;
    return 0;
}

int fmro_declare(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter,
                 uint32_t local_experts, fmoe_param_desc descs[FMRO_MAX_PARAMS], uint32_t *n, char *why, size_t cap)
{
    if (fmro_scheme_quant(s, why, cap) < 0)
        return -1;
    uint32_t E = local_experts, k = 0;
    int64_t rI = (int64_t)(cfg->gated ? 2 : 1) * inter, H = hidden;
    if (fmoe_declare_fp8_experts(cfg, s, hidden, inter, E, descs, &k, why, cap) != 0)
        return -1;
    if (cfg->has_bias) {
        /* bf16 either way: the unquantized reference declares biases in the
         * weight dtype, the quantized ones in the act dtype. */
        fmoe_declare_expert_param(&descs[k++], "w13_bias", FMOE_DTYPE_BF16, FMOE_PROJ_W13, FMOE_ROLE_BIAS,
                                  FMOE_SCALE_NONE, 0, E, 2, rI, 0);
        fmoe_declare_expert_param(&descs[k++], "w2_bias", FMOE_DTYPE_BF16, FMOE_PROJ_W2, FMOE_ROLE_BIAS,
                                  FMOE_SCALE_NONE, -1, E, 2, H, 0);
    }
    *n = k;
    return 0;
}

uint32_t fmro_pad(uint32_t n)
{
    return (n + FMRO_PAD - 1) / FMRO_PAD * FMRO_PAD;
}

/* Reserve `bytes` at the running offset (256-byte aligned). */
static size_t take(uint64_t *at, uint64_t bytes)
{
    size_t off = (size_t)*at;
    *at = (*at + (bytes ? bytes : 1) + 255u) & ~(uint64_t)255u;
    return off;
}

int fmro_workspace_layout(uint32_t max_tokens, uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t local_experts,
                          int32_t quant, uint32_t group, fmro_ws *ws, char *why, size_t cap)
{
    memset(ws, 0, sizeof *ws);
    uint32_t L = local_experts ? local_experts : 1;
    ws->capacity = fmro_sorting_capacity(max_tokens, top_k, L, FMRO_SORT_BLOCK);
    ws->blocks = fmro_sorting_blocks(max_tokens, top_k, L, FMRO_SORT_BLOCK);
    if (ws->capacity == 0)
        return snprintf(why, cap, "max_num_tokens %u x top_k %u: moe_sorting's buffers overflow 32 bits", max_tokens,
                        top_k),
               -1;
    uint64_t M = max_tokens, P = M * top_k, C = ws->capacity, Hp = fmro_pad(hidden), Ip = fmro_pad(inter);
    int fp8 = quant != FMRO_Q_BF16;
    uint64_t gh = quant == FMRO_Q_BLOCK ? (hidden + group - 1) / group : 1;
    uint64_t gi = quant == FMRO_Q_BLOCK ? (inter + group - 1) / group : 1;
    uint64_t at = 0;
    ws->counts = take(&at, (uint64_t)L * 4);
    ws->starts = take(&at, (uint64_t)L * 4);
    ws->pos_of = take(&at, P * 4);
    ws->sorted_ids = take(&at, C * 4);
    ws->sorted_w = take(&at, C * 4);
    ws->sorted_expert = take(&at, (uint64_t)ws->blocks * 4);
    ws->num_valid = take(&at, 8);
    ws->amax = take(&at, 8);
    ws->a1 = take(&at, M * Hp * (fp8 ? 1 : 2));
    ws->a1_scale = take(&at, fp8 ? M * gh * 4 : 0);
    ws->act = take(&at, C * Ip * 2);
    ws->a2 = take(&at, fp8 ? C * Ip : 0);
    ws->a2_scale = take(&at, fp8 ? C * gi * 4 : 0);
    ws->y = take(&at, C * hidden * 4);
    if (at > ((uint64_t)1 << 40))
        return snprintf(why, cap, "workspace of %llu bytes for max_num_tokens %u: too large", (unsigned long long)at,
                        max_tokens),
               -1;
    ws->total = (size_t)at;
    return 0;
}
