/*
 * plugins/cuda/decode_fused.h - the one-launch decode (decode_fused.cu), as
 * the forward (forward.cu) launches it in place of the plan, GEMM1 and the
 * fused tail when fmcu_fused_plan (tier.h) accepts the call. Device-side
 * C++ only.
 *
 * For a call of P <= FMCU_TAIL_MAX_PAIRS (token, slot) pairs it computes
 * what the plan kernel, the GEMM1 input quantization, the stream GEMM1 and
 * the fused tail (decode_tail.h) would, with the same rounding points, and
 * writes out (and act, the GEMM1 output, which its CTAs exchange).
 */
#ifndef FMOE_PLUGIN_CUDA_DECODE_FUSED_H
#define FMOE_PLUGIN_CUDA_DECODE_FUSED_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/gemm.h"
#include "plugins/cuda/tier.h"

struct fmcu_fused_args {
    /* Routing and the plan's inputs. */
    const int32_t *topk_ids; /* [pairs] physical expert ids */
    const float *topk_w;     /* [pairs] */
    uint32_t pairs, top_k;
    uint32_t global_experts, local_experts;
    const int32_t *expert_map; /* [global] local id or -1, or NULL */

    /* The GEMM inputs: x rows (act dtype, 16-byte aligned rows) and how
     * both inputs are quantized (FMCU_Q_*, cuda_api.h). */
    const void *x;
    int64_t ldx;
    int32_t act_dtype;
    int quant, a_dynamic, ue8m0;
    const float *in_scales; /* [2] static per-tensor scales of the GEMM1 / GEMM2 inputs, or NULL */

    /* The weights, scales, biases and epilogues as the stream tier reads
     * them (gemm.h): GEMM1 from g1 (w, n_rows, n_out, k, gated, w_scale*,
     * block_*, bias, activation, swiglu_*), GEMM2 from g2 (w, w_scale*,
     * bias). Their a, tiles and out fields are not read. */
    fmcu_gemm_args g1, g2;

    void *act;      /* [pairs, I] act dtype: GEMM1's output, exchanged through L2 */
    uint32_t *sync; /* [2] u32, zero between calls: the grid barrier (arrivals, departures) */
    void *out;      /* [m, ldo] act dtype */
    int64_t ldo;

    fmcu_fused_cfg cfg; /* fmcu_fused_plan's */
};

/* Launch on `stream` (programmatic dependent launch; cooperative, so the
 * driver refuses a grid that cannot be resident at once). */
cudaError_t fmcu_fused_launch(const fmcu_fused_args &a, cudaStream_t stream);

/* Raise the kernel's dynamic shared-memory limit (once per device). */
cudaError_t fmcu_fused_prepare(void);

#endif
