/*
 * plugins/cpu/bprep.c - the finalize-time repacking of bf16 weights into
 * the tile layout of bgemm.h (oneDNN's BA16a64b2a). Portable C, run once
 * per layer; tests/cpu checks it byte for byte against oneDNN's reorder.
 */
#include <string.h>

#include "plugins/cpu/bgemm.h"

int cpu_bweights_pack(cpu_bweights *b, uint32_t E, uint32_t N, uint32_t K, const uint16_t *w, cpu_alloc_fn alloc,
                      void *ctx)
{
    memset(b, 0, sizeof *b);
    b->experts = E;
    b->n = N;
    b->k = K;
    b->kp = (K + CPU_BKP - 1) / CPU_BKP * CPU_BKP;
    b->tiles = (N + CPU_BNR - 1) / CPU_BNR;
    b->expert_elems = (size_t)b->tiles * CPU_BNR * b->kp;
    size_t bytes = (size_t)E * b->expert_elems * sizeof(uint16_t);
    b->w = alloc(ctx, bytes ? bytes : 64, 64);
    if (!b->w)
        return -1;
    memset(b->w, 0, bytes); /* the padding rows and K values */
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t n = 0; n < N; n++) {
            const uint16_t *row = w + ((size_t)e * N + n) * K;
            uint16_t *tile = b->w + (size_t)e * b->expert_elems + (size_t)(n / CPU_BNR) * CPU_BNR * b->kp;
            uint32_t r = n % CPU_BNR;
            for (uint32_t k = 0; k < K; k++)
                tile[(size_t)(k / 2) * 2 * CPU_BNR + 2 * r + (k & 1)] = row[k];
        }
    return 0;
}

uint16_t *cpu_bweights_expert(const cpu_bweights *b, uint32_t e)
{
    return b->w + (size_t)e * b->expert_elems;
}

const uint16_t *cpu_bweights_tile(const cpu_bweights *b, uint32_t e, uint32_t t)
{
    return b->w + (size_t)e * b->expert_elems + (size_t)t * CPU_BNR * b->kp;
}
