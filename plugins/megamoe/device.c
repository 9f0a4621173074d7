/*
 * plugins/megamoe/device.c - the query's capability check through the CUDA
 * runtime's C API (device.h). The probe lists devices with the cuda
 * plugin's runtime calls (plugins/cuda/runtime.cu, compiled into this
 * plugin), so both plugins name a device by the same PCI id; the memory the
 * plugin lends is the cuda plugin's table (plugins/cuda/memory_table.h);
 * the kernels are in sm90_forward.cu.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "plugins/megamoe/device.h"

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
