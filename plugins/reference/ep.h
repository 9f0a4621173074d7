/*
 * plugins/reference/ep.h - the reference plugin's EP groups: the contract of
 * plugin.h fmoe_ep_ops served on one host, ranks being threads of one
 * process or processes of one machine, over a POSIX shared-memory segment
 * per group. A test double, so CI checks the API and the semantics of
 * expert parallelism without a GPU; not a product transport (docs/EP.md).
 *
 *   ep_group.c    the segment (named from the unique id, or from the comm
 *                 pointer for ranks of one process), the join, the bounded
 *                 barrier;
 *   ep_forward.c  the collective forward: dispatch, experts, combine.
 *
 * The segment, like a low-latency EP buffer, is sized once for
 * max_tokens_per_rank on every rank (pages are touched only when used):
 *
 *   header   the agreed sizes, a process-shared robust mutex and condition,
 *            join and barrier state, one slot per rank (ref_ep_slot)
 *   rank r   x [max_tokens, H] act dtype, w [max_tokens, k] f32,
 *            ids [max_tokens, k] i32, owner [num_experts] i32 (the rank of
 *            each physical expert), row_of [max_tokens, k] i32 (where each
 *            of r's (token, slot) pairs went in its owner's batch), and
 *            batch_out [size * max_tokens * k, H] act dtype (r's experts'
 *            outputs, one row per pair it received)
 */
#ifndef FMOE_PLUGIN_REFERENCE_EP_H
#define FMOE_PLUGIN_REFERENCE_EP_H

#include <pthread.h>

#include "fusedmoe/plugin.h"

#define REF_EP_MAX_RANKS 64

/* What a rank publishes for one forward, read by the others between
 * barriers (the arrays are in the rank's region). */
typedef struct ref_ep_slot {
    int64_t m;
    uint32_t num_global;
    /* The weight goes with the row (on the input, or inside the method
     * before GEMM2), so the combine adds the rows unweighted. */
    uint32_t on_input;
    int32_t failed; /* its experts failed: `failure` says why */
    char failure[512];
} ref_ep_slot;

typedef struct ref_ep_hdr ref_ep_hdr;

/* Offsets of a rank's arrays inside its region, and the sizes. */
typedef struct ref_ep_layout {
    size_t elem;   /* bytes of one activation */
    uint64_t rows; /* batch_out capacity: size * max_tokens * top_k */
    size_t x, w, ids, owner, row_of, out, region;
    size_t header; /* offset of rank 0's region */
    size_t total;
} ref_ep_layout;

/* One rank's membership, in its process. */
typedef struct ref_ep_group {
    ref_ep_hdr *hdr; /* the mapping */
    ref_ep_layout lay;
    char name[96]; /* of the segment (unlinked once every rank joined) */
    uint32_t rank, size;
    uint32_t max_tokens, hidden, top_k, num_experts;
    fmoe_dtype act_dtype;
    int32_t dispatch, mode;
    long timeout_ms;
    const fmoe_host *host;
    int timing;
    pthread_mutex_t timing_lock; /* the sums below: read by `timing` */
    uint64_t forwards;
    double dispatch_s, experts_s, combine_s;
} ref_ep_group;

/* ep_group.c */
fmoe_status ref_ep_unique_id(fmoe_ep_unique_id_args *a);
fmoe_status ref_ep_group_create(fmoe_ep_group_args *a);
void ref_ep_group_destroy(fmoe_ep_group_destroy_args *a);
fmoe_status ref_ep_timing(fmoe_ep_timing_args *a);
/* Rank r's slot, and the base of its region. */
ref_ep_slot *ref_ep_slot_of(ref_ep_group *g, uint32_t rank);
char *ref_ep_region(ref_ep_group *g, uint32_t rank);
/* Wait until every rank has arrived at barrier `what` of this forward, at
 * most the group's timeout: 0, or -1 with the missing ranks named in `why`
 * (and the group broken for good: a collective cannot be resumed). */
int ref_ep_barrier(ref_ep_group *g, const char *what, char *why, size_t cap);
/* Add one forward's phase times to the group's sums. */
void ref_ep_add_timing(ref_ep_group *g, double dispatch_s, double experts_s, double combine_s);

/* ep_forward.c */
fmoe_status ref_ep_forward(fmoe_ep_forward_args *a);

extern const fmoe_ep_ops ref_ep_ops;

#endif
