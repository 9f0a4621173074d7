/*
 * plugins/cuda/wq_gemm.h - the grouped expert GEMM over 4-bit and int
 * weights (wq_gemm.cu), and the per-pair staging of its inputs, as the
 * forward (forward.cu) launches them. Device-side C++ only.
 *
 * Same contract as gemm.h (C[row, n] = sum_k A[src(row), k] * W[e, n, k],
 * GEMM1's activation epilogue, GEMM2's plain store), with W in the layout
 * of wq_pack.h dequantized in registers.
 */
#ifndef FMOE_PLUGIN_CUDA_WQ_GEMM_H
#define FMOE_PLUGIN_CUDA_WQ_GEMM_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/wq_pack.h"

struct fmcu_wq_gemm_args {
    int32_t format;     /* FMCU_WQ_* */
    uint32_t fp4_block; /* 16 or 32 */
    fmcu_wq_proj w;     /* the projection's weights */
    int gemm1, gated;
    uint32_t row_tile;      /* 16 or 64: the plan's row tile (32 for the stream form) */
    uint32_t slabs_per_cta; /* stream form: 16-row slabs a CTA streams (1, 2, 4) */
    int64_t grid_tiles;
    uint32_t experts; /* the layer's local experts (the ring form's weight map) */
    int sms;          /* the device's multiprocessors (the ring form's persistent grid) */

    const void *a; /* rows of a_k elements (act dtype), row stride lda */
    int64_t lda;
    uint32_t a_k;  /* columns of A (K, or Kp when staged per pair) */
    int a_row_div; /* A row of a pair = pair / a_row_div */
    uint32_t n_rows, n_out;

    const void *bias;
    int32_t act_dtype, activation;
    float swiglu_alpha, swiglu_limit;

    const int32_t *sorted;
    const int2 *tiles;
    const int32_t *n_tiles;
    const int32_t *offsets;
    void *out;
    int64_t ldo;
};

cudaError_t fmcu_wq_gemm_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream);

/* The same GEMM by weight streaming (wq_stream.cu) for decode-sized calls:
 * row_tile 32 (the stream tier's plan), layers fmcu_wq_stream_serves
 * accepts. A CTA streams slabs_per_cta slabs of 16 weight rows, its 4 warps
 * splitting K 4 / slabs_per_cta ways (fmcu_wq_stream_slabs). */
cudaError_t fmcu_wq_stream_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream);

/* The same GEMM on wgmma with the weights dequantized into its register A
 * operand (wq_wgmma.cu, sm_90a): row_tile 64 or 128 (fmcu_wq_wgmma_tile),
 * layers fmcu_wq_wgmma_serves accepts; cudaErrorInvalidValue otherwise.
 * fmcu_wq_wgmma_prepare raises its kernels' shared-memory limit on the
 * current device (fmcu_prepare_kernels, once per device). */
cudaError_t fmcu_wq_wgmma_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream);
cudaError_t fmcu_wq_wgmma_prepare(void);

/* The same GEMM as a weight stream on wgmma (wq_ring.cu, sm_90a): swap-AB
 * over row tiles of 32 (the stream tier's plan), one persistent block an
 * SM fed by TMA; the layers fmcu_wq_ring_serves accepts, with experts and
 * sms set; cudaErrorInvalidValue otherwise. fmcu_wq_ring_prepare raises its
 * kernels' shared-memory limit on the current device. */
cudaError_t fmcu_wq_ring_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream);
cudaError_t fmcu_wq_ring_prepare(void);

/* Per-pair GEMM input rows dst[pair, kp] (act dtype) of the local pairs:
 * src row pair / row_div, gathered through perm [E, kp] (act-order; -1
 * gives 0), or NVFP4-quantized per 16 with the pair's expert's in_glob
 * (W4A4: the decoded e2m1 * e4m3 value, exact in the act dtype; 1/g is
 * applied by the GEMM), or MXFP4-quantized per 32 with the OCP scale
 * choice (mx_a4: the decoded e2m1 * 2^e value, exact in bf16). With
 * `sorted` (the prefill path's expert-sorted rows), row i of src and dst
 * belongs to pair sorted[i], for the first *n_sorted rows; src may be dst
 * (each block of 16 or 32 columns is read before it is written, by the
 * same thread). */
struct fmcu_wq_stage_args {
    const void *src;
    int64_t ld;
    int row_div;
    int32_t dtype;
    const int32_t *pair_local;
    const int32_t *sorted, *n_sorted; /* or NULL: row i is pair i */
    const int32_t *perm;              /* or NULL */
    const float *in_glob;             /* or NULL */
    int mx_a4;                        /* MXFP4 W4A4 (k % 32 == 0, k == kp; in_glob NULL) */
    uint32_t k, kp;
    void *dst;
};

cudaError_t fmcu_wq_stage_launch(const fmcu_wq_stage_args &a, int64_t pairs, cudaStream_t stream);

#endif
