/*
 * core/placement.c - expert placement tables derived from a layer config
 * (fusedmoe.h; spec/interface.md §7; docs/PLACEMENT.md): the AITER expert
 * mask, local->global ids, the EPLB physical<->logical tables and the
 * all-to-all dispatch order. Everything is computed from the same two
 * rules as fmoe_layer_config_expert_map and fusedmoe/kit/eplb.h, so the tables,
 * the loader and the plugins can never disagree.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/eplb.h"

static fmoe_status check(const fmoe_layer_config *cfg, const void *buf, uint32_t len, uint32_t want, const char *table,
                         const char *what)
{
    fmoe_error_clear();
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!buf)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: the buffer is NULL", table);
    if (len != want)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: len = %u, expected %u (%s)", table, len, want, what);
    return FMOE_STATUS_OK;
}

/* This rank's expert map, allocated. */
static fmoe_status rank_map(const fmoe_layer_config *cfg, int32_t **out)
{
    uint32_t global = fmoe_layer_config_global_experts(cfg);
    int32_t *map = malloc(global * sizeof *map);
    if (!map)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_status st = fmoe_layer_config_expert_map(cfg, map, global);
    if (st != FMOE_STATUS_OK) {
        free(map);
        return st;
    }
    *out = map;
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_expert_mask(const fmoe_layer_config *cfg, int32_t *mask, uint32_t len)
{
    fmoe_status st = check(cfg, mask, len, fmoe_layer_config_global_experts(cfg) + 1, "expert mask",
                           "global experts + 1 sentinel");
    int32_t *map = NULL;
    if (st == FMOE_STATUS_OK)
        st = rank_map(cfg, &map);
    if (st != FMOE_STATUS_OK)
        return st;
    for (uint32_t g = 0; g + 1 < len; g++)
        mask[g] = map[g] >= 0;
    mask[len - 1] = 0;
    free(map);
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_local_to_global(const fmoe_layer_config *cfg, int32_t *local_to_global,
                                                       uint32_t len)
{
    fmoe_status st = check(cfg, local_to_global, len, fmoe_layer_config_local_experts(cfg), "local to global",
                           "local experts");
    int32_t *map = NULL;
    if (st == FMOE_STATUS_OK)
        st = rank_map(cfg, &map);
    if (st != FMOE_STATUS_OK)
        return st;
    uint32_t global = fmoe_layer_config_global_experts(cfg);
    for (uint32_t g = 0; g < global; g++)
        if (map[g] >= 0)
            local_to_global[map[g]] = (int32_t)g;
    free(map);
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_physical_to_logical(const fmoe_layer_config *cfg, int32_t *physical_to_logical,
                                                           uint32_t len)
{
    fmoe_status st = check(cfg, physical_to_logical, len, fmoe_layer_config_global_experts(cfg), "physical to logical",
                           "global physical experts");
    if (st != FMOE_STATUS_OK)
        return st;
    for (uint32_t p = 0; p < len; p++)
        physical_to_logical[p] = (int32_t)fmoe_eplb_logical_of(cfg->num_experts, p);
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_logical_to_physical(const fmoe_layer_config *cfg, int32_t *logical_to_physical,
                                                           uint32_t max_replicas, uint32_t *replica_count)
{
    fmoe_error_clear();
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!logical_to_physical)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "logical to physical: the buffer is NULL");
    uint32_t l = cfg->num_experts, r = cfg->num_redundant_experts;
    uint32_t most = fmoe_eplb_replica_count(l, r, 0); /* expert 0 has the most */
    if (max_replicas < most)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "logical to physical: max_replicas = %u, but logical expert 0 has %u replicas",
                              max_replicas, most);
    for (uint32_t e = 0; e < l; e++) {
        uint32_t count = fmoe_eplb_replica_count(l, r, e);
        for (uint32_t k = 0; k < max_replicas; k++)
            logical_to_physical[(size_t)e * max_replicas + k] = k < count ? (int32_t)fmoe_eplb_physical_of(l, e, k)
                                                                          : -1;
        if (replica_count)
            replica_count[e] = count;
    }
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_config_dispatch_order(const fmoe_layer_config *cfg, int32_t *global_to_dispatch,
                                                      int32_t *dispatch_to_global, uint32_t len)
{
    uint32_t global = fmoe_layer_config_global_experts(cfg);
    fmoe_status st = check(cfg,
                           global_to_dispatch ? (const void *)global_to_dispatch : (const void *)dispatch_to_global,
                           len, global, "dispatch order", "global physical experts");
    if (st != FMOE_STATUS_OK)
        return st;
    uint32_t ep = cfg->ep_size, base = global / ep, rem = global % ep;
    int rr = ep > 1 && cfg->placement == FMOE_PLACEMENT_ROUND_ROBIN;
    for (uint32_t g = 0; g < global; g++) {
        uint32_t owner = g % ep, offset = owner * base + (owner < rem ? owner : rem);
        int32_t d = rr ? (int32_t)(offset + g / ep) : (int32_t)g;
        if (global_to_dispatch)
            global_to_dispatch[g] = d;
        if (dispatch_to_global)
            dispatch_to_global[d] = (int32_t)g;
    }
    return FMOE_STATUS_OK;
}
