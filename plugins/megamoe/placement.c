/*
 * plugins/megamoe/placement.c - which logical expert each local slot of a
 * rank holds, and the token check (host.h).
 *
 * Placement is vLLM EPLB's initial layout (spec/interface.md §7): physical
 * expert p holds logical p % L, so physical 0..L-1 are the logical experts
 * and the redundant replicas follow round-robin; rank r owns physical
 * experts [r * E_local, (r + 1) * E_local). The kit's fmoe_eplb_logical_of
 * is the same function; the host loads each slot from its logical expert.
 */
#include <stdio.h>

#include "plugins/megamoe/host.h"

uint32_t mm_logical_of(uint32_t physical, uint32_t logical)
{
    return logical ? physical % logical : 0;
}

int mm_local_logical(uint32_t physical, uint32_t logical, uint32_t ranks, uint32_t rank, uint32_t *out, char *why,
                     size_t cap)
{
    if (!logical || !ranks || physical < logical || physical % ranks || rank >= ranks) {
        if (cap)
            snprintf(why, cap,
                     "MegaMoE placement: %u physical experts (%u logical) over %u EP ranks, rank %u: expected physical "
                     ">= logical > 0, divisible by the ranks, and rank < ranks",
                     physical, logical, ranks, rank);
        return -1;
    }
    uint32_t local = physical / ranks;
    for (uint32_t s = 0; s < local; s++)
        out[s] = mm_logical_of(rank * local + s, logical);
    return 0;
}

int mm_check_tokens(uint64_t tokens, const mm_layout *l, char *why, size_t cap)
{
    if (tokens <= l->dims.max_tokens)
        return 0;
    if (cap)
        snprintf(why, cap,
                 "MegaMoE got %llu tokens, but the symmetric buffer was sized for %u (max_num_tokens; %u rows after "
                 "rounding to %u): refused, not truncated",
                 (unsigned long long)tokens, l->dims.max_tokens, l->tokens, MM_TOKEN_ALIGN);
    return -1;
}
