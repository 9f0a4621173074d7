/*
 * plugins/cuda/ep_kernels.cuh - the kernels of an EP forward (ep_api.h), the
 * same for both transports; they write through the per-destination chunk
 * table of common_args (ep_layout.h) and read this rank's receive buffer:
 *
 *   dispatch       each of this rank's tokens: its row into the chunk of
 *                  every rank that holds one of its experts, its ids and
 *                  weights into every rank's (so no rank reads a stale row
 *                  as its own), the count; with arrival counters (lsa) one
 *                  release-add per block on each peer's disp_arrive[me]
 *                  (and, given the layer's load record, +1 per valid slot)
 *   (collective: the host's ncclSend/ncclRecv of the chunks)
 *   plan           HIGH_THROUGHPUT only: [wait for every source's blocks,]
 *                  pack the live rows (ep_plan.h) and write their count R
 *                  to host-mapped memory (the host reads it, then applies
 *                  the method on R rows)
 *   unpack         [wait,] then each received row with a local expert into
 *                  the method's input rows (FP8 dequantized): low latency,
 *                  at its own row, every other row's ids to -1; high
 *                  throughput, at its packed row
 *   (the method's apply)
 *   combine_send   each live row's result into its owner's combine chunk,
 *                  [then one release-add per block on each comb_arrive]
 *   (collective: the host's ncclSend/ncclRecv of the chunks)
 *   finish         [wait,] out[t] = the f32 sum of comb[r].y[t] over the
 *                  ranks r holding an expert of t, in rank order, rounded
 *                  once to the activation dtype
 *   advance        the forward count (the arrival targets) + 1
 *
 * lsa: peers' buffers are NCCL window memory mapped into this process (LSA
 * over NVLink); writes to them are plain stores ordered by
 * __threadfence_system before the release-add, and readers acquire the
 * counter before reading. Waits give up after timeout_ns and record the
 * missing ranks in host-mapped memory (fmcu_ep_fail). collective: every
 * write is local and stream order is the only synchronization (counted = 0:
 * no release-adds, no waits).
 */
#ifndef FMOE_PLUGIN_CUDA_EP_KERNELS_CUH
#define FMOE_PLUGIN_CUDA_EP_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/ep_layout.h"

namespace fmcu_ep_dev {

constexpr int THREADS = 256;
/* Blocks of the kernels whose every block signals peers: fixed per group,
 * so that the arrival targets are known without the counts. */
constexpr int DISPATCH_BLOCKS = 128, COMBINE_BLOCKS = 128;
constexpr int UNPACK_BLOCKS = 264, FINISH_BLOCKS = 132;
/* HIGH_THROUGHPUT's plan: one block scans every received row. */
constexpr int PLAN_THREADS = 1024;

/* Host-mapped: what a timed-out wait saw. */
struct fail_record {
    volatile uint32_t failed;                    /* 1: some wait timed out */
    volatile uint32_t phase;                     /* 1: dispatch, 2: combine */
    volatile uint8_t missing[FMCU_EP_MAX_RANKS]; /* 1: this rank did not arrive */
};

struct peers {
    /* Where this rank's chunk for destination r begins: lsa, chunk `me` of
     * r's receive buffer; collective, chunk r of the local staging (its own
     * chunk: the receive buffer, in both). */
    char *disp[FMCU_EP_MAX_RANKS];
    char *comb[FMCU_EP_MAX_RANKS];
    /* lsa: every rank's receive buffer as this process sees it (its arrival
     * counters); collective: unused */
    char *base[FMCU_EP_MAX_RANKS];
};

struct common_args {
    peers p;
    char *own;       /* this rank's receive buffer */
    uint32_t counted; /* 1: arrival counters and device waits (lsa); 0: stream order (collective) */
    fmcu_ep_layout L;
    uint32_t rank, num_experts;
    const int32_t *owner; /* [num_experts] */
    const uint64_t *seq;  /* forwards completed */
    uint64_t timeout_ns;
    fail_record *fail;
};

__device__ __forceinline__ uint64_t ld_acquire(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void red_release_add(uint64_t *p, uint64_t v)
{
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t now_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Every thread of the block returns once counter[s] >= target for all
 * sources s (or the wait timed out and was recorded); at once without
 * arrival counters (collective: the data arrived before the kernel began). */
__device__ inline void wait_all(const common_args &a, const uint64_t *counter, uint64_t target, uint32_t phase)
{
    for (uint32_t s = threadIdx.x; a.counted && s < a.L.size; s += blockDim.x) {
        const uint64_t t0 = now_ns();
        while (ld_acquire(counter + s) < target) {
            if (now_ns() - t0 > a.timeout_ns) {
                a.fail->missing[s] = 1;
                a.fail->phase = phase;
                a.fail->failed = 1;
                break;
            }
        }
    }
    __syncthreads();
}

__device__ __forceinline__ float to_f(int32_t dt, uint16_t h)
{
    return dt == FMOE_DTYPE_F16 ? __half2float(__ushort_as_half(h)) : __bfloat162float(__ushort_as_bfloat16(h));
}

__device__ __forceinline__ uint16_t from_f(int32_t dt, float v)
{
    return dt == FMOE_DTYPE_F16 ? __half_as_ushort(__float2half_rn(v)) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* The ranks holding an expert of token t (bit r), from its k ids. */
__device__ __forceinline__ uint64_t ranks_of(const common_args &a, const int32_t *ids, uint32_t k)
{
    uint64_t mask = 0;
    for (uint32_t j = 0; j < k; j++) {
        const int32_t id = ids[j];
        if (id >= 0 && (uint32_t)id < a.num_experts) {
            const int32_t r = a.owner[id];
            if (r >= 0 && (uint32_t)r < a.L.size)
                mask |= 1ull << r;
        }
    }
    return mask;
}

} // namespace fmcu_ep_dev

#endif
