/*
 * plugins/cpu/bgemm_amx.c - the AMX-BF16 kernel of bgemm.h, for calls of
 * several activation rows (decode experts with 3..16 rows). Compiled with
 * -mamx-tile -mamx-bf16 for this file only; called only when isa.c found
 * AMX-BF16 and the OS granted this process the tile data state.
 *
 * Why: with more than two rows the vdpbf16ps kernel does one instruction
 * per row and 64 weight bytes, and on two cores that is compute, not
 * memory; a TDPBF16PS multiplies a 16-row x 32-K block of activations by
 * a 32-K x 16-column block of weights in one instruction, so the call
 * streams its tile at memory speed whatever the row count.
 *
 * The tile layout (bgemm.h, BA16a64b2a) is already AMX's B operand: pair
 * step s of columns 16j..16j+15 is 64 bytes at s*256 + 64j, so a B tile
 * (16 pair steps) loads with a 256-byte stride straight from the weights.
 * The A operand is the activation rows packed with a common stride and K
 * zero-padded to a multiple of 32 (t->apk; bgemv.c packs them once per
 * work item). Four C tiles hold the 64 output columns for the mr rows.
 *
 * Order of the sums: per 32-K block, pair by pair, even element then odd
 * (the SDM's order for TDPBF16PS), with subnormals flushed - not the
 * odd-first order of the other kernels, so results may differ from theirs
 * in the last bits; tests/cpu checks this kernel against a float64 model.
 */
#include <immintrin.h>
#include <string.h>

#include "plugins/cpu/bgemm.h"

/* Prefetch distances in K blocks of the tile (4 KiB each): into L1 16 KiB
 * ahead, into L2 64 KiB ahead, running on into the next tile (t->ahead) at
 * the end of this one. Measured on the CI machine (2 threads streaming
 * Mixtral-sized tiles): 22 GB/s without the L2 stream, 24-27 with it. */
#ifndef PF_BLOCKS
#define PF_BLOCKS 4
#endif
#ifndef L2_BLOCKS
#define L2_BLOCKS 16
#endif

typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void configure(uint32_t mr)
{
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; i++) { /* C: mr rows of 16 f32 */
        c.rows[i] = (uint8_t)mr;
        c.colsb[i] = 64;
    }
    c.rows[4] = (uint8_t)mr; /* A: mr rows of 32 bf16 */
    c.colsb[4] = 64;
    for (int i = 5; i < 7; i++) { /* B: 16 pair steps of 16 columns */
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    /* GCC's _tile_loadconfig tells the compiler it reads 8 bytes only; once
     * this is inlined the other stores would be dead without the barrier. */
    __asm__ volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
}

static void prefetch_block(const uint16_t *blk, int hint_l2)
{
    for (int l = 0; l < 64; l++) {
        if (hint_l2)
            _mm_prefetch((const char *)(blk + 32 * l), _MM_HINT_T1);
        else
            _mm_prefetch((const char *)(blk + 32 * l), _MM_HINT_T0);
    }
}

static void amx_tile(cpu_btile *t)
{
    configure(t->mr);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const size_t astride = (size_t)t->apk_stride * sizeof(uint16_t);
    const uint16_t *w = t->w[0];
    uint32_t blocks = (t->k + 31) / 32;
    for (uint32_t b = 0; b < blocks; b++) {
        const uint16_t *blk = w + (size_t)b * 16 * 2 * CPU_BNR; /* 16 pair steps of 256 bytes */
        if (b + PF_BLOCKS < blocks)
            prefetch_block(blk + (size_t)PF_BLOCKS * 16 * 2 * CPU_BNR, 0);
        if (b + L2_BLOCKS < blocks)
            prefetch_block(blk + (size_t)L2_BLOCKS * 16 * 2 * CPU_BNR, 1);
        else if (t->ahead)
            prefetch_block(t->ahead + (size_t)(b + L2_BLOCKS - blocks) * 16 * 2 * CPU_BNR, 1);
        _tile_loadd(4, t->apk + (size_t)b * 32, astride);
        /* Columns 16j..16j+15: 32 values (64 bytes) at 32j of each pair step. */
        _tile_loadd(5, blk, 2 * CPU_BNR * sizeof(uint16_t));
        _tile_loadd(6, blk + 32, 2 * CPU_BNR * sizeof(uint16_t));
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 6);
        _tile_loadd(5, blk + 64, 2 * CPU_BNR * sizeof(uint16_t));
        _tile_loadd(6, blk + 96, 2 * CPU_BNR * sizeof(uint16_t));
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 6);
    }
    const size_t ostride = CPU_BNR * sizeof(float);
    _tile_stored(0, t->out[0][0], ostride);
    _tile_stored(1, t->out[0][0] + 16, ostride);
    _tile_stored(2, t->out[0][0] + 32, ostride);
    _tile_stored(3, t->out[0][0] + 48, ostride);
    _tile_release();
}

const cpu_bkernels cpu_bkernels_amx = {.name = "amx_bf16", .tile = amx_tile};
