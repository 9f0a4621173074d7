/*
 * fusedmoe/kit/eplb.h - expert-parallel load balancing: redundant physical replicas
 * of logical experts, in the initial layout of vLLM's EPLB state
 * (spec/interface.md §7): physical experts 0..L-1 are the logical experts,
 * then the R redundant ones are appended round-robin, physical L+i holding
 * logical i % L. So the replicas of logical l are l, L+l, 2L+l, ... (< L+R).
 *
 * Replica choice for a routed slot (deterministic; documented in
 * docs/ROUTING.md): flat slot index i = token*k + slot picks replica
 * i % replica_count(l). Pure functions shared by the core and plugins.
 */
#ifndef FMOE_KIT_EPLB_H
#define FMOE_KIT_EPLB_H

#include <stdint.h>

/* Logical expert held by physical expert p (p < L + R). */
static inline uint32_t fmoe_eplb_logical_of(uint32_t n_logical, uint32_t physical)
{
    return physical < n_logical ? physical : (physical - n_logical) % n_logical;
}

/* Number of physical replicas of logical expert l (>= 1). */
static inline uint32_t fmoe_eplb_replica_count(uint32_t n_logical, uint32_t n_redundant, uint32_t l)
{
    uint32_t extra = n_redundant / n_logical + (l < n_redundant % n_logical ? 1u : 0u);
    return 1u + extra;
}

/* Physical id of replica r of logical l. */
static inline uint32_t fmoe_eplb_physical_of(uint32_t n_logical, uint32_t l, uint32_t replica)
{
    return l + replica * n_logical;
}

/* Map n logical ids in place to physical ids (flat index picks the replica).
 * Ids outside [0, n_logical) become -1 (they then contribute nothing). */
static inline void fmoe_eplb_map_ids(uint32_t n_logical, uint32_t n_redundant, int32_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_logical) {
            ids[i] = -1;
            continue;
        }
        uint32_t l = (uint32_t)ids[i];
        uint32_t count = fmoe_eplb_replica_count(n_logical, n_redundant, l);
        ids[i] = (int32_t)fmoe_eplb_physical_of(n_logical, l, (uint32_t)(i % count));
    }
}

#endif
