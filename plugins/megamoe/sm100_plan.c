/*
 * plugins/megamoe/sm100_plan.c - the SM100 kernel's descriptors and launch
 * shape (sm100_plan.h).
 */
#include <stdio.h>

#include "plugins/megamoe/sm100_plan.h"

uint32_t mm100_pick_block_m(uint64_t tokens, uint32_t topk, uint32_t ranks, uint32_t experts)
{
    uint64_t rows = experts ? (tokens * topk * ranks + experts - 1) / experts : tokens;
    return rows <= 32 ? 32u : rows <= 64 ? 64u : 128u;
}

uint32_t mm100_table_bytes(uint32_t local, uint32_t block_m)
{
    (void)block_m;
    /* 2 x 8 stage barriers + 4 accumulator barriers + the TMEM address
     * (8 bytes each, 256 reserved); 4 warps x 32 columns of f32 amax; two
     * [local + 1] tables. */
    return 256u + 4u * 32u * 4u + 2u * (local + 1u) * 4u;
}

int mm100_shape_make(uint32_t block_m, uint32_t local, mm100_shape *out, char *why, size_t cap)
{
    if (block_m != 32 && block_m != 64 && block_m != 128) {
        snprintf(why, cap, "MegaMoE SM100: BLOCK_M %u (32, 64 or 128)", block_m);
        return -1;
    }
    if (local == 0 || local > MM100_MAX_LOCAL) {
        snprintf(why, cap,
                 "MegaMoE SM100: %u experts per rank (1 to %u: the kernel keeps a table per expert in shared memory)",
                 local, MM100_MAX_LOCAL);
        return -1;
    }
    /* A: 128 rows x 128 bytes (e2m1 in 16-byte chunks of 8 packed bytes and
     * 8 of padding); B: block_m rows x 128 bytes; two 512-byte scale blocks. */
    uint32_t stage = MM100_BLOCK_N * MM100_BLOCK_K + block_m * MM100_BLOCK_K + 2u * 512u;
    uint32_t fixed = mm100_table_bytes(local, block_m) + 1024u; /* slack to align the stages to 1024 */
    uint32_t stages = (MM100_SMEM_LIMIT - fixed) / stage;
    if (stages > MM100_MAX_STAGES)
        stages = MM100_MAX_STAGES;
    if (stages < MM100_MIN_STAGES) {
        snprintf(why, cap, "MegaMoE SM100: %u experts per rank leave room for %u pipeline stages (at least %u)", local,
                 stages, MM100_MIN_STAGES);
        return -1;
    }
    uint32_t need = 2u * block_m + 16u, cols = 32;
    while (cols < need)
        cols *= 2;
    *out = (mm100_shape){.block_m = block_m,
                         .stages = stages,
                         .stage_bytes = stage,
                         .smem_bytes = stages * stage + fixed,
                         .tmem_cols = cols};
    return 0;
}

uint64_t mm100_tiles(const uint32_t *rows, uint32_t local, uint32_t block_m, uint32_t n_out)
{
    uint64_t blocks = 0;
    for (uint32_t e = 0; e < local; e++)
        blocks += (rows[e] + (uint64_t)block_m - 1) / block_m;
    return blocks * (n_out / MM100_BLOCK_N);
}
