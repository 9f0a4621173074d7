/*
 * plugins/cuda/ep_transport.cu - a CUDA EP group (ep_api.h): the NCCL
 * communicator, the group's buffers and the forward's launches, over
 * either transport (lsa or collective).
 *
 * Creation, collective over the ranks:
 *   1. the communicator: the application's (borrowed), or a new one from
 *      the unique id, made non-blocking so that every wait is bounded by
 *      timeout_ms (then aborted, with the reason);
 *   2. the transport (fmcu_ep_transport_pick): lsa needs every rank
 *      reachable by load/store (NCCL's LSA team = the world, i.e. one
 *      NVLink domain), as its kernels write peers' memory directly;
 *      collective works over whatever NCCL connects (across nodes);
 *   3. lsa: ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)
 *      of the receive buffer (ep_layout.h); each rank's base is the
 *      window's flat LSA base + rank x stride (the fields NCCL keeps at
 *      fixed offsets of its window handle for its device code:
 *      nccl_device/impl/core__types.h), its own rank included (an alias of
 *      the same memory). collective: a local receive buffer and staging;
 *   4. the buffers zeroed, then an all-gather of every rank's parameters:
 *      it checks they agree (naming the field that differs, the transport
 *      among them) and, being collective, no rank's forward can write into
 *      a buffer not yet zeroed;
 *   5. collective: a blocking child communicator (ncclCommSplit) for the
 *      exchanges, so that a forward's ncclGroupEnd enqueues on the calling
 *      thread (a non-blocking communicator hands every group to a new
 *      thread: a thread per exchange, and launches into a stream that the
 *      caller may be capturing from another thread), then one exchange of
 *      each phase, which connects the peers before any forward is captured.
 *
 * A forward's launches (ep_kernels.cuh): dispatch, [exchange,] [plan,]
 * unpack, the method, combine-send, [exchange,] finish (the exchanges:
 * collective only). LOW_LATENCY hands the method every size x max_tokens row
 * and never waits for the device. HIGH_THROUGHPUT adds the plan kernel,
 * which packs the live rows and writes their count R to host-mapped memory;
 * the host waits for that one event (unpack already queued behind it) and
 * the method applies to R rows: one host synchronization per forward, so
 * it cannot be captured in a graph, and the method's cost follows the rows
 * received rather than the capacity.
 */
#include <cuda_runtime.h>
#include <new>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plugins/cuda/ep_api.h"
#include "plugins/cuda/ep_launch.h"
#include "plugins/cuda/ep_nccl.h"

using fmcu_ep_dev::common_args;
using fmcu_ep_dev::fail_record;

struct fmcu_ep {
    fmcu_ep_params p;
    const fmcu_nccl *nccl;
    ncclComm_t comm;
    bool own_comm;
    fmcu_ep_layout L;
    int32_t transport; /* FMCU_EP_TRANSPORT_LSA or _COLLECTIVE */
    void *sym;         /* lsa: the receive buffer (NCCL window memory), then the extra region */
    uint64_t extra_at; /* lsa: the extra region's offset in the window (0: none) */
    ncclWindow_t win;
    /* collective: the receive buffer, the send staging, and the blocking
     * communicator of the exchanges (always the group's own) */
    char *recv, *stage;
    ncclComm_t xcomm;
    common_args c;
    /* local (not symmetric) device memory */
    void *x_in, *y;
    int32_t *ids_in, *owner;
    float *w_in;
    uint8_t *live;
    uint64_t *seq;
    /* HIGH_THROUGHPUT: the row plan (ep_plan.h) and R, written by the plan
     * kernel into host-mapped memory (rows_dev its device alias), read
     * after `planned` completes. */
    int32_t *pos;
    int64_t *rows_host, *rows_dev;
    cudaEvent_t planned;
    fail_record *fail_host; /* host-mapped; c.fail is its device alias */
    int32_t *owner_host;    /* the last owner table uploaded */
    uint32_t owner_n;
    cudaStream_t init_stream;
    cudaEvent_t ev[4];
    uint64_t forwards;
    double sums[3];
    bool timing_now; /* timing, and this forward is not being captured in a graph */
};

namespace {

int failf(char *why, size_t cap, const char *what, cudaError_t e)
{
    snprintf(why, cap, "EP group: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait until the non-blocking communicator settles; 0, or -1 with why. */
int settle(fmcu_ep *ep, ncclResult_t r, const char *what, char *why, size_t cap)
{
    const double t0 = now_s();
    while (r == ncclInProgress) {
        if (now_s() - t0 > ep->p.timeout_ms * 1e-3) {
            snprintf(why, cap,
                     "EP group rank %u: %s did not complete within %u ms (ep_timeout_ms): a rank did not join, or the "
                     "ranks were given different unique ids or sizes",
                     ep->p.rank, what, ep->p.timeout_ms);
            return -1;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
        if (ep->nccl->CommGetAsyncError(ep->comm, &r) != ncclSuccess)
            r = ncclInternalError;
    }
    if (r != ncclSuccess) {
        snprintf(why, cap, "EP group rank %u: %s: %s", ep->p.rank, what, ep->nccl->GetErrorString(r));
        return -1;
    }
    return 0;
}

/* Wait for the init stream, bounded. */
int drain(fmcu_ep *ep, const char *what, char *why, size_t cap)
{
    const double t0 = now_s();
    for (;;) {
        cudaError_t e = cudaStreamQuery(ep->init_stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return failf(why, cap, what, e);
        if (now_s() - t0 > ep->p.timeout_ms * 1e-3) {
            snprintf(why, cap, "EP group rank %u: %s did not complete within %u ms (ep_timeout_ms)", ep->p.rank, what,
                     ep->p.timeout_ms);
            return -1;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, nullptr);
    }
}

/* What every rank must agree on. */
struct agreed {
    uint32_t rank, size, max_tokens, hidden, top_k, num_experts;
    int32_t act_dtype, dispatch, mode, transport;
};

int check_agreed(const fmcu_ep *ep, const agreed *all, char *why, size_t cap)
{
    const agreed &me = all[ep->p.rank];
    for (uint32_t r = 0; r < ep->p.size; r++) {
        const agreed &o = all[r];
        const char *field = o.rank != r                       ? "rank (two ranks gave the same one)"
                            : o.size != me.size               ? "size"
                            : o.max_tokens != me.max_tokens   ? "max_tokens_per_rank"
                            : o.hidden != me.hidden           ? "hidden_size"
                            : o.top_k != me.top_k             ? "top_k"
                            : o.num_experts != me.num_experts ? "num_experts"
                            : o.act_dtype != me.act_dtype     ? "act_dtype"
                            : o.dispatch != me.dispatch       ? "dispatch"
                            : o.mode != me.mode               ? "mode"
                            : o.transport != me.transport
                                ? "transport (ep_transport, or auto with ranks in NVLink domains of different sizes)"
                                : nullptr;
        if (field) {
            snprintf(why, cap, "EP group: ranks %u and %u were created with different %s", ep->p.rank, r, field);
            return -1;
        }
    }
    return 0;
}

/* lsa: the receive buffer as an NCCL window, and every rank's view of it. */
int setup_window(fmcu_ep *ep, char *why, size_t cap)
{
    const fmcu_ep_params &p = ep->p;
    cudaError_t e;
    /* the receive buffer, then the plugin's extra region (ep_api.h) */
    const uint64_t extra_at = (ep->L.bytes + FMCU_EP_ALIGN - 1) / FMCU_EP_ALIGN * FMCU_EP_ALIGN;
    const uint64_t bytes = p.extra_bytes ? extra_at + p.extra_bytes : ep->L.bytes;
    if (p.extra_bytes > (1ull << 40)) {
        snprintf(why, cap, "EP group: %llu extra window bytes asked for, beyond 2^40",
                 (unsigned long long)p.extra_bytes);
        return -1;
    }
    ep->extra_at = p.extra_bytes ? extra_at : 0;
    ncclResult_t r = ep->nccl->MemAlloc(&ep->sym, bytes);
    if (r != ncclSuccess) {
        snprintf(why, cap, "EP group: ncclMemAlloc of %llu bytes: %s", (unsigned long long)bytes,
                 ep->nccl->GetErrorString(r));
        ep->sym = nullptr;
        return -1;
    }
    if ((e = cudaMemsetAsync(ep->sym, 0, bytes, ep->init_stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(ep->init_stream)) != cudaSuccess)
        return failf(why, cap, "zeroing the symmetric buffer", e);
    r = ep->nccl->CommWindowRegister(ep->comm, ep->sym, bytes, &ep->win, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess && r != ncclInProgress) {
        snprintf(why, cap, "EP group: ncclCommWindowRegister: %s", ep->nccl->GetErrorString(r));
        ep->win = nullptr;
        return -1;
    }
    if (settle(ep, r, "ncclCommWindowRegister", why, cap) != 0)
        return -1;
    /* A non-blocking communicator may fill the handle after it reports
     * success: wait for it, bounded. */
    for (const double t0 = now_s(); !*(ncclWindow_t volatile *)&ep->win;) {
        if (now_s() - t0 > p.timeout_ms * 1e-3) {
            snprintf(why, cap, "EP group rank %u: ncclCommWindowRegister returned no window within %u ms", p.rank,
                     p.timeout_ms);
            return -1;
        }
        ncclResult_t ar = ncclSuccess;
        ep->nccl->CommGetAsyncError(ep->comm, &ar);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
    }
    struct {
        void *win_host;
        char *lsa_flat_base;
        int lsa_rank, world_rank;
        uint32_t stride4g;
    } head;
    static_assert(sizeof head == 32, "the window's head");
    cudaPointerAttributes at;
    if ((e = cudaPointerGetAttributes(&at, ep->win)) != cudaSuccess)
        return failf(why, cap, "cudaPointerGetAttributes (NCCL's window)", e);
    if (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged)
        e = fmcu_ep_read_window(ep->win, &head, ep->init_stream);
    else
        memcpy(&head, ep->win, sizeof head); /* a host handle */
    if (e != cudaSuccess) {
        snprintf(why, cap, "EP group: reading NCCL's window at %p (memory type %d): %s", (void *)ep->win, (int)at.type,
                 cudaGetErrorString(e));
        return -1;
    }
    for (uint32_t q = 0; q < p.size; q++) {
        char *b = head.lsa_flat_base + ((uint64_t)q * head.stride4g << 32);
        ep->c.p.base[q] = b;
        ep->c.p.disp[q] = b + ep->L.disp + p.rank * ep->L.disp_chunk;
        ep->c.p.comb[q] = b + ep->L.comb + p.rank * ep->L.comb_chunk;
    }
    ep->c.own = ep->c.p.base[p.rank];
    ep->c.counted = 1;
    /* NCCL maps every rank's buffer, this one's too, into one flat range:
     * base[rank] is another address of ep->sym's memory (the kernels use
     * it for both, as NCCL's device code would). */
    if (head.lsa_rank != (int)p.rank || head.world_rank != (int)p.rank || head.stride4g == 0 || !head.lsa_flat_base) {
        snprintf(why, cap,
                 "EP group: NCCL %d's window does not read as expected (handle %p, memory type %d: LSA rank %d, "
                 "world rank %d, stride %u x 4 GiB, own base %p, buffer %p): this NCCL's layout is not one the plugin "
                 "knows",
                 ep->nccl->version, (void *)ep->win, (int)at.type, head.lsa_rank, head.world_rank, head.stride4g,
                 (void *)ep->c.p.base[p.rank], ep->sym);
        return -1;
    }
    return 0;
}

/* The method's rows, the row plan and the failure record. */
int local_buffers(fmcu_ep *ep, char *why, size_t cap)
{
    const fmcu_ep_params &p = ep->p;
    cudaError_t e;
    const uint64_t rows = (uint64_t)p.size * p.max_tokens;
    if ((e = cudaMalloc(&ep->x_in, rows * p.hidden * 2)) != cudaSuccess ||
        (e = cudaMalloc(&ep->y, rows * p.hidden * 2)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ep->ids_in, rows * p.top_k * 4)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ep->w_in, rows * p.top_k * 4)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ep->live, rows)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ep->owner, (size_t)p.num_experts * 4)) != cudaSuccess ||
        (e = cudaMalloc((void **)&ep->seq, 8)) != cudaSuccess)
        return failf(why, cap, "cudaMalloc of the group's rows", e);
    if (p.mode == FMOE_EP_MODE_HIGH_THROUGHPUT) {
        void *dev = nullptr;
        if ((e = cudaMalloc((void **)&ep->pos, rows * 4)) != cudaSuccess ||
            (e = cudaHostAlloc((void **)&ep->rows_host, sizeof(int64_t), cudaHostAllocMapped)) != cudaSuccess ||
            (e = cudaHostGetDevicePointer(&dev, ep->rows_host, 0)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&ep->planned, cudaEventDisableTiming)) != cudaSuccess)
            return failf(why, cap, "the high-throughput row plan's buffers", e);
        ep->rows_dev = (int64_t *)dev;
        *ep->rows_host = 0;
    }
    if ((e = cudaMemset(ep->x_in, 0, rows * p.hidden * 2)) != cudaSuccess ||
        (e = cudaMemset(ep->seq, 0, 8)) != cudaSuccess || (e = cudaMemset(ep->owner, 0xff, p.num_experts * 4)))
        return failf(why, cap, "cudaMemset", e);
    void *fail_dev = nullptr;
    if ((e = cudaHostAlloc((void **)&ep->fail_host, sizeof(fail_record), cudaHostAllocMapped)) != cudaSuccess ||
        (e = cudaHostGetDevicePointer(&fail_dev, ep->fail_host, 0)) != cudaSuccess)
        return failf(why, cap, "cudaHostAlloc (the wait-failure record)", e);
    memset((void *)ep->fail_host, 0, sizeof(fail_record));
    for (auto &ev : ep->ev)
        if ((e = cudaEventCreate(&ev)) != cudaSuccess)
            return failf(why, cap, "cudaEventCreate", e);
    ep->c.L = ep->L;
    ep->c.rank = p.rank;
    ep->c.num_experts = p.num_experts;
    ep->c.owner = ep->owner;
    ep->c.seq = ep->seq;
    ep->c.timeout_ns = (uint64_t)p.timeout_ms * 1000000ull;
    ep->c.fail = (fail_record *)fail_dev;
    return 0;
}

/* Every rank's parameters gathered and compared. */
int agree(fmcu_ep *ep, char *why, size_t cap)
{
    const fmcu_ep_params &p = ep->p;
    cudaError_t e;
    ncclResult_t r;
    agreed mine = {p.rank,      p.size,     p.max_tokens, p.hidden, p.top_k,
                   p.num_experts, p.act_dtype, p.dispatch, p.mode,  ep->transport};
    agreed *d_all = nullptr;
    if ((e = cudaMalloc((void **)&d_all, sizeof(agreed) * (p.size + 1))) != cudaSuccess)
        return failf(why, cap, "cudaMalloc", e);
    agreed *d_mine = d_all + p.size;
    int rc = -1;
    agreed all[FMCU_EP_MAX_RANKS];
    if ((e = cudaMemcpy(d_mine, &mine, sizeof mine, cudaMemcpyHostToDevice)) != cudaSuccess)
        failf(why, cap, "cudaMemcpy", e);
    else if ((r = ep->nccl->AllGather(d_mine, d_all, sizeof mine, ncclUint8, ep->comm, ep->init_stream)) !=
                 ncclSuccess &&
             r != ncclInProgress)
        snprintf(why, cap, "EP group: ncclAllGather: %s", ep->nccl->GetErrorString(r));
    else if (settle(ep, r, "ncclAllGather of the group's parameters", why, cap) == 0 &&
             drain(ep, "the all-gather of the group's parameters", why, cap) == 0) {
        if ((e = cudaMemcpy(all, d_all, sizeof(agreed) * p.size, cudaMemcpyDeviceToHost)) != cudaSuccess)
            failf(why, cap, "cudaMemcpy", e);
        else
            rc = check_agreed(ep, all, why, cap);
    }
    cudaFree(d_all);
    return rc;
}

/* collective: chunk q of the staging at `send_off` to every other rank q,
 * and each one's chunk into chunk q of the receive buffer at `recv_off`,
 * in one NCCL group on `st` (so no pair waits on another's order). The
 * sizes match on both sides: every chunk is `chunk` bytes. */
int exchange(fmcu_ep *ep, uint64_t send_off, uint64_t recv_off, uint64_t chunk, cudaStream_t st, char *why,
             size_t cap)
{
    const uint32_t n = ep->p.size, me = ep->p.rank;
    if (n == 1)
        return 0;
    const fmcu_nccl *nc = ep->nccl;
    ncclResult_t r = nc->GroupStart();
    if (r != ncclSuccess) {
        snprintf(why, cap, "EP group rank %u: ncclGroupStart: %s", me, nc->GetErrorString(r));
        return -1;
    }
    ncclResult_t bad = ncclSuccess;
    const char *what = "ncclSend";
    for (uint32_t i = 1; i < n && bad == ncclSuccess; i++) {
        const uint32_t to = (me + i) % n, from = (me + n - i) % n;
        r = nc->Send(ep->stage + send_off + to * chunk, chunk, ncclUint8, (int)to, ep->xcomm, st);
        if (r == ncclSuccess) {
            what = "ncclRecv";
            r = nc->Recv(ep->recv + recv_off + from * chunk, chunk, ncclUint8, (int)from, ep->xcomm, st);
        }
        bad = r;
    }
    /* the group is closed whatever happened inside it */
    r = nc->GroupEnd();
    if (bad != ncclSuccess || r != ncclSuccess) {
        snprintf(why, cap, "EP group rank %u: %s of %llu bytes per peer: %s", me,
                 bad != ncclSuccess ? what : "ncclGroupEnd", (unsigned long long)chunk,
                 nc->GetErrorString(bad != ncclSuccess ? bad : r));
        return -1;
    }
    return 0;
}

int setup(fmcu_ep *ep, char *why, size_t cap)
{
    const fmcu_ep_params &p = ep->p;
    cudaError_t e = cudaSetDevice(p.device);
    if (e != cudaSuccess)
        return failf(why, cap, "cudaSetDevice", e);
    if ((e = cudaStreamCreateWithFlags(&ep->init_stream, cudaStreamNonBlocking)) != cudaSuccess)
        return failf(why, cap, "cudaStreamCreate", e);
    /* 1. the communicator */
    if (p.comm) {
        ep->comm = (ncclComm_t)p.comm;
        int n = 0, r = 0, d = -1;
        if (ep->nccl->CommCount(ep->comm, &n) != ncclSuccess || ep->nccl->CommUserRank(ep->comm, &r) != ncclSuccess ||
            ep->nccl->CommCuDevice(ep->comm, &d) != ncclSuccess) {
            snprintf(why, cap, "EP group: the application's communicator could not be queried");
            return -1;
        }
        if ((uint32_t)n != p.size || (uint32_t)r != p.rank || d != p.device) {
            snprintf(why, cap,
                     "EP group: the application's communicator has %d ranks, this is rank %d on CUDA device %d; the "
                     "group asked for rank %u of %u on device %d",
                     n, r, d, p.rank, p.size, p.device);
            return -1;
        }
    } else {
        ncclUniqueId id;
        if (p.unique_id_length != sizeof id) {
            snprintf(why, cap, "EP group: a unique id of %u bytes; NCCL's is %zu", p.unique_id_length, sizeof id);
            return -1;
        }
        memcpy(&id, p.unique_id, sizeof id);
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclResult_t r = ep->nccl->CommInitRankConfig(&ep->comm, (int)p.size, id, (int)p.rank, &cfg);
        if (r != ncclSuccess && r != ncclInProgress) {
            snprintf(why, cap, "EP group rank %u: ncclCommInitRankConfig: %s", p.rank, ep->nccl->GetErrorString(r));
            ep->comm = nullptr;
            return -1;
        }
        ep->own_comm = true;
        if (settle(ep, r, "ncclCommInitRankConfig (joining the group)", why, cap) != 0)
            return -1;
    }
    /* 2. the transport */
    const ncclTeam lsa = ep->nccl->TeamLsa(ep->comm);
    if (fmcu_ep_transport_pick(p.transport, lsa.nRanks < 0 ? 0u : (uint32_t)lsa.nRanks, p.size, &ep->transport, why,
                               cap) != 0)
        return -1;
    /* 3. the buffers */
    if (ep->transport == FMCU_EP_TRANSPORT_LSA) {
        if (setup_window(ep, why, cap) != 0)
            return -1;
    } else {
        if ((e = cudaMalloc((void **)&ep->recv, ep->L.bytes)) != cudaSuccess ||
            (e = cudaMalloc((void **)&ep->stage, ep->L.staging_bytes)) != cudaSuccess ||
            (e = cudaMemsetAsync(ep->recv, 0, ep->L.bytes, ep->init_stream)) != cudaSuccess ||
            (e = cudaMemsetAsync(ep->stage, 0, ep->L.staging_bytes, ep->init_stream)) != cudaSuccess ||
            (e = cudaStreamSynchronize(ep->init_stream)) != cudaSuccess)
            return failf(why, cap, "the collective transport's receive buffer and staging", e);
        ep->c.own = ep->recv;
        ep->c.counted = 0;
        for (uint32_t q = 0; q < p.size; q++) {
            const bool self = q == p.rank;
            ep->c.p.disp[q] = self ? ep->recv + ep->L.disp + q * ep->L.disp_chunk
                                   : ep->stage + ep->L.send_disp + q * ep->L.disp_chunk;
            ep->c.p.comb[q] = self ? ep->recv + ep->L.comb + q * ep->L.comb_chunk
                                   : ep->stage + ep->L.send_comb + q * ep->L.comb_chunk;
        }
    }
    if (local_buffers(ep, why, cap) != 0)
        return -1;
    /* 4. agree (and fence the zeroing) */
    if (agree(ep, why, cap) != 0)
        return -1;
    /* 5. the exchanges' communicator, connected */
    if (ep->transport == FMCU_EP_TRANSPORT_COLLECTIVE) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 1;
        ncclResult_t r = ep->nccl->CommSplit(ep->comm, 0, (int)p.rank, &ep->xcomm, &cfg);
        /* Splitting a non-blocking parent completes in the background, and
         * may report success before it fills the handle (as window
         * registration does): wait for the child to exist and settle, or
         * for the parent's error, bounded. */
        for (const double t0 = now_s(); r == ncclSuccess || r == ncclInProgress;) {
            ncclComm_t child = *(ncclComm_t volatile *)&ep->xcomm;
            ncclResult_t ar = ncclInProgress, pr = ncclSuccess;
            if (child)
                ep->nccl->CommGetAsyncError(child, &ar);
            else if (ep->nccl->CommGetAsyncError(ep->comm, &pr) == ncclSuccess && pr != ncclSuccess &&
                     pr != ncclInProgress)
                ar = pr;
            if (ar != ncclInProgress) {
                r = ar;
                break;
            }
            if (now_s() - t0 > p.timeout_ms * 1e-3) {
                snprintf(why, cap, "EP group rank %u: ncclCommSplit did not complete within %u ms (ep_timeout_ms)",
                         p.rank, p.timeout_ms);
                return -1;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, nullptr);
        }
        if (r != ncclSuccess) {
            snprintf(why, cap, "EP group rank %u: ncclCommSplit (the collective transport's communicator): %s", p.rank,
                     ep->nccl->GetErrorString(r));
            return -1; /* a child that exists is aborted by fmcu_ep_destroy */
        }
        if (exchange(ep, ep->L.send_disp, ep->L.disp, ep->L.disp_chunk, ep->init_stream, why, cap) != 0 ||
            exchange(ep, ep->L.send_comb, ep->L.comb, ep->L.comb_chunk, ep->init_stream, why, cap) != 0 ||
            drain(ep, "the first exchange between the ranks", why, cap) != 0)
            return -1;
    }
    return 0;
}

/* The last timing mark of a timed forward: record, wait, add the spans. */
cudaError_t timing_end(fmcu_ep *ep, cudaStream_t st)
{
    if (!ep->timing_now)
        return cudaSuccess;
    float ms[3];
    cudaError_t e = cudaEventRecord(ep->ev[3], st);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(ep->ev[3]);
    for (int i = 0; i < 3 && e == cudaSuccess; i++)
        e = cudaEventElapsedTime(&ms[i], ep->ev[i], ep->ev[i + 1]);
    if (e == cudaSuccess) {
        for (int i = 0; i < 3; i++)
            ep->sums[i] += ms[i] * 1e-3;
        ep->forwards++;
    }
    return e;
}

} // namespace

extern "C" int fmcu_ep_unique_id(const char *nccl_library, uint8_t *out, uint32_t cap, uint32_t *length, char *why,
                                 size_t cap_why)
{
    const fmcu_nccl *n = fmcu_nccl_load(nccl_library, why, cap_why);
    if (!n)
        return -1;
    ncclUniqueId id;
    if (cap < sizeof id) {
        snprintf(why, cap_why, "EP unique id: %u bytes of room, NCCL's id takes %zu", cap, sizeof id);
        return -1;
    }
    ncclResult_t r = n->GetUniqueId(&id);
    if (r != ncclSuccess) {
        snprintf(why, cap_why, "ncclGetUniqueId: %s", n->GetErrorString(r));
        return -1;
    }
    memcpy(out, &id, sizeof id);
    *length = (uint32_t)sizeof id;
    return 0;
}

extern "C" void fmcu_ep_destroy(fmcu_ep *ep)
{
    if (!ep)
        return;
    cudaSetDevice(ep->p.device);
    cudaDeviceSynchronize();
    if (ep->win)
        ep->nccl->CommWindowDeregister(ep->comm, ep->win);
    if (ep->sym)
        ep->nccl->MemFree(ep->sym);
    if (ep->xcomm)
        ep->nccl->CommAbort(ep->xcomm);
    cudaFree(ep->recv);
    cudaFree(ep->stage);
    if (ep->own_comm && ep->comm) {
        /* a failed creation may leave peers waiting: abort never blocks */
        ep->nccl->CommAbort(ep->comm);
    }
    cudaFree(ep->x_in);
    cudaFree(ep->y);
    cudaFree(ep->ids_in);
    cudaFree(ep->w_in);
    cudaFree(ep->live);
    cudaFree(ep->owner);
    cudaFree(ep->seq);
    cudaFree(ep->pos);
    if (ep->rows_host)
        cudaFreeHost(ep->rows_host);
    if (ep->planned)
        cudaEventDestroy(ep->planned);
    if (ep->fail_host)
        cudaFreeHost((void *)ep->fail_host);
    for (auto ev : ep->ev)
        if (ev)
            cudaEventDestroy(ev);
    if (ep->init_stream)
        cudaStreamDestroy(ep->init_stream);
    delete[] ep->owner_host;
    delete ep;
}

extern "C" int fmcu_ep_create(const fmcu_ep_params *p, fmcu_ep **out, char *why, size_t cap)
{
    *out = nullptr;
    fmcu_ep_layout L;
    if (fmcu_ep_layout_make(p->size, p->max_tokens, p->hidden, p->top_k, p->act_dtype, p->dispatch, &L, why, cap) != 0)
        return -1;
    if (p->rank >= p->size || p->num_experts < 1) {
        snprintf(why, cap, "EP group: rank %u of %u, %u experts", p->rank, p->size, p->num_experts);
        return -1;
    }
    const fmcu_nccl *n = fmcu_nccl_load(p->nccl_library, why, cap);
    if (!n)
        return -1;
    fmcu_ep *ep = new (std::nothrow) fmcu_ep();
    if (!ep) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    ep->p = *p;
    ep->nccl = n;
    ep->L = L;
    const int rc = setup(ep, why, cap);
    ep->p.unique_id = nullptr; /* both valid during the call only */
    ep->p.nccl_library = nullptr;
    if (rc != 0) {
        fmcu_ep_destroy(ep);
        return -1;
    }
    *out = ep;
    return 0;
}

extern "C" void fmcu_ep_rows_of(const fmcu_ep *ep, fmcu_ep_rows *r)
{
    r->x = ep->x_in;
    r->ids = ep->ids_in;
    r->w = ep->w_in;
    r->y = ep->y;
    r->rows = (int64_t)ep->p.size * ep->p.max_tokens;
}

extern "C" int fmcu_ep_check(fmcu_ep *ep, char *why, size_t cap)
{
    fail_record *f = ep->fail_host;
    if (!f->failed)
        return 0;
    char ranks[256] = "";
    size_t n = 0;
    for (uint32_t r = 0; r < ep->p.size && n < sizeof ranks - 8; r++)
        if (f->missing[r])
            n += (size_t)snprintf(ranks + n, sizeof ranks - n, "%s%u", n ? ", " : "", r);
    snprintf(why, cap,
             "EP group rank %u: rank(s) %s did not arrive at the %s of an earlier forward within %u ms "
             "(ep_timeout_ms); that forward's output is invalid and the group cannot continue",
             ep->p.rank, ranks, f->phase == 1 ? "dispatch" : "combine", ep->p.timeout_ms);
    return -1;
}

extern "C" int fmcu_ep_set_owner(fmcu_ep *ep, const int32_t *owner, uint32_t n, void *stream, char *why, size_t cap)
{
    if (n != ep->p.num_experts) {
        snprintf(why, cap, "EP group: the layer has %u global experts, the group was made for %u", n,
                 ep->p.num_experts);
        return -1;
    }
    if (ep->owner_host && memcmp(ep->owner_host, owner, (size_t)n * 4) == 0)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (owner[i] < 0 || (uint32_t)owner[i] >= ep->p.size) {
            snprintf(why, cap, "EP group: expert %u is placed on rank %d of a group of %u", i, owner[i], ep->p.size);
            return FMCU_EP_MISUSE;
        }
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaSetDevice(ep->p.device);
    if (e == cudaSuccess)
        e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    if (e != cudaSuccess)
        return failf(why, cap, "cudaStreamIsCapturing", e);
    if (cs != cudaStreamCaptureStatusNone) {
        snprintf(why, cap,
                 "EP group: the expert placement changed (or was never seen) while a CUDA graph is being captured; run "
                 "one forward of the layer before capturing it");
        return FMCU_EP_MISUSE;
    }
    if (!ep->owner_host && !(ep->owner_host = new (std::nothrow) int32_t[n])) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    if ((e = cudaStreamSynchronize((cudaStream_t)stream)) != cudaSuccess ||
        (e = cudaMemcpy(ep->owner, owner, (size_t)n * 4, cudaMemcpyHostToDevice)) != cudaSuccess)
        return failf(why, cap, "uploading the expert placement", e);
    memcpy(ep->owner_host, owner, (size_t)n * 4);
    return 0;
}

extern "C" int fmcu_ep_dispatch(fmcu_ep *ep, const void *x, int64_t x_ld, const int32_t *ids, const float *w,
                                int64_t m, uint64_t *load, void *stream, int64_t *rows, char *why, size_t cap)
{
    const bool ht = ep->p.mode == FMOE_EP_MODE_HIGH_THROUGHPUT;
    if (m < 0 || m > ep->p.max_tokens) {
        snprintf(why, cap, "EP group: %lld tokens on rank %u; the group holds at most %u per rank (max_tokens_per_rank)",
                 (long long)m, ep->p.rank, ep->p.max_tokens);
        return FMCU_EP_MISUSE;
    }
    if (((uintptr_t)x % 16) || (x_ld % 8)) {
        snprintf(why, cap, "EP group: x must be 16-byte aligned with a row stride that is a multiple of 8 elements");
        return FMCU_EP_MISUSE;
    }
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaSetDevice(ep->p.device);
    /* A forward captured in a graph is not timed: the events would need a
     * synchronize, which capture forbids. */
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (e == cudaSuccess)
        e = cudaStreamIsCapturing(st, &cs);
    if (e == cudaSuccess && ht && cs != cudaStreamCaptureStatusNone) {
        snprintf(why, cap,
                 "EP group: a high_throughput forward waits on the host for the count of rows it received, which a "
                 "CUDA graph capture forbids; capture a group made with mode low_latency");
        return FMCU_EP_MISUSE;
    }
    ep->timing_now = ep->p.timing && cs == cudaStreamCaptureStatusNone;
    if (e == cudaSuccess && ep->timing_now)
        e = cudaEventRecord(ep->ev[0], st);
    if (e == cudaSuccess)
        e = fmcu_ep_launch_dispatch(ep->c, x, x_ld, ids, w, m, load, st);
    if (e != cudaSuccess)
        return failf(why, cap, "dispatch", e);
    if (ep->transport == FMCU_EP_TRANSPORT_COLLECTIVE &&
        exchange(ep, ep->L.send_disp, ep->L.disp, ep->L.disp_chunk, st, why, cap) != 0)
        return -1;
    if (e == cudaSuccess && ht) {
        e = fmcu_ep_launch_plan(ep->c, ep->pos, ep->rows_dev, st);
        if (e == cudaSuccess)
            e = cudaEventRecord(ep->planned, st);
    }
    if (e == cudaSuccess)
        e = fmcu_ep_launch_unpack(ep->c, ep->x_in, ep->ids_in, ep->w_in, ep->live, ht ? ep->pos : nullptr, st);
    if (e == cudaSuccess && ep->timing_now)
        e = cudaEventRecord(ep->ev[1], st);
    /* The one host synchronization of a high-throughput forward: the plan's
     * R (unpack runs meanwhile). Bounded: the plan's waits on peers are. */
    if (e == cudaSuccess && ht)
        e = cudaEventSynchronize(ep->planned);
    if (e != cudaSuccess)
        return failf(why, cap, "dispatch", e);
    if (ht && fmcu_ep_check(ep, why, cap) != 0)
        return -1;
    const int64_t cap_rows = (int64_t)ep->p.size * ep->p.max_tokens;
    *rows = ht ? *(volatile int64_t *)ep->rows_host : cap_rows;
    if (*rows < 0 || *rows > cap_rows) {
        snprintf(why, cap, "EP group: the row plan counted %lld rows, beyond the %lld the group holds", (long long)*rows,
                 (long long)cap_rows);
        return -1;
    }
    return 0;
}

extern "C" int fmcu_ep_mark_experts_done(fmcu_ep *ep, void *stream, char *why, size_t cap)
{
    cudaError_t e = ep->timing_now ? cudaEventRecord(ep->ev[2], (cudaStream_t)stream) : cudaSuccess;
    return e == cudaSuccess ? 0 : failf(why, cap, "cudaEventRecord", e);
}

extern "C" int fmcu_ep_combine(fmcu_ep *ep, void *out, int64_t out_ld, const int32_t *ids, int64_t m, void *stream,
                               char *why, size_t cap)
{
    if (((uintptr_t)out % 16) || (out_ld % 8)) {
        snprintf(why, cap, "EP group: out must be 16-byte aligned with a row stride that is a multiple of 8 elements");
        return -1;
    }
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaSetDevice(ep->p.device);
    if (e == cudaSuccess)
        e = fmcu_ep_launch_combine_send(ep->c, ep->y, ep->live,
                                        ep->p.mode == FMOE_EP_MODE_HIGH_THROUGHPUT ? ep->pos : nullptr, st);
    if (e != cudaSuccess)
        return failf(why, cap, "combine", e);
    if (ep->transport == FMCU_EP_TRANSPORT_COLLECTIVE &&
        exchange(ep, ep->L.send_comb, ep->L.comb, ep->L.comb_chunk, st, why, cap) != 0)
        return -1;
    e = fmcu_ep_launch_finish(ep->c, ids, out, out_ld, m, ep->seq, st);
    if (e == cudaSuccess)
        e = timing_end(ep, st);
    if (e != cudaSuccess)
        return failf(why, cap, "combine", e);
    return 0;
}

extern "C" int fmcu_ep_extra_of(const fmcu_ep *ep, fmcu_ep_extra *out)
{
    if (ep->transport != FMCU_EP_TRANSPORT_LSA || !ep->extra_at)
        return -1;
    memset(out, 0, sizeof *out);
    for (uint32_t q = 0; q < ep->p.size; q++)
        out->base[q] = ep->c.p.base[q] + ep->extra_at;
    out->bytes = ep->p.extra_bytes;
    out->rank = ep->p.rank;
    out->size = ep->p.size;
    out->max_tokens = ep->p.max_tokens;
    out->mode = ep->p.mode;
    out->timeout_ns = ep->c.timeout_ns;
    out->fail = ep->c.fail;
    return 0;
}

extern "C" int fmcu_ep_timing_mark(fmcu_ep *ep, int phase, void *stream, char *why, size_t cap)
{
    cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaSuccess;
    if (phase == 0) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        e = cudaStreamIsCapturing(st, &cs);
        ep->timing_now = e == cudaSuccess && ep->p.timing && cs == cudaStreamCaptureStatusNone;
    }
    if (e == cudaSuccess && ep->timing_now)
        e = phase == 3 ? timing_end(ep, st) : phase >= 0 && phase < 3 ? cudaEventRecord(ep->ev[phase], st)
                                                                      : cudaErrorInvalidValue;
    return e == cudaSuccess ? 0 : failf(why, cap, "timing mark", e);
}

extern "C" int fmcu_ep_timing(fmcu_ep *ep, int reset, uint64_t *forwards, double *dispatch_s, double *experts_s,
                              double *combine_s, char *why, size_t cap)
{
    if (!ep->p.timing) {
        snprintf(why, cap, "EP group: made without timing");
        return -1;
    }
    *forwards = ep->forwards;
    *dispatch_s = ep->sums[0];
    *experts_s = ep->sums[1];
    *combine_s = ep->sums[2];
    if (reset) {
        ep->forwards = 0;
        ep->sums[0] = ep->sums[1] = ep->sums[2] = 0.0;
    }
    return 0;
}
