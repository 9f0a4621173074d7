/*
 * plugins/cuda/runtime.cu - device discovery and memory for the host side
 * (cuda_api.h). The CUDA runtime is linked statically: it finds the driver
 * (libcuda.so.1) itself at the first call, so on a machine without a driver
 * or a GPU these calls fail with an error code instead of the plugin failing
 * to load.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/cuda_api.h"

static int fail(char *err, size_t cap, const char *what, cudaError_t e)
{
    if (err && cap)
        snprintf(err, cap, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

extern "C" void fmcu_versions(int *driver, int *runtime)
{
    *driver = 0;
    *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess)
        *driver = 0;
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        *runtime = 0;
}

extern "C" int fmcu_device_count(int *count, char *err, size_t cap)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) {
        *count = 0;
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return fail(err, cap, "cudaGetDeviceCount", e);
    }
    return 0;
}

extern "C" int fmcu_device_query(int device, fmcu_device_info *info, char *err, size_t cap)
{
    memset(info, 0, sizeof *info);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return fail(err, cap, "cudaGetDeviceProperties", e);
    snprintf(info->name, sizeof info->name, "%.127s", p.name);
    if (cudaDeviceGetPCIBusId(info->pci_id, (int)sizeof info->pci_id, device) != cudaSuccess)
        snprintf(info->pci_id, sizeof info->pci_id, "cuda:%d", device);
    info->major = p.major;
    info->minor = p.minor;
    info->multiprocessors = p.multiProcessorCount;
    info->memory_bytes = p.totalGlobalMem;
    fmcu_versions(&info->driver_version, &info->runtime_version);
    return 0;
}

extern "C" int fmcu_malloc(int device, void **ptr, size_t bytes, char *err, size_t cap)
{
    *ptr = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *ptr = NULL;
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc(%zu bytes)", bytes);
        return fail(err, cap, what, e);
    }
    return 0;
}

extern "C" void fmcu_free(int device, void *ptr)
{
    if (!ptr)
        return;
    if (cudaSetDevice(device) == cudaSuccess)
        cudaFree(ptr);
}

extern "C" int fmcu_upload(int device, void *dst, const void *src, size_t bytes, char *err, size_t cap)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess && bytes)
        e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? 0 : fail(err, cap, "cudaMemcpy to the device", e);
}

extern "C" int fmcu_copy(int device, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *err,
                         size_t cap)
{
    cudaError_t e = cudaSetDevice(device);
    cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (e == cudaSuccess && bytes) {
        if (stream)
            e = cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream);
        else
            e = cudaMemcpy(dst, src, bytes, kind);
    }
    return e == cudaSuccess ? 0 : fail(err, cap, to_device ? "copy to the device" : "copy from the device", e);
}

extern "C" int fmcu_synchronize(int device, void *stream, char *err, size_t cap)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = stream ? cudaStreamSynchronize((cudaStream_t)stream) : cudaDeviceSynchronize();
    return e == cudaSuccess ? 0 : fail(err, cap, stream ? "cudaStreamSynchronize" : "cudaDeviceSynchronize", e);
}
