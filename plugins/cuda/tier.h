/*
 * plugins/cuda/tier.h - which GEMM kernel tier a forward uses, decided on
 * the host from the call's size alone (so that a captured CUDA graph never
 * depends on device data). Pure C, unit-tested without a GPU (tests/cuda).
 *
 *   STREAM  stream_gemm.cu: weight streaming, experts see <= 16 rows on
 *           average (decode and small batches: the weights are the cost);
 *   TILED   gemm.cu: mma.sync tiles of 16-64 rows, any size;
 *   PREFILL the wgmma/TMA grouped GEMM path (prefill.h) where it serves the
 *           layer (bf16; fp8 only when forced, see kernels.cu), else TILED.
 *
 * FMOE_CUDA_TIER=stream|tiled|prefill|auto forces a tier for testing and
 * benchmarking; it is read once, at layer create.
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
/* Average rows per local expert up to which the stream tier splits K over a
 * CTA's warps (more CTAs); above it, each warp streams its own rows (fewer
 * re-reads of the token rows). */
#define FMCU_STREAM_SPLITK_ROWS 4

/* The tier for m tokens; `forced` is FMCU_TIER_AUTO or a tier, and
 * `prefill_ok` says whether the prefill path serves this layer. */
int fmcu_gemm_tier(int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int prefill_ok);

/* Parse FMOE_CUDA_TIER's value (NULL or "" = auto): 0, or -1 with why. */
int fmcu_tier_parse(const char *value, int *tier, char *why, size_t cap);

/* "stream", "tiled", "prefill" or "auto". */
const char *fmcu_tier_name(int tier);

#ifdef __cplusplus
}
#endif
#endif
