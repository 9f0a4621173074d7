/*
 * plugins/cuda/ep_plan.c - the host reference of the high-throughput row
 * plan (ep_plan.h): what the device's plan kernel computes, in plain C for
 * the unit test.
 */
#include "plugins/cuda/ep_plan.h"

int64_t fmcu_ep_plan_rows(uint32_t size, uint32_t max_tokens, uint32_t k, const int32_t *count, const int32_t *ids,
                          const int32_t *owner, uint32_t num_experts, uint32_t me, int32_t *pos)
{
    int64_t live = 0;
    for (uint32_t s = 0; s < size; s++)
        for (uint32_t t = 0; t < max_tokens; t++) {
            const uint64_t row = (uint64_t)s * max_tokens + t;
            pos[row] = fmcu_ep_row_live(ids + row * k, k, owner, num_experts, me, t, count[s]) ? (int32_t)live++ : -1;
        }
    return live;
}
