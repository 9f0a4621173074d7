/*
 * fusedmoe/kit/param_desc.h - filling the fmoe_param_desc records a plugin's
 * query/create declares for the parameters it loads (plugin.h): one
 * per-expert parameter, a per-tensor scale, and the whole set of a bf16 or
 * fp8 W8A8 layer. Header-only, part of the plugin kit (fusedmoe-kit), so the
 * backends that declare the same parameters (cuda, rocm) fill them one way.
 */
#ifndef FMOE_KIT_PARAM_DESC_H
#define FMOE_KIT_PARAM_DESC_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/plugin.h"

/* A per-expert parameter of shape [experts, d1, d2], of which the first
 * `ndim` axes count (pass 0 for d1 or d2 past them). `name` is kept by
 * pointer: it must outlive the declaration (a string literal). The flags are
 * 0; set d->flags afterwards for FMOE_PARAM_*. */
static inline void fmoe_declare_expert_param(fmoe_param_desc *d, const char *name, fmoe_dtype dtype, int32_t proj,
                                             int32_t role, int32_t scale_kind, int32_t shard_axis, uint32_t experts,
                                             uint32_t ndim, int64_t d1, int64_t d2)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dtype;
    d->ndim = ndim;
    d->shape[0] = experts;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->scale_kind = scale_kind;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
}

/* An f32 per-tensor value (a weight or input scale, a global scale): [E, 2]
 * when `pair` (W13 of a gated layer: w1's at 0, w3's at 1), else [E]. */
static inline void fmoe_declare_tensor_scale(fmoe_param_desc *d, const char *name, int32_t proj, int32_t role, int pair,
                                             uint32_t experts)
{
    fmoe_declare_expert_param(d, name, FMOE_DTYPE_F32, proj, role, FMOE_SCALE_TENSOR, -1, experts, pair ? 2 : 1,
                              pair ? 2 : 0, 0);
}

/* The weights and weight/input scales of a bf16 layer (w_strategy NONE) or
 * an fp8 e4m3 W8A8 one (TENSOR, CHANNEL or BLOCK weight scales), with the
 * reference's names, shapes and shard axes (plugins/reference/
 * method_unquantized.c, method_fp8.c): written from descs[*k] on (at most 6),
 * *k advanced. The weights keep the scheme's w_dtype and block scales its
 * w_scale_dtype. The scheme must be one the caller has accepted as such;
 * biases are the caller's (backends declare them in different dtypes).
 * Returns -1, vLLM's message in why, when a weight block would straddle
 * gate/up or a TP shard (validate_fp8_block_shape); else 0. */
static inline int fmoe_declare_fp8_experts(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden,
                                           uint32_t inter, uint32_t experts, fmoe_param_desc *descs, uint32_t *k,
                                           char *why, size_t cap)
{
    uint32_t r = cfg->gated ? 2 : 1, E = experts, bn = s->w_block_n, bk = s->w_block_k;
    int64_t rI = (int64_t)r * inter, H = hidden, I = inter;
    if (s->w_strategy == FMOE_QSTRATEGY_BLOCK) {
        if (inter % bn)
            return snprintf(why, cap,
                            "The output_size of gate's and up's weight = %u is not divisible by weight quantization "
                            "block_n = %u.",
                            inter, bn),
                   -1;
        if (cfg->tp_size > 1 && inter % bk)
            return snprintf(why, cap,
                            "The input_size of down's weight = %u is not divisible by weight quantization block_k = "
                            "%u.",
                            inter, bk),
                   -1;
    }
    fmoe_param_desc *d = descs + *k;
    fmoe_dtype wd = s->w_dtype, f32 = FMOE_DTYPE_F32;
    int32_t p13 = FMOE_PROJ_W13, p2 = FMOE_PROJ_W2, ws = FMOE_ROLE_WEIGHT_SCALE, is = FMOE_ROLE_INPUT_SCALE;
    fmoe_declare_expert_param(d++, "w13_weight", wd, p13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, E, 3, rI, H);
    fmoe_declare_expert_param(d++, "w2_weight", wd, p2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, E, 3, H, I);
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_TENSOR:
        fmoe_declare_tensor_scale(d++, "w13_weight_scale", p13, ws, r == 2, E);
        fmoe_declare_tensor_scale(d++, "w2_weight_scale", p2, ws, 0, E);
        if (!s->a_dynamic) {
            fmoe_declare_tensor_scale(d++, "w13_input_scale", p13, is, r == 2, E);
            fmoe_declare_tensor_scale(d++, "w2_input_scale", p2, is, 0, E);
        }
        break;
    case FMOE_QSTRATEGY_CHANNEL:
        fmoe_declare_expert_param(d++, "w13_weight_scale", f32, p13, ws, FMOE_SCALE_CHANNEL, 0, E, 3, rI, 1);
        fmoe_declare_expert_param(d++, "w2_weight_scale", f32, p2, ws, FMOE_SCALE_CHANNEL, -1, E, 3, H, 1);
        break;
    case FMOE_QSTRATEGY_BLOCK:
        /* A ragged last block (of hidden; of intermediate when unsharded)
         * has a scale of its own; gate/up split on whole blocks. */
        fmoe_declare_expert_param(d++, "w13_weight_scale", s->w_scale_dtype, p13, ws, FMOE_SCALE_BLOCK, 0, E, 3,
                                  (int64_t)r * (inter / bn), (H + bk - 1) / bk);
        fmoe_declare_expert_param(d++, "w2_weight_scale", s->w_scale_dtype, p2, ws, FMOE_SCALE_BLOCK, 1, E, 3,
                                  (H + bn - 1) / bn, (I + bk - 1) / bk);
        break;
    default:
        break;
    }
    *k = (uint32_t)(d - descs);
    return 0;
}

#endif
