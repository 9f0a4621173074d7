/*
 * core/model/naming.c - the checkpoint tensor names of every MoE layer,
 * built once from the family's naming table (model.h) when the config is
 * read, so that queries hand out stable strings and never allocate.
 *
 * Layout: "<layer_prefix>.<N>.<block>." then
 *   <router>.weight, <router>.bias, <router>.e_score_correction_bias (or the
 *   family's name for it; none on a hash-routed layer)
 *   experts                                  (prefix of either form)
 *   experts.gate_up_proj[_bias], experts.down_proj[_bias]       (fused)
 *   experts.gate_up_proj_blocks/_scales, experts.down_proj_*    (MXFP4)
 *   <shared>, <shared_gate>.weight
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "core/model/model.h"

const model_expert_names model_experts_proj = {"gate_proj", "up_proj", "down_proj"};
const model_expert_names model_experts_w1_w3_w2 = {"w1", "w3", "w2"};

static fmoe_status format_name(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fmoe_status format_name(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "tensor name: formatting failed");
    *out = malloc((size_t)n + 1);
    if (!*out)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    va_start(ap, fmt);
    vsnprintf(*out, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return FMOE_STATUS_OK;
}

/* One name "<block path>.<suffix>" into row[slot] when `want`. */
static fmoe_status add(char **row, int slot, int want, const char *block, const char *suffix)
{
    if (!want)
        return FMOE_STATUS_OK;
    return format_name(&row[slot], "%s.%s", block, suffix);
}

static fmoe_status layer_names(const fmoe_model *m, uint32_t layer, char **row)
{
    const model_naming *nm = m->family->naming;
    char block[128];
    snprintf(block, sizeof block, "%s.%u.%s", nm->layer_prefix, layer, nm->block);
    char router[160];
    snprintf(router, sizeof router, "%s.%s", block, nm->router);
    int shared = m->shared_count > 0 && nm->shared;
    int mx = (int)nm->mxfp4;
    const struct {
        int slot, want;
        const char *base, *suffix;
    } items[] = {
        {MN_ROUTER_WEIGHT, 1, router, "weight"},
        {MN_ROUTER_BIAS, (int)nm->router_bias, router, "bias"},
        /* A family that names the bias itself (DeepSeek-V4) gets the name
         * even without noaux_tc, so that the loader refuses a checkpoint
         * that has one the config does not route with. */
        {MN_CORRECTION_BIAS, (m->cfg.has_correction_bias || nm->correction_bias) && !m->hash_routed[layer], router,
         nm->correction_bias ? nm->correction_bias : "e_score_correction_bias"},
        {MN_EXPERTS, 1, block, "experts"},
        {MN_FUSED_GATE_UP, (int)nm->fused, block, "experts.gate_up_proj"},
        {MN_FUSED_GATE_UP_BIAS, (int)nm->fused_bias, block, "experts.gate_up_proj_bias"},
        {MN_FUSED_DOWN, (int)nm->fused, block, "experts.down_proj"},
        {MN_FUSED_DOWN_BIAS, (int)nm->fused_bias, block, "experts.down_proj_bias"},
        {MN_MXFP4_GATE_UP_BLOCKS, mx, block, "experts.gate_up_proj_blocks"},
        {MN_MXFP4_GATE_UP_SCALES, mx, block, "experts.gate_up_proj_scales"},
        {MN_MXFP4_DOWN_BLOCKS, mx, block, "experts.down_proj_blocks"},
        {MN_MXFP4_DOWN_SCALES, mx, block, "experts.down_proj_scales"},
        {MN_SHARED, shared, block, nm->shared},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        fmoe_status st = add(row, items[i].slot, items[i].want, items[i].base, items[i].suffix);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    if (shared && m->shared_gated && nm->shared_gate)
        return format_name(&row[MN_SHARED_GATE], "%s.%s.weight", block, nm->shared_gate);
    return FMOE_STATUS_OK;
}

fmoe_status model_build_names(fmoe_model *m)
{
    m->names = calloc((size_t)m->num_layers * MN_COUNT, sizeof *m->names);
    if (!m->names)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t layer = 0; layer < m->num_layers; layer++) {
        if (!m->is_moe[layer])
            continue;
        fmoe_status st = layer_names(m, layer, m->names + (size_t)layer * MN_COUNT);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    return FMOE_STATUS_OK;
}
