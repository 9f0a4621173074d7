/*
 * plugins/cuda/forward_steps.h - the small steps of the forward around the
 * GEMMs, as forward.cu (fmcu_forward) launches them. One file each, with
 * the algorithm in its first comment:
 *
 *   routing.cu   route: scores, grouped top-k, top-k, renormalize, EPLB ids
 *   plan.cu      plan: pairs by local expert, offsets, row tiles (one block,
 *                or two launches over many blocks); the GEMM1 input
 *                quantized by the one-block plan's other blocks
 *   quantize.cu  quant and amax: GEMM input rows to e4m3 (quant_row.cuh)
 *   combine.cu   combine: out = round(sum_j y_j * w_j) in slot order
 *
 * Every launcher enqueues on `st` with programmatic dependent launch
 * (device_math.cuh launch_overlapped) unless it says otherwise, allocates
 * nothing and returns the launch's error. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_FORWARD_STEPS_H
#define FMOE_PLUGIN_CUDA_FORWARD_STEPS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/quant_row.cuh"

namespace fmcu_fwd {

/* ------------------------------------------------------------------------ */
/* Routing (routing.cu)                                                      */
/* ------------------------------------------------------------------------ */

struct route_args {
    const void *logits;
    int32_t dtype;
    int64_t ld, cs;
    uint32_t n; /* logical experts */
    uint32_t k;
    int32_t scoring;
    int renormalize, grouped;
    uint32_t n_groups, topk_group;
    const float *bias;
    float scaling;
    uint32_t redundant; /* EPLB replicas */
    float *w;
    int32_t *ids; /* physical */
    int32_t *ids_logical;
};

/* A warp per token of the m tokens (a plain launch: routing starts the
 * forward). */
cudaError_t route_launch(const route_args &r, int64_t m, cudaStream_t st);

/* ------------------------------------------------------------------------ */
/* Plan (plan.cu)                                                            */
/* ------------------------------------------------------------------------ */

struct plan_args {
    const int32_t *ids;
    int64_t pairs;
    uint32_t global_experts, local_experts;
    const int32_t *expert_map;
    uint32_t row_tile;
    int32_t *pair_local, *offsets, *sorted, *n_tiles;
    int2 *tiles;
    fmcu_quant::quant_args q; /* blocks 1..: quantize row blockIdx.x - 1 of the GEMM1 input */
};

/* The wide plan's workspace counters. */
struct plan_wide {
    int32_t *counts; /* [E_local], zero between calls */
    int32_t *cursor; /* [E_local] */
    uint32_t *done;  /* zero between calls */
};

/* One block plans the call; `quant_rows` more blocks quantize the first
 * quant_rows rows of the GEMM1 input as a.q says (0: none). */
cudaError_t plan_launch(const plan_args &a, unsigned quant_rows, cudaStream_t st);

/* The same plan over many blocks in two launches (count, scatter), for
 * calls of many pairs; nothing quantized. */
cudaError_t plan_wide_launch(const plan_args &a, const plan_wide &w, cudaStream_t st);

/* ------------------------------------------------------------------------ */
/* Quantization (quantize.cu)                                                */
/* ------------------------------------------------------------------------ */

/* `rows` rows of a GEMM input as q says (a block a row); a dynamic
 * per-tensor scale first zeroes *amax (one u32 of the workspace) and
 * takes the amax of all rows into it. 0, or -1 with the failed step in
 * err. */
int quantize(fmcu_quant::quant_args q, int64_t rows, uint32_t *amax, cudaStream_t st, char *err, size_t cap);

/* ------------------------------------------------------------------------ */
/* Combine (combine.cu)                                                      */
/* ------------------------------------------------------------------------ */

struct combine_args {
    const void *y; /* [pairs, H] act dtype */
    const float *w;
    const int32_t *pair_local;
    uint32_t k, hidden;
    int on_input;
    int32_t dtype;
    void *out;
    int64_t ldo;
};

/* The m tokens' output rows. */
cudaError_t combine_launch(const combine_args &a, int64_t m, cudaStream_t st);

} // namespace fmcu_fwd

#endif
