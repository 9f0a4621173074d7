/*
 * plugins/megamoe/sm90.h - the C boundary of the SM90 path's device side
 * (sm90_forward.cu, CUDA C++17, compiled by nvcc for sm_90a). Plain C types
 * only; every function returns 0, or -1 with one line in `why` naming the
 * CUDA call that failed. Nothing here throws, aborts or prints.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM90_H
#define FMOE_PLUGIN_MEGAMOE_SM90_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/megamoe/call.h"
#include "plugins/megamoe/ep_fused_layout.h"
#include "plugins/megamoe/sm90_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm90_layer mm90_layer;

/* The loaded parameters (host memory, the checkpoint's layout). */
typedef struct mm90_host_weights {
    const uint8_t *w13, *w13_sf, *w2, *w2_sf;
} mm90_host_weights;

/* Allocate the plan's two buffers on `device` and upload the weights
 * (synchronous: finalize). */
int mm90_create(int device, const mm90_plan *plan, const mm90_host_weights *w, mm90_layer **out, char *why, size_t cap);

/* Queue one forward on the call's stream: no allocation, no host sync. */
int mm90_forward(mm90_layer *l, const mm_call *c, char *why, size_t cap);

void mm90_destroy(mm90_layer *l);

/* The fused EP forward (sm90_ep.cu; docs/MEGAMOE.md "Expert parallelism,
 * fused"), in three calls so that the group can time its phases between
 * them. c: this rank's tokens (x, ids, weights, out, m <= L.max_tokens,
 * expert_base, swiglu_limit, stream); the layer's workspace holds
 * L.size x L.max_tokens rows. */
typedef struct mm90_ep_call {
    mm_call c;
    mm_epf_layout L;
    char *base[MM_EPF_MAX_RANKS]; /* every rank's region, as this process sees it: one stride apart,
                                     base[r] = base[0] + r (base[1] - base[0]) (GEMM2 addresses them so) */
    uint32_t rank;
    uint32_t num_global; /* physical experts over all ranks; an id outside is an empty slot */
    uint64_t timeout_ns;
    void *fail;     /* the group's device failure record (plugins/cuda/ep_kernels.cuh fail_record) */
    uint64_t *load; /* the layer's load record [num_global], or NULL */
} mm90_ep_call;

/* send (this rank's tokens quantized into its window, then an arrival on
 * every rank) and gather (wait for every rank's, copy the rows that have
 * an expert here into the workspace) */
int mm90_ep_dispatch(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);
/* route, GEMM1 (SwiGLU, requant), GEMM2 on the gathered rows */
int mm90_ep_experts(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);
/* push (each pair's output row into its token's rank's comb slot, then an
 * arrival on every rank), finish (wait, sum each token's slots into out)
 * and the forward count */
int mm90_ep_combine(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);

/* What the EP kernels (sm90_ep.cu) need of a layer: the workspace rows
 * the gather writes, the local experts and the device. */
typedef struct mm90_work_ptrs {
    uint8_t *xq;      /* [rows, H] e4m3 */
    float *xs;        /* [rows, mm90_xs_pitch(H)] */
    uint32_t experts; /* local experts */
    int device;
} mm90_work_ptrs;
void mm90_work_of(const mm90_layer *l, mm90_work_ptrs *out);

#ifdef __cplusplus
}
#endif

#endif
