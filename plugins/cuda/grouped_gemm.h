/*
 * plugins/cuda/grouped_gemm.h - our own Hopper grouped GEMM
 * (grouped_gemm_sm90.cu): D = round_bf16(acc * (s_row * s_col) + bias) over
 * the expert-sorted rows of the prefill path, e4m3 operands (the fp8 tensor
 * and channel schemes) or bf16 ones (bf16 weights, or e2m1 weights that the
 * prefill path dequantized into bf16, with their per-expert output factor
 * as s_col and their biases). Host-callable C++ (the prefill path and
 * tests/cuda call it).
 *
 *   A  [rows_cap, K] e4m3 or bf16, rows sorted by expert: expert e owns rows
 *      offsets[e] .. offsets[e+1] (device memory, written by the plan)
 *   B  [E, N, K] e4m3 or bf16 (the expert's weight rows, K contiguous)
 *   D  [rows, N] bf16; only the rows of some expert are written
 *   s_row  per row (row_vec) or one value; s_col [E, N] (col_vec) or [E]
 *   bias   [E, N] bf16, added after the scales (NULL: none)
 *
 * Why not CUTLASS's grouped kernels: they rewrite a TMA descriptor per
 * expert whenever a persistent CTA moves to another group, and their
 * promoted FP8 main loop is limited to 128x128 cooperative or 64x192
 * ping-pong tiles. Here one 2-D descriptor covers all of A and one all of
 * B ([E*N, K]); a tile is (expert, 128-row block, BN-column block), its A
 * rows start at offsets[e] + 128*m (any row: TMA does not need alignment
 * to the tile), rows past the expert's end are computed and not stored,
 * and TMA zero-fills past K and past rows_cap. An expert's last row block
 * of at most 64 rows is a half tile (64 rows; each warp group computes
 * half of the columns), so it costs half a tile: under random routing
 * about half the experts end in such a block (Qwen3-30B-A3B at M=8192:
 * 571 row blocks for 512 blocks' worth of rows). Tiles then differ in
 * cost, so the promoted kinds take them from a counter in `sched` in order
 * rather than by a fixed stride (`order`, below).
 *
 * Accumulation (e4m3): promoted kinds restart wgmma's accumulator every 128 K and
 * add it into f32 registers (the schedule of CUTLASS's promoted FP8 main
 * loop, DeepSeek-V3 3.3.2), fast kinds keep one accumulator over all of K.
 * bf16 takes the fast kinds: wgmma accumulates it in f32.
 */
#ifndef FMOE_PLUGIN_CUDA_GROUPED_GEMM_H
#define FMOE_PLUGIN_CUDA_GROUPED_GEMM_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/launch_shape.h"

struct fmcu_gg_args {
    const uint8_t *a;          /* [rows_cap, K] */
    const uint8_t *b;          /* [E, N, K] */
    __nv_bfloat16 *d;          /* [rows_cap, N] */
    const float *s_row;        /* [rows_cap] when row_vec, else [1]; NULL: 1 */
    const float *s_col;        /* [E, N] when col_vec, else [E]; NULL: 1 */
    const __nv_bfloat16 *bias; /* [E, N], added after the scales; NULL: none */
    const int32_t *offsets;    /* [E + 1], device */
    int row_vec, col_vec;
    uint32_t E, N, K; /* K, N multiples of 16 */
    int64_t rows_cap;
    int bf16;        /* A and B bf16 (fast kinds: wgmma accumulates bf16 in f32) */
    int whole_tiles; /* 1: every tile 128 rows (measurements); 0: an expert's last
                        row block of at most 64 rows is a half tile, 64 rows with the
                        warp groups splitting its columns (same bits) */
    /* e2m1 weights converted in the kernel (prefill_dequant.h's arithmetic):
     * w4 = their block size (16 NVFP4, 32 MXFP4) and b = their chunks [E, N,
     * kp / 32] (wq_pack.h), sf8 = their scale codes [E, N, kp / w4]; `kind`
     * is then ignored (128-column tiles, two more warp groups converting each
     * stage). 0: b holds the operand itself. */
    int w4;
    const uint8_t *sf8;
    uint32_t kp;
    int mx_fold; /* MXFP4: every scale code <= 128 (fmcu_wq_proj.mx_fold), so that the
                    swapped form folds the scales into one product a register; 0: not
                    known (the converting kinds ignore it) */
    /* int4 weights converted in the kernel (w4 = FMCU_GG_W4_INT4): b = their
     * chunks [E, N, kp / 32] (wq_pack.h, value + 8), gscale = their f32
     * scales [E, N, groups] per 128 columns, zero = their zero points [E, N,
     * groups] (bias removed) or NULL; the kernel promotes each group's sum
     * times its scale into f32 (s_col then multiplies as usual). */
    const float *gscale;
    const int8_t *zero;
    uint32_t groups;
    /* fp8 128 x 128 block scales (the block scheme), promoted per 128-K
     * stage: fin += acc x a_sf x b_sf, f32. a_sf: the activation scales
     * grouped M-major (expert e's [K/128][M_e] from offsets[e] x K/128, as
     * the prefill path's quantization writes them for CUTLASS); b_sf: the
     * weight scales [E, N/128, K/128]. Both or neither; with them K and N
     * are multiples of 128, the operands e4m3, s_row, s_col and bias NULL,
     * and `kind` is ignored (128 x 128 promoted tiles: every warp group's
     * columns are in one weight block). */
    const float *a_sf, *b_sf;
    int32_t *sched; /* [2] device memory, zero before the first launch: the tile
                       counter; each launch leaves it zero again */
    int order;      /* FMCU_GG_ORDER_*: which CTA takes which tile */
};

/* Tile kinds (fmcu_gg_kind) and orders (FMCU_GG_ORDER_*) are in
 * launch_shape.h, with the host-side choice of kinds (fmcu_gg_kinds) and
 * the measurement knobs' parsing, unit-tested without a GPU. */

/* fmcu_gg_args.w4 of int4 weights with 128-column scale groups. */
#define FMCU_GG_W4_INT4 4

/* The largest number of experts the kernel's tile table holds. */
#define FMCU_GG_MAX_EXPERTS 1024

/* Enqueue the GEMM on `st` on `sms` persistent CTAs (the device's
 * multiprocessor count). No allocation, no synchronization: graph
 * capturable. Returns cudaErrorInvalidValue for arguments it cannot
 * serve (E > FMCU_GG_MAX_EXPERTS, K or N not multiples of 16, misaligned
 * pointers, promoted kinds with bf16), or the error of encoding the TMA
 * descriptors or launching. */
cudaError_t fmcu_gg_launch(const fmcu_gg_args *args, fmcu_gg_kind kind, int sms, cudaStream_t st);

/* The 4-bit GEMMs (w4 = FMCU_GG_W4_INT4, 32 or 16) with the operands
 * swapped (gg_w4_swap.cu): the weights dequantized in registers as wgmma's
 * A operand, 128 weight rows by 128 token rows a tile; `order` FIXED the
 * fixed tile order (`sched` unused), AUTO and COUNTER the counter's. Same
 * contract, refusals and bits as fmcu_gg_launch's 4-bit kinds. */
cudaError_t fmcu_gg_w4_swap_launch(const fmcu_gg_args *args, int sms, cudaStream_t st);

#endif
