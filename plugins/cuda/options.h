/*
 * plugins/cuda/options.h - the cuda plugin's options (declared in
 * cuda.toml.in, docs/CUDA.md "Options"): parsed once at init from the
 * text the host hands over, kept in the plugin state, copied into every
 * layer at create, and read from there by the code that makes each
 * decision. Pure C, unit-tested without a GPU (tests/cuda).
 *
 *   tier                auto | stream | tiled | prefill: force a GEMM tier (tier.h)
 *   plan_wide_pairs     pairs from which the plan runs over many blocks; 0 never
 *   decode_tail         the decode tail (decode_tail.cu) where it fits
 *   decode_fused        auto | on | off: the one-launch decode (decode_fused.cu);
 *                       auto serves the fp8 schemes only
 *   decode_fused_w13    auto | registers: how the one-launch decode loads W13
 *   prefill_warp_rows   per-token activation rows of at most 1024 columns a warp's
 *   prefill_half_tiles  our grouped GEMM's half tiles (grouped_gemm.h)
 *   prefill_tile_order  auto | fixed | counter: our grouped GEMM's tile order
 *   wq_wgmma            the 4-bit weights' wgmma kernel (wq_wgmma.cu) where it serves;
 *                       false: the tiled mma.sync kernel (wq_gemm.cu)
 *   wq_ring             auto | on | off: the 4-bit weights' wgmma weight stream
 *                       (wq_ring.cu) where it serves; auto: calls of 6 to 47 rows
 *                       an expert on average (tier.h), on: every call unless the
 *                       prefill tier is forced
 *   stream_wgmma        auto | on | off: the fp8 schemes' stream-tier GEMM2 on
 *                       native FP8 wgmma (stream_wgmma.cu, sm_90a) where it
 *                       serves; auto: block scales always, else from 128
 *                       pairs a call or 4 rows an expert (tier.h); off: the
 *                       mma.sync kernel (stream_gemm.cu)
 *   stream_wgmma_gemm1  auto | on | off: the same tier's fp8 GEMM1 on f16 wgmma
 *                       with f32's sums (stream_g1_wgmma.cu, sm_90a) where it
 *                       serves; auto: block scales always, else from 4 rows an
 *                       expert on average (tier.h); off: the mma.sync kernel
 *   stream_wgmma_bf16   auto | on | off: bf16 layers on the stream tier, both
 *                       GEMMs on bf16 wgmma (stream_bf16_wgmma.cu, sm_90a) where
 *                       it serves; auto: from 4 rows an expert on average
 *                       (tier.h); off: the mma.sync kernel
 *   prefill_dequant_fused auto | on | off: e2m1 weights converted inside the grouped
 *                       GEMM (two converter warp groups) instead of through the bf16
 *                       scratch; auto: by the rows an expert (tier.h
 *                       fmcu_wq_prefill_fused: 17-320, or every size without
 *                       a scratch; at most 1024 local experts); int4 g128 too
 *                       (auto: from 48 rows an expert; on: from 17; off: wgmma form)
 *   prefill_dequant_mib device memory for e2m1 weights dequantized to bf16 on the
 *                       prefill tier (prefill_dequant.h), per layer, allocated
 *                       where a call could use it (fmcu_wq_scratch_min_rows);
 *                       0: no scratch (then only the fused form serves that
 *                       tier; with it off, or more than 1024 local experts,
 *                       the 4-bit kernels do); ignored when fused is on
 *   prefill_block_gemm  cutlass | ours: the fp8 block scheme's prefill GEMMs on
 *                       CUTLASS's 128 x 128 blockwise kernel or on our grouped
 *                       GEMM's block kind (grouped_gemm.h)
 *   prefill_w4_gemm     auto | swapped | converting: 4-bit weights (int4 g128; MXFP4 and
 *                       NVFP4 in the fused form) converted inside the prefill
 *                       tier's grouped GEMM as wgmma's register A operand
 *                       (gg_w4_swap.cu) or by converter warps into a bf16 B
 *                       stage (grouped_gemm_sm90.cu's 4-bit kinds); same bits;
 *                       auto: int4 and NVFP4 swapped, MXFP4 swapped where
 *                       its scales fold (codes <= 128), else converting
 *                       (fmcu_prefill_w4_swapped)
 *
 * Every default is what the plugin measured best (the manifest states the
 * same defaults); the other values exist for A/B timing and for tests that
 * force a path.
 */
#ifndef FMOE_PLUGIN_CUDA_OPTIONS_H
#define FMOE_PLUGIN_CUDA_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* decode_fused and prefill_dequant_fused. AUTO: decode_fused serves the fp8
 * schemes (in bf16 the one launch was slower than the chain);
 * prefill_dequant_fused goes by the rows an expert (tier.h). ON: every
 * scheme / always. OFF: never. */
#define FMCU_FUSED_AUTO 0
#define FMCU_FUSED_ON   1
#define FMCU_FUSED_OFF  2

typedef struct fmcu_options {
    int32_t tier;                 /* FMCU_TIER_* (tier.h); FMCU_TIER_AUTO by default */
    int64_t plan_wide_pairs;      /* FMCU_PLAN_WIDE_PAIRS (launch_shape.h); INT64_MAX: never */
    int decode_tail;              /* 1 */
    int decode_fused;             /* FMCU_FUSED_* */
    int decode_fused_w13_regs;    /* 0: W13 by bulk copies where the slots fit; 1: register loads */
    int prefill_warp_rows;        /* 1 */
    int prefill_half_tiles;       /* 1 */
    int prefill_tile_order;       /* FMCU_GG_ORDER_* (launch_shape.h) */
    int wq_wgmma;                 /* 1 */
    int wq_ring;                  /* FMCU_FUSED_* */
    int stream_wgmma;             /* FMCU_FUSED_AUTO */
    int stream_wgmma_gemm1;       /* FMCU_FUSED_AUTO */
    int stream_wgmma_bf16;        /* FMCU_FUSED_AUTO */
    uint32_t prefill_dequant_mib; /* FMCU_PREFILL_DEQUANT_MIB */
    int prefill_dequant_fused;    /* FMCU_FUSED_*: AUTO by the rows an expert, ON always (no scratch), OFF never */
    int prefill_block_gemm;       /* FMCU_BLOCK_GEMM_* */
    int prefill_w4_gemm;          /* FMCU_W4_GEMM_* */
} fmcu_options;

/* prefill_w4_gemm: which form of the 4-bit grouped GEMM the prefill tier runs. */
#define FMCU_W4_GEMM_AUTO       0 /* int4 g128 swapped, e2m1 where it folds (measured) */
#define FMCU_W4_GEMM_SWAPPED    1
#define FMCU_W4_GEMM_CONVERTING 2

/* prefill_block_gemm: whose kernel runs the fp8 block scheme's prefill GEMMs. */
#define FMCU_BLOCK_GEMM_CUTLASS 0
#define FMCU_BLOCK_GEMM_OURS    1

/* prefill_dequant_mib: the default, and the most accepted (1 TiB). */
#define FMCU_PREFILL_DEQUANT_MIB     1024
#define FMCU_PREFILL_DEQUANT_MIB_MAX 1048576

/* The defaults (the manifest's). */
void fmcu_options_default(fmcu_options *o);

/* Set option `name` from its text (the host's form: bool "true"/"false",
 * int in decimal, enum as declared): 0, or -1 with one line in `why` that
 * names the option and says what was expected, e.g. "option 'tier':
 * expected auto, stream, tiled or prefill, got 'Stream'"; an unknown name
 * is refused the same way. `o` is unchanged on failure. */
int fmcu_options_set(fmcu_options *o, const char *name, const char *value, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
