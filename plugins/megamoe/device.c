/*
 * plugins/megamoe/device.c - device discovery through the CUDA runtime's C
 * API (device.h). Only the probe uses it: no kernel exists yet.
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
