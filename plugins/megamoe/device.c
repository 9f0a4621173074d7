/*
 * plugins/megamoe/device.c - device discovery through the CUDA runtime's C
 * API (device.h): the probe and the query's capability check. The memory
 * the plugin lends is the cuda plugin's table (plugins/cuda/memory_table.h);
 * the kernels are in sm90_forward.cu.
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
