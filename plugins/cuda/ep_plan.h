/*
 * plugins/cuda/ep_plan.h - the rows a rank's method runs on in an EP
 * group's HIGH_THROUGHPUT mode (docs/EP.md, "Modes"), and where they go.
 *
 * Row (s, t) of the receive buffer (ep_layout.h: source rank s, its token t)
 * is live on rank `me` when t < count[s] and one of the token's k ids is a
 * physical expert placed on `me` (owner[id] == me). High-throughput packs the
 * live rows, in (s, t) order, into rows 0..R-1 of the method's input:
 * pos[row] = the row's packed index, or -1 when it is dead. That is the
 * low-latency order with the dead rows left out, so both modes hand the
 * method the same rows in the same order, and the packing is deterministic
 * (a scan, no atomics).
 *
 * The rule is written once, for the device's plan kernel (ep_kernels.cu)
 * and for the host reference fmcu_ep_plan_rows (ep_plan.c), which the unit
 * test checks without a GPU (tests/cuda/test_cuda_ep_plan.c).
 */
#ifndef FMOE_PLUGIN_CUDA_EP_PLAN_H
#define FMOE_PLUGIN_CUDA_EP_PLAN_H

#include <stdint.h>

#ifdef __CUDACC__
#define FMCU_EP_HD static __host__ __device__ __forceinline__
#else
#define FMCU_EP_HD static inline
#endif

/* 1 when token t of a source that passed `count` tokens, with ids[k], has an
 * expert on rank `me`. Ids outside 0..num_experts-1 name no expert. */
FMCU_EP_HD int fmcu_ep_row_live(const int32_t *ids, uint32_t k, const int32_t *owner, uint32_t num_experts, uint32_t me,
                                uint32_t t, int32_t count)
{
    if ((int64_t)t >= (int64_t)count)
        return 0;
    for (uint32_t j = 0; j < k; j++) {
        const int32_t id = ids[j];
        if (id >= 0 && (uint32_t)id < num_experts && owner[id] == (int32_t)me)
            return 1;
    }
    return 0;
}

#ifdef __cplusplus
extern "C" {
#endif

/* The host reference of the device's plan: for the size x max_tokens rows
 * of a receive buffer (count[size], ids[size x max_tokens x k], owner[num_experts]),
 * fill pos[size x max_tokens] and return R, the live rows. */
int64_t fmcu_ep_plan_rows(uint32_t size, uint32_t max_tokens, uint32_t k, const int32_t *count, const int32_t *ids,
                          const int32_t *owner, uint32_t num_experts, uint32_t me, int32_t *pos);

#ifdef __cplusplus
}
#endif
#endif
