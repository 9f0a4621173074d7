/*
 * core/formats/gidx.c - the act-order (desc_act) sort of GPTQ / Marlin
 * (spec/formats.md §4.3, vLLM marlin_sort_g_idx). Contract in
 * fusedmoe/formats.h.
 *
 * vLLM uses torch.argsort, which is not stable; any order within a group is
 * valid because the same permutation is applied to the weight rows and the
 * activation columns. We use a stable counting sort so that the result is
 * unique (and testable against numpy's stable argsort): O(k + groups).
 * Only libc: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <stdlib.h>

fmoe_status fmoe_gidx_sort(int64_t k, const int32_t *g_idx, int64_t num_groups, int32_t *perm, int32_t *g_idx_sorted)
{
    if (k < 0 || k > INT32_MAX || num_groups <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < k; i++)
        if (g_idx[i] < 0 || g_idx[i] >= num_groups)
            return FMOE_STATUS_INVALID_ARGUMENT;

    /* start[g] = first output slot of group g (exclusive prefix sum of the
     * group sizes), then advanced as rows of g are placed. */
    int64_t *start = calloc((size_t)num_groups, sizeof *start);
    if (!start)
        return FMOE_STATUS_OUT_OF_MEMORY;
    for (int64_t i = 0; i < k; i++)
        start[g_idx[i]]++;
    int64_t sum = 0;
    for (int64_t g = 0; g < num_groups; g++) {
        int64_t count = start[g];
        start[g] = sum;
        sum += count;
    }
    for (int64_t i = 0; i < k; i++)
        perm[start[g_idx[i]]++] = (int32_t)i;
    free(start);

    if (g_idx_sorted)
        for (int64_t i = 0; i < k; i++)
            g_idx_sorted[i] = g_idx[perm[i]];
    return FMOE_STATUS_OK;
}
