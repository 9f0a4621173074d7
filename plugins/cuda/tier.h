/*
 * plugins/cuda/tier.h - which GEMM kernel tier a forward uses, decided on
 * the host from the call's size alone (so that a captured CUDA graph never
 * depends on device data). Pure C, unit-tested without a GPU (tests/cuda).
 *
 *   STREAM  stream_gemm.cu: weight streaming, experts see <= 16 rows on
 *           average (decode and small batches: the weights are the cost);
 *   TILED   gemm.cu: mma.sync tiles of 16-64 rows, any size;
 *   PREFILL the wgmma/TMA grouped GEMM path (prefill.h) where it serves the
 *           layer, else TILED.
 *
 * The plugin's option `tier` (options.h) forces one for tests and
 * measurements; a layer takes it at create.
 */
#ifndef FMOE_PLUGIN_CUDA_TIER_H
#define FMOE_PLUGIN_CUDA_TIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FMCU_TIER_AUTO    -1
#define FMCU_TIER_TILED   0
#define FMCU_TIER_STREAM  1
#define FMCU_TIER_PREFILL 2

/* Plan row tile of the stream tier: 4 token tiles of 8 per warp. */
#define FMCU_STREAM_ROW_TILE 32
/* Average rows per local expert up to which the stream tier is chosen. */
#define FMCU_STREAM_MAX_ROWS 16
/* The 4-bit and int weights' stream form (wq_stream.cu) is chosen up to 16
 * rows per expert; above, the wgmma kernel (wq_wgmma.cu) where it serves
 * the layer, else the tiled one (wq_gemm.cu). H200, int4 g128, stream vs
 * wgmma: Mixtral-8x7B M = 16 (4 rows) 374.8 vs 703.3 us, Qwen3-30B-A3B
 * M = 128 (8 rows) 263.9 vs 377.0, Mixtral M = 128 (32 rows) 1847.4 vs
 * 740.1 (bench/cuda/RESULTS.md at a920f9d, "4-bit weights: the wgmma form"). */
#define FMCU_WQ_STREAM_MAX_ROWS 16
/* From this many rows per expert on average, e2m1 weights (MXFP4, NVFP4)
 * take the prefill tier through the bf16 scratch where it serves them and
 * the fused form (below) does not: their active experts dequantized to
 * bf16 a run at a time, then the bf16 grouped GEMMs (prefill_dequant.h).
 * Below, writing and re-reading the bf16 weights costs more than the
 * register-level dequantization of wq_wgmma.cu. H200, MXFP4 Mixtral-8x7B,
 * wgmma vs dequantized: 128 rows (M = 512) 2559.4 vs 2806.3 us, 256 rows
 * 4550.1 vs 3281.5; a line through each pair crosses at 149 rows
 * (bench/cuda/RESULTS.md at a920f9d, "4-bit weights: the e2m1 prefill form"). Where
 * the fused form serves, e2m1 takes the prefill tier from the first row
 * past the stream tier instead (fmcu_wq_tier). */
#define FMCU_WQ_PREFILL_MIN_ROWS 150
/* Up to this many rows per local expert on average, prefill_dequant_fused =
 * auto converts e2m1 weights inside the grouped GEMM; above, through the
 * bf16 scratch where there is one (the same bits either way). The fused
 * form converts a weight tile once per 128-row tile of its expert, the
 * scratch once per call, so the scratch wins as the rows grow. H200, MXFP4,
 * M = 8192, scratch vs fused, us: 256 rows (DeepSeek-V3) 25277.6 vs
 * 19110.3, 256 (gpt-oss-120b) 7128.7 vs 5764.4, 512 (Qwen3-30B-A3B) 2001.8
 * vs 2142.7, 2048 (Mixtral) 9930.3 vs 15688.9 (bench/cuda/RESULTS.md at a920f9d,
 * "4-bit weights: e2m1 converted inside the grouped GEMM"). The crossover
 * lies between 256 and 512 rows; 320 is inside that gap, not measured.
 * Below 150 rows the fused form also beats the wgmma kernel: MXFP4,
 * wgmma vs fused, us: Qwen3-30B-A3B 32 rows 502.2 vs 454.7, 64 rows 747.5
 * vs 494.7; gpt-oss-120b 32 rows 2523.4 vs 2156.0; Mixtral 32 rows 1030.6
 * vs 953.0, 128 rows 2485.7 vs 1403.4 (NVFP4 W4A4 the same way except
 * Mixtral at 32 rows, 1004.0 vs 1046.7: bench/cuda/RESULTS.md at 7426a60, "4-bit
 * weights: the fused form from 17 rows"). */
#define FMCU_WQ_FUSED_MAX_ROWS 320
/* From this many rows per local expert on average, prefill_dequant_fused =
 * auto converts int4 weights with 128-column groups inside the grouped
 * GEMM (128-row tiles, group scales promoted in f32); below, the wgmma
 * kernel (64-row tiles) wastes less of its tiles. H200, int4 g128, fused
 * vs wgmma, us: Mixtral-8x7B 32 rows (M = 128) 734.9 vs 603.5, 64 rows
 * (M = 256) 818.1 vs 863.1; DeepSeek-V3 32 rows (M = 1024) 5658.2 vs
 * 4569.0; Qwen3-30B-A3B 64 rows (M = 1024) 423.0 vs 469.8
 * (bench/cuda/RESULTS.md at 7426a60, "int4 converted inside the grouped GEMM"). The
 * crossover lies between 32 and 64 rows; 48 is inside that gap. */
#define FMCU_WQ_INT4_FUSED_MIN_ROWS 48
/* The same where the prefill tier's int4 GEMMs take the swapped form
 * (fmcu_prefill_w4_swapped), whose 32-row tiles of an expert's last rows
 * beat the wgmma weight stream from 32 rows an expert: H200, int4 g128,
 * ring vs swapped, us: Mixtral-8x7B 16 rows (M = 64) 377.9 vs 399.2, 24
 * rows 402.3 vs 402.0, 32 rows 502.4 vs 453.9, 40 rows 573.1 vs 474.6;
 * Qwen3-30B-A3B 16 rows (M = 256) 206.2 vs 233.0, 24 rows 240.0 vs 242.4,
 * 32 rows 271.8 vs 267.6, 40 rows 320.2 vs 284.6 (bench/cuda/RESULTS.md,
 * "e2m1 on the swapped GEMM: scales folded"). */
#define FMCU_WQ_INT4_SWAP_MIN_ROWS 32
/* Rows per local expert on average from which, and up to which, wq_ring =
 * auto takes the wgmma weight stream (wq_ring.cu) where it serves the
 * layer. H200, ring vs the form it replaces, us (bench/cuda/RESULTS.md at 7426a60,
 * "4-bit weights: the weight stream's 64-pair tiles"): at 4 rows the
 * stream form wins (MXFP4 DeepSeek-V3 M = 128 3092.9 vs 2814.4, Mixtral
 * M = 16 415.9 vs 377.7), at 8 the ring (MXFP4 Qwen3-30B-A3B M = 128
 * 213.8 vs 259.7, int4 g128 176.9 vs 208.0): 6 is inside that gap. At 32
 * rows the ring wins (MXFP4 DeepSeek-V3 M = 1024 3897.7 vs 5640.6, Mixtral
 * M = 128 527.8 vs 715.8), at 64 the grouped GEMMs (MXFP4 Qwen3-30B-A3B
 * M = 1024 495.4 vs 421.0): the ring up to 47, the int4 fused form from
 * FMCU_WQ_INT4_FUSED_MIN_ROWS. */
#define FMCU_WQ_RING_MIN_ROWS 6
#define FMCU_WQ_RING_MAX_ROWS 47
/* The ring's last rows an expert where the prefill tier's GEMMs of both
 * projections take the swapped form (fmcu_prefill_w4_swaps): int4 from
 * FMCU_WQ_INT4_SWAP_MIN_ROWS (above); e2m1 with folded scales from 36 rows:
 * H200, MXFP4, ring vs swapped, us: Mixtral-8x7B 24 rows 424.1 vs 511.3,
 * 32 rows 521.5 vs 525.3, 40 rows 586.1 vs 549.7; Qwen3-30B-A3B 24 rows
 * 244.6 vs 276.1, 32 rows 277.5 vs 285.3, 40 rows 324.9 vs 306.8 (same
 * section): 35 is inside the 32-40 gap. */
#define FMCU_WQ_RING_SWAP_INT4_MAX_ROWS (FMCU_WQ_INT4_SWAP_MIN_ROWS - 1)
#define FMCU_WQ_RING_SWAP_E2M1_MAX_ROWS 35
/* The same for NVFP4 (MXFP4 keeps the bound above): its ring is the
 * slowest of the three 4-bit rings (gpt-oss-120b M = 1024, 32 rows: NVFP4
 * 1952.0 against MXFP4's 1360.1 us), and the swapped form beat it by a
 * quarter where measured: H200, NVFP4 W4A4 gpt-oss-120b, ring vs swapped,
 * us: 24 rows (M = 768) 1839.6 vs 1361.5, 32 rows (M = 1024) 1958.4 vs
 * 1446.5, 40 rows both swapped 1516.0 / 1518.3 (bench/cuda/RESULTS.md,
 * "e2m1 on the swapped GEMM: scales folded"). Not measured below 24 rows:
 * 23 keeps the ring where it was not beaten. */
#define FMCU_WQ_RING_SWAP_NVFP4_MAX_ROWS 23
/* Rows per local expert on average from which the stream tier's wgmma
 * forms take over from mma.sync by default: stream_wgmma_gemm1 = auto's
 * fp8 GEMM1 on f16 wgmma (stream_g1_wgmma.cu) for per-tensor and
 * per-channel scales (with block scales it takes it at every size), and
 * stream_wgmma_bf16 = auto's bf16 GEMMs (stream_bf16_wgmma.cu). BF16, H200,
 * whole layer, mma.sync vs wgmma, us: at 1-2 rows mma.sync wins by 2 to
 * 34 % (M = 1 and 16 of Qwen3-30B-A3B, gpt-oss-120b, DeepSeek-V3), at 4
 * wgmma wins twice (gpt-oss-120b M = 128 1535.7 vs 1460.5, DeepSeek-V3 5351.4
 * vs 5021.2) and loses 1 % once (Mixtral-8x7B M = 16 667.2 vs 672.5), at
 * 8 it wins (Qwen3-30B-A3B M = 128 382.0 vs 339.3): bench/cuda/RESULTS.md at 7426a60,
 * "The stream tier's BF16 GEMMs on wgmma". FP8: H200, mma.sync vs wgmma, whole layer, us (bench/cuda/
 * RESULTS.md, "The stream tier's GEMM1 on f16 wgmma"): FP8 channel at
 * 1.3 to 1.8 rows an expert mma.sync wins by 2 to 6 % (Qwen3-30B-A3B,
 * DeepSeek-V3, gpt-oss-120b M = 16), at 4 it is split (Mixtral M = 16
 * 361.7 vs 379.5, gpt-oss-120b M = 128 891.5 vs 826.4), from 8 wgmma wins
 * (Qwen3-30B-A3B M = 128 226.9 vs 205.7, DeepSeek-V3 at 97 experts M = 128
 * 1399.2 vs 1104.1); FP8 block wgmma wins from 1.5 rows (Qwen3-30B-A3B
 * M = 16 141.2 vs 130.2). */
#define FMCU_STREAM_WGMMA_MIN_ROWS 4
/* stream_wgmma = auto's fp8 GEMM2 on FP8 wgmma (stream_wgmma.cu) for
 * per-tensor and per-channel scales: from this many (token, slot) pairs a
 * call, or where GEMM1 takes f16 wgmma (FMCU_STREAM_WGMMA_MIN_ROWS rows an
 * expert); with block scales at every size. H200, FP8 channel, whole
 * layer, mma.sync vs wgmma GEMM2, us (bench/cuda/RESULTS.md at 7426a60, "The stream
 * tier's FP8 GEMM2 by call size"): below 128 pairs mma.sync wins or ties
 * (Mixtral-8x7B M = 1 113.1 vs 136.6: two experts' 256-row items are 32
 * CTAs for 132 SMs; gpt-oss-120b M = 1-16 by 4-14 %, DeepSeek-V3 M = 1-4
 * by 2-5 %; Mixtral M = 2 loses 2.6 %), from 128 wgmma wins (DeepSeek-V3
 * M = 16 1087.2 vs 1052.9, M = 32 1849.0 vs 1740.3) but for gpt-oss-120b
 * M = 32 (540.2 vs 550.0), and with GEMM1 on wgmma the mma.sync GEMM2
 * loses most (Mixtral M = 16 446.2 vs 379.7, M = 32 526.2 vs 390.0).
 * Block scales: wgmma wins at every size measured (Mixtral M = 1 151.3 vs
 * 144.9 to DeepSeek-V3 M = 16 1311.9 vs 1097.4). */
#define FMCU_STREAM_WGMMA2_MIN_PAIRS 128
/* grouped_gemm.h's FMCU_GG_MAX_EXPERTS (a static_assert in prefill_sm90.cu
 * keeps them equal; this header stays free of CUDA's). */
#define FMCU_WQ_FUSED_MAX_EXPERTS 1024
/* Average rows per local expert up to which the stream tier splits K over a
 * CTA's warps (more CTAs); above it, each warp streams its own rows (fewer
 * re-reads of the token rows). */
#define FMCU_STREAM_SPLITK_ROWS 4

/* The fused decode tail (decode_tail.cu): the GEMM2-input quantization,
 * GEMM2 and the top-k combine of a call of at most FMCU_TAIL_MAX_PAIRS
 * (token, slot) pairs in one launch. A CTA owns FMCU_TAIL_ROWS rows of
 * every pair's W2 (output columns of the layer) and all of K, so the combine
 * is local to it; the rows come into shared memory by one bulk copy each,
 * issued before the CTA waits for GEMM1 (they depend only on the plan's
 * expert ids). It serves calls whose CTAs all fit on the device at once
 * with all of K staged: one wave, each CTA's copies in flight from the
 * start (bench/cuda/RESULTS.md at 5ddad69, "Decode: the fused tail": a ring of
 * stages, or a second wave, streamed at a third of what the stream GEMM
 * does). */
#define FMCU_TAIL_MAX_PAIRS 8
#define FMCU_TAIL_ROWS      16
#define FMCU_TAIL_ROW_PAD   16             /* bytes after each staged row: conflict-free 16-byte fragment loads */
#define FMCU_TAIL_SMEM_MAX  (220u * 1024u) /* dynamic shared memory of a CTA */
#define FMCU_TAIL_SM_SMEM   (228u * 1024u) /* shared memory of an SM (sm_90) */
#define FMCU_TAIL_CTA_EXTRA 2048u          /* per CTA beyond the dynamic part: static arrays, reserve */

/* Where things are in a tail CTA's dynamic shared memory (bytes). */
typedef struct fmcu_tail_layout {
    size_t weights; /* [pairs][ROWS] rows of I e4m3 or bf16, ROW_PAD bytes apart */
    size_t act;     /* [pairs][I] GEMM2 input, e4m3 codes or bf16 */
    size_t a_scale; /* [pairs][kgroups] f32 */
    size_t y;       /* [pairs][ROWS] f32: the rounded GEMM2 outputs */
    size_t bar;     /* the mbarrier of the weight copies */
    size_t amax;    /* [pairs][kgroups] u32: the input's amaxes (stage_rows.cuh) */
    size_t total;
} fmcu_tail_layout;

static inline size_t fmcu_tail_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* Bytes of one staged weight row (I elements, then the pad). */
static inline size_t fmcu_tail_row_stride(uint32_t inter, int fp8)
{
    return (size_t)inter * (fp8 ? 1 : 2) + FMCU_TAIL_ROW_PAD;
}

static inline fmcu_tail_layout fmcu_tail_layout_of(uint32_t pairs, uint32_t inter, int fp8, uint32_t kgroups)
{
    fmcu_tail_layout l;
    l.weights = 0;
    l.act = (size_t)pairs * FMCU_TAIL_ROWS * fmcu_tail_row_stride(inter, fp8);
    l.a_scale = fmcu_tail_up(l.act + (size_t)pairs * inter * (fp8 ? 1 : 2), 16);
    l.y = fmcu_tail_up(l.a_scale + (size_t)pairs * kgroups * sizeof(float), 16);
    l.bar = fmcu_tail_up(l.y + (size_t)pairs * FMCU_TAIL_ROWS * sizeof(float), 16);
    l.amax = l.bar + 16;
    l.total = l.amax + (size_t)pairs * kgroups * sizeof(uint32_t);
    return l;
}

/* The tail's shape for a call. */
typedef struct fmcu_tail_cfg {
    uint32_t ctas; /* ceil(H / ROWS) */
    fmcu_tail_layout layout;
} fmcu_tail_cfg;

/* 1 and *cfg when the tail serves a call of `pairs` pairs on `tier` with
 * hidden size H, intermediate size I, fp8 (else bf16) operands and
 * `kgroups` activation scales per pair (block scales: ceil(I / block_k),
 * else 1) on a device of `sms` multiprocessors; 0 when GEMM2 and the
 * combine run as separate kernels (more pairs, another tier, K too long
 * to stage, or more CTAs than fit at once). */
int fmcu_tail_plan(int tier, int64_t pairs, uint32_t H, uint32_t I, int fp8, uint32_t kgroups, int sms,
                   fmcu_tail_cfg *cfg);

/* The one-launch decode (decode_fused.cu): a call the tail would serve
 * runs as one persistent launch of one CTA per SM -- the plan of its few
 * pairs, the GEMM1 input quantization, GEMM1, a grid-wide barrier, then
 * the tail's work in the CTAs that own W2 rows. Every CTA streams W13 for
 * GEMM1 while its W2 rows arrive in shared memory, so both weights are in
 * flight together and no launch waits for another (bench/cuda/RESULTS.md at 5ddad69,
 * "Decode: the one-launch decode").
 * A CTA runs `groups` GEMM1 units of 4 warps (16 weight rows, K split over
 * the warps, as the stream tier's split-K CTAs) and a copy warp: 6 groups
 * (800 threads at 72 registers), 5 with block scales (their partial sums
 * need more). */
#define FMCU_FUSED_GROUPS       6
#define FMCU_FUSED_GROUPS_BLOCK 5
#define FMCU_FUSED_X_PAD        16 /* bytes after each staged GEMM1 input row: conflict-free fragment loads */
/* With W13 by bulk copies (fmcu_fused_bulk_plan): groups, each with a
 * shared-memory slot for the two 8-row pieces of its unit. */
#define FMCU_FUSED_GROUPS_BULK 3

typedef struct fmcu_fused_layout {
    fmcu_tail_layout tail; /* the GEMM2 side, at the same offsets as the tail's */
    size_t x;              /* [tokens][H row + X_PAD] GEMM1 input, e4m3 codes or bf16 */
    size_t x_scale;        /* [tokens][kgroups of H] f32 */
    size_t x_amax;         /* [tokens][kgroups of H] u32 */
    size_t red;            /* f32 partial sums: GEMM1 [groups][3][4][32], then GEMM2 [warps][2][32] */
    size_t w13_bar;        /* bulk W13: [groups] full, then [groups] empty mbarriers; 0 otherwise */
    size_t w13;            /* bulk W13: [groups][2] pieces of 8 rows of H e4m3 or bf16; 0 otherwise */
    size_t total;
} fmcu_fused_layout;

typedef struct fmcu_fused_cfg {
    uint32_t ctas;      /* one an SM */
    uint32_t groups;    /* GEMM1 units a CTA runs at once */
    uint32_t tail_ctas; /* ceil(H / FMCU_TAIL_ROWS): the CTAs that own W2 rows */
    uint32_t tokens;    /* pairs / top_k */
    uint32_t w13_piece; /* bytes of a W13 piece (8 rows) when W13 comes by bulk copies, else 0 */
    fmcu_fused_layout layout;
} fmcu_fused_cfg;

/* 1 and *cfg when the one-launch decode serves a call of `pairs` pairs of
 * top-k `top_k` on `tier` (H, I, fp8 as fmcu_tail_plan; `block_k` the
 * activation group of block scales, 0 for none) on `sms` multiprocessors:
 * the tail's conditions, every W2-owning CTA on its own SM, and the GEMM1
 * input beside the W2 rows in one CTA's shared memory. */
int fmcu_fused_plan(int tier, int64_t pairs, uint32_t top_k, uint32_t H, uint32_t I, int fp8, uint32_t block_k, int sms,
                    fmcu_fused_cfg *cfg);

/* 1 and *cfg changed so that W13 comes into shared memory by bulk copies
 * that the copy warp issues as soon as the plan is known (one 8-row piece
 * of 8 * H elements each, contiguous in the checkpoint's layout), into a
 * slot of two pieces per group of FMCU_FUSED_GROUPS_BULK, instead of the
 * GEMM1 warps' register loads; 0 and *cfg unchanged when the slots do not
 * fit beside the rest (`cfg` from fmcu_fused_plan for the same H, fp8). */
int fmcu_fused_bulk_plan(uint32_t H, int fp8, fmcu_fused_cfg *cfg);

/* The tier for m tokens; `forced` is FMCU_TIER_AUTO or a tier, and
 * `prefill_ok` says whether the prefill path serves this layer. */
int fmcu_gemm_tier(int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int prefill_ok);

/* The same for the 4-bit and int weights: STREAM up to
 * FMCU_WQ_STREAM_MAX_ROWS rows per expert (or forced); above, PREFILL
 * where `prefill_ok` and either the call takes the fused form (`fused`:
 * fmcu_wq_prefill_fused for e2m1, fmcu_wq_int4_fused for int4) or it has FMCU_WQ_PREFILL_MIN_ROWS rows an expert
 * (or forced); else TILED. `streams` = 0 when wq_stream.cu does not serve
 * the layer. */
int fmcu_wq_tier(int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int streams, int prefill_ok, int fused);

/* On the prefill tier, whether e2m1 weights are converted inside the
 * grouped GEMM (1) or go through the bf16 scratch (0). `option` is
 * prefill_dequant_fused (FMCU_FUSED_*, options.h): on (1) and off (0)
 * decide alone; auto gives 1 for 1 to FMCU_WQ_FUSED_MAX_EXPERTS local
 * experts (one launch serves them all) when m * top_k / local_experts
 * (integer division) is at most FMCU_WQ_FUSED_MAX_ROWS or there is no
 * scratch (`has_scratch` = 0: the fused form beat the wgmma kernel at
 * every size measured but one, NVFP4 W4A4 at 32 rows, by 4%); otherwise 0. */
int fmcu_wq_prefill_fused(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int has_scratch);

/* Whether a call of m tokens of an int4 layer with 128-column groups takes
 * the fused form (the prefill tier, converted inside the grouped GEMM):
 * `option` on always; auto for 1 to FMCU_WQ_FUSED_MAX_EXPERTS local
 * experts from min_rows rows an expert (m * top_k / local_experts:
 * FMCU_WQ_INT4_FUSED_MIN_ROWS, or FMCU_WQ_INT4_SWAP_MIN_ROWS for the
 * swapped form); off never (int4 has no bf16 scratch form). */
int fmcu_wq_int4_fused(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int64_t min_rows);

/* Whether a call of m tokens takes the wgmma weight stream (wq_ring.cu)
 * where it serves the layer, whatever fmcu_wq_tier says: `option` is
 * wq_ring (FMCU_FUSED_*, options.h); off never, nor when the prefill tier
 * is forced (`forced`); on always else; auto from FMCU_WQ_RING_MIN_ROWS to
 * max_rows rows an expert (m * top_k / local_experts: FMCU_WQ_RING_MAX_ROWS,
 * or FMCU_WQ_RING_SWAP_*_MAX_ROWS where the prefill tier's GEMMs are the
 * swapped form) when no tier or the stream tier is forced. */
int fmcu_wq_ring_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int64_t max_rows);

/* fmcu_wq_ring_wanted's max_rows for a layer: FMCU_WQ_RING_MAX_ROWS, or
 * where the call would take the prefill tier's swapped GEMMs (`swapped`)
 * its format's bound: int4 (`int4`), NVFP4 (`fp4_block` 16) or MXFP4. */
int64_t fmcu_wq_ring_max_rows(int swapped, int int4, uint32_t fp4_block);

/* Whether the prefill tier's grouped GEMM over a 4-bit projection takes
 * the swapped form (gg_w4_swap.cu) rather than the converting kinds:
 * `option` is prefill_w4_gemm (FMCU_W4_GEMM_*, options.h); swapped or
 * converting decides alone; auto takes it for int4 (`int4`), and for e2m1
 * (`fp4_block` 16 or 32, else 0) where its scales fold into one product a
 * register: NVFP4 always, MXFP4 where every scale code is <= 128
 * (`mx_fold`). H200 (bench/cuda/RESULTS.md, "e2m1 on the swapped GEMM:
 * scales folded"): the layer 4-25 % faster at M = 1024 and on par at 8192;
 * NVFP4 gpt-oss-120b (K = 2880) M = 8192 12 % faster since its scales load
 * two stages ahead (4716 against 5384 us); unfolded MXFP4 was 3-18 % slower
 * (measured before that change). */
int fmcu_w4_gemm_swapped(int option, int int4, uint32_t fp4_block, int mx_fold);

/* Whether a call of m tokens runs a stream-tier GEMM on its wgmma form
 * where that serves the layer: `option` is stream_wgmma_gemm1 or
 * stream_wgmma_bf16 (FMCU_FUSED_*, options.h); on always, off never; auto
 * always when `always` (the fp8 GEMM1 with block scales), else from
 * FMCU_STREAM_WGMMA_MIN_ROWS rows an expert (m * top_k / local_experts). */
int fmcu_stream_wgmma_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int always);

/* Whether a call of m tokens runs the fp8 stream tier's GEMM2 on FP8
 * wgmma where that serves the layer: `option` is stream_wgmma
 * (FMCU_FUSED_*); on always, off never; auto always with block scales
 * (`block`), else from FMCU_STREAM_WGMMA2_MIN_PAIRS pairs (m * top_k) or
 * FMCU_STREAM_WGMMA_MIN_ROWS rows an expert. */
int fmcu_stream_wgmma2_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int block);

/* Whether the fused form can serve a layer of local_experts at some size:
 * prefill_dequant_fused on, or auto with 1 to FMCU_WQ_FUSED_MAX_EXPERTS
 * (fmcu_wq_prefill_fused gives 1 for some call exactly then). */
int fmcu_wq_fused_serves(int option, uint32_t local_experts);

/* The rows an expert (m * top_k / local_experts) from which a call of an
 * e2m1 layer would run on the bf16 scratch, so that finalize allocates it
 * only when max_num_tokens reaches them: never (UINT32_MAX) with
 * prefill_dequant_fused = on; past FMCU_WQ_FUSED_MAX_ROWS where auto takes
 * the fused form; else FMCU_WQ_PREFILL_MIN_ROWS, or 0 with the prefill
 * tier forced (`forced`, option tier). */
uint32_t fmcu_wq_scratch_min_rows(int option, uint32_t local_experts, int forced);

#ifdef __cplusplus
}
#endif
#endif
