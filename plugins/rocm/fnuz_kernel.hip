/*
 * plugins/rocm/fnuz_kernel.hip - e4m3fn -> e4m3fnuz on the device (the
 * bytes of fnuz.c's fmro_fnuz_from_fn_bytes): 0x80 -> 0x00, and the number
 * of NaN codes (0x7F, 0xFF) added to *nan_codes. Written against
 * dialect.h; not called by the plugin yet (docs/ROCM.md, "What is next").
 */
#include <stdint.h>

#include "plugins/rocm/dialect.h"

FMRO_KERNEL void fmro_fnuz_from_fn_kernel(uint8_t *q, unsigned long long n, unsigned int *nan_codes)
{
    unsigned int nans = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint8_t b = q[i];
        if (b == 0x80u)
            q[i] = 0x00u;
        else if ((b & 0x7Fu) == 0x7Fu)
            nans++;
    }
    /* one atomic a wave, not one a thread */
    nans = fmro_warp_sum(nans);
    if (threadIdx.x % FMRO_WARP == 0 && nans)
        fmro_atomic_add(nan_codes, nans);
}
