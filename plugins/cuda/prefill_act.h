/*
 * plugins/cuda/prefill_act.h - the prefill tier's activation stage
 * (prefill_act.cu), between GEMM1 and GEMM2 (prefill_sm90.cu enqueues it):
 *   act      a = round(act(h_gate, h_up)) from GEMM1's bf16 output h, and
 *            the GEMM2 input made from it: bf16 (for NVFP4 W4A4 quantized
 *            with the row's expert's input global and decoded), or e4m3
 *            with a per-tensor (static, or dynamic from the exact amax),
 *            per-token or 1x128 group scale.
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_PREFILL_ACT_H
#define FMOE_PLUGIN_CUDA_PREFILL_ACT_H

#include "plugins/cuda/act_math.cuh"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace fmcu_pf {

struct act_args {
    const bf16 *h; /* [R, rows13] */
    uint32_t I, rows13, E;
    act_fn fn;
    const int32_t *offsets;
    int mode, ue8m0;
    int dynamic;               /* QM_TENSOR: stage to `stage` and take the amax */
    const float *static_scale; /* QM_TENSOR static */
    void *dst;                 /* [R, I] bf16 (QM_BF16) or fp8 */
    float *scale;              /* QM_TOKEN [R]; QM_GROUP grouped M-major */
    bf16 *stage;               /* QM_TENSOR dynamic: [R, I] bf16 activations */
    uint32_t *amax;            /* QM_TENSOR dynamic: their amax */
    float *tensor_scale;       /* QM_TENSOR dynamic: the scale quant_staged_kernel writes */
    /* QM_TENSOR dynamic, the amax recomputed exactly (amax_exact_kernel): */
    float *row_max; /* [R] each row's amax, written by act_kernel */
    int32_t *cand;  /* [R] rows to recompute, *n_cand of them (zeroed before) */
    uint32_t *n_cand;
    uint32_t *amax_exact;    /* the amax quant_staged_kernel takes (zeroed before) */
    const uint8_t *a1, *w13; /* GEMM1's e4m3 operands: [R, H] sorted rows, [E, rows13, H] */
    const float *s_x, *s_w;  /* GEMM1's scales: x (one), W13 [E] */
    uint32_t H;
    /* QM_BF16, NVFP4 W4A4 (I % 16 == 0): [E] the GEMM2 input globals; each
     * row is written NVFP4-quantized with its expert's (nvfp4_quant.cuh). */
    const float *in_glob;
};

/* Enqueue the stage on st for up to `rows` sorted rows (offsets[E] of them
 * valid, read on the device): act_kernel, then for a dynamic per-tensor
 * GEMM2 input scale (dyn_tensor) the exact amax and the quantization.
 * warp_rows: per-token rows of at most 1024 columns a warp's (option
 * prefill_warp_rows, launch_shape.h). No allocation, no host
 * synchronization. */
cudaError_t act_stage(const act_args &aa, unsigned rows, bool dyn_tensor, bool warp_rows, cudaStream_t st);

/* The largest I of a per-token (channel scheme) GEMM2 input: a long row
 * waits for its amax in shared memory, within the 48 KiB a launch gets
 * without opting in. The largest block of the activation kernels. */
constexpr uint32_t TOKEN_MAX_I = 48 * 1024 / sizeof(bf16);
constexpr unsigned ACT_MAX_THREADS = 256;

} // namespace fmcu_pf

#endif
