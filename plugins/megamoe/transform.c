/*
 * plugins/megamoe/transform.c - the expert weights into the layout the
 * MegaMoE kernels read (host.h; spec/formats.md §7.3, E17), done once at
 * finalize:
 *
 *  - L1 (w13): gate and up rows alternate in runs of 8, so one 16-row MMA
 *    tile holds 8 gate and the matching 8 up outputs and the SwiGLU
 *    epilogue pairs them in registers (DeepGEMM _interleave_weights);
 *  - scales: UE8M0 bytes packed 4 per int32 along K, stored MN-major (the
 *    rows of one K-word contiguous: transform_sf_into_required_layout with
 *    recipe (1, 32)); then within each 128 rows the UTCCP order (the copy
 *    of scales into tensor memory takes rows 0, 32, 64, 96, 1, 33, ...:
 *    _transpose_sf_for_utccp), after the same interleave for L1;
 *  - L2 (w2) values: unchanged.
 * Each function writes out[dst] = in[src(dst)] with src the inverse
 * permutation, so every output element is written exactly once.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/host.h"

uint32_t mm_interleave_src(uint32_t n, uint32_t rows)
{
    uint32_t half = rows / 2, j = n / (2 * MM_INTERLEAVE), r = n % (2 * MM_INTERLEAVE);
    return r < MM_INTERLEAVE ? j * MM_INTERLEAVE + r : half + j * MM_INTERLEAVE + (r - MM_INTERLEAVE);
}

uint32_t mm_utccp_src(uint32_t n)
{
    uint32_t c = n / MM_UTCCP_ROWS, m = n % MM_UTCCP_ROWS, b = m / 4, a = m % 4;
    return c * MM_UTCCP_ROWS + 32 * a + b;
}

/* One line naming the broken rule; -1. */
#define FAIL(why, cap, ...) (snprintf((why), (cap), __VA_ARGS__), -1)

int mm_interleave_rows(const uint8_t *in, uint8_t *out, uint32_t experts, uint32_t inter, size_t row, char *why,
                       size_t cap)
{
    if (inter % MM_INTERLEAVE)
        return FAIL(why, cap, "MegaMoE: intermediate size %u is not a multiple of 8 (the gate/up interleave)", inter);
    size_t rows = 2 * (size_t)inter;
    for (size_t e = 0; e < experts; e++) {
        const uint8_t *src = in + e * rows * row;
        uint8_t *dst = out + e * rows * row;
        for (uint32_t n = 0; n < rows; n++)
            memcpy(dst + n * row, src + (size_t)mm_interleave_src(n, (uint32_t)rows) * row, row);
    }
    return 0;
}

int mm_transform_l1_weight(const uint8_t *w13, uint8_t *out, uint32_t experts, uint32_t inter, uint32_t hidden,
                           char *why, size_t cap)
{
    if (hidden % 2)
        return FAIL(why, cap, "MegaMoE: hidden size %u is odd (e2m1 pairs)", hidden);
    return mm_interleave_rows(w13, out, experts, inter, hidden / 2, why, cap);
}

uint64_t mm_sf_words(uint32_t experts, uint32_t mn, uint32_t k)
{
    return (uint64_t)experts * (k / (4 * MM_GROUP)) * mn;
}

int mm_transform_sf(const uint8_t *sf, uint32_t *out, uint32_t experts, uint32_t mn, uint32_t k, int l1, char *why,
                    size_t cap)
{
    if (mn % MM_UTCCP_ROWS)
        return FAIL(why, cap, "MegaMoE: %u scale rows are not a multiple of 128 (the UTCCP transpose)", mn);
    if (k % (4 * MM_GROUP))
        return FAIL(why, cap, "MegaMoE: K = %u is not a multiple of 128 (4 UE8M0 scales per int32)", k);
    if (l1 && mn % (2 * MM_INTERLEAVE))
        return FAIL(why, cap, "MegaMoE: %u L1 rows are not a multiple of 16 (the gate/up interleave)", mn);
    uint32_t sf_k = k / MM_GROUP, words = sf_k / 4;
    for (size_t e = 0; e < experts; e++) {
        const uint8_t *src = sf + e * (size_t)mn * sf_k;
        uint32_t *dst = out + e * (size_t)words * mn;
        for (uint32_t n = 0; n < mn; n++) {
            uint32_t s = mm_utccp_src(n);
            if (l1)
                s = mm_interleave_src(s, mn);
            const uint8_t *row = src + (size_t)s * sf_k;
            for (uint32_t w = 0; w < words; w++)
                dst[(size_t)w * mn + n] = (uint32_t)row[4 * w] | (uint32_t)row[4 * w + 1] << 8 |
                                          (uint32_t)row[4 * w + 2] << 16 | (uint32_t)row[4 * w + 3] << 24;
        }
    }
    return 0;
}
