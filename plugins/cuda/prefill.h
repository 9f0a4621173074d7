/*
 * plugins/cuda/prefill.h - the Hopper prefill path (prefill_sm90.cu): the
 * MoE forward through sm90 grouped GEMMs (TMA + wgmma, warp specialized,
 * persistent: ours, grouped_gemm.h, and CUTLASS's for the fp8 block scheme),
 * as forward.cu's fmcu_forward calls it once the plan kernel has sorted the
 * pairs by expert. Device-side C++ only.
 *
 *   gather   x rows -> A1 [rows, H] in expert-sorted order, bf16 copy or e4m3
 *            with the scheme's activation scales (per tensor static/dynamic,
 *            per token, per 1 x 128 group with f32 or UE8M0 scales: the
 *            arithmetic of quantize.cu's quant_kernel); also the sorted
 *            position of every pair.
 *   GEMM1    grouped over the local experts (problem sizes and pointers built
 *            on the device from the plan's offsets; experts with no rows are
 *            empty groups) -> h [rows, r*I] bf16, scales in the epilogue
 *            (tensor/channel) or per 128-K block in the main loop (block).
 *   act      a = round(act(h_gate, h_up)) as GEMM1's epilogue in gemm.cu
 *            does, then the GEMM2 input (bf16, or e4m3 with its scales):
 *            prefill_act.h.
 *   GEMM2    grouped -> y [rows, H] bf16 in sorted order.
 *   combine  out[t] = round(sum_j y[pos(t, j)] * w[t, j]) in slot order, f32
 *            without FMA; pairs with no local expert are skipped.
 *
 * Everything runs on the caller's stream with the layer's workspace (the
 * pf_* buffers of fmcu_ws): no allocation, no host synchronization, CUDA
 * graph capturable.
 *
 * Served: bf16, fp8 tensor (static or dynamic), fp8 channel x token, fp8
 * block 128x128 x group 128 (f32 or UE8M0 activation scales), and e2m1
 * weights (MXFP4, NVFP4 W4A16 and W4A4) dequantized to bf16 a run of
 * experts at a time (prefill_dequant.h), with bf16 activations, on compute
 * capability 9.x (sm_90a code only); biases with bf16 operands (bf16 and
 * e2m1). Refused (the caller keeps the mma.sync or 4-bit kernels): f16
 * activations, biases with fp8, router weight on the input, other block
 * sizes, H or I not multiples of 128 for the block scheme, I > 24576 for
 * the channel scheme, int weights, e2m1 without its scratch, sm_100, a
 * build without CUTLASS headers.
 */
#ifndef FMOE_PLUGIN_CUDA_PREFILL_H
#define FMOE_PLUGIN_CUDA_PREFILL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/tier.h"

/* Does the path serve this layer on its device? Host only, cheap (the
 * device's compute capability is cached). */
bool fmcu_prefill_supported(const fmcu_layer *L);

/* The same, with the reason when not (cap bytes, one line). */
bool fmcu_prefill_supported_why(const fmcu_layer *L, char *why, size_t cap);

/* Whether a call of m tokens of this layer, on the prefill tier, converts
 * e2m1 codes inside the grouped GEMM (tier.h fmcu_wq_prefill_fused with the
 * layer's option, experts and scratch): the one decision that forward.cu's
 * tier choice and the e2m1 pipeline (prefill_sm90.cu) both take. */
static inline bool fmcu_prefill_e2m1_fused(const fmcu_layer *L, int64_t m)
{
    return FMCU_Q_IS_E2M1(L->quant) && fmcu_wq_prefill_fused(L->opt.prefill_dequant_fused, m, L->top_k,
                                                             L->local_experts, L->wq.dq && L->wq.dq_experts);
}

/* Whether the prefill tier's grouped GEMM over the 4-bit projection w
 * (int4 g128, or e2m1 in the fused form) takes the swapped form
 * (gg_w4_swap.cu) rather than the converting kinds (tier.h
 * fmcu_w4_gemm_swapped). */
static inline bool fmcu_prefill_w4_swapped(const fmcu_layer *L, const fmcu_wq_proj *w)
{
    return fmcu_w4_gemm_swapped(L->opt.prefill_w4_gemm, L->wq.format == FMCU_WQ_INT4,
                                L->wq.format == FMCU_WQ_FP4 ? L->wq.fp4_block : 0, w->mx_fold) != 0;
}

/* Both projections swapped: the rows an expert from which the prefill tier
 * takes a call over the wgmma weight stream (fmcu_wq_ring_wanted,
 * fmcu_wq_int4_fused) are the swapped form's. */
static inline bool fmcu_prefill_w4_swaps(const fmcu_layer *L)
{
    return fmcu_prefill_w4_swapped(L, &L->wq.w13) && fmcu_prefill_w4_swapped(L, &L->wq.w2);
}

/* int4 weights on the prefill tier are converted inside the grouped GEMM
 * or not served there (no bf16 scratch: an int4 value times its group
 * scale is not a bf16 value): whether a call of m tokens takes that form
 * (tier.h fmcu_wq_int4_fused; prefill_ok already says the layer's groups
 * are 128 columns). */
static inline bool fmcu_prefill_int4_fused(const fmcu_layer *L, int64_t m)
{
    return L->quant == FMCU_Q_WNA16 && L->wq.format == FMCU_WQ_INT4 &&
           fmcu_wq_int4_fused(L->opt.prefill_dequant_fused, m, L->top_k, L->local_experts,
                              fmcu_prefill_w4_swaps(L) ? FMCU_WQ_INT4_SWAP_MIN_ROWS : FMCU_WQ_INT4_FUSED_MIN_ROWS);
}

/* Either: the fused form of the 4-bit weights for this call. */
static inline bool fmcu_prefill_wq_fused(const fmcu_layer *L, int64_t m)
{
    return fmcu_prefill_e2m1_fused(L, m) || fmcu_prefill_int4_fused(L, m);
}

/* The forward of m tokens after the plan kernel: pair_local [m*k] (local
 * expert or -1), offsets [E_local + 1], sorted [m*k] (pair ids grouped by
 * expert, the first offsets[E_local] valid), all device memory, as
 * plan.cu's plan_kernel writes them. x [m, H] with row stride x_ld, out
 * [m, H] with row stride out_ld (elements, act dtype), topk_w [m*k] f32.
 * Only call when fmcu_prefill_supported(L). Returns the first launch error. */
cudaError_t fmcu_prefill_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                                 const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted, void *out,
                                 int64_t out_ld, cudaStream_t st);

/* Profiling (tests/cuda/prefill_check): the same forward with events
 * recorded on `st` before the gather and after each of the five stages
 * (gather, GEMM1, act, GEMM2, combine). */
#define FMCU_PREFILL_EVENTS 6
cudaError_t fmcu_prefill_forward_events(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld,
                                        const float *topk_w, const int32_t *pair_local, const int32_t *offsets,
                                        const int32_t *sorted, void *out, int64_t out_ld, cudaStream_t st,
                                        cudaEvent_t events[FMCU_PREFILL_EVENTS]);

#endif
