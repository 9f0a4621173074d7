/*
 * plugins/rocm/expert_mask.c - mask mode (expert_mask.h).
 */
#include <stdio.h>

#include "plugins/rocm/expert_mask.h"

uint32_t fmro_expert_mask_len(uint32_t num_experts, uint32_t num_shared)
{
    return num_experts + num_shared + 1;
}

int64_t fmro_expert_mask_build(const int32_t *expert_map, uint32_t num_experts, uint32_t num_shared, int32_t *mask,
                               char *why, size_t cap)
{
    if (num_experts == 0 || (uint64_t)num_experts + num_shared + 1 > INT32_MAX) {
        snprintf(why, cap,
                 "expert mask: %u routed and %u shared experts (expected 1 or more routed, fewer than 2^31 in all)",
                 num_experts, num_shared);
        return -1;
    }
    int32_t next = 0;
    for (uint32_t g = 0; g < num_experts; g++) {
        int32_t v = expert_map ? expert_map[g] : (int32_t)g;
        if (v == -1) {
            mask[g] = 0;
            continue;
        }
        if (v != next) {
            snprintf(
                why, cap,
                "expert mask: expert_map[%u] = %d, expected %d or -1 (mask mode numbers local experts in ascending "
                "global order)",
                g, (int)v, (int)next);
            return -1;
        }
        mask[g] = 1;
        next++;
    }
    for (uint32_t s = 0; s < num_shared; s++)
        mask[num_experts + s] = 1;
    mask[num_experts + num_shared] = 0; /* the sentinel */
    return (int64_t)next + num_shared;
}

int64_t fmro_expert_mask_local_ids(const int32_t *mask, uint32_t len, int32_t *local, char *why, size_t cap)
{
    if (len == 0 || mask[len - 1] != 0) {
        snprintf(why, cap, "expert mask: the last of %u slots must be the 0 sentinel", len);
        return -1;
    }
    int32_t next = 0;
    for (uint32_t g = 0; g < len; g++) {
        if (mask[g] != 0 && mask[g] != 1) {
            snprintf(why, cap, "expert mask: slot %u is %d (expected 0 or 1)", g, (int)mask[g]);
            return -1;
        }
        local[g] = mask[g] ? next++ : -1;
    }
    return next;
}

uint32_t fmro_shared_columns(uint32_t num_shared, uint32_t ep_size)
{
    return num_shared + (ep_size > 1 ? 1u : 0u);
}

void fmro_shared_slot_ids(uint32_t num_experts, uint32_t num_shared, uint32_t ep_size, uint32_t ep_rank, uint64_t token,
                          int32_t *ids)
{
    uint32_t cols = fmro_shared_columns(num_shared, ep_size);
    int32_t sentinel = (int32_t)(num_experts + num_shared);
    int owner = ep_size <= 1 || token % ep_size == ep_rank;
    for (uint32_t c = 0; c < cols; c++)
        ids[c] = owner ? (int32_t)(num_experts + c) : sentinel;
}
