/*
 * plugins/cpu_arm/pack.c - int8-held int4 weights -> packed row blocks
 * (kernels.h). Rows past N and columns past K are zero (zero weight, zero
 * scale), so they add nothing and the kernels never branch on edges.
 */
#include "plugins/cpu_arm/pack.h"

#include <string.h>

int carm_shape_init(carm_shape *s, uint32_t n, uint32_t k, uint32_t groups, uint32_t group)
{
    if (n == 0 || k == 0 || groups == 0 || (uint64_t)groups * group != k)
        return -1;
    if (groups > 1 && group % CARM_KC)
        return -1;
    s->n = n;
    s->k = k;
    s->groups = groups;
    s->group = group;
    s->kp = (k + CARM_KC - 1) / CARM_KC * CARM_KC;
    s->bl = groups == 1 ? s->kp : group;
    s->row_blocks = (n + CARM_NR - 1) / CARM_NR;
    s->block_bytes = groups * carm_group_bytes(s->bl);
    s->expert_bytes = s->row_blocks * s->block_bytes;
    return 0;
}

/* Weight (n, k), 0 past the edges. */
static int32_t value_at(const carm_shape *s, const int8_t *values, uint32_t n, uint32_t k)
{
    return n < s->n && k < s->k ? values[(size_t)n * s->k + k] : 0;
}

static void pack_group(const carm_shape *s, const int8_t *values, const float *scales, uint32_t n0, uint32_t g,
                       uint8_t *rec)
{
    uint32_t k0 = g * s->bl;
    for (uint32_t c = 0; c < s->bl / CARM_KC; c++)
        for (uint32_t j = 0; j < CARM_NR; j++) {
            uint8_t *dst = rec + 64u * c + 16u * (j / 2) + 8u * (j % 2);
            for (uint32_t i = 0; i < 8; i++) {
                uint32_t k = k0 + CARM_KC * c + i;
                uint32_t lo = (uint32_t)value_at(s, values, n0 + j, k) & 0xFu;
                uint32_t hi = (uint32_t)value_at(s, values, n0 + j, k + 8) & 0xFu;
                dst[i] = (uint8_t)(lo | hi << 4);
            }
        }
    int32_t sums[CARM_NR];
    float sc[CARM_NR];
    for (uint32_t j = 0; j < CARM_NR; j++) {
        sums[j] = 0;
        for (uint32_t k = k0; k < k0 + s->bl; k++)
            sums[j] += value_at(s, values, n0 + j, k);
        sc[j] = n0 + j < s->n ? scales[(size_t)(n0 + j) * s->groups + g] : 0.0f;
    }
    memcpy(rec + (size_t)s->bl * CARM_NR / 2, sums, sizeof sums);
    memcpy(rec + (size_t)s->bl * CARM_NR / 2 + sizeof sums, sc, sizeof sc);
}

int carm_pack_expert(const carm_shape *s, const int8_t *values, const float *scales, uint8_t *dst, size_t *bad)
{
    for (size_t i = 0; i < (size_t)s->n * s->k; i++)
        if (values[i] < -8 || values[i] > 7) {
            if (bad)
                *bad = i;
            return -1;
        }
    for (uint32_t b = 0; b < s->row_blocks; b++)
        for (uint32_t g = 0; g < s->groups; g++)
            pack_group(s, values, scales, b * CARM_NR, g, dst + b * s->block_bytes + g * carm_group_bytes(s->bl));
    return 0;
}
