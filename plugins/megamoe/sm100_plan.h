/*
 * plugins/megamoe/sm100_plan.h - the SM100 kernel's launch plan and the
 * tcgen05 descriptors it builds, in plain C so that tests/megamoe checks
 * every bit without a GPU (sm100_plan.c; the kernel, sm100_forward.cu,
 * includes this header and uses the same functions).
 *
 * The kernel (docs/MEGAMOE.md "The SM100 kernel") is one persistent launch
 * per forward, one CTA per SM, 9 warps: 0-3 load operands into shared
 * memory, 4-7 run the epilogue (warp w reads TMEM lanes 32(w%4)..+31), 8
 * allocates tensor memory and issues the MMAs. The MMA is swap-AB, as
 * DeepGEMM's: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale with A =
 * 128 e2m1 weight rows (M = 128, the only M of this kind on one CTA), B =
 * BLOCK_M e4m3 token rows (N), K = 32 per instruction, one UE8M0 scale per
 * row per 32 on both sides, fp32 accumulators in TMEM.
 *
 * Facts (read, not copied): PTX ISA tcgen05 (instruction descriptor table
 * for .kind::mxf8f6f4, shared memory descriptor table, 16 4-bit values then
 * 8 bytes of padding per 16-byte chunk for f8f6f4 kinds), CUTLASS
 * cute/arch/mma_sm100_desc.hpp (InstrDescriptorBlockScaled, SmemDescriptor),
 * DeepGEMM 54e2261 (sm100_fp8_fp4_gemm_1d1d.cuh, mega_moe.cuh).
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM100_PLAN_H
#define FMOE_PLUGIN_MEGAMOE_SM100_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/megamoe/host.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MM100_BLOCK_N    128u /* weight rows per tile: the MMA's M */
#define MM100_BLOCK_K    128u /* K per pipeline stage: 4 MMAs of 32, one scale word per row */
#define MM100_MMA_K      32u  /* K per tcgen05.mma of an 8-bit kind */
#define MM100_WARPS      9u   /* 4 loaders, 4 epilogue, 1 MMA */
#define MM100_THREADS    (MM100_WARPS * 32u)
#define MM100_MAX_STAGES 8u      /* beyond this the loaders cannot keep more in flight */
#define MM100_MIN_STAGES 3u      /* the loaders keep 2 stages in flight (cp.async groups) */
#define MM100_SMEM_LIMIT 232448u /* opt-in shared memory per block on SM100 (227 KiB) */
#define MM100_MAX_LOCAL  1024u   /* local experts: the per-expert tables live in shared memory */
#define MM100_TMEM_COLS  512u    /* tensor memory columns per SM */

/* ---- descriptors ----------------------------------------------------------- */

/* Operand formats of .kind::mxf8f6f4 (PTX / CUTLASS MXF8F6F4Format). E2M1
 * is 5 here (the 8-bit-container form, 16 values + 8 padding bytes per
 * 16-byte chunk); kind::mxf4's packed E2M1 code (1) is another kind's. */
#define MM100_FMT_E4M3 0u
#define MM100_FMT_E2M1 5u

/* Host and device both build the descriptors (tests/megamoe checks them
 * on the host; sm100_forward.cu uses the same functions on the device). */
#ifdef __CUDACC__
#define MM100_HD __host__ __device__ __forceinline__
#else
#define MM100_HD inline
#endif

/* The 32-bit instruction descriptor of a block-scaled MMA with A = e2m1
 * (K-major), B = e4m3 (K-major), UE8M0 scales, M = 128, N = n, and the
 * scale bytes a_sf_id / b_sf_id (0..3: which 32-wide K chunk of the scale
 * word). Bits: [4,6) b_sf_id, [7,10) a format, [10,13) b format, 15 / 16
 * A / B major (0 = K), [17,23) N >> 3, 23 scale format (1 = UE8M0),
 * [24,29) M >> 4, [29,31) a_sf_id. n % 8 == 0, 8 <= n <= 256 (the kernel
 * uses 32, 64, 128). */
static MM100_HD uint32_t mm100_idesc(uint32_t n, uint32_t a_sf_id, uint32_t b_sf_id)
{
    return ((b_sf_id & 3u) << 4) | (MM100_FMT_E2M1 << 7) | (MM100_FMT_E4M3 << 10) | ((n >> 3) << 17) | (1u << 23) |
           ((MM100_BLOCK_N >> 4) << 24) | ((a_sf_id & 3u) << 29);
}

/* The fields both shared-memory descriptors use: start address >> 4 in
 * [0,14), SBO >> 4 in [32,46), the fixed version bit 46, the layout type
 * in [61,64); LBO 0, base offset 0. */
static MM100_HD uint64_t mm100_smem_desc(uint32_t addr, uint32_t sbo, uint32_t layout)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)(sbo >> 4) << 32) | ((uint64_t)1 << 46) |
           ((uint64_t)layout << 61);
}

/* A K-major operand tile laid out with the 128-byte swizzle: rows of 128
 * bytes, 8-row groups 1024 bytes apart (SBO), LBO unused (one swizzle atom
 * along K), layout type 2 (SWIZZLE_128B on SM100; SM90's code differs),
 * the tile on a 1024-byte boundary. K moves by adding (bytes >> 4) to the
 * low word: +2 per 32-byte MMA step. */
static MM100_HD uint64_t mm100_sw128_desc(uint32_t addr)
{
    return mm100_smem_desc(addr, 1024u, 2u);
}

/* A scale block for tcgen05.cp .32x128b.warpx4: 512 contiguous bytes (32
 * rows of 16), no swizzle (layout type 0), SBO 128 bytes. */
static MM100_HD uint64_t mm100_sf_desc(uint32_t addr)
{
    return mm100_smem_desc(addr, 128u, 0u);
}

/* Byte offset, inside a swizzled tile, of 16-byte chunk `chunk` (0..7) of
 * row `row`: rows 128 bytes apart, chunk positions XORed with row % 8
 * (the 128-byte swizzle the descriptor above names). */
static MM100_HD uint32_t mm100_sw128_offset(uint32_t row, uint32_t chunk)
{
    return (row >> 3) * 1024u + (row & 7u) * 128u + ((chunk ^ (row & 7u)) << 4);
}

/* Where a token's scale word goes in a 128-row scale block: the order
 * tcgen05.cp .32x128b.warpx4 needs (lane b gets words 4b..4b+3 as columns
 * 0..3; the MMA reads row 32a + b at lane b, column a), the inverse of
 * host.h's mm_utccp_src: (i & ~127) + (i % 32) * 4 + (i / 32) % 4. */
static MM100_HD uint32_t mm100_utccp_dst(uint32_t i)
{
    return (i & ~127u) + (i & 31u) * 4u + ((i >> 5) & 3u);
}

/* ---- the kernel's indexing (host and device: tested without a GPU) -------- */

/* The per-expert tables of a call: cnt[e * ranks + s] rows of local expert
 * e came from rank s; each expert's rows start at row0[e] in the ring,
 * padded to block_m, and its first block_m block is blk0[e]; row0[L] and
 * blk0[L] are the totals. Returns row0[L]. */
static MM100_HD uint32_t mm100_tables(const uint32_t *cnt, uint32_t local, uint32_t ranks, uint32_t block_m,
                                      uint32_t *row0, uint32_t *blk0)
{
    uint32_t row = 0, blk = 0;
    for (uint32_t e = 0; e < local; e++) {
        uint32_t n = 0;
        for (uint32_t s = 0; s < ranks; s++)
            n += cnt[e * ranks + s];
        row0[e] = row;
        blk0[e] = blk;
        blk += (n + block_m - 1) / block_m;
        row = blk * block_m;
    }
    row0[local] = row;
    blk0[local] = blk;
    return row;
}

/* The local expert holding block b < blk0[local]: the e with blk0[e] <= b <
 * blk0[e + 1] (experts with no rows share their successor's blk0). */
static MM100_HD uint32_t mm100_expert_of_block(const uint32_t *blk0, uint32_t local, uint32_t b)
{
    uint32_t lo = 0, hi = local; /* blk0[lo] <= b < blk0[hi] */
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (blk0[mid] <= b)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Where ring row r's scale word for K block kb lives in a ring scale view
 * [K/128][sf_ring]: block r / block_m owns 128 scale rows, in tcgen05.cp
 * order (the loader copies those 128 words as one 512-byte block). */
static MM100_HD uint64_t mm100_ring_sf_word(uint32_t r, uint32_t kb, uint32_t block_m, uint32_t sf_ring)
{
    return (uint64_t)kb * sf_ring + mm100_utccp_dst((r / block_m) * 128u + r % block_m);
}

/* The 128 scale words a stage's loader copies as one 512-byte block: the
 * weights' for K block kb of weight block nb of local expert e (words
 * [L][K/128][n_out], transform.c), and the ring's for the BLOCK_M block
 * starting at ring row row0. */
static MM100_HD uint64_t mm100_weight_sf_block(uint32_t e, uint32_t kb, uint32_t kblocks, uint32_t n_out, uint32_t nb)
{
    return ((uint64_t)e * kblocks + kb) * n_out + (uint64_t)nb * 128u;
}

static MM100_HD uint64_t mm100_ring_sf_block(uint32_t kb, uint32_t sf_ring, uint32_t row0, uint32_t block_m)
{
    return (uint64_t)kb * sf_ring + (uint64_t)(row0 / block_m) * 128u;
}

/* Entry `pos` of the pull list of local expert e from source rank src
 * (host.h MM_WS_PULL_IDX: [local][ranks][ranks x T] u32). */
static MM100_HD uint64_t mm100_pull_index(uint32_t e, uint32_t src, uint32_t pos, uint32_t ranks, uint32_t tokens)
{
    return ((uint64_t)e * ranks + src) * ((uint64_t)ranks * tokens) + pos;
}

/* GEMM1's epilogue: tile row `row` (0..127, the TMEM lane) of weight block
 * nb holds the gate (row % 16 < 8) or the up half (else) of intermediate
 * channel nb x 64 + (row / 16) x 8 + row % 8 (the 8-row interleave of
 * transform.c); its partner half is row ^ 8, in the same warp. */
static MM100_HD int mm100_l1_is_gate(uint32_t row)
{
    return (row & 8u) == 0;
}

static MM100_HD uint32_t mm100_l1_channel(uint32_t nb, uint32_t row)
{
    return nb * 64u + (row / 16u) * 8u + (row & 7u);
}

/* ---- the plan -------------------------------------------------------------- */

typedef struct mm100_shape {
    uint32_t block_m; /* tokens per tile: the MMA's N (32, 64 or 128) */
    uint32_t stages;  /* operand stages in shared memory */
    uint32_t stage_bytes;
    uint32_t smem_bytes; /* dynamic shared memory of the launch (with 1024 bytes of alignment slack) */
    uint32_t tmem_cols;  /* power of two: 2 accumulators of block_m columns, then 2 sets of 4 + 4 scale columns */
} mm100_shape;

/* BLOCK_M for a call: the smallest of 32, 64, 128 that holds the expected
 * rows per local expert (tokens x topk x ranks / experts, rounded up), so a
 * decode call wastes little of the MMA and a prefill call reuses each
 * weight tile over 128 tokens. */
uint32_t mm100_pick_block_m(uint64_t tokens, uint32_t topk, uint32_t ranks, uint32_t experts);

/* The shape for `block_m`: stages as many as fit in MM100_SMEM_LIMIT with
 * the per-expert tables of `local` experts (at most MM100_MAX_STAGES), and
 * the TMEM columns. -1 (with the reason) for a block_m other than 32, 64,
 * 128 or more than MM100_MAX_LOCAL local experts. */
int mm100_shape_make(uint32_t block_m, uint32_t local, mm100_shape *out, char *why, size_t cap);

/* Bytes of the shared-memory tables besides the stages: the mbarriers, the
 * epilogue's amax exchange, and two [local + 1] u32 tables (first ring row
 * and first tile block of each local expert). */
uint32_t mm100_table_bytes(uint32_t local, uint32_t block_m);

/* Tiles of one GEMM for per-expert row counts `rows[local]`: sum over
 * experts of ceil(rows / block_m) x (n_out / 128). */
uint64_t mm100_tiles(const uint32_t *rows, uint32_t local, uint32_t block_m, uint32_t n_out);

#ifdef __cplusplus
}
#endif

#endif
