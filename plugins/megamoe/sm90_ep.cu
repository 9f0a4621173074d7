/*
 * plugins/megamoe/sm90_ep.cu - the SM90 path's fused EP forward (sm90.h
 * mm90_ep_*; docs/MEGAMOE.md "Expert parallelism, fused"): the rows move
 * between ranks already quantized, and each expert's output row goes
 * straight to its token's rank, over the EP group's NCCL window
 * (ep_fused_layout.h; NVLink load/store). A forward, on the caller's
 * stream, no host synchronization:
 *
 *   send     this rank's tokens quantized (the method's input rule, the
 *            same bytes the single-device forward makes) into its own
 *            window with their ids, weights and count; the layer's load
 *            record counted; then the last block a release-add on every
 *            rank's arrive_send[me]
 *   gather   wait for every rank's send, then each row of every rank that
 *            has an expert here: its e4m3 codes and scales read from that
 *            rank's window into the workspace row s x T + t, its ids and
 *            weights into ids_in / w_in (all -1 where no expert is here)
 *   (route, GEMM1, GEMM2: sm90_forward.cu, on the size x T rows; GEMM2's
 *   epilogue writes each pair's row (bf16) into slot j of token t in the
 *   comb of the token's rank, over NVLink while the GEMM runs, and each
 *   of its threads fences its stores at system scope before it exits)
 *   finish   a release-add on every rank's arrive_comb[me] (GEMM2's rows
 *            are in place), wait for every rank's, then out_t = bf16(f32
 *            sum of comb[j][t] over the token's valid slots in ascending
 *            j): the single-device combine's rule over the same rows, so
 *            the output does not depend on the ranks (docs/MEGAMOE.md);
 *            its last block advances the forward count (the targets)
 *
 * The launches after send are programmatic (device_math.cuh): each starts
 * while its predecessor drains and waits for it before it reads.
 *
 * Buffer reuse needs no more waits: a rank writes its window's rows for
 * forward i + 1 only after its finish of forward i, which waited for every
 * rank's combine arrival of forward i, which each rank makes after its
 * GEMM2, after its gather of forward i read those rows; and a rank's GEMM2
 * writes into another's comb for forward i + 1 only after its gather of
 * i + 1 saw that rank's send, which follows that rank's finish of forward
 * i (the last reader of its comb).
 *
 * Waits are bounded as the transport's (plugins/cuda/ep_kernels.cuh): a
 * rank that does not arrive within the group's timeout is recorded in the
 * group's failure record, the kernels finish, and the next forward
 * reports it.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/ep_kernels.cuh"
#include "plugins/megamoe/sm90.h"
#include "plugins/megamoe/sm90_quant.cuh"

namespace {

constexpr int WARP = 32;
constexpr int THREADS = 256, WARPS = THREADS / WARP;
/* At most this many blocks a kernel; each is sized by its work (the last
 * block of a kernel signals the peers, so the targets do not depend on
 * the grid). */
constexpr unsigned MAX_BLOCKS = 264;
enum { DONE_SEND = 0, DONE_FINISH = 1 };

struct ep_args {
    char *base[MM_EPF_MAX_RANKS];
    mm_epf_layout L;
    uint32_t rank, num_global;
    int32_t expert_base; /* global id of local expert 0 */
    uint32_t local;      /* local experts */
    uint64_t timeout_ns;
    fmcu_ep_dev::fail_record *fail;
};

/* What every rank's counter reaches in this forward: the forwards done + 1. */
__device__ __forceinline__ uint64_t target(const ep_args &a)
{
    return *reinterpret_cast<const uint64_t *>(a.base[a.rank] + a.L.seq) + 1;
}

/* Every thread returns once each rank's counter at `off` reached target
 * (or the wait timed out and was recorded). */
__device__ void wait_ranks(const ep_args &a, uint64_t off, uint64_t goal, uint32_t phase)
{
    const uint64_t *counter = reinterpret_cast<const uint64_t *>(a.base[a.rank] + off);
    for (uint32_t s = threadIdx.x; s < a.L.size; s += blockDim.x) {
        const uint64_t t0 = fmcu_ep_dev::now_ns();
        while (fmcu_ep_dev::ld_acquire(counter + s) < goal) {
            if (fmcu_ep_dev::now_ns() - t0 > a.timeout_ns) {
                a.fail->missing[s] = 1;
                a.fail->phase = phase;
                a.fail->failed = 1;
                break;
            }
        }
    }
    __syncthreads();
}

/* The end of a block: true in one thread of the grid's last block to get
 * here, after every block's writes are visible on the device (each block
 * fences before it counts itself on done[which]; the counter is reset for
 * the next forward). */
__device__ bool last_block(const ep_args &a, int which)
{
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t *done = reinterpret_cast<uint32_t *>(a.base[a.rank] + a.L.done) + which;
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
        if (last) {
            *done = 0;
            __threadfence();
        }
    }
    __syncthreads();
    return last && threadIdx.x == 0;
}

/* After every block's writes (the caller is last_block's thread): one
 * release-add on every rank's counter at `off` + this rank. */
__device__ void arrive_all(const ep_args &a, uint64_t off)
{
    __threadfence_system();
    for (uint32_t r = 0; r < a.L.size; r++)
        fmcu_ep_dev::red_release_add(reinterpret_cast<uint64_t *>(a.base[r] + off) + a.rank, 1);
}

/* A warp copies n 16-byte chunks, U loads in flight a lane before their
 * stores: a peer's memory is a round trip over NVLink away, and a loop of
 * dependent load-store pairs would pay it once a chunk. */
template <int U> __device__ __forceinline__ void warp_copy16(uint4 *dst, const uint4 *src, uint32_t n, int lane)
{
    for (uint32_t c0 = (uint32_t)lane; c0 < n; c0 += WARP * U) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (c0 + u * WARP < n)
                v[u] = src[c0 + u * WARP];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (c0 + u * WARP < n)
                dst[c0 + u * WARP] = v[u];
    }
}

__global__ void __launch_bounds__(THREADS)
    ep_send(ep_args a, const __nv_bfloat16 *__restrict__ x, int64_t x_ld, const int32_t *__restrict__ ids,
            int64_t ids_ld, const float *__restrict__ w, int64_t w_ld, uint32_t m, uint64_t *load)
{
    fmcu_dev::pdl_trigger(); /* the gather may launch now; it waits for this grid first */
    char *own = a.base[a.rank];
    const uint32_t H = a.L.hidden, k = a.L.top_k;
    uint8_t *xq = reinterpret_cast<uint8_t *>(own + a.L.x);
    float *xs = reinterpret_cast<float *>(own + a.L.xs);
    const uint64_t groups = (uint64_t)m * (H / 32);
    for (uint64_t wi = (uint64_t)blockIdx.x * WARPS + threadIdx.x / WARP; wi < groups; wi += (uint64_t)gridDim.x * WARPS)
        mm90_dev::quant_group(x, x_ld, m, H, a.L.xs_pitch, wi, (int)(threadIdx.x % WARP), xq, xs);
    int32_t *oid = reinterpret_cast<int32_t *>(own + a.L.ids);
    float *ow = reinterpret_cast<float *>(own + a.L.w);
    for (uint64_t i = (uint64_t)blockIdx.x * THREADS + threadIdx.x; i < (uint64_t)m * k;
         i += (uint64_t)gridDim.x * THREADS) {
        const uint64_t t = i / k, j = i % k;
        const int32_t id = ids[(int64_t)t * ids_ld + (int64_t)j];
        oid[i] = id;
        ow[i] = w[(int64_t)t * w_ld + (int64_t)j];
        if (load && id >= 0 && (uint32_t)id < a.num_global)
            atomicAdd(reinterpret_cast<unsigned long long *>(load + id), 1ull);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *reinterpret_cast<uint32_t *>(own + a.L.count) = m;
    if (last_block(a, DONE_SEND))
        arrive_all(a, a.L.arrive_send);
}

/* A warp per row s x T + t of the workspace. */
__global__ void __launch_bounds__(THREADS) ep_gather(ep_args a, uint8_t *__restrict__ xq, float *__restrict__ xs)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    wait_ranks(a, a.L.arrive_send, target(a), 1);
    const uint32_t T = a.L.max_tokens, H = a.L.hidden, k = a.L.top_k, pitch = a.L.xs_pitch;
    char *own = a.base[a.rank];
    int32_t *ids_in = reinterpret_cast<int32_t *>(own + a.L.ids_in);
    float *w_in = reinterpret_cast<float *>(own + a.L.w_in);
    const int lane = (int)(threadIdx.x % WARP);
    const uint64_t rows = (uint64_t)a.L.size * T;
    for (uint64_t g = (uint64_t)blockIdx.x * WARPS + threadIdx.x / WARP; g < rows; g += (uint64_t)gridDim.x * WARPS) {
        const uint32_t s = (uint32_t)(g / T), t = (uint32_t)(g % T);
        const char *src = a.base[s];
        const bool live = t < *reinterpret_cast<const volatile uint32_t *>(src + a.L.count);
        int32_t id = -1;
        float wv = 0.0f;
        if (live && (uint32_t)lane < k) {
            id = reinterpret_cast<const int32_t *>(src + a.L.ids)[(uint64_t)t * k + lane];
            wv = reinterpret_cast<const float *>(src + a.L.w)[(uint64_t)t * k + lane];
        }
        const bool here = id >= a.expert_base && (uint32_t)(id - a.expert_base) < a.local;
        const bool any = __any_sync(0xffffffffu, here);
        if ((uint32_t)lane < k) {
            ids_in[g * k + lane] = any ? id : -1;
            w_in[g * k + lane] = wv;
        }
        if (!any)
            continue;
        warp_copy16<8>(reinterpret_cast<uint4 *>(xq + g * H),
                       reinterpret_cast<const uint4 *>(src + a.L.x + (uint64_t)t * H), H / 16, lane);
        const float *ss = reinterpret_cast<const float *>(src + a.L.xs) + (uint64_t)t * pitch;
        for (uint32_t c = lane; c < H / 32; c += WARP)
            xs[g * pitch + c] = ss[c];
    }
}

/* A thread per 8 outputs of this rank's tokens (GEMM2 is complete when
 * pdl_wait returns). */
__global__ void __launch_bounds__(THREADS)
    ep_finish(ep_args a, const int32_t *__restrict__ ids, int64_t ids_ld, uint32_t m, __nv_bfloat16 *out,
              int64_t out_ld)
{
    fmcu_dev::pdl_wait();
    /* GEMM2 wrote this rank's pairs' rows into their ranks' comb (each of
     * its threads fenced them at system scope): tell every rank */
    if (blockIdx.x == 0 && threadIdx.x == 0)
        arrive_all(a, a.L.arrive_comb);
    const uint64_t goal = target(a);
    wait_ranks(a, a.L.arrive_comb, goal, 2);
    const uint32_t T = a.L.max_tokens, H = a.L.hidden, k = a.L.top_k;
    const uint4 *comb = reinterpret_cast<const uint4 *>(a.base[a.rank] + a.L.comb);
    const uint64_t per = H / 8, n = (uint64_t)m * per;
    for (uint64_t i = (uint64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (uint64_t)gridDim.x * THREADS) {
        const uint64_t t = i / per, c = i % per;
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        /* eight slots' loads in flight, then their sums in ascending order */
        for (uint32_t j0 = 0; j0 < k; j0 += 8) {
            uint4 v[8];
            bool ok[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const uint32_t j = j0 + u;
                const int32_t id = j < k ? ids[(int64_t)t * ids_ld + j] : -1;
                ok[u] = id >= 0 && (uint32_t)id < a.num_global;
                if (ok[u])
                    v[u] = comb[((uint64_t)j * T + t) * per + c];
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                if (!ok[u])
                    continue;
                const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v[u]);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 f = __bfloat1622float2(h[e]);
                    acc[2 * e] += f.x;
                    acc[2 * e + 1] += f.y;
                }
            }
        }
        uint4 o;
        __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&o);
        for (int e = 0; e < 4; e++)
            oh[e] = __floats2bfloat162_rn(acc[2 * e], acc[2 * e + 1]);
        *reinterpret_cast<uint4 *>(out + (int64_t)t * out_ld + (int64_t)c * 8) = o;
    }
    /* the forward count, once every block has read it */
    if (last_block(a, DONE_FINISH))
        *reinterpret_cast<uint64_t *>(a.base[a.rank] + a.L.seq) = goal;
}

unsigned blocks_for(uint64_t work, uint64_t per_block)
{
    const uint64_t b = (work + per_block - 1) / per_block;
    return (unsigned)(b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

int fail(cudaError_t e, const char *what, char *why, size_t cap)
{
    snprintf(why, cap, "MegaMoE SM90 fused EP: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

ep_args args_of(const mm90_ep_call *c, const mm90_work_ptrs &w)
{
    ep_args a;
    for (uint32_t r = 0; r < MM_EPF_MAX_RANKS; r++)
        a.base[r] = r < c->L.size ? c->base[r] : nullptr;
    a.L = c->L;
    a.rank = c->rank;
    a.num_global = c->num_global;
    a.expert_base = c->c.expert_base;
    a.local = w.experts;
    a.timeout_ns = c->timeout_ns;
    a.fail = static_cast<fmcu_ep_dev::fail_record *>(c->fail);
    return a;
}

/* The layer's workspace, its device made current, the kernels' arguments. */
cudaError_t prepare(mm90_layer *l, const mm90_ep_call *c, mm90_work_ptrs &w, ep_args &a)
{
    mm90_work_of(l, &w);
    a = args_of(c, w);
    return cudaSetDevice(w.device);
}

} // namespace

extern "C" int mm90_ep_dispatch(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap)
{
    mm90_work_ptrs w;
    ep_args a;
    cudaError_t e = prepare(l, c, w, a);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    cudaStream_t s = static_cast<cudaStream_t>(c->c.stream);
    const uint64_t groups = (uint64_t)c->c.m * (c->L.hidden / 32), rows = (uint64_t)c->L.size * c->L.max_tokens;
    ep_send<<<blocks_for(groups, WARPS), THREADS, 0, s>>>(a, static_cast<const __nv_bfloat16 *>(c->c.x), c->c.x_ld,
                                                          c->c.ids, c->c.ids_ld, c->c.weights, c->c.weights_ld,
                                                          c->c.m, c->load);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail(e, "send launch", why, cap);
    if ((e = fmcu_dev::launch_overlapped(ep_gather, dim3(blocks_for(rows, WARPS)), dim3(THREADS), 0, s, a, w.xq,
                                         w.xs)) != cudaSuccess)
        return fail(e, "gather launch", why, cap);
    return 0;
}

extern "C" int mm90_ep_combine(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap)
{
    mm90_work_ptrs w;
    ep_args a;
    cudaError_t e = prepare(l, c, w, a);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    const uint64_t outs = (uint64_t)c->c.m * (c->L.hidden / 8);
    if ((e = fmcu_dev::launch_overlapped(ep_finish, dim3(blocks_for(outs, THREADS)), dim3(THREADS), 0,
                                         static_cast<cudaStream_t>(c->c.stream), a, c->c.ids, c->c.ids_ld, c->c.m,
                                         static_cast<__nv_bfloat16 *>(c->c.out), c->c.out_ld)) != cudaSuccess)
        return fail(e, "finish launch", why, cap);
    return 0;
}
