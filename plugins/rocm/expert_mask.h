/*
 * plugins/rocm/expert_mask.h - AITER's mask mode for expert parallelism
 * (spec/formats.md §6.1; vLLM expert_map_manager.py::determine_expert_map
 * with return_expert_mask, rocm_aiter_fused_moe.py::init_aiter_topK_meta_data).
 *
 * The kernels take global top-k ids and an int32 mask of E + S + 1 slots:
 *   [0, E)       1 where this rank holds the routed expert, else 0;
 *   [E, E + S)   1: the S shared experts fused into the MoE, on every rank;
 *   E + S        0: the sentinel, a "fake expert" id that every rank drops.
 * A masked id is dropped; a kept id g runs local expert cumsum(mask)[g] - 1,
 * so the local weights must be ordered as the kept ids ascend: routed local
 * experts first, then the shared ones (vLLM extends expert_map with
 * local + i for shared expert i).
 *
 * Shared experts as extra top-k columns: each token gets S (+1 under EP)
 * more ids. Without EP they are E .. E+S-1. Under EP only the rank that
 * owns the token (token % ep_size == ep_rank) runs its shared experts: its
 * columns are E .. E+S (the last one the sentinel), every other rank's are
 * all E+S, so each (token, shared expert) pair runs on exactly one rank.
 */
#ifndef FMOE_PLUGINS_ROCM_EXPERT_MASK_H
#define FMOE_PLUGINS_ROCM_EXPERT_MASK_H

#include <stddef.h>
#include <stdint.h>

/* E + S + 1. */
uint32_t fmro_expert_mask_len(uint32_t num_experts, uint32_t num_shared);

/* mask[E + S + 1] from expert_map[E] (local index or -1; NULL: this rank
 * holds every expert). Mask mode needs the local indices to be 0, 1, 2, ...
 * in ascending global order (what vLLM's linear and round-robin maps are):
 * any other map is refused, because the kernels derive local ids by
 * counting the mask. Returns the number of local experts (routed + shared),
 * or -1 with the reason in why. */
int64_t fmro_expert_mask_build(const int32_t *expert_map, uint32_t num_experts, uint32_t num_shared, int32_t *mask,
                               char *why, size_t cap);

/* local[len]: cumsum(mask) - 1 where mask is 1, -1 where 0. Returns the
 * number of ones, or -1 (why) when a value is not 0 or 1 or the last slot
 * (the sentinel) is not 0. */
int64_t fmro_expert_mask_local_ids(const int32_t *mask, uint32_t len, int32_t *local, char *why, size_t cap);

/* Columns the shared experts add to each token: S, plus the sentinel
 * column under EP (ep_size > 1). */
uint32_t fmro_shared_columns(uint32_t num_shared, uint32_t ep_size);
/* ids[fmro_shared_columns()] of token `token` on rank ep_rank. */
void fmro_shared_slot_ids(uint32_t num_experts, uint32_t num_shared, uint32_t ep_size, uint32_t ep_rank, uint64_t token,
                          int32_t *ids);

#endif /* FMOE_PLUGINS_ROCM_EXPERT_MASK_H */
