/*
 * plugins/cuda/layout.c - scheme/config acceptance, parameter declaration
 * and workspace layout of the CUDA plugin (contracts in layout.h).
 */
#include "plugins/cuda/layout.h"

#include <stdio.h>
#include <string.h>

#include "fusedmoe/kit/param_desc.h"
#include "plugins/cuda/cuda_api.h"

#define FP8 FMOE_DTYPE_FP8_E4M3FN

static int refuse(char *why, size_t cap, const char *text)
{
    snprintf(why, cap, "%s", text);
    return -1;
}

/* The 4-bit and int weight schemes (wq_gemm.cu): the reference's families
 * wna16, mxfp4 (W4A16) and nvfp4 (W4A16, W4A4). */
static int wq_scheme(const fmoe_scheme *s, char *why, size_t cap)
{
    if (s->w_dtype != FMOE_DTYPE_FP4_E2M1X2) {
        int order_ok = s->w_actorder == FMOE_ACTORDER_NONE ||
                       (s->w_actorder == FMOE_ACTORDER_GROUP && s->w_strategy == FMOE_QSTRATEGY_GROUP);
        if (s->a_strategy != FMOE_QSTRATEGY_NONE)
            return refuse(why, cap, "int weights: weight-only (WNA16) only; int8 W8A8 and W4A8 are not served");
        if ((s->w_strategy != FMOE_QSTRATEGY_GROUP && s->w_strategy != FMOE_QSTRATEGY_CHANNEL) || !order_ok)
            return refuse(why, cap, "WNA16: channel or group scales (act-order with groups only)");
        if (s->w_scale_dtype != FMOE_DTYPE_F32 && s->w_scale_dtype != FMOE_DTYPE_BF16 &&
            s->w_scale_dtype != FMOE_DTYPE_F16)
            return refuse(why, cap, "WNA16: f32, bf16 or f16 scales only");
        if (s->w_strategy == FMOE_QSTRATEGY_GROUP && (s->w_group_size == 0 || s->w_group_size % 16))
            return refuse(why, cap, "WNA16: group size must be a multiple of 16 (a group is whole k16 MMA steps)");
        return FMCU_Q_WNA16;
    }
    if (s->w_actorder != FMOE_ACTORDER_NONE)
        return refuse(why, cap, "fp4: act-order is not served");
    if (s->w_strategy == FMOE_QSTRATEGY_GROUP && s->w_group_size == 32 && s->w_scale_dtype == FMOE_DTYPE_UE8M0) {
        if (s->a_strategy == FMOE_QSTRATEGY_NONE)
            return FMCU_Q_MXFP4;
        /* The reference's megamoe family (method_megamoe.c megamoe_serves). */
        int mx_acts = s->a_strategy == FMOE_QSTRATEGY_GROUP && s->a_group_size == 32 && s->a_dynamic && s->a_symmetric;
        if (mx_acts && s->a_dtype == FP8)
            return FMCU_Q_MXFP4_A8;
        /* The reference's mxfp4 family with activations (method_mx.c). */
        if (mx_acts && s->a_dtype == FMOE_DTYPE_FP4_E2M1X2)
            return FMCU_Q_MXFP4_A4;
        return refuse(why, cap,
                      "MXFP4: W4A16, W4A4 (dynamic group32 fp4 activations) or x FP8 e4m3 in dynamic symmetric "
                      "groups of 32 (MegaMoE) only");
    }
    if (s->w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP && s->w_group_size == 16 &&
        s->w_scale_dtype == FMOE_DTYPE_FP8_E4M3FN) {
        if (s->a_strategy == FMOE_QSTRATEGY_NONE)
            return FMCU_Q_NVFP4;
        if (s->a_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->a_strategy == FMOE_QSTRATEGY_TENSOR_GROUP &&
            s->a_group_size == 16 && s->a_dynamic && s->a_symmetric)
            return FMCU_Q_NVFP4_A4;
        return refuse(why, cap, "NVFP4: W4A16 or W4A4 (dynamic tgroup16 fp4 activations) only");
    }
    return refuse(why, cap, "fp4: MXFP4 (group32, ue8m0) or NVFP4 (tgroup16, e4m3 scales) only");
}

int fmcu_scheme_quant(const fmoe_scheme *s, char *why, size_t cap)
{
    if (s->w_strategy == FMOE_QSTRATEGY_NONE && s->a_strategy == FMOE_QSTRATEGY_NONE) {
        if (s->w_dtype != FMOE_DTYPE_BF16)
            return refuse(why, cap, "unquantized: bf16 weights only (f32/f16 weights are not served)");
        return FMCU_Q_NONE;
    }
    if (s->w_dtype == FMOE_DTYPE_INT4 || s->w_dtype == FMOE_DTYPE_INT8 || s->w_dtype == FMOE_DTYPE_FP4_E2M1X2)
        return wq_scheme(s, why, cap);
    if (s->w_dtype != FP8 || s->a_dtype != FP8)
        return refuse(why, cap, "serves bf16, fp8 e4m3 W8A8, int4/int8 WNA16, MXFP4 and NVFP4 only");
    if (s->w_actorder != FMOE_ACTORDER_NONE || !s->a_symmetric)
        return refuse(why, cap, "fp8: act-order or asymmetric activations are not served");
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        if (s->w_scale_dtype != FMOE_DTYPE_F32 || s->a_strategy != FMOE_QSTRATEGY_TENSOR)
            return refuse(why, cap, "fp8 per-tensor weights need f32 scales and per-tensor activations");
        return FMCU_Q_TENSOR;
    case FMOE_QSTRATEGY_CHANNEL:
        if (s->w_scale_dtype != FMOE_DTYPE_F32 || s->a_strategy != FMOE_QSTRATEGY_TOKEN || !s->a_dynamic)
            return refuse(why, cap, "fp8 per-channel weights need f32 scales and dynamic per-token activations");
        return FMCU_Q_CHANNEL;
    case FMOE_QSTRATEGY_BLOCK:
        if ((s->w_scale_dtype != FMOE_DTYPE_F32 && s->w_scale_dtype != FMOE_DTYPE_UE8M0) ||
            s->a_strategy != FMOE_QSTRATEGY_GROUP || !s->a_dynamic || s->a_group_size != s->w_block_k)
            return refuse(why, cap,
                          "fp8 block weights need f32/ue8m0 scales and dynamic 1 x block_k activation groups");
        if (s->w_block_k % FMCU_GEMM_BK_BYTES != 0)
            return refuse(why, cap, "fp8 block: block_k must be a multiple of 64 (the GEMM's K stage)");
        return FMCU_Q_BLOCK;
    default:
        return refuse(why, cap, "fp8: only tensor, channel and block weight strategies are served");
    }
}

/* MXFP4 x FP8 (MegaMoE): the layer features the scheme's epilogue has,
 * with the reference's reasons (method_megamoe.c megamoe_layer_refusal):
 * NULL, or the first one missing. */
static const char *mx_a8_layer_refusal(const fmoe_layer_config *c)
{
    if (!c->gated || c->activation != FMOE_ACT_SILU)
        return "the scheme's epilogue is SwiGLU: needs a gated layer with activation silu";
    if (c->act_dtype != FMOE_DTYPE_BF16)
        return "GEMM2 outputs and the combine are bf16: needs act_dtype bf16";
    if (c->has_bias)
        return "expert biases are not part of the scheme";
    if (c->apply_router_weight_on_input)
        return "the router weight is applied after SwiGLU, not on the input";
    return NULL;
}

int fmcu_check_config(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter, char *why,
                      size_t cap)
{
    int quant = fmcu_scheme_quant(s, why, cap);
    if (quant < 0)
        return -1;
    const char *mx_no = quant == FMCU_Q_MXFP4_A8 ? mx_a8_layer_refusal(cfg) : NULL;
    if (mx_no) {
        snprintf(why, cap, "MXFP4 x FP8 (MegaMoE): %s", mx_no);
        return -1;
    }
    if (cfg->act_dtype != FMOE_DTYPE_BF16 && !(cfg->act_dtype == FMOE_DTYPE_F16 && quant != FMCU_Q_NONE))
        return refuse(why, cap,
                      quant == FMCU_Q_NONE ? "unquantized: bf16 activations only"
                                           : "quantized: bf16 or f16 activations only (no f32)");
    /* e2m1 x 2^(s-127) is exact in bf16, not in f16 (range). */
    if ((quant == FMCU_Q_MXFP4 || quant == FMCU_Q_MXFP4_A4) && cfg->act_dtype != FMOE_DTYPE_BF16)
        return refuse(why, cap, "MXFP4: bf16 activations only");
    if (hidden % FMCU_K_ALIGN || inter % FMCU_K_ALIGN) {
        snprintf(why, cap, "hidden %u and per-rank intermediate %u must be multiples of %d", hidden, inter,
                 FMCU_K_ALIGN);
        return -1;
    }
    if (cfg->num_experts > FMCU_MAX_LOGICAL_EXPERTS) {
        snprintf(why, cap, "%u experts: the GPU router holds at most %d", cfg->num_experts, FMCU_MAX_LOGICAL_EXPERTS);
        return -1;
    }
    if (cfg->top_k > FMCU_MAX_TOP_K) {
        snprintf(why, cap, "top_k %u: at most %d", cfg->top_k, FMCU_MAX_TOP_K);
        return -1;
    }
    if (cfg->max_num_tokens == 0)
        return refuse(why, cap, "max_num_tokens must be > 0 (it sizes the workspace)");
    return 0;
}

static void param_flags(fmoe_param_desc *d, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role,
                        int32_t scale_kind, int32_t shard_axis, uint32_t flags, uint32_t experts, uint32_t ndim,
                        int64_t d1, int64_t d2)
{
    fmoe_declare_expert_param(d, name, dtype, proj, role, scale_kind, shard_axis, experts, ndim, d1, d2);
    d->flags = flags;
}

/* WNA16's sizes and parameters, exactly the reference's (method_wna16.c):
 * the same size errors, names, shapes, shard axes and flags. */
static int declare_wna16(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter,
                         uint32_t E, fmoe_param_desc *descs, uint32_t *k, char *why, size_t cap)
{
    uint32_t bits = s->w_dtype == FMOE_DTYPE_INT4 ? 4 : 8, pf = 32 / bits, g = s->w_group_size;
    int grouped = s->w_strategy == FMOE_QSTRATEGY_GROUP, act_order = s->w_actorder == FMOE_ACTORDER_GROUP;
    if (hidden % pf)
        return snprintf(why, cap, "WNA16: hidden_size %u is not divisible by the int32 pack factor %u", hidden, pf), -1;
    if (inter % pf)
        return snprintf(why, cap,
                        "WNA16: intermediate_size_per_partition %u is not divisible by the int32 pack factor %u", inter,
                        pf),
               -1;
    if (grouped && hidden % g)
        return snprintf(why, cap, "WNA16: hidden_size %u is not divisible by group_size %u", hidden, g), -1;
    if (grouped && !act_order && inter % g)
        return snprintf(why, cap,
                        "WNA16: intermediate_size_per_partition %u is not divisible by group_size %u (scale groups "
                        "would cross TP shards)",
                        inter, g),
               -1;
    if (grouped && act_order && cfg->intermediate_size % g)
        return snprintf(why, cap, "WNA16: intermediate_size %u is not divisible by group_size %u",
                        cfg->intermediate_size, g),
               -1;
    uint32_t r = cfg->gated ? 2 : 1, G13 = grouped ? hidden / g : 1;
    uint32_t G2 = grouped ? (act_order ? cfg->intermediate_size : inter) / g : 1;
    int64_t rI = (int64_t)r * inter, H = hidden, I = inter;
    int32_t kind = grouped ? FMOE_SCALE_GROUP : FMOE_SCALE_CHANNEL, w2_axis = grouped ? 0 : -1;
    uint32_t T = FMOE_PARAM_TRANSPOSED, w2_flags = T | (act_order ? FMOE_PARAM_LOAD_FULL : 0);
    fmoe_dtype sd = s->w_scale_dtype, i32 = FMOE_DTYPE_INT32;
    param_flags(&descs[(*k)++], "w13_weight_packed", i32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, T, E, 3,
                H / pf, rI);
    param_flags(&descs[(*k)++], "w2_weight_packed", i32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, T, E, 3,
                I / pf, H);
    param_flags(&descs[(*k)++], "w13_weight_scale", sd, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, kind, 1, T, E, 3, G13,
                rI);
    param_flags(&descs[(*k)++], "w2_weight_scale", sd, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, kind, w2_axis, w2_flags, E,
                3, G2, H);
    if (!s->w_symmetric) {
        param_flags(&descs[(*k)++], "w13_weight_zero_point", i32, FMOE_PROJ_W13, FMOE_ROLE_ZERO_POINT, kind, 1, T, E, 3,
                    G13, rI / pf);
        param_flags(&descs[(*k)++], "w2_weight_zero_point", i32, FMOE_PROJ_W2, FMOE_ROLE_ZERO_POINT, kind, w2_axis,
                    w2_flags, E, 3, G2, H / pf);
    }
    if (act_order) {
        param_flags(&descs[(*k)++], "w13_weight_g_idx", i32, FMOE_PROJ_W13, FMOE_ROLE_G_IDX, FMOE_SCALE_NONE, -1, 0, E,
                    2, H, 0);
        param_flags(&descs[(*k)++], "w2_weight_g_idx", i32, FMOE_PROJ_W2, FMOE_ROLE_G_IDX, FMOE_SCALE_NONE, 0, 0, E, 2,
                    I, 0);
    }
    return 0;
}

static void declare_biases(const fmoe_layer_config *cfg, int quant, uint32_t E, int64_t rI, int64_t H,
                           fmoe_param_desc *descs, uint32_t *k)
{
    if (!cfg->has_bias)
        return;
    /* The unquantized reference declares its biases in the weight dtype
     * (bf16, equal to the act dtype here); the quantized ones in the act dtype. */
    fmoe_dtype bd = quant == FMCU_Q_NONE ? FMOE_DTYPE_BF16 : cfg->act_dtype;
    fmoe_declare_expert_param(&descs[(*k)++], "w13_bias", bd, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, E, 2,
                              rI, 0);
    fmoe_declare_expert_param(&descs[(*k)++], "w2_bias", bd, FMOE_PROJ_W2, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, -1, E, 2, H,
                              0);
}

/* MXFP4 and NVFP4 (method_mx.c, method_nvfp4.c with nvfp4_globals =
 * "quant": the compressed-tensors names). */
static int declare_wq(const fmoe_layer_config *cfg, const fmoe_scheme *s, int quant, uint32_t hidden, uint32_t inter,
                      uint32_t E, fmoe_param_desc *descs, uint32_t *k, char *why, size_t cap)
{
    if (quant == FMCU_Q_WNA16)
        return declare_wna16(cfg, s, hidden, inter, E, descs, k, why, cap);
    int mx = quant == FMCU_Q_MXFP4 || quant == FMCU_Q_MXFP4_A8 || quant == FMCU_Q_MXFP4_A4,
        a8 = quant == FMCU_Q_MXFP4_A8;
    uint32_t grp = mx ? 32 : 16, r = cfg->gated ? 2 : 1;
    const char *what = a8 ? "MXFP4 x FP8" : mx ? "MXFP4" : "NVFP4";
    if (hidden % grp)
        return snprintf(why, cap, "%s: hidden_size %u is not divisible by the scale group of %u", what, hidden, grp),
               -1;
    if (inter % grp)
        return snprintf(why, cap,
                        "%s: intermediate_size_per_partition %u is not divisible by the scale group of %u (a group "
                        "would straddle gate/up or a TP shard)",
                        what, inter, grp),
               -1;
    int64_t rI = (int64_t)r * inter, H = hidden, I = inter;
    fmoe_dtype sd = mx ? FMOE_DTYPE_UE8M0 : FP8, fp4 = FMOE_DTYPE_FP4_E2M1X2;
    /* MXFP4 x FP8 keeps vLLM DeepseekV4MegaMoEExperts' names (method_megamoe.c),
     * the others compressed-tensors' (*_weight_packed); shapes and axes agree. */
    fmoe_declare_expert_param(&descs[(*k)++], a8 ? "w13_weight" : "w13_weight_packed", fp4, FMOE_PROJ_W13,
                              FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, E, 3, rI, H / 2);
    fmoe_declare_expert_param(&descs[(*k)++], a8 ? "w2_weight" : "w2_weight_packed", fp4, FMOE_PROJ_W2,
                              FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, E, 3, H, I / 2);
    fmoe_declare_expert_param(&descs[(*k)++], "w13_weight_scale", sd, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE,
                              FMOE_SCALE_GROUP, 0, E, 3, rI, H / grp);
    fmoe_declare_expert_param(&descs[(*k)++], "w2_weight_scale", sd, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE,
                              FMOE_SCALE_GROUP, 1, E, 3, H, I / grp);
    if (mx)
        return 0;
    fmoe_declare_tensor_scale(&descs[(*k)++], "w13_weight_global_scale", FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_GLOBAL_SCALE,
                              r == 2, E);
    fmoe_declare_tensor_scale(&descs[(*k)++], "w2_weight_global_scale", FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_GLOBAL_SCALE, 0,
                              E);
    if (quant == FMCU_Q_NVFP4_A4) {
        fmoe_declare_tensor_scale(&descs[(*k)++], "w13_input_global_scale", FMOE_PROJ_W13, FMOE_ROLE_INPUT_GLOBAL_SCALE,
                                  r == 2, E);
        fmoe_declare_tensor_scale(&descs[(*k)++], "w2_input_global_scale", FMOE_PROJ_W2, FMOE_ROLE_INPUT_GLOBAL_SCALE,
                                  0, E);
    }
    return 0;
}

int fmcu_declare(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter,
                 uint32_t local_experts, fmoe_param_desc descs[FMCU_MAX_PARAMS], uint32_t *n, char *why, size_t cap)
{
    int quant = fmcu_scheme_quant(s, why, cap);
    if (quant < 0)
        return -1;
    uint32_t r = cfg->gated ? 2 : 1, E = local_experts, k = 0;
    int64_t rI = (int64_t)r * inter, H = hidden;
    int rc = FMCU_Q_IS_WQ(quant) ? declare_wq(cfg, s, quant, hidden, inter, E, descs, &k, why, cap)
                                 : fmoe_declare_fp8_experts(cfg, s, hidden, inter, E, descs, &k, why, cap);
    if (rc != 0)
        return -1;
    declare_biases(cfg, quant, E, rI, H, descs, &k);
    *n = k;
    return 0;
}

static size_t align_up(size_t v)
{
    return (v + 255u) & ~(size_t)255u;
}

/* Reserve `bytes` at the running offset; returns the buffer's offset. */
static size_t take(size_t *at, size_t bytes)
{
    size_t off = *at;
    *at = align_up(off + (bytes ? bytes : 1));
    return off;
}

void fmcu_workspace_layout(uint32_t max_tokens, uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t local_experts,
                           uint32_t logical_experts, int32_t quant, uint32_t block_k, fmcu_ws *ws)
{
    size_t M = max_tokens, P = (size_t)max_tokens * top_k, H = hidden, I = inter, E = local_experts;
    size_t at = 0;
    /* The 4-bit and int schemes keep act-dtype GEMM inputs, as bf16. */
    int fp8 = FMCU_Q_IS_FP8(quant);
    memset(ws, 0, sizeof *ws);
    ws->topk_w = take(&at, P * 4);
    ws->topk_ids = take(&at, P * 4);
    ws->topk_ids_logical = take(&at, P * 4);
    ws->pair_local = take(&at, P * 4);
    ws->offsets = take(&at, (E + 1) * 4);
    ws->plan_sync = take(&at, (E + 1) * 4);
    ws->plan_cursor = take(&at, E * 4);
    ws->sorted = take(&at, P * 4);
    ws->tiles = take(&at, (size_t)fmcu_max_tiles((int64_t)P, local_experts, 16) * 8);
    ws->n_tiles = take(&at, 4);
    ws->amax = take(&at, 8);
    ws->grid_sync = take(&at, 8);
    ws->gg_sched = take(&at, 8);
    ws->x_stage = take(&at, M * H * 2);
    ws->out_stage = take(&at, M * H * 2);
    /* GEMM1 input: bf16 (2 bytes) or fp8 (1 byte) plus scales. */
    ws->a1 = take(&at, M * H * (fp8 ? 1 : 2));
    size_t groups_h = quant == FMCU_Q_BLOCK ? (H + block_k - 1) / block_k : 1;
    size_t groups_i = quant == FMCU_Q_BLOCK ? (I + block_k - 1) / block_k : 1;
    ws->a1_scale = take(&at, fp8 ? M * groups_h * 4 : 0);
    ws->act = take(&at, P * I * 2);
    ws->a2 = take(&at, fp8 ? P * I : 0);
    ws->a2_scale = take(&at, fp8 ? P * groups_i * 4 : 0);
    ws->y = take(&at, P * H * 2);
    ws->logits_stage = take(&at, M * (size_t)logical_experts * 4);
    /* Prefill path: the sorted GEMM1 input holds a row per pair; its GEMM2
     * input reuses act (bf16) or a2/a2_scale (fp8), and y. h is sized for a
     * gated expert (2I columns). */
    ws->pf_a1 = take(&at, P * H * (fp8 ? 1 : 2));
    ws->pf_a1_scale = take(&at, fp8 ? P * groups_h * 4 : 0);
    ws->pf_h = take(&at, P * 2 * I * 2);
    ws->pf_pos = take(&at, P * 4);
    ws->pf_args = take(&at, E * FMCU_PF_ARGS_PER_EXPERT + FMCU_PF_ARGS_FIXED);
    ws->pf_scalars = take(&at, FMCU_PF_SCALARS);
    ws->pf_cutlass = take(&at, FMCU_PF_CUTLASS_WS);
    ws->total = at;
}

uint32_t fmcu_row_tile(int64_t m, uint32_t top_k, uint32_t local_experts)
{
    /* Rows an expert sees on average. */
    int64_t per_expert = m * (int64_t)top_k / (local_experts ? local_experts : 1);
    if (per_expert <= 16)
        return 16;
    if (per_expert <= 48)
        return 32;
    return 64;
}

int64_t fmcu_max_tiles(int64_t pairs, uint32_t local_experts, uint32_t row_tile)
{
    int64_t busy = pairs < (int64_t)local_experts ? pairs : (int64_t)local_experts;
    return (pairs + row_tile - 1) / row_tile + busy;
}
