/*
 * core/layer_config.c - validation, derived sizes and the EP expert
 * map of fmoe_layer_config (include/fusedmoe/fusedmoe.h); the defaults are in
 * base/layer_config_init.c.
 *
 * Validation mirrors the construction errors of spec/interface.md §12 that a
 * config can express, plus the checks a C struct needs that Python did not
 * (bool-like fields that are 0 or 1, enum values in range, sizes that fit the
 * int32 expert ids). It stops at the first problem; every message starts
 * with "layer config: " and names the field, its value and what was expected.
 * The bool-like fields are checked first (no later check reads a garbage
 * "true"), then the rest roughly in the order of the struct's fields.
 *
 * Error text: the functions returning fmoe_status clear it on entry; the
 * infallible ones (init, derived sizes) never touch it (fusedmoe.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"

/* Version 1 of the struct ends with max_num_tokens; a caller compiled
 * against it passes at least this many bytes. Fields appended later are
 * read only when struct_size covers them. */
#define LAYER_CONFIG_V1_SIZE (offsetof(fmoe_layer_config, max_num_tokens) + sizeof(uint32_t))

#define PREFIX "layer config: "

static fmoe_status invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static fmoe_status invalid(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fmoe_status st = fmoe_error_setv(FMOE_STATUS_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Validation, one group of fields per function.                             */
/* ------------------------------------------------------------------------ */

static fmoe_status check_flag(const char *name, uint32_t value)
{
    if (value > 1)
        return invalid(PREFIX "%s = %u, expected 0 or 1", name, value);
    return FMOE_STATUS_OK;
}

/* Every bool-like field, so that a garbage value is never read as "true". */
static fmoe_status check_flags(const fmoe_layer_config *cfg)
{
    const struct {
        const char *name;
        uint32_t value;
    } flags[] = {
        {"gated", cfg->gated},
        {"has_bias", cfg->has_bias},
        {"renormalize", cfg->renormalize},
        {"grouped_topk", cfg->grouped_topk},
        {"has_correction_bias", cfg->has_correction_bias},
        {"apply_router_weight_on_input", cfg->apply_router_weight_on_input},
        {"enable_eplb", cfg->enable_eplb},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        fmoe_status st = check_flag(flags[i].name, flags[i].value);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    return FMOE_STATUS_OK;
}

static fmoe_status check_positive(const char *name, uint32_t value)
{
    if (value == 0)
        return invalid(PREFIX "%s = 0, expected at least 1", name);
    return FMOE_STATUS_OK;
}

static fmoe_status check_sizes(const fmoe_layer_config *cfg)
{
    fmoe_status st;
    if ((st = check_positive("num_experts", cfg->num_experts)) != FMOE_STATUS_OK)
        return st;
    if ((st = check_positive("top_k", cfg->top_k)) != FMOE_STATUS_OK)
        return st;
    if (cfg->top_k > cfg->num_experts)
        return invalid(PREFIX "top_k = %u exceeds num_experts = %u", cfg->top_k, cfg->num_experts);
    if ((st = check_positive("hidden_size", cfg->hidden_size)) != FMOE_STATUS_OK)
        return st;
    if ((st = check_positive("intermediate_size", cfg->intermediate_size)) != FMOE_STATUS_OK)
        return st;
    /* Expert ids are int32 everywhere (topk_ids, expert maps). */
    uint64_t global = (uint64_t)cfg->num_experts + cfg->num_redundant_experts;
    if (global > INT32_MAX)
        return invalid(PREFIX "num_experts + num_redundant_experts = %llu exceeds %d (expert ids are int32)",
                       (unsigned long long)global, INT32_MAX);
    return FMOE_STATUS_OK;
}

static fmoe_status check_activation(const fmoe_layer_config *cfg)
{
    int32_t act = cfg->activation;
    if (act < FMOE_ACT_SILU || act > FMOE_ACT_SWIGLUSTEP)
        return invalid(PREFIX "activation = %d is unknown, expected silu (1), gelu (2), gelu_tanh (3), "
                              "relu2 (4), swigluoai (5) or swiglustep (6)",
                       act);
    if (!cfg->gated && act == FMOE_ACT_SWIGLUOAI)
        return invalid(PREFIX "activation = 5 (swigluoai) is gated only, but gated = 0");
    if (!cfg->gated && act == FMOE_ACT_SWIGLUSTEP)
        return invalid(PREFIX "activation = 6 (swiglustep) is gated only, but gated = 0");
    if (!isfinite(cfg->swiglu_limit) || cfg->swiglu_limit < 0.0f)
        return invalid(PREFIX "swiglu_limit = %g, expected a finite value >= 0 (0 = no clamp)",
                       (double)cfg->swiglu_limit);
    if (!isfinite(cfg->swiglu_alpha))
        return invalid(PREFIX "swiglu_alpha = %g, expected a finite value", (double)cfg->swiglu_alpha);
    return FMOE_STATUS_OK;
}

static fmoe_status check_act_dtype(const fmoe_layer_config *cfg)
{
    fmoe_dtype dt = cfg->act_dtype;
    if (dt != FMOE_DTYPE_F32 && dt != FMOE_DTYPE_BF16 && dt != FMOE_DTYPE_F16)
        return invalid(PREFIX "act_dtype = %d, expected F32 (1), BF16 (2) or F16 (3)", dt);
    return FMOE_STATUS_OK;
}

static fmoe_status check_grouping(const fmoe_layer_config *cfg)
{
    uint32_t G = cfg->num_expert_group, TG = cfg->topk_group;
    if (G == 0 || TG == 0)
        return invalid(PREFIX "grouped_topk = 1 needs num_expert_group and topk_group >= 1, got "
                              "num_expert_group = %u, topk_group = %u",
                       G, TG);
    if (TG > G)
        return invalid(PREFIX "topk_group = %u exceeds num_expert_group = %u", TG, G);
    if (cfg->num_experts % G != 0)
        return invalid(PREFIX "num_experts = %u is not a multiple of num_expert_group = %u", cfg->num_experts, G);
    uint64_t selectable = (uint64_t)TG * (cfg->num_experts / G);
    if (cfg->top_k > selectable)
        return invalid(PREFIX "top_k = %u exceeds the %llu experts in topk_group = %u groups of %u", cfg->top_k,
                       (unsigned long long)selectable, TG, cfg->num_experts / G);
    return FMOE_STATUS_OK;
}

static fmoe_status check_routing(const fmoe_layer_config *cfg)
{
    int32_t sc = cfg->scoring;
    if (sc != FMOE_SCORING_SOFTMAX && sc != FMOE_SCORING_SIGMOID && sc != FMOE_SCORING_SQRTSOFTPLUS)
        return invalid(PREFIX "scoring = %d is unknown, expected softmax (1), sigmoid (2) or sqrtsoftplus (3)", sc);
    if (cfg->grouped_topk) {
        fmoe_status st = check_grouping(cfg);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    float rsf = cfg->routed_scaling_factor;
    if (!isfinite(rsf) || rsf <= 0.0f)
        return invalid(PREFIX "routed_scaling_factor = %g, expected a finite value > 0", (double)rsf);
    if (cfg->apply_router_weight_on_input && cfg->top_k != 1)
        return invalid(PREFIX "apply_router_weight_on_input = 1 needs top_k = 1, got top_k = %u", cfg->top_k);
    return FMOE_STATUS_OK;
}

static fmoe_status check_rank(const char *size_name, uint32_t size, const char *rank_name, uint32_t rank)
{
    if (size == 0)
        return invalid(PREFIX "%s = 0, expected at least 1", size_name);
    if (rank >= size)
        return invalid(PREFIX "%s = %u is out of range for %s = %u (expected 0..%u)", rank_name, rank, size_name, size,
                       size - 1);
    return FMOE_STATUS_OK;
}

static fmoe_status check_parallel(const fmoe_layer_config *cfg)
{
    fmoe_status st;
    if ((st = check_rank("tp_size", cfg->tp_size, "tp_rank", cfg->tp_rank)) != FMOE_STATUS_OK)
        return st;
    if ((st = check_rank("ep_size", cfg->ep_size, "ep_rank", cfg->ep_rank)) != FMOE_STATUS_OK)
        return st;
    if (cfg->tp_size > 1 && cfg->ep_size > 1)
        return invalid(PREFIX "tp_size = %u and ep_size = %u: a layer uses tensor or expert parallelism, "
                              "not both",
                       cfg->tp_size, cfg->ep_size);
    if (cfg->intermediate_size % cfg->tp_size != 0)
        return invalid(PREFIX "intermediate_size = %u is not divisible by tp_size = %u", cfg->intermediate_size,
                       cfg->tp_size);
    if (cfg->placement != FMOE_PLACEMENT_LINEAR && cfg->placement != FMOE_PLACEMENT_ROUND_ROBIN)
        return invalid(PREFIX "placement = %d is unknown, expected linear (1) or round_robin (2)", cfg->placement);
    return FMOE_STATUS_OK;
}

static fmoe_status check_eplb(const fmoe_layer_config *cfg)
{
    uint32_t red = cfg->num_redundant_experts;
    if (red > 0 && !cfg->enable_eplb)
        return invalid(PREFIX "num_redundant_experts = %u needs enable_eplb = 1", red);
    if (red > FMOE_MAX_REDUNDANT_EXPERTS)
        return invalid(PREFIX "num_redundant_experts = %u exceeds the maximum of %u", red,
                       (unsigned)FMOE_MAX_REDUNDANT_EXPERTS);
    uint32_t global = cfg->num_experts + red; /* fits: check_sizes bounded it */
    if (cfg->enable_eplb && global % cfg->ep_size != 0)
        return invalid(PREFIX "enable_eplb = 1 needs the global experts (num_experts + num_redundant_experts "
                              "= %u) to be a multiple of ep_size = %u",
                       global, cfg->ep_size);
    if (cfg->ep_size > global)
        return invalid(PREFIX "ep_size = %u exceeds the %u global experts; every EP rank must own at least one",
                       cfg->ep_size, global);
    return FMOE_STATUS_OK;
}

static fmoe_status config_check(const fmoe_layer_config *cfg)
{
    if (!cfg)
        return invalid(PREFIX "cfg is NULL");
    if (cfg->struct_size < LAYER_CONFIG_V1_SIZE)
        return invalid(PREFIX "struct_size = %zu, expected at least %zu (set it with fmoe_layer_config_init)",
                       cfg->struct_size, (size_t)LAYER_CONFIG_V1_SIZE);

    fmoe_status (*const checks[])(const fmoe_layer_config *) = {
        check_flags, check_sizes, check_activation, check_act_dtype, check_routing, check_parallel, check_eplb,
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        fmoe_status st = checks[i](cfg);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    if (cfg->max_num_tokens == 0)
        return invalid(PREFIX "max_num_tokens = 0, expected at least 1");
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_validate(const fmoe_layer_config *cfg)
{
    fmoe_error_clear();
    return config_check(cfg);
}

/* ------------------------------------------------------------------------ */
/* Derived sizes and the expert map.                                         */
/* ------------------------------------------------------------------------ */

static uint32_t global_experts(const fmoe_layer_config *cfg)
{
    return cfg->num_experts + cfg->num_redundant_experts;
}

/* Experts owned by `rank` of `ep_size`: the first (global % ep_size) ranks
 * get one extra. The same count for linear and round-robin placement. */
static uint32_t rank_expert_count(uint32_t global, uint32_t ep_size, uint32_t rank)
{
    uint32_t base = global / ep_size, rem = global % ep_size;
    return base + (rank < rem ? 1u : 0u);
}

FMOE_API uint32_t fmoe_layer_config_global_experts(const fmoe_layer_config *cfg)
{
    return cfg ? global_experts(cfg) : 0;
}

FMOE_API uint32_t fmoe_layer_config_local_experts(const fmoe_layer_config *cfg)
{
    if (!cfg)
        return 0;
    if (cfg->ep_size <= 1)
        return global_experts(cfg);
    return rank_expert_count(global_experts(cfg), cfg->ep_size, cfg->ep_rank);
}

FMOE_API uint32_t fmoe_layer_config_intermediate_per_rank(const fmoe_layer_config *cfg)
{
    if (!cfg || cfg->tp_size == 0)
        return 0;
    return cfg->intermediate_size / cfg->tp_size;
}

/* Contiguous ranges: rank r owns [r*base + min(r, rem), +count). */
static void map_fill_linear(uint32_t global, uint32_t ep_size, uint32_t rank, int32_t *map)
{
    uint32_t base = global / ep_size, rem = global % ep_size;
    uint32_t start = rank * base + (rank < rem ? rank : rem);
    uint32_t count = rank_expert_count(global, ep_size, rank);
    for (uint32_t i = 0; i < count; i++)
        map[start + i] = (int32_t)i;
}

/* Expert g lives on rank g % ep_size, at local index g / ep_size. */
static void map_fill_round_robin(uint32_t global, uint32_t ep_size, uint32_t rank, int32_t *map)
{
    for (uint32_t g = rank; g < global; g += ep_size)
        map[g] = (int32_t)(g / ep_size);
}

FMOE_API fmoe_status fmoe_layer_config_expert_map(const fmoe_layer_config *cfg, int32_t *expert_map, uint32_t len)
{
    fmoe_error_clear();
    fmoe_status st = config_check(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    uint32_t global = global_experts(cfg);
    if (!expert_map)
        return invalid("expert map: expert_map is NULL");
    if (len != global)
        return invalid("expert map: len = %u, expected the %u global experts", len, global);

    if (cfg->ep_size == 1) {
        for (uint32_t g = 0; g < global; g++)
            expert_map[g] = (int32_t)g;
        return FMOE_STATUS_OK;
    }
    for (uint32_t g = 0; g < global; g++)
        expert_map[g] = -1;
    if (cfg->placement == FMOE_PLACEMENT_ROUND_ROBIN)
        map_fill_round_robin(global, cfg->ep_size, cfg->ep_rank, expert_map);
    else
        map_fill_linear(global, cfg->ep_size, cfg->ep_rank, expert_map);
    return FMOE_STATUS_OK;
}
