/*
 * plugins/cuda/ep_api.h - the C boundary of the CUDA EP transport
 * (ep_transport.cu, ep_kernels.cu): an NCCL communicator, the group's
 * buffers (ep_layout.h) and the kernels that move tokens to the ranks of
 * their experts and the results back. Two transports (option ep_transport):
 *
 *   lsa         the receive buffer is an NCCL symmetric window; the kernels
 *               store straight into peers' windows and signal with
 *               release-adds on their arrival counters. Needs every rank in
 *               this rank's load/store (NVLink) domain: NCCL's LSA team.
 *   collective  the kernels store into local staging, one chunk per
 *               destination, and ncclSend/ncclRecv pairs in one NCCL group
 *               move the chunks, on the forward's stream: any NCCL
 *               transport (NVLink, PCIe, InfiniBand/RoCE across nodes).
 *               Stream order replaces the arrival counters: no device waits.
 *
 * A forward is: fmcu_ep_dispatch (pack this rank's tokens for each rank,
 * deliver, then unpack every source's into the rows the local method
 * applies), the method's own apply on those rows, then fmcu_ep_combine
 * (each row's result back to its owner, deliver, sum in rank order). All
 * on the caller's stream; no allocation, and in
 * LOW_LATENCY no host synchronization unless the group measures phases
 * (`timing`), so such a forward can be captured in a CUDA graph.
 * HIGH_THROUGHPUT packs the received rows that have a local expert first
 * (ep_plan.h) and waits once, in fmcu_ep_dispatch, for their count R, so
 * the method applies to R rows instead of size x max_tokens; capturing it
 * is refused.
 *
 * lsa: waits on peers are bounded on the device (timeout_ms): a peer that
 * does not arrive sets a flag in host-mapped memory with the missing ranks,
 * the kernels finish, and fmcu_ep_check reports it on the next call (the
 * outputs of that forward are invalid, and the message says so).
 * collective: the host's waits on NCCL (joining, enqueueing a group) are
 * bounded by timeout_ms; a peer that never posts its half of a transfer
 * stalls the stream inside NCCL, as any NCCL collective would.
 */
#ifndef FMOE_PLUGIN_CUDA_EP_API_H
#define FMOE_PLUGIN_CUDA_EP_API_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/ep_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmcu_ep fmcu_ep;

/* The option ep_transport. */
enum { FMCU_EP_TRANSPORT_AUTO = 0, FMCU_EP_TRANSPORT_LSA = 1, FMCU_EP_TRANSPORT_COLLECTIVE = 2 };

/* The transport a group uses (ep_options.c): `want` an FMCU_EP_TRANSPORT_*,
 * lsa_ranks the ranks of NCCL's LSA team of this rank (those it can reach
 * by load/store), size the group's. auto: lsa when the team is the whole
 * group, else collective. 0 with *out, or -1 with why (lsa asked for and
 * the team is smaller; a team size outside 1..size). */
int fmcu_ep_transport_pick(int32_t want, uint32_t lsa_ranks, uint32_t size, int32_t *out, char *why, size_t cap);
/* "lsa", "collective" or "auto". */
const char *fmcu_ep_transport_name(int32_t t);

typedef struct fmcu_ep_params {
    int device;
    uint32_t rank, size, max_tokens, hidden, top_k, num_experts;
    int32_t act_dtype, dispatch, mode;
    uint32_t timeout_ms; /* every wait, on the host (init) and on the device */
    int timing;          /* measure dispatch / experts / combine (synchronizes each forward) */
    int32_t transport;   /* FMCU_EP_TRANSPORT_* (option ep_transport) */
    const char *nccl_library;
    void *comm;               /* the application's ncclComm_t, borrowed; or NULL and: */
    const uint8_t *unique_id; /* an ncclUniqueId made by fmcu_ep_unique_id */
    uint32_t unique_id_length;
    /* lsa: bytes of the window after the receive buffer for the plugin's
     * own use (fmcu_ep_extra_of), zeroed at creation; 0: none. The
     * collective transport ignores it (no peer reaches another's memory). */
    uint64_t extra_bytes;
} fmcu_ep_params;

/* An ncclUniqueId into out[cap] (*length = its size); 0 or -1 with why. */
int fmcu_ep_unique_id(const char *nccl_library, uint8_t *out, uint32_t cap, uint32_t *length, char *why,
                      size_t cap_why);

/* Collective over the group's ranks. 0, or -1 with why. */
int fmcu_ep_create(const fmcu_ep_params *p, fmcu_ep **out, char *why, size_t cap);
void fmcu_ep_destroy(fmcu_ep *ep);

/* The rows the method applies: [rows, hidden] act dtype, ids/w [rows, k];
 * y [rows, hidden] act dtype for its output. rows = size x max_tokens (the
 * capacity; a forward uses the first `rows` fmcu_ep_dispatch returns). */
typedef struct fmcu_ep_rows {
    void *x;
    int32_t *ids;
    float *w;
    void *y;
    int64_t rows;
} fmcu_ep_rows;
void fmcu_ep_rows_of(const fmcu_ep *ep, fmcu_ep_rows *r);

/* A failure an earlier forward left on the device (a peer that did not
 * arrive): 0 when none, else -1 with why (and the flag is cleared). */
int fmcu_ep_check(fmcu_ep *ep, char *why, size_t cap);

/* owner[n] (host): the rank of each global physical expert. Uploaded when
 * it differs from the last one, which needs a synchronous copy: refused
 * while `stream` is being captured. */
int fmcu_ep_set_owner(fmcu_ep *ep, const int32_t *owner, uint32_t n, void *stream, char *why, size_t cap);

/* This rank's m tokens (device): x [m, hidden] (row stride x_ld elements),
 * ids/w [m, top_k] dense. load: the layer's load record (num_experts u64
 * on the device), to which the dispatch kernel adds this forward's valid
 * slots, or NULL. *rows: the rows of fmcu_ep_rows the method must apply
 * (LOW_LATENCY: all of them; HIGH_THROUGHPUT: the R received rows with a
 * local expert, packed first, after one wait for the device). */
/* What fmcu_ep_set_owner and fmcu_ep_dispatch return, beside 0 and -1
 * (a CUDA or NCCL failure), when the caller's arguments are at fault: too
 * many tokens, a misaligned x, a placement naming no rank, or a capture
 * the forward cannot take part in (ep.c: INVALID_ARGUMENT). */
#define FMCU_EP_MISUSE (-2)

int fmcu_ep_dispatch(fmcu_ep *ep, const void *x, int64_t x_ld, const int32_t *ids, const float *w, int64_t m,
                     uint64_t *load, void *stream, int64_t *rows, char *why, size_t cap);
/* After the method wrote rows.y: out [m, hidden] (row stride out_ld) of
 * this rank's tokens, ids as given to dispatch. */
int fmcu_ep_combine(fmcu_ep *ep, void *out, int64_t out_ld, const int32_t *ids, int64_t m, void *stream, char *why,
                    size_t cap);
/* Mark the end of the method's apply (timing only). */
int fmcu_ep_mark_experts_done(fmcu_ep *ep, void *stream, char *why, size_t cap);

/* The plugin's region of the window (fmcu_ep_params.extra_bytes): every
 * rank's, as this process sees it (NVLink load/store), at the same offset
 * on each; and what a plugin's own kernels need to wait on peers the way
 * the transport's do (ep_kernels.cuh: fail_record, timeout). 0, or -1 when
 * the group has none (collective transport, or extra_bytes 0). */
typedef struct fmcu_ep_extra {
    char *base[FMCU_EP_MAX_RANKS];
    uint64_t bytes;
    uint32_t rank, size, max_tokens;
    int32_t mode; /* the group's FMOE_EP_MODE_* */
    uint64_t timeout_ns;
    void *fail; /* the device alias of the group's fmcu_ep_dev::fail_record */
} fmcu_ep_extra;
int fmcu_ep_extra_of(const fmcu_ep *ep, fmcu_ep_extra *out);

/* For a plugin that runs a forward itself over the extra region: the
 * timing marks the transport makes around dispatch, the method and
 * combine (timing groups; nothing otherwise). phase 0 before the forward's
 * first kernel (it decides whether this forward is timed: not while
 * `stream` is being captured), 1 after the rows arrived, 2 after the
 * experts, 3 after the last kernel (this one synchronizes and adds the
 * three spans). 0, or -1 with why. */
int fmcu_ep_timing_mark(fmcu_ep *ep, int phase, void *stream, char *why, size_t cap);

/* Sums of the measured phases (timing groups). */
int fmcu_ep_timing(fmcu_ep *ep, int reset, uint64_t *forwards, double *dispatch_s, double *experts_s, double *combine_s,
                   char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
