/*
 * plugins/rocm/sorting.c - moe_sorting on the host (sorting.h): a counting
 * sort over experts, stable in (token, slot) order. The host computes it
 * per forward for the kernels; a device version must give the same arrays
 * (tests/rocm/test_sorting.c holds the expected values).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/rocm/sorting.h"

uint32_t fmro_sorting_capacity(uint32_t m, uint32_t topk, uint32_t num_experts, uint32_t block)
{
    uint64_t pairs = (uint64_t)m * topk;
    uint64_t aiter = pairs + (uint64_t)num_experts * block;
    aiter = aiter >= topk ? aiter - topk : 0;
    uint64_t runs = pairs < num_experts ? pairs : num_experts;
    uint64_t worst = pairs + runs * (block ? block - 1 : 0);
    uint64_t c = aiter > worst ? aiter : worst;
    return c > UINT32_MAX ? 0 : (uint32_t)c;
}

uint32_t fmro_sorting_blocks(uint32_t m, uint32_t topk, uint32_t num_experts, uint32_t block)
{
    uint64_t c = fmro_sorting_capacity(m, topk, num_experts, block);
    return block ? (uint32_t)((c + block - 1) / block) : 0;
}

int fmro_moe_sorting(const int32_t *topk_ids, const float *topk_weights, uint32_t m, uint32_t topk,
                     uint32_t num_experts, const int32_t *expert_mask, uint32_t block, fmro_sorting_out *out, char *why,
                     size_t cap)
{
    if (m > FMRO_SORT_MAX_TOKENS) {
        snprintf(why, cap, "moe_sorting: %u tokens; token ids have 24 bits (at most %u tokens)", m,
                 FMRO_SORT_MAX_TOKENS);
        return -1;
    }
    if (topk == 0 || topk > FMRO_SORT_MAX_TOPK) {
        snprintf(why, cap, "moe_sorting: top-k %u; the slot has 8 bits (1 to %u)", topk, FMRO_SORT_MAX_TOPK);
        return -1;
    }
    if (block == 0 || num_experts == 0) {
        snprintf(why, cap, "moe_sorting: block %u and %u experts (both must be positive)", block, num_experts);
        return -1;
    }
    if (m > 0 && (!topk_ids || !topk_weights)) {
        snprintf(why, cap, "moe_sorting: no topk_ids or topk_weights");
        return -1;
    }
    /* Local id of each expert: its rank among the unmasked ones. */
    int32_t *local = malloc((size_t)num_experts * sizeof *local);
    uint32_t *count = calloc(num_experts, sizeof *count);
    if (!local || !count) {
        free(local);
        free(count);
        snprintf(why, cap, "moe_sorting: out of memory for %u experts", num_experts);
        return -1;
    }
    int32_t next = 0;
    for (uint32_t e = 0; e < num_experts; e++) {
        int32_t v = expert_mask ? expert_mask[e] : 1;
        if (v != 0 && v != 1) {
            snprintf(why, cap, "moe_sorting: expert_mask[%u] = %d (expected 0 or 1)", e, (int)v);
            free(local);
            free(count);
            return -1;
        }
        local[e] = v ? next++ : -1;
    }
    for (uint64_t i = 0; i < (uint64_t)m * topk; i++) {
        int32_t e = topk_ids[i];
        if (e >= 0 && (uint32_t)e < num_experts && local[e] >= 0)
            count[e]++;
    }
    uint64_t total = 0, nblocks = 0;
    for (uint32_t e = 0; e < num_experts; e++) {
        uint64_t b = (count[e] + (uint64_t)block - 1) / block;
        nblocks += b;
        total += b * block;
    }
    if (total > out->capacity || nblocks > out->blocks) {
        snprintf(why, cap, "moe_sorting: the routing needs %llu entries in %llu blocks; the outputs hold %u and %u",
                 (unsigned long long)total, (unsigned long long)nblocks, out->capacity, out->blocks);
        free(local);
        free(count);
        return -1;
    }
    const uint32_t pad = FMRO_SORT_ID(m, topk);
    for (uint32_t i = 0; i < out->capacity; i++) {
        out->sorted_ids[i] = pad;
        out->sorted_weights[i] = 0.0f;
    }
    for (uint32_t b = 0; b < out->blocks; b++)
        out->sorted_expert_ids[b] = -1;
    /* count[] becomes each expert's write position: its run's start. */
    uint32_t start = 0, blk = 0;
    for (uint32_t e = 0; e < num_experts; e++) {
        uint32_t b = (uint32_t)((count[e] + (uint64_t)block - 1) / block);
        for (uint32_t j = 0; j < b; j++)
            out->sorted_expert_ids[blk++] = local[e];
        count[e] = start;
        start += b * block;
    }
    /* Row-major over [m, topk]: ascending token, then slot, in each run. */
    for (uint32_t t = 0; t < m; t++)
        for (uint32_t k = 0; k < topk; k++) {
            size_t i = (size_t)t * topk + k;
            int32_t e = topk_ids[i];
            if (e < 0 || (uint32_t)e >= num_experts || local[e] < 0)
                continue;
            uint32_t at = count[e]++;
            out->sorted_ids[at] = FMRO_SORT_ID(t, k);
            out->sorted_weights[at] = topk_weights[i];
        }
    out->num_valid[0] = (uint32_t)total;
    out->num_valid[1] = m;
    free(local);
    free(count);
    return 0;
}
