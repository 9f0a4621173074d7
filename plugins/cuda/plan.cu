/*
 * plugins/cuda/plan.cu - the forward's plan step: the local expert of
 * every (token, slot) pair through the expert map (ids out of range or not
 * local: -1, no contribution), the per-expert counts and offsets, the pairs
 * sorted by expert and the row-tile list the GEMMs walk. One block plans a
 * call (plan_kernel; its blocks 1..M quantize the GEMM1 input rows, the
 * decode chain's separate quant launch folded in); from the option
 * plan_wide_pairs (launch_shape.h) on, the same runs over many blocks in
 * two launches (plan_count_kernel, plan_scatter_kernel).
 */
#include <cuda_runtime.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/quant_row.cuh"

namespace {

using fmcu_fwd::plan_args;
using fmcu_fwd::plan_wide;
using fmcu_quant::quant_row;

/* Exclusive prefix sums of two per-thread values over the block (blockDim
 * a multiple of 32, at most 1024); the totals go to *total_a / *total_b. */
__device__ void block_scan2(int a, int b, int *ex_a, int *ex_b, int *total_a, int *total_b)
{
    __shared__ int wa[32], wb[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int ia = a, ib = b;
    for (int o = 1; o < 32; o <<= 1) {
        int xa = __shfl_up_sync(0xffffffffu, ia, o), xb = __shfl_up_sync(0xffffffffu, ib, o);
        if (lane >= o) {
            ia += xa;
            ib += xb;
        }
    }
    if (lane == 31) {
        wa[w] = ia;
        wb[w] = ib;
    }
    __syncthreads();
    if (w == 0) {
        int va = lane < nw ? wa[lane] : 0, vb = lane < nw ? wb[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int xa = __shfl_up_sync(0xffffffffu, va, o), xb = __shfl_up_sync(0xffffffffu, vb, o);
            if (lane >= o) {
                va += xa;
                vb += xb;
            }
        }
        if (lane < nw) {
            wa[lane] = va; /* inclusive prefix over warps */
            wb[lane] = vb;
        }
    }
    __syncthreads();
    const int base_a = w ? wa[w - 1] : 0, base_b = w ? wb[w - 1] : 0;
    *ex_a = base_a + ia - a;
    *ex_b = base_b + ib - b;
    *total_a = wa[nw - 1];
    *total_b = wb[nw - 1];
}

constexpr int PLAN_BATCH = 8;

/* The local expert of a routed id: -1 when out of range or not on this rank. */
__device__ __forceinline__ int local_of(const plan_args &a, int32_t id)
{
    if (id < 0 || (uint32_t)id >= a.global_experts)
        return -1;
    const int l = a.expert_map ? a.expert_map[id] : id;
    return l >= 0 && l < (int)a.local_experts ? l : -1;
}

/* Pairs p0 + j * stride (j < N) to their local experts (pair_local), counted
 * into shared cnt; all N ids are loaded before the first is used. */
template <int N>
__device__ __forceinline__ void count_pairs(const plan_args &a, int64_t p0, int64_t stride, int *cnt)
{
    int32_t id[N];
#pragma unroll
    for (int j = 0; j < N; j++) {
        const int64_t p = p0 + j * stride;
        id[j] = p < a.pairs ? a.ids[p] : -1;
    }
#pragma unroll
    for (int j = 0; j < N; j++) {
        const int64_t p = p0 + j * stride;
        if (p >= a.pairs)
            break;
        const int l = local_of(a, id[j]);
        a.pair_local[p] = l;
        if (l >= 0)
            atomicAdd(&cnt[l], 1);
    }
}

/* From the per-expert counts in shared memory (cnt[E]): the offsets (to
 * shared off[E + 1] and global a.offsets), the row-tile list and its
 * length. Each thread takes a contiguous run of experts; one block. */
__device__ void plan_layout(const plan_args &a, const int *cnt, int *off)
{
    const int E = (int)a.local_experts, rt = (int)a.row_tile;
    const int per = (E + (int)blockDim.x - 1) / (int)blockDim.x;
    const int l0 = min(E, (int)threadIdx.x * per), l1 = min(E, l0 + per);
    int rows = 0, tiles = 0;
    for (int l = l0; l < l1; l++) {
        rows += cnt[l];
        tiles += (cnt[l] + rt - 1) / rt;
    }
    int row0, tile0, total_rows, total_tiles;
    block_scan2(rows, tiles, &row0, &tile0, &total_rows, &total_tiles);
    for (int l = l0; l < l1; l++) {
        off[l] = row0;
        a.offsets[l] = row0;
        for (int r = 0; r < cnt[l]; r += rt)
            a.tiles[tile0++] = make_int2(l, row0 + r);
        row0 += cnt[l];
    }
    if (threadIdx.x == 0) {
        off[E] = total_rows;
        a.offsets[E] = total_rows;
        *a.n_tiles = total_tiles;
    }
}

/* Block 0 plans; every step is parallel over pairs or experts (a serial
 * loop over experts costs a global-memory latency per expert, which at
 * decode sizes is most of the kernel). Blocks 1.. (when the forward asks)
 * quantize one row of the GEMM1 input each, as quantize.cu's quant_kernel
 * would: one launch less in the decode chain. Calls of plan_wide_pairs
 * pairs or more take plan_count_kernel and plan_scatter_kernel instead. */
__global__ void plan_kernel(const plan_args a)
{
    extern __shared__ int cnt[]; /* [E_local] counts, then [E_local + 1] offsets */
    __shared__ float red[32];
    const int E = (int)a.local_experts;
    int *off = cnt + E;
    fmcu_dev::pdl_trigger();
    if (blockIdx.x > 0) { /* the GEMM1 input, one row per block */
        fmcu_dev::pdl_wait();
        /* The scalar loop, so that plan_kernel stays the code it was:
         * with the register path inlined (and __launch_bounds__(1024)) the
         * bf16 M=1 chain, where block 0 alone runs and every other kernel
         * was unchanged, lost 2.5-4 us on an H100 (Qwen3-30B-A3B; 0.7-1.6
         * at gpt-oss-120b; bench/cuda/RESULTS.md at 5ddad69, "Decode: GEMM-input rows
         * quantized in registers"), more than the register path saved here
         * (x has 2048-7168 values). */
        quant_row<false>(a.q, blockIdx.x - 1, red);
        return;
    }
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    fmcu_dev::pdl_wait();
    __syncthreads();
    /* PLAN_BATCH pairs a thread per step, their loads first (a load
     * latency per pair and thread was most of the kernel: 97 -> 80 us at
     * 65536 pairs on an H100, bench/cuda/RESULTS.md at 5ddad69, "Prefill: the
     * activation and plan kernels"). */
    const int64_t step = (int64_t)blockDim.x * PLAN_BATCH;
    for (int64_t p0 = threadIdx.x; p0 < a.pairs; p0 += step)
        count_pairs<PLAN_BATCH>(a, p0, blockDim.x, cnt);
    __syncthreads();
    plan_layout(a, cnt, off);
    __syncthreads();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    __syncthreads();
    for (int64_t p0 = threadIdx.x; p0 < a.pairs; p0 += step) {
        int l[PLAN_BATCH];
#pragma unroll
        for (int j = 0; j < PLAN_BATCH; j++) {
            const int64_t p = p0 + (int64_t)j * blockDim.x;
            l[j] = p < a.pairs ? a.pair_local[p] : -1;
        }
#pragma unroll
        for (int j = 0; j < PLAN_BATCH; j++)
            if (l[j] >= 0)
                a.sorted[off[l[j]] + atomicAdd(&cnt[l[j]], 1)] = (int32_t)(p0 + (int64_t)j * blockDim.x);
    }
}

/* The plan over many blocks, for prefill-sized calls, where one block
 * walking every pair twice was 80 us at 65536 pairs (Qwen3-30B-A3B,
 * M = 8192; bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and plan
 * kernels"). Two launches over chunks of PLAN_WIDE_CHUNK pairs:
 *   count    each block: its pairs' local experts, a shared histogram added
 *            into wide.counts; the last block to finish (a done counter,
 *            as CUDA's threadFenceReduction sample) takes the counts (and
 *            zeroes them and the counter for the next call), then writes
 *            the offsets and the tile list as plan_kernel does and sets each
 *            expert's cursor to its offset;
 *   scatter  each block ranks its pairs per expert in shared memory, takes
 *            a run of each expert's positions with one atomicAdd on the
 *            cursor, and writes its pair ids there.
 * The order of an expert's pairs in `sorted` depends on timing, as in
 * plan_kernel (shared atomics): the GEMMs compute each row alone, so no
 * result depends on it. counts and done start at zero (zeroed at create). */
constexpr int PLAN_WIDE_THREADS = 512, PLAN_WIDE_BATCH = 4;
constexpr int PLAN_WIDE_CHUNK = PLAN_WIDE_THREADS * PLAN_WIDE_BATCH;
__global__ void __launch_bounds__(PLAN_WIDE_THREADS) plan_count_kernel(const plan_args a, const plan_wide w)
{
    extern __shared__ int cnt[]; /* [E_local], then [E_local + 1] offsets in the last block */
    __shared__ int last;
    const int E = (int)a.local_experts;
    fmcu_dev::pdl_trigger();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    fmcu_dev::pdl_wait();
    __syncthreads();
    count_pairs<PLAN_WIDE_BATCH>(a, (int64_t)blockIdx.x * PLAN_WIDE_CHUNK + threadIdx.x, PLAN_WIDE_THREADS, cnt);
    __syncthreads();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        if (cnt[i])
            atomicAdd(&w.counts[i], cnt[i]);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(w.done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = atomicExch(&w.counts[i], 0);
    if (threadIdx.x == 0)
        *w.done = 0;
    __syncthreads();
    int *off = cnt + E;
    plan_layout(a, cnt, off);
    __syncthreads();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        w.cursor[i] = off[i];
}

__global__ void __launch_bounds__(PLAN_WIDE_THREADS) plan_scatter_kernel(const plan_args a, const plan_wide w)
{
    extern __shared__ int cnt[]; /* [E_local] this block's pairs per expert, then [E_local] their first position */
    const int E = (int)a.local_experts;
    int *base = cnt + E;
    fmcu_dev::pdl_trigger();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    fmcu_dev::pdl_wait();
    __syncthreads();
    const int64_t p0 = (int64_t)blockIdx.x * PLAN_WIDE_CHUNK + threadIdx.x;
    int l[PLAN_WIDE_BATCH], rank[PLAN_WIDE_BATCH];
#pragma unroll
    for (int j = 0; j < PLAN_WIDE_BATCH; j++) {
        const int64_t p = p0 + (int64_t)j * PLAN_WIDE_THREADS;
        l[j] = p < a.pairs ? a.pair_local[p] : -1;
    }
#pragma unroll
    for (int j = 0; j < PLAN_WIDE_BATCH; j++)
        rank[j] = l[j] >= 0 ? atomicAdd(&cnt[l[j]], 1) : 0;
    __syncthreads();
    for (int i = threadIdx.x; i < E; i += blockDim.x)
        if (cnt[i])
            base[i] = atomicAdd(&w.cursor[i], cnt[i]);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < PLAN_WIDE_BATCH; j++)
        if (l[j] >= 0)
            a.sorted[base[l[j]] + rank[j]] = (int32_t)(p0 + (int64_t)j * PLAN_WIDE_THREADS);
}

} // namespace

cudaError_t fmcu_fwd::plan_launch(const plan_args &a, unsigned quant_rows, cudaStream_t st)
{
    const size_t smem = (2 * (size_t)a.local_experts + 1) * sizeof(int);
    return fmcu_dev::launch_overlapped(plan_kernel, dim3(1 + quant_rows), dim3(1024), smem, st, a);
}

cudaError_t fmcu_fwd::plan_wide_launch(const plan_args &a, const plan_wide &w, cudaStream_t st)
{
    const size_t smem = (2 * (size_t)a.local_experts + 1) * sizeof(int);
    const dim3 chunks((unsigned)((a.pairs + PLAN_WIDE_CHUNK - 1) / PLAN_WIDE_CHUNK));
    cudaError_t e = fmcu_dev::launch_overlapped(plan_count_kernel, chunks, dim3(PLAN_WIDE_THREADS), smem, st, a, w);
    if (e != cudaSuccess)
        return e;
    return fmcu_dev::launch_overlapped(plan_scatter_kernel, chunks, dim3(PLAN_WIDE_THREADS), smem, st, a, w);
}
