/*
 * plugins/cpu/bgemm_portable.c - the portable C kernel of bgemm.h: the
 * contract's loop as written, tile by tile, widening each bf16 to f32 (its
 * 16 bits are the f32's high half), and the ISA table.
 */
#include <string.h>

#include "plugins/cpu/bgemm.h"

static float widen(uint16_t v)
{
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void portable_tile(cpu_btile *t)
{
    uint32_t pairs = (t->k + 1) / 2;
    for (uint32_t i = 0; i < t->nt; i++)
        for (uint32_t m = 0; m < t->mr; m++) {
            float *acc = t->out[i][m];
            const uint16_t *a = t->a[m];
            for (uint32_t n = 0; n < CPU_BNR; n++)
                acc[n] = 0.0f;
            for (uint32_t s = 0; s < pairs; s++) {
                const uint16_t *w = t->w[i] + (size_t)s * 2 * CPU_BNR;
                float even = widen(a[2 * s]), odd = 2 * s + 1 < t->k ? widen(a[2 * s + 1]) : 0.0f;
                /* Odd element first, each sum rounded, as vdpbf16ps does. The
                 * product of two bf16 is exact in f32, so whether a compiler
                 * contracts a line into an FMA changes nothing. */
                for (uint32_t n = 0; n < CPU_BNR; n++) {
                    acc[n] = acc[n] + widen(w[2 * n + 1]) * odd;
                    acc[n] = acc[n] + widen(w[2 * n]) * even;
                }
            }
        }
}

const cpu_bkernels cpu_bkernels_portable = {.name = "portable", .tile = portable_tile};

const cpu_bkernels *cpu_bkernels_for(int isa)
{
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX512_BF16)
        return &cpu_bkernels_avx512_bf16;
    if (isa == CPU_ISA_AVX512_VNNI)
        return &cpu_bkernels_avx512;
    if (isa == CPU_ISA_AVX2)
        return &cpu_bkernels_avx2;
#else
    (void)isa;
#endif
    return &cpu_bkernels_portable;
}
