/*
 * plugins/rocm/dialect.h - the few things HIP and CUDA spell differently,
 * so one kernel source builds with hipcc for AMD targets and with nvcc for
 * the NVIDIA test build (DESIGN.md, "ROCm without AMD hardware").
 *
 * Kernels use only: FMRO_KERNEL and FMRO_LAUNCH (definition and launch),
 * FMRO_WARP (64 lanes on CDNA, 32 on NVIDIA: never assume either),
 * fmro_shfl_down / fmro_warp_sum (cross-lane), fmro_atomic_add (global
 * memory), FMRO_SHARED (static shared memory / LDS) and the thread ids.
 * Host code (runtime.hip) uses the fmro_rt_* names for the runtime calls
 * (memory, copies, streams, device properties), which differ only in their
 * prefix.
 */
#ifndef FMOE_PLUGINS_ROCM_DIALECT_H
#define FMOE_PLUGINS_ROCM_DIALECT_H

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
typedef hipStream_t fmro_stream;
typedef hipError_t fmro_error;
#define FMRO_SUCCESS hipSuccess
#define FMRO_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    hipLaunchKernelGGL(kernel, dim3(grid), dim3(block), shmem, stream, __VA_ARGS__)
#define FMRO_LAST_ERROR() hipGetLastError()
/* warpSize is a compile-time constant per target on AMD (64 on gfx9). */
#define FMRO_WARP        warpSize
#define FMRO_RT(name)    hip##name
#define FMRO_RT_H2D      hipMemcpyHostToDevice
#define FMRO_RT_D2H      hipMemcpyDeviceToHost
#define FMRO_RT_D2D      hipMemcpyDeviceToDevice
#define FMRO_RT_PLATFORM "hip"
typedef hipDeviceProp_t fmro_device_prop;
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
typedef cudaStream_t fmro_stream;
typedef cudaError_t fmro_error;
#define FMRO_SUCCESS cudaSuccess
#define FMRO_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    kernel<<<dim3(grid), dim3(block), shmem, stream>>>(__VA_ARGS__)
#define FMRO_LAST_ERROR() cudaGetLastError()
#define FMRO_WARP         32
#define FMRO_RT(name)     cuda##name
#define FMRO_RT_H2D       cudaMemcpyHostToDevice
#define FMRO_RT_D2H       cudaMemcpyDeviceToHost
#define FMRO_RT_D2D       cudaMemcpyDeviceToDevice
#define FMRO_RT_PLATFORM  "cuda"
typedef cudaDeviceProp fmro_device_prop;
#else
#error "plugins/rocm/dialect.h is for hipcc or nvcc"
#endif

#define FMRO_KERNEL extern "C" __global__
/* Kernel templates (C++ linkage: extern "C" cannot be a template). */
#define FMRO_KERNEL_TEMPLATE __global__
#define FMRO_SHARED          __shared__

/* Value of lane (lane + delta) of the wave; lanes past the end get their own. */
template <typename T> __device__ inline T fmro_shfl_down(T v, unsigned delta)
{
#if defined(__HIPCC__)
    return __shfl_down(v, delta, FMRO_WARP);
#else
    return __shfl_down_sync(0xFFFFFFFFu, v, delta, FMRO_WARP);
#endif
}

/* Sum over the whole wave, in lane 0 (the other lanes hold partial sums). */
template <typename T> __device__ inline T fmro_warp_sum(T v)
{
    for (unsigned d = FMRO_WARP / 2; d > 0; d /= 2)
        v += fmro_shfl_down(v, d);
    return v;
}

template <typename T> __device__ inline T fmro_atomic_add(T *p, T v)
{
    return atomicAdd(p, v);
}

/* Largest of *p and v (unsigned: non-negative f32 bits compare as their values). */
__device__ inline unsigned int fmro_atomic_max(unsigned int *p, unsigned int v)
{
    return atomicMax(p, v);
}

#endif /* FMOE_PLUGINS_ROCM_DIALECT_H */
