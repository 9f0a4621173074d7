/*
 * plugins/cuda/launch_shape.h - launch shapes of small kernels, decided on
 * the host from the layer's sizes and the plugin's options alone (a
 * captured CUDA graph never depends on device data). Pure C, unit-tested
 * without a GPU (tests/cuda).
 *
 *   plan  plan.cu: one block plans a call below the option plan_wide_pairs
 *         (FMCU_PLAN_WIDE_PAIRS by default); from there the count and
 *         scatter kernels over many blocks (80 -> 13 us at 65536 pairs on an
 *         H100; bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and plan
 *         kernels").
 *   act   prefill_act.cu: the activation stage of the prefill tier, a row
 *         per block or (per-token GEMM2 inputs of at most 4 chunks of 8
 *         columns a lane) per warp.
 *   quant quantize.cu: the block of the quant and amax kernels (a row each).
 *   gg    prefill_sm90.cu: the tile kinds of our grouped GEMM
 *         (grouped_gemm.h) for the prefill tier's GEMM1 and GEMM2.
 */
#ifndef FMOE_PLUGIN_CUDA_LAUNCH_SHAPE_H
#define FMOE_PLUGIN_CUDA_LAUNCH_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pairs from which the wide plan runs by default (option plan_wide_pairs). */
#define FMCU_PLAN_WIDE_PAIRS 8192

/* Threads of a quant or amax block (quantize.cu) for rows of `cols` values:
 * 256, or 1024 past FMCU_QUANT_WIDE_COLS, so that rows held in registers
 * (quant_row.cuh: 2 pieces of 8 values a thread) can have up to 16384
 * values (Mixtral-8x7B's GEMM2 input: 14336). */
#define FMCU_QUANT_WIDE_COLS 4096
unsigned fmcu_quant_threads(uint32_t cols);

/* The GEMM2 input the activation stage writes (prefill_act.cu's QM_*). */
#define FMCU_ACT_BF16   0 /* bf16 */
#define FMCU_ACT_TENSOR 1 /* e4m3, one scale */
#define FMCU_ACT_TOKEN  2 /* e4m3, a scale per row */
#define FMCU_ACT_GROUP  3 /* e4m3, a scale per 1 x FMCU_ACT_GROUP_COLS group */

#define FMCU_ACT_GROUP_COLS  128
#define FMCU_ACT_MAX_THREADS 256
/* Chunks of 8 columns a lane takes in a warp row: up to FMCU_ACT_WARP_CH
 * (I <= 1024). H100, M = 8192, same bits: Qwen3-30B-A3B's I = 768 (3 a
 * lane) 128 -> 98 us against a block per row; DeepSeek-V3's 2048 (8 a lane,
 * 100 registers, 2 blocks an SM) 309 -> 542 us, so longer rows keep a block
 * (bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and plan kernels"). */
#define FMCU_ACT_WARP_CH 4

typedef struct fmcu_act_launch {
    unsigned threads; /* a block */
    int ch;           /* chunks of 8 columns a thread takes a pass (a lane a row, warp rows): 1, 2, 3 or 4 */
    size_t smem;      /* dynamic shared memory: a per-token row past 512 chunks waits for its amax there */
    int warp_rows;    /* 1: a row per warp, FMCU_ACT_MAX_THREADS / 32 rows a block */
} fmcu_act_launch;

/* The activation kernel's launch for GEMM2 inputs of form `mode`
 * (FMCU_ACT_*) and I columns; per-token rows of up to FMCU_ACT_WARP_CH
 * chunks a lane are a warp's when `warp_rows` (option prefill_warp_rows).
 * Block rows (bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and plan
 * kernels"): one chunk a thread up to 128 chunks, 2 up to 256, 4 up to 512
 * (so a thread has 2 to 8 loads in flight and a per-token row waits for its
 * amax in registers), then 256 threads of 2 chunks a pass; the block scheme
 * a half-warp per 128-column group, up to 8 warps. */
fmcu_act_launch fmcu_act_shape(int mode, uint32_t I, int warp_rows);

/* Our grouped GEMM's tile kinds (grouped_gemm.h, grouped_gemm_sm90.cu):
 * columns per tile and accumulation. Promoted kinds restart wgmma's
 * accumulator every 128 K (e4m3 only); fast kinds keep one over all of K. */
typedef enum fmcu_gg_kind {
    FMCU_GG_N192_PROMOTED,
    FMCU_GG_N256_FAST,
    FMCU_GG_N128_FAST,
    FMCU_GG_N192_FAST,
    FMCU_GG_KINDS
} fmcu_gg_kind;

/* 1 for the kinds that promote (e4m3 operands only). */
int fmcu_gg_promoted(int kind);

/* Tile order (fmcu_gg_args.order; option prefill_tile_order). FIXED: CTA b
 * takes tiles b, b + grid, b + 2 grid, ...; COUNTER: tile b, then the next
 * untaken one from a counter; AUTO: the counter for promoted kinds and the
 * swapped 4-bit GEMM (fmcu_gg_w4_swap_launch), fixed for fast ones. H100,
 * GEMMs alone under random routing and the forward (bench/cuda/RESULTS.md
 * at 5ddad69, "Prefill: half tiles and the tile order"): with half tiles in
 * the fixed order the promoted fp8 GEMM1s of long K ran 13-21% slower
 * alone, 21-55% in the forward (CTAs drift apart and the tiles in flight
 * stop sharing weight tiles in L2), in the counter's order 1-6% faster than
 * whole tiles; the fast kinds ran up to 17% slower alone and 9% in the
 * forward in the counter's order, and best with half tiles in the fixed
 * one. The swapped 4-bit GEMM, H200: the counter 1-4% faster at M = 1024
 * (bench/cuda/RESULTS.md, "The swapped 4-bit GEMM's tile order"). */
#define FMCU_GG_ORDER_AUTO    0
#define FMCU_GG_ORDER_FIXED   1
#define FMCU_GG_ORDER_COUNTER 2

/* The prefill tier's kinds (bf16 and fp8 tensor/channel) for a call of
 * `rows` average rows per local expert and hidden size H: *k1 for GEMM1,
 * *k2 for GEMM2. fp8: GEMM1 promoted 192 columns (its output is quantized
 * again), GEMM2 not; bf16: fast kinds (f32 accumulation), GEMM1 256
 * columns. GEMM2 takes 128-column tiles below 128 rows (fewer half-empty
 * tiles), 256 from 128, or 192 where that pads its N (= H) less:
 * gpt-oss-120b's H = 2880 is 15 tiles of 192 and 11.25 of 256 (H100,
 * forward at M=8192, GEMM2 -5.5% fp8 and -4% bf16, same bits;
 * bench/cuda/RESULTS.md at 5ddad69, "Prefill: ping-pong and overlapped GEMM kinds"). */
void fmcu_gg_kinds(int bf16, int64_t rows, uint32_t H, int *k1, int *k2);

#ifdef __cplusplus
}
#endif
#endif
