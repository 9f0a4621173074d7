/*
 * plugins/cuda/gemm.h - the grouped expert GEMM (gemm.cu), as the forward
 * (forward.cu) launches it. Device-side C++ only.
 *
 * One launch computes, for every local expert e and every row of the
 * expert-sorted pair list that belongs to e,
 *     C[row, n] = sum_k A[src(row), k] * W[e, n, k]      (fp32 accumulation)
 * with the scales of the scheme applied, then one of two epilogues:
 *   GEMM1  h = round(C + b13); a = round(act(h_gate, h_up)) -> act[pair, I]
 *          (gated: the tile holds the gate and up columns of the same outputs)
 *   GEMM2  y = round(C + b2) -> y[pair, H]
 */
#ifndef FMOE_PLUGIN_CUDA_GEMM_H
#define FMOE_PLUGIN_CUDA_GEMM_H

#include <cuda_runtime.h>
#include <stdint.h>

struct fmcu_gemm_args {
    int fp8;            /* operands are e4m3 codes (else bf16) */
    int block_scaled;   /* FMCU_Q_BLOCK: scales per K group */
    int gemm1;          /* epilogue: activation (GEMM1) or plain store (GEMM2) */
    uint32_t row_tile;  /* 16, 32 or 64 (fmcu_row_tile) */
    int split_k;        /* stream tier: a CTA's warps split K (very few rows per expert) */
    int wait_first;     /* stream tier: let the next kernel launch only after this one's
                         * griddepcontrol.wait (the decode tail reads the plan early) */
    int64_t grid_tiles; /* upper bound of row tiles (fmcu_max_tiles) */

    const void *a; /* rows of K elements, row stride lda elements */
    int64_t lda;
    int a_row_div;   /* A row of a pair = pair / a_row_div (top_k for GEMM1, 1 for GEMM2) */
    const void *w;   /* [E, n_rows, K] */
    uint32_t n_rows; /* rows of one expert's W (r*I or H) */
    uint32_t n_out;  /* output columns (I for GEMM1, H for GEMM2) */
    uint32_t k;      /* K elements */
    int gated;       /* GEMM1: gate rows [0, I), up rows [I, 2I) */

    /* Scales. Non-block: C *= a_scale[row_src * a_scale_ld] * w_scale[e * w_scale_e + n * w_scale_n]
     * (strides 0 broadcast; a NULL pointer means 1). Block: a_scale [src, ceil(K/bk)],
     * w_scale [e, ceil(n_rows/bn), ceil(K/bk)]. */
    const float *a_scale;
    int64_t a_scale_ld;
    const float *w_scale;
    int64_t w_scale_e, w_scale_n;
    uint32_t block_n, block_k;

    const void *bias;   /* [E, n_rows] act dtype, or NULL */
    int32_t act_dtype;  /* FMOE_DTYPE_BF16 / F16: rounding and storage of outputs */
    int32_t activation; /* GEMM1 */
    float swiglu_alpha, swiglu_limit;

    const int32_t *sorted; /* [pairs] pair ids by expert */
    const int2 *tiles;     /* (expert, first sorted position) */
    const int32_t *n_tiles;
    const int32_t *offsets; /* [E + 1] sorted positions of each expert */
    void *out;              /* [pairs, n_out] act dtype */
    int64_t ldo;
    uint32_t experts; /* local experts (rows of W: experts * n_rows); stream_wgmma.cu's weight map */
    int sms;          /* multiprocessors: stream_wgmma.cu's persistent grid */
};

/* Launch on `stream`; cudaSuccess or the launch error. */
cudaError_t fmcu_gemm_launch(const fmcu_gemm_args &a, cudaStream_t stream);

/* The weight-streaming tier (stream_gemm.cu), same contract, for calls where
 * experts see few rows; the plan's row tile must be FMCU_STREAM_ROW_TILE. */
cudaError_t fmcu_stream_gemm_launch(const fmcu_gemm_args &a, cudaStream_t stream);

/* The same tier's FP8 GEMM2 on native FP8 wgmma (stream_wgmma.cu, sm_90a
 * only; option stream_wgmma); GEMM1 and a layer it does not serve (K not a
 * multiple of 16, rows not of 8, block scales not 128 along K) go to
 * fmcu_stream_gemm_launch. Needs `experts` and `sms`. */
cudaError_t fmcu_stream_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream);
cudaError_t fmcu_stream_wgmma_prepare(void);
/* The same tier's FP8 GEMM1 on f16 wgmma with f32's sums (stream_g1_wgmma.cu,
 * sm_90a only; option stream_wgmma_gemm1); GEMM2 and a layer it does not
 * serve go to fmcu_stream_gemm_launch. Needs `experts` and `sms`. */
cudaError_t fmcu_stream_g1_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream);
cudaError_t fmcu_stream_g1_wgmma_prepare(void);
/* The same tier's BF16 GEMMs on bf16 wgmma (stream_bf16_wgmma.cu, sm_90a
 * only; option stream_wgmma_bf16), both GEMM1 and GEMM2; a layer it does
 * not serve (activations not bf16, K not a multiple of 8, rows not of 8)
 * goes to fmcu_stream_gemm_launch. Needs `experts` and `sms`. */
cudaError_t fmcu_stream_bf16_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream);
cudaError_t fmcu_stream_bf16_wgmma_prepare(void);
/* Raise the dynamic shared-memory limit of every instantiation. */
cudaError_t fmcu_gemm_prepare(void);

#endif
