/*
 * plugins/megamoe/ep_fused_layout.c - the fused EP region's offsets and
 * the group checks of the fused forward (ep_fused_layout.h).
 */
#include "plugins/megamoe/ep_fused_layout.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/host.h"
#include "plugins/megamoe/sm90_plan.h"

static uint64_t place(uint64_t *at, uint64_t bytes)
{
    const uint64_t off = *at;
    *at = off + (bytes + MM_EPF_ALIGN - 1) / MM_EPF_ALIGN * MM_EPF_ALIGN;
    return off;
}

int mm_epf_layout_make(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, mm_epf_layout *L, char *why,
                       size_t cap)
{
    memset(L, 0, sizeof *L);
    if (size < 1 || size > MM_EPF_MAX_RANKS || max_tokens < 1 || hidden == 0 || hidden % 128 || top_k < 1 ||
        top_k > MM_MAX_TOPK) {
        snprintf(why, cap,
                 "MegaMoE fused EP: %u ranks (1..%u), %u tokens a rank (at least 1), hidden %u (a multiple of 128), "
                 "top_k %u (1..%u)",
                 size, MM_EPF_MAX_RANKS, max_tokens, hidden, top_k, MM_MAX_TOPK);
        return -1;
    }
    /* every product below stays under 2^64: T < 2^32, H < 2^32, k <= 32, R <= 64 */
    const uint64_t T = max_tokens, H = hidden, k = top_k, R = size;
    if (T * H * (k * 2 + 2) + R * T * k * 8 > (1ull << 40)) {
        snprintf(why, cap, "MegaMoE fused EP: %u tokens a rank of hidden %u need more than 2^40 window bytes",
                 max_tokens, hidden);
        return -1;
    }
    *L = (mm_epf_layout){
        .size = size, .max_tokens = max_tokens, .hidden = hidden, .top_k = top_k, .xs_pitch = mm90_xs_pitch(hidden)};
    uint64_t at = 0;
    L->arrive_send = place(&at, R * 8);
    L->arrive_comb = place(&at, R * 8);
    L->count = place(&at, 4);
    L->x = place(&at, T * H);
    L->xs = place(&at, T * L->xs_pitch * 4);
    L->ids = place(&at, T * k * 4);
    L->w = place(&at, T * k * 4);
    L->comb = place(&at, k * T * H * 2);
    L->seq = place(&at, 8);
    L->done = place(&at, 16);
    L->ids_in = place(&at, R * T * k * 4);
    L->w_in = place(&at, R * T * k * 4);
    L->bytes = at;
    return 0;
}

int mm_epf_linear_placement(const int32_t *owner, uint32_t n, uint32_t size, uint32_t local)
{
    if (!owner || local == 0 || (uint64_t)size * local != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (owner[i] != (int32_t)(i / local))
            return 0;
    return 1;
}

int mm_epf_one_stride_apart(char *const *base, uint32_t size)
{
    for (uint32_t r = 2; r < size; r++)
        if (base[r] - base[0] != (ptrdiff_t)r * (base[1] - base[0]))
            return 0;
    return 1;
}
