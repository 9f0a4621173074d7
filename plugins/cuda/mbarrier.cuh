/*
 * plugins/cuda/mbarrier.cuh - the shared-memory barriers and bulk copies of
 * the async proxy (sm_90+), as the kernels that stage operands with TMA,
 * cp.async.bulk or cp.async use them (grouped_gemm_sm90.cu, decode_tail.cu,
 * wq_wgmma.cu, wq_ring.cu). A copy
 * counts its bytes down on an mbarrier; a waiter spins on the barrier's
 * phase parity. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_MBARRIER_CUH
#define FMOE_PLUGIN_CUDA_MBARRIER_CUH

#include <stdint.h>

namespace fmcu_async {

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* Make initialized barriers visible to the async proxy (and the cluster). */
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("{\n.reg .b64 s;\nmbarrier.arrive.shared::cta.b64 s, [%0];\n}\n" ::"r"(bar) : "memory");
}

/* Arrive, and expect `bytes` more of asynchronous copies in this phase. */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("{\n.reg .b64 s;\nmbarrier.arrive.expect_tx.shared::cta.b64 s, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

/* An arrival on `bar` made when every cp.async this thread issued before
 * it has completed; the thread goes on at once. The arrival counts as one
 * of the phase's expected arrivals (noinc: the barrier's count includes it). */
__device__ __forceinline__ void mbar_arrive_on_cp_async(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* `bytes` (a multiple of 16, both addresses 16-byte aligned) from global
 * memory into shared memory, counted on `bar`. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* Order this thread's earlier generic-proxy accesses to shared memory
 * before later async-proxy ones (a slot read by threads, then refilled by
 * a bulk copy; or written by threads, then stored by TMA). */
__device__ __forceinline__ void fence_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* A 2-D box of the tensor map at `map` (a CUtensorMap in kernel-parameter
 * or global memory) at coordinates (c0, c1), c0 the inner one, counted in
 * bytes on `bar`. */
__device__ __forceinline__ void tma_load(uint32_t dst, const void *map, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

/* A 4-D box of the tensor map at `map` at coordinates (c0 .. c3), c0 the
 * inner one, counted in bytes on `bar`. */
__device__ __forceinline__ void tma_load4(uint32_t dst, const void *map, int c0, int c1, int c2, int c3, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

/* 16 bytes by cp.async, or zeros when !valid (the source is then not read). */
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

/* A 32-bit word of shared memory (a dequantizing lane's fragment word). */
__device__ __forceinline__ uint32_t lds32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
    return v;
}

} // namespace fmcu_async

#endif
