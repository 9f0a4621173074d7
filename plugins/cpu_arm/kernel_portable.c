/*
 * plugins/cpu_arm/kernel_portable.c - the W4A8 micro-kernel in plain C:
 * the contract of kernels.h read straight off the packed layout, one
 * activation row and one weight row at a time. The fallback on CPUs
 * without SDOT, and what the option isa = "portable" runs.
 */
#include <string.h>

#include "plugins/cpu_arm/kernels.h"

/* Sign-extend a nibble. */
static inline int32_t s4(uint32_t v)
{
    return (int32_t)((v & 0xFu) ^ 8u) - 8;
}

void carm_kernel_portable(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                          uint32_t bl, float *out)
{
    size_t gbytes = carm_group_bytes(bl);
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < CARM_NR; j++)
            out[i * CARM_NR + j] = 0.0f;
    for (uint32_t g = 0; g < groups; g++) {
        const uint8_t *rec = w + g * gbytes;
        int32_t sums[CARM_NR];
        float scales[CARM_NR];
        memcpy(sums, rec + (size_t)bl * CARM_NR / 2, sizeof sums);
        memcpy(scales, rec + (size_t)bl * CARM_NR / 2 + sizeof sums, sizeof scales);
        for (uint32_t i = 0; i < m; i++) {
            const int8_t *ai = a[i] + (size_t)g * bl;
            for (uint32_t j = 0; j < CARM_NR; j++) {
                const uint8_t *row = rec + 16u * (j / 2) + 8u * (j % 2);
                int32_t acc = 0;
                for (uint32_t c = 0; c < bl / CARM_KC; c++) {
                    const uint8_t *b = row + 64u * c;
                    const int8_t *x = ai + CARM_KC * c;
                    for (uint32_t t = 0; t < 8; t++)
                        acc += x[t] * s4(b[t]) + x[8 + t] * s4(b[t] >> 4);
                }
                acc += o[i] * sums[j];
                float term = (float)acc * scales[j];
                out[i * CARM_NR + j] += term;
            }
        }
    }
}
