/*
 * plugins/rocm/sorting.h - AITER's moe_sorting on the host
 * (aiter/fused_moe.py::moe_sorting; spec/formats.md §6.2, E15).
 *
 * Groups the routed (token, slot) pairs by expert, in ascending expert id
 * and, within an expert, ascending token then slot (the order of AITER's
 * reference, op_tests/test_moe_sorting.py); each expert's run is padded
 * to a multiple of `block`, so a block of rows belongs to one expert.
 *
 * Entries are the token id (24 bits) with the top-k slot in the high byte,
 * not vLLM's flat t * topk + k (spec §9 item 8): FMRO_SORT_ID(t, k).
 * Padding, inside a run and past the valid part, is FMRO_SORT_ID(M, topk)
 * with weight 0. Experts that receive no pair get no block. With an
 * expert mask (mask mode, expert_mask.h) ids whose mask is 0 are dropped
 * and the block expert ids are local (cumsum(mask) - 1). Ids outside
 * [0, num_experts) are dropped (plugin ABI: they contribute 0).
 */
#ifndef FMOE_PLUGINS_ROCM_SORTING_H
#define FMOE_PLUGINS_ROCM_SORTING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the kernel sources size their arrays with it */
#endif

#define FMRO_SORT_ID(token, slot) ((((uint32_t)(token)) & 0xFFFFFFu) | ((((uint32_t)(slot)) & 0xFFu) << 24))
#define FMRO_SORT_TOKEN(id)       ((id)&0xFFFFFFu)
#define FMRO_SORT_SLOT(id)        ((id) >> 24)
#define FMRO_SORT_MAX_TOKENS      0xFFFFFFu /* M itself is the padding token */
#define FMRO_SORT_MAX_TOPK        255u      /* topk itself is the padding slot */

/* Entries of sorted_ids / sorted_weights. AITER sizes them
 * topk*M + E*block - topk; that bound assumes no token routes to one
 * expert twice, so this returns the larger of it and the true worst case
 * topk*M + min(E, topk*M)*(block - 1). 0 on overflow of 32 bits. */
uint32_t fmro_sorting_capacity(uint32_t m, uint32_t topk, uint32_t num_experts, uint32_t block);
/* Entries of sorted_expert_ids: ceil(capacity / block). */
uint32_t fmro_sorting_blocks(uint32_t m, uint32_t topk, uint32_t num_experts, uint32_t block);

typedef struct fmro_sorting_out {
    uint32_t *sorted_ids;       /* [capacity] FMRO_SORT_ID */
    float *sorted_weights;      /* [capacity] routing weight of each entry, 0 for padding */
    int32_t *sorted_expert_ids; /* [blocks] expert (local in mask mode) of each block, -1 past the end */
    uint32_t capacity, blocks;  /* entries the arrays hold */
    uint32_t num_valid[2];      /* [0]: padded entries in use (a multiple of block); [1]: M */
} fmro_sorting_out;

/* topk_ids / topk_weights: [m, topk] row-major. expert_mask: NULL, or
 * [num_experts] of 0/1 (then num_experts is the mask length E + S + 1).
 * Returns 0, or -1 with the reason (argument that is out of range, or an
 * output too small for the routing) in why; outputs are then undefined. */
int fmro_moe_sorting(const int32_t *topk_ids, const float *topk_weights, uint32_t m, uint32_t topk,
                     uint32_t num_experts, const int32_t *expert_mask, uint32_t block, fmro_sorting_out *out, char *why,
                     size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FMOE_PLUGINS_ROCM_SORTING_H */
