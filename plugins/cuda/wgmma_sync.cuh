/*
 * plugins/cuda/wgmma_sync.cuh - the ordering around asynchronous wgmma
 * (sm_90a) shared by the kernels that issue it (grouped_gemm_sm90.cu,
 * wq_wgmma.cu), and the shared-memory descriptor of their K-major operands.
 */
#ifndef FMOE_PLUGIN_CUDA_WGMMA_SYNC_CUH
#define FMOE_PLUGIN_CUDA_WGMMA_SYNC_CUH

#include <stdint.h>

namespace fmcu_wgmma {

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keep the compiler from moving register reads or writes (accumulators,
 * register A operands) across the asynchronous wgmma boundary. */
template <int R> __device__ __forceinline__ void fence_regs(float (&r)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}

template <int R> __device__ __forceinline__ void fence_regs(uint32_t (&r)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+r"(r[i])::"memory");
}

/* Matrix descriptor of a K-major operand in 128-byte-swizzled rows of 128 B:
 * 8-row core-matrix groups 1024 B apart (stride byte offset); the leading
 * offset is unused with swizzling. Adding 32 B (2 in the address field)
 * steps K by 32 bytes (32 e4m3, 16 bf16) inside the swizzle atom. */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

} // namespace fmcu_wgmma

#endif
