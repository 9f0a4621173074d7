/*
 * plugins/megamoe/sm90_plan.h - the SM90 path's device memory, planned on
 * the host (sm90_plan.c, unit-tested in tests/megamoe without a GPU) and
 * allocated once at finalize by sm90_forward.cu: the weights, and a
 * workspace sized by max_num_tokens, so a forward allocates nothing.
 *
 * The SM90 path (docs/MEGAMOE.md "SM90 path") is a few kernel launches
 * per forward (on an EP group, on the rows the transport received): quantize x, group the (token, slot) pairs by
 * expert, GEMM1 with SwiGLU + requant in its epilogue, GEMM2, combine. Its
 * weights are the checkpoint's (w13 [E, 2I, H/2] e2m1 pairs, K contiguous;
 * scales [E, rows, K/32] UE8M0 bytes) with w13's rows and their scales
 * interleaving gate and up in runs of 8 (host.h mm_interleave_rows), so
 * GEMM1's epilogue finds a channel's gate and up in one lane, stored
 * tile-major (mm90_tile_expert): what one GEMM block reads in one pipeline
 * stage, 256 rows x 128 K, is one contiguous 16 KB run of codes and one
 * 1 KB run of scale words, each a single bulk copy. The weights are the
 * wgmma's A operand, from registers (swap-AB: weight rows on the MMA's M
 * side, pairs on N), K-contiguous per row, and every e2m1 value times 2^-6
 * is an exact e4m3 value, so they are decoded in the GEMM, not rebased. Within each 128-wide
 * K stage of a row the values are reordered, and their bits placed, once at
 * finalize (mm90_pack_stage_rows, mm90_pack_word) so that a thread reads its
 * fragments of a stage with one 16-byte load and decodes them with masks and
 * rotations.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM90_PLAN_H
#define FMOE_PLUGIN_MEGAMOE_SM90_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/megamoe/host.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MM90_ALIGN      256u   /* every view starts at a multiple of this */
#define MM90_BLOCK_M    32u    /* pairs per GEMM tile: the MMA's N side (swap-AB), 4 x 8 */
#define MM90_BLOCK_N    256u   /* weight rows per GEMM block: the MMA's M side, 4 warp groups x 64 */
#define MM90_MAX_GRID_Y 65535u /* CUDA's grid.y limit: the GEMM loops over tiles beyond it */
#define MM90_STAGE_K    128u   /* K per GEMM pipeline stage: four scale groups */

/* Weights (one allocation), in this order, each expert's tensors tile-major
 * (mm90_tile_expert). */
enum { MM90_W13, MM90_W13_SF, MM90_W2, MM90_W2_SF, MM90_WEIGHT_VIEWS };

/* Workspace (one allocation), in this order. P = max_tokens * topk pairs. */
enum {
    MM90_XQ,     /* [T, H] e4m3: x quantized per 32 */
    MM90_XS,     /* [T, mm90_xs_pitch(H)] f32: its power-of-two scales */
    MM90_LOC,    /* [P] i32: local expert of pair t*topk + j, -1 masked */
    MM90_ORDER,  /* [P] i32: the local pairs grouped by expert */
    MM90_COUNT,  /* [E] u32: pairs per expert */
    MM90_SEG,    /* [E + 1] u32: first pair of each expert in ORDER */
    MM90_TILES,  /* [E + 1] u32: first GEMM tile of each expert */
    MM90_CURSOR, /* [E] u32: scatter cursors */
    MM90_HY,     /* [P, H] bf16 GEMM2 out */
    MM90_AQ,     /* [P, I] e4m3: SwiGLU out requantized per 32 */
    MM90_AS,     /* [P, mm90_xs_pitch(I)] f32: its power-of-two scales */
    MM90_WORK_VIEWS
};

typedef struct mm90_plan {
    uint32_t experts, hidden, inter, topk, max_tokens;
    uint64_t pairs; /* max_tokens * topk */
    mm_view weight[MM90_WEIGHT_VIEWS];
    mm_view work[MM90_WORK_VIEWS];
    uint64_t weight_bytes, work_bytes;
} mm90_plan;

/* Plan both allocations. Refuses (-1, the reason) zero sizes, H or I not a
 * multiple of 32 (one scale per 32 along K), and sizes whose allocations
 * pass 2^62 bytes. */
int mm90_plan_make(uint32_t experts, uint32_t hidden, uint32_t inter, uint32_t topk, uint32_t max_tokens,
                   mm90_plan *out, char *why, size_t cap);

/* GEMM tiles of a forward of `pairs` pairs over `experts` experts, at most:
 * each expert's last tile may be partial, and at most min(experts, pairs)
 * experts get any. */
uint64_t mm90_max_tiles(uint64_t pairs, uint32_t experts);

/* f32 activation scales per row for a reduction length k (a multiple of
 * 32): k/32 rounded up to whole stages (4), so that a stage's four are one
 * aligned 16-byte copy; the padding is never written and never used. */
uint32_t mm90_xs_pitch(uint32_t k);

/* Bytes of one expert's tile-major codes (mm90_tile_expert) for `rows`
 * weight rows and reduction length k: ceil(rows/256) row blocks x
 * ceil(k/128) stages x 256 rows x 64 bytes; and of its scale words, x 4
 * bytes per row instead of 64. */
uint64_t mm90_tile_bytes(uint64_t rows, uint32_t k);
uint64_t mm90_tile_sf_bytes(uint64_t rows, uint32_t k);

/* One expert's weights tile-major: `packed` [rows, k/2] (each row in the
 * stage order of mm90_pack_stage_rows) and `sf` [rows, k/32] UE8M0 into
 * w [row block][stage][256 rows][64 bytes] and w_sf [row block][stage][256
 * rows][4 bytes], so that a GEMM block's stage (256 rows x 128 K) is one
 * contiguous run of each. A stage of ng < 4 groups (the end of K) holds a
 * row's ng * 16 bytes at the start of its 64 and ng scale bytes; rows past
 * `rows`, the rest of a short stage and its scale bytes are zero. k is a
 * multiple of 32; w and w_sf hold mm90_tile_bytes and mm90_tile_sf_bytes. */
void mm90_tile_expert(const uint8_t *packed, const uint8_t *sf, uint64_t rows, uint32_t k, uint8_t *w, uint8_t *w_sf);

/* The GEMM's launch grid for n output rows (weight rows) and a forward of
 * `pairs` pairs: x = ceil(n / MM90_BLOCK_N) blocks of weight rows, y = the
 * tile bound capped at MM90_MAX_GRID_Y (at least 1). */
typedef struct mm90_grid {
    uint32_t x, y;
} mm90_grid;
mm90_grid mm90_gemm_grid(uint32_t n, uint64_t pairs, uint32_t experts);

/* The GEMM's weight order. The wgmma m64nNk32 e4m3 A fragment from
 * registers is mma.sync m16n8k32's per warp: thread tg (lane % 4) holds,
 * per weight row and 32-group c, the 8 values at K offsets 4tg..4tg+3 (one
 * register) and 16+4tg..16+4tg+3 (another): one 32-bit word of the four
 * low values 4tg+j and the four high ones 16+4tg+j in mm90_pack_word's
 * bit layout.
 * A stage of ng groups (4, or fewer at the end of K) is stored as
 * [tg][c][4 bytes], so a thread's words of a full stage are 16 contiguous
 * bytes. src: `rows` rows of k/2 bytes, e2m1 pairs with element 0 in the
 * low nibble (the checkpoint's order); dst the same size. k is a
 * multiple of 32. */
void mm90_pack_stage_rows(const uint8_t *src, uint8_t *dst, uint64_t rows, uint32_t k);

/* 1 when every UE8M0 byte of sf[0..n) is in [1, 254]: the GEMM then makes
 * each scale from its exponent bits alone; 0 takes ue8m0's path, which
 * also decodes 0 (2^-127, an f32 subnormal) and 0xFF (NaN). */
int mm90_fast_scales(const uint8_t *sf, uint64_t n);

#if defined(__CUDACC__)
#define MM90_HD __host__ __device__ __forceinline__
#else
#define MM90_HD static inline
#endif

/* A packed word (mm90_pack_stage_rows, mm90_pack_word) to four e4m3 bytes:
 * the low values (4tg+j) and the high values (16+4tg+j), byte j each. An
 * e2m1 nibble s e1 e0 m put into e4m3 bits as s 0 0 e1 e0 m 0 0 is its
 * value times 2^-6 exactly, 0.5 included (e4m3 subnormal 4 x 2^-9), so the
 * decode is masks and rotations and the 2^6 goes into the activation
 * scales the GEMM multiplies by (sm90_forward.cu). The word's bits are
 * placed at finalize so that the low values need one mask and the high
 * ones two rotations and two masks (five instructions a word; plain nibbles
 * took seven): byte j holds low value j's s e1 e0 m at bits 7 4 3 2 (where
 * the decode wants them), high value j's s at 5, e1 at 0, e0 at 1, and at
 * bit 6 the m of high value j + 1 (mod 4; the rotation by 4 brings it from
 * the byte below, byte 3's into byte 0). */
MM90_HD uint32_t mm90_rotl(uint32_t w, int n)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_l(w, w, n);
#else
    return (w << n) | (w >> (32 - n));
#endif
}
MM90_HD uint32_t mm90_e2m1_lo_e4m3(uint32_t w)
{
    return w & 0x9C9C9C9Cu;
}
MM90_HD uint32_t mm90_e2m1_hi_e4m3(uint32_t w)
{
    return (mm90_rotl(w, 2) & 0x88888888u) | (mm90_rotl(w, 4) & 0x14141414u);
}

/* The word of four low and four high e2m1 codes (lo[j], hi[j]: value j of
 * each set) in the layout the decoders above read. */
MM90_HD uint32_t mm90_pack_word(const uint8_t lo[4], const uint8_t hi[4])
{
    uint32_t w = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t a = lo[j], b = hi[j], m_next = hi[(j + 1) % 4] & 1u;
        const uint32_t byte = (a & 8u) << 4 | (a & 7u) << 2 | (b & 8u) << 2 | (b >> 2 & 1u) | (b >> 1 & 1u) << 1 |
                              m_next << 6;
        w |= byte << (8 * j);
    }
    return w;
}

#ifdef __cplusplus
}
#endif

#endif
