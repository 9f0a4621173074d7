/*
 * plugins/cuda/decode_tail.h - the fused decode tail (decode_tail.cu), as
 * the forward (forward.cu) launches it after GEMM1 when fmcu_tail_plan
 * (tier.h) accepts the call. Device-side C++ only.
 *
 * For a call of P <= FMCU_TAIL_MAX_PAIRS (token, slot) pairs it computes
 * what the quant kernel, GEMM2 and the combine kernel would:
 *     a2[p]  = quant(act[p])                       (fp8 schemes; bf16: act)
 *     y[p,n] = round(acc * scales + b2[e_p, n])    (gemm.h's GEMM2 epilogue)
 *     out[t] = round(sum_j y[t*k + j] * w[t*k + j]) in slot order (f32, no FMA)
 * with the same rounding points, and writes only out.
 */
#ifndef FMOE_PLUGIN_CUDA_DECODE_TAIL_H
#define FMOE_PLUGIN_CUDA_DECODE_TAIL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/tier.h"

struct fmcu_tail_args {
    int quant;             /* FMCU_Q_* (cuda_api.h) */
    int a_dynamic;         /* FMCU_Q_TENSOR: scale from the amax of all pairs' act */
    int ue8m0;             /* FMCU_Q_BLOCK: power-of-two activation scales */
    const float *a_static; /* FMCU_Q_TENSOR static: the GEMM2 input scale */

    const void *act; /* [pairs, I] GEMM1 output, act dtype */
    int32_t act_dtype;
    uint32_t I, H, pairs, top_k;
    const int32_t *pair_local; /* [pairs] local expert or -1 (the plan's) */
    const float *topk_w;       /* [pairs] */
    int on_input;              /* router weight applied to the input: combine with 1 */

    const uint8_t *w2;    /* [E, H, I] e4m3 or bf16 */
    const float *w_scale; /* gemm.h's w_scale for GEMM2, or NULL */
    int64_t w_scale_e, w_scale_n;
    uint32_t block_n, block_k; /* FMCU_Q_BLOCK */
    const void *bias;          /* [E, H] act dtype, or NULL */

    void *out; /* [m, ldo] act dtype */
    int64_t ldo;

    fmcu_tail_cfg cfg; /* fmcu_tail_plan's */
};

/* Launch on `stream` (programmatic dependent launch: its weight copies
 * start before GEMM1 completes, so GEMM1 must have been launched with
 * fmcu_gemm_args.wait_first). */
cudaError_t fmcu_tail_launch(const fmcu_tail_args &a, cudaStream_t stream);

/* Raise the kernel's dynamic shared-memory limit (once per device). */
cudaError_t fmcu_tail_prepare(void);

#endif
