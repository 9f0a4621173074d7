/*
 * plugins/megamoe/sm90_plan.c - the SM90 path's allocations (sm90_plan.h).
 */
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/sm90_plan.h"

#define LIMIT ((uint64_t)1 << 62)

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Lay the views out in order, each aligned; -1 when the total passes LIMIT. */
static int place(mm_view *v, const uint64_t *bytes, int n, uint64_t *total)
{
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (bytes[i] > LIMIT || at > LIMIT - bytes[i])
            return -1;
        v[i].offset = at;
        v[i].bytes = bytes[i];
        at = align_up(at + bytes[i], MM90_ALIGN);
    }
    *total = at;
    return 0;
}

int mm90_plan_make(uint32_t experts, uint32_t hidden, uint32_t inter, uint32_t topk, uint32_t max_tokens,
                   mm90_plan *out, char *why, size_t cap)
{
    if (!experts || !hidden || !inter || !topk || !max_tokens) {
        snprintf(why, cap, "MegaMoE SM90: experts, hidden, intermediate sizes, top_k and max_num_tokens must be > 0");
        return -1;
    }
    if (hidden % MM_GROUP || inter % MM_GROUP) {
        snprintf(why, cap,
                 "MegaMoE SM90: hidden_size %u and intermediate_size_per_partition %u must be multiples of %u (one "
                 "UE8M0 scale per %u along K)",
                 hidden, inter, MM_GROUP, MM_GROUP);
        return -1;
    }
    /* Each factor below 2^32, so every product of two fits in 64 bits; the
     * products of three are bounded first. */
    uint64_t E = experts, H = hidden, I = inter, P = (uint64_t)max_tokens * topk;
    /* the weights' tiles pad rows to 256 and K to 128 */
    if (P > ((uint64_t)1 << 31) || E * (H + 256) > LIMIT / (2 * (I + 256)) || P * H > LIMIT / 4 || P * I > LIMIT / 4) {
        snprintf(why, cap,
                 "MegaMoE SM90: %u experts x H %u x I %u with %u tokens x top_k %u does not fit in memory (2^62 "
                 "bytes; at most 2^31 pairs)",
                 experts, hidden, inter, max_tokens, topk);
        return -1;
    }
    *out = (mm90_plan){
        .experts = experts, .hidden = hidden, .inter = inter, .topk = topk, .max_tokens = max_tokens, .pairs = P};
    const uint64_t weights[MM90_WEIGHT_VIEWS] = {E * mm90_tile_bytes(2 * I, hidden),
                                                 E * mm90_tile_sf_bytes(2 * I, hidden), E * mm90_tile_bytes(H, inter),
                                                 E * mm90_tile_sf_bytes(H, inter)};
    uint64_t hy = P * H; /* GEMM2's bf16 out (GEMM1's goes through its SwiGLU epilogue) */
    const uint64_t work[MM90_WORK_VIEWS] = {(uint64_t)max_tokens * H,
                                            (uint64_t)max_tokens * mm90_xs_pitch(hidden) * 4,
                                            P * 4,
                                            P * 4,
                                            E * 4,
                                            (E + 1) * 4,
                                            (E + 1) * 4,
                                            E * 4,
                                            hy * 2,
                                            P * I,
                                            P * mm90_xs_pitch(inter) * 4};
    if (place(out->weight, weights, MM90_WEIGHT_VIEWS, &out->weight_bytes) != 0 ||
        place(out->work, work, MM90_WORK_VIEWS, &out->work_bytes) != 0) {
        snprintf(why, cap, "MegaMoE SM90: the layer's device memory passes 2^62 bytes");
        return -1;
    }
    return 0;
}

uint64_t mm90_max_tiles(uint64_t pairs, uint32_t experts)
{
    uint64_t busy = pairs < experts ? pairs : experts;
    return (pairs + MM90_BLOCK_M - 1) / MM90_BLOCK_M + busy;
}

uint32_t mm90_xs_pitch(uint32_t k)
{
    const uint32_t gps = MM90_STAGE_K / MM_GROUP;
    return (k / MM_GROUP + gps - 1) / gps * gps;
}

static uint64_t stages_of(uint32_t k)
{
    return (k + (uint64_t)MM90_STAGE_K - 1) / MM90_STAGE_K;
}

static uint64_t blocks_of(uint64_t rows)
{
    return (rows + MM90_BLOCK_N - 1) / MM90_BLOCK_N;
}

uint64_t mm90_tile_bytes(uint64_t rows, uint32_t k)
{
    return blocks_of(rows) * stages_of(k) * MM90_BLOCK_N * (MM90_STAGE_K / 2);
}

uint64_t mm90_tile_sf_bytes(uint64_t rows, uint32_t k)
{
    return blocks_of(rows) * stages_of(k) * MM90_BLOCK_N * (MM90_STAGE_K / MM_GROUP);
}

void mm90_tile_expert(const uint8_t *packed, const uint8_t *sf, uint64_t rows, uint32_t k, uint8_t *w, uint8_t *w_sf)
{
    const uint64_t ks = stages_of(k), bytes = k / 2, groups = k / MM_GROUP;
    const uint32_t row_bytes = MM90_STAGE_K / 2, gps = MM90_STAGE_K / MM_GROUP;
    memset(w, 0, mm90_tile_bytes(rows, k));
    memset(w_sf, 0, mm90_tile_sf_bytes(rows, k));
    for (uint64_t r = 0; r < rows; r++) {
        const uint64_t b = r / MM90_BLOCK_N, rr = r % MM90_BLOCK_N;
        for (uint64_t s = 0; s < ks; s++) {
            const uint64_t ng = groups - s * gps < gps ? groups - s * gps : gps;
            const uint64_t at = (b * ks + s) * MM90_BLOCK_N + rr;
            memcpy(w + at * row_bytes, packed + r * bytes + s * row_bytes, ng * (MM_GROUP / 2));
            memcpy(w_sf + at * gps, sf + r * groups + s * gps, ng);
        }
    }
}

mm90_grid mm90_gemm_grid(uint32_t n, uint64_t pairs, uint32_t experts)
{
    uint64_t tiles = mm90_max_tiles(pairs, experts);
    return (mm90_grid){.x = (uint32_t)((n + (uint64_t)MM90_BLOCK_N - 1) / MM90_BLOCK_N),
                       .y = tiles < 1                 ? 1
                            : tiles < MM90_MAX_GRID_Y ? (uint32_t)tiles
                                                      : MM90_MAX_GRID_Y};
}

static uint32_t nibble(const uint8_t *row, uint32_t e)
{
    return (uint32_t)(row[e / 2] >> (4 * (e % 2))) & 0xFu;
}

void mm90_pack_stage_rows(const uint8_t *src, uint8_t *dst, uint64_t rows, uint32_t k)
{
    const uint32_t bytes = k / 2, groups = k / MM_GROUP, gps = MM90_STAGE_K / MM_GROUP;
    for (uint64_t r = 0; r < rows; r++) {
        const uint8_t *in = src + r * bytes;
        uint8_t *out = dst + r * bytes;
        for (uint32_t g0 = 0; g0 < groups; g0 += gps) {
            const uint32_t ng = groups - g0 < gps ? groups - g0 : gps;
            uint8_t *st = out + g0 * (MM_GROUP / 2);
            for (uint32_t tg = 0; tg < 4; tg++)
                for (uint32_t c = 0; c < ng; c++) {
                    uint8_t lo[4], hi[4];
                    for (uint32_t j = 0; j < 4; j++) {
                        const uint32_t e = (g0 + c) * MM_GROUP + 4 * tg + j;
                        lo[j] = (uint8_t)nibble(in, e);
                        hi[j] = (uint8_t)nibble(in, e + 16);
                    }
                    const uint32_t w = mm90_pack_word(lo, hi);
                    for (uint32_t j = 0; j < 4; j++)
                        st[(tg * ng + c) * 4 + j] = (uint8_t)(w >> (8 * j));
                }
        }
    }
}

int mm90_fast_scales(const uint8_t *sf, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (sf[i] == 0 || sf[i] == 0xFF)
            return 0;
    return 1;
}
