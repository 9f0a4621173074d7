/*
 * plugins/cpu/qgemm_portable.c - the portable C kernels of qgemm.h: plain
 * integer dot products over the repacked tiles, the same results as the
 * SIMD kernels bit for bit (integer sums are exact; the float steps are
 * the same operations in the same order).
 */
#include "plugins/cpu/cpu.h"
#include "plugins/cpu/qgemm.h"

static void portable_i8(cpu_qtile *t)
{
    for (uint32_t m = 0; m < t->mr; m++) {
        int32_t acc[CPU_NR] = {0};
        const int8_t *a = t->a[m];
        for (uint32_t s = 0; s < t->kp / 4; s++) {
            const int8_t *w = (const int8_t *)t->w + (size_t)s * 64;
            for (uint32_t r = 0; r < CPU_NR; r++)
                for (uint32_t j = 0; j < 4; j++)
                    acc[r] += (int32_t)a[4 * s + j] * w[4 * r + j];
        }
        for (uint32_t r = 0; r < CPU_NR; r++)
            t->out[m][r] = t->gscale[r] * (float)acc[r];
    }
}

static void portable_i4(cpu_qtile *t)
{
    uint32_t steps = t->group / 8;
    for (uint32_t m = 0; m < t->mr; m++) {
        const int8_t *a = t->a[m];
        float f[CPU_NR] = {0};
        for (uint32_t g = 0; g < t->groups; g++) {
            int32_t acc[CPU_NR] = {0};
            for (uint32_t s = g * steps; s < (g + 1) * steps; s++) {
                const uint8_t *w = t->w + (size_t)s * 64;
                for (uint32_t r = 0; r < CPU_NR; r++)
                    for (uint32_t j = 0; j < 4; j++) {
                        uint8_t b = w[4 * r + j];
                        acc[r] += (int32_t)a[8 * s + j] * (b & 0xF) + (int32_t)a[8 * s + 4 + j] * (b >> 4);
                    }
            }
            for (uint32_t r = 0; r < CPU_NR; r++) {
                int32_t dot = acc[r] - 8 * t->qsum[m][g] + t->off[m] * t->wsum[g * CPU_NR + r];
                float term = t->gscale[g * CPU_NR + r] * (float)dot;
                f[r] += term;
            }
        }
        for (uint32_t r = 0; r < CPU_NR; r++)
            t->out[m][r] = f[r];
    }
}

const cpu_kernels cpu_kernels_portable = {.name = "portable", .mr = 4, .i8 = portable_i8, .i4 = portable_i4};

const cpu_kernels *cpu_kernels_for(int isa)
{
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX512_VNNI) /* avx512_bf16 adds nothing for int8 */
        return &cpu_kernels_avx512_vnni;
    if (isa == CPU_ISA_AVX2)
        return &cpu_kernels_avx2;
#else
    (void)isa;
#endif
    return &cpu_kernels_portable;
}
