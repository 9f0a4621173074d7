/*
 * plugins/megamoe/device.c - device discovery through the CUDA runtime's C
 * API (device.h): the probe, the query's capability check, and the memory
 * table the plugin lends (the kernels are in sm90_forward.cu).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "plugins/megamoe/device.h"

int mm_device_count(char *why, size_t cap)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0)
        snprintf(why, cap, "the CUDA runtime sees no device");
    return n;
}

int mm_device_query(int i, mm_device *out, char *why, size_t cap)
{
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaGetDeviceProperties(%d): %s", i, cudaGetErrorString(e));
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%.255s", p.name);
    snprintf(out->pci_id, sizeof out->pci_id, "%04x:%02x:%02x", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    out->major = p.major;
    out->minor = p.minor;
    out->sms = p.multiProcessorCount;
    return 0;
}

int mm_device_capability(int i, int *major, int *minor, char *why, size_t cap)
{
    cudaError_t e = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, i);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, i);
    if (e != cudaSuccess) {
        snprintf(why, cap, "CUDA device %d: %s", i, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int mm_device_alloc(int i, void **ptr, size_t bytes, char *why, size_t cap)
{
    cudaError_t e = cudaSetDevice(i);
    if (e == cudaSuccess)
        e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaMalloc(%zu) on device %d: %s", bytes, i, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

void mm_device_free(int i, void *ptr)
{
    if (ptr && cudaSetDevice(i) == cudaSuccess)
        cudaFree(ptr);
}

int mm_device_copy(int i, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *why, size_t cap)
{
    enum cudaMemcpyKind kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaError_t e = cudaSetDevice(i);
    if (e == cudaSuccess)
        e = stream ? cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream) : cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess) {
        snprintf(why, cap, "cudaMemcpy (%zu bytes) on device %d: %s", bytes, i, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int mm_device_sync(int i, void *stream, char *why, size_t cap)
{
    cudaError_t e = cudaSetDevice(i);
    if (e == cudaSuccess)
        e = stream ? cudaStreamSynchronize((cudaStream_t)stream) : cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        snprintf(why, cap, "synchronize device %d: %s", i, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
