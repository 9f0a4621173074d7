/*
 * plugins/cuda/prefill_rows.h - the prefill tier's row kernels
 * (prefill_rows.cu), which prefill_sm90.cu enqueues around its GEMMs:
 *
 *   amax     max |x| over the m rows of x (a dynamic per-tensor GEMM1 input
 *            scale), atomicMax on the float bits into *amax (zeroed before);
 *   pos      pos[sorted[i]] = i for the sorted rows (offsets[E] of them);
 *   gather   a block per token: its x row, read and quantized once (bf16
 *            copy, or e4m3 per tensor, per token or per 1 x 128 group), is
 *            written to the sorted row of each of its local pairs; NVFP4
 *            W4A4 reads it once and quantizes it with each pair's expert's
 *            input global (block maxima once, scales per pair);
 *   combine  out[t] = round(sum_j y[pos(t, j)] * w[t, j]) in slot order, f32
 *            without FMA; pairs with no local expert skipped.
 *
 * Plain launches on `st` (no allocation); each returns the launch's error.
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_PREFILL_ROWS_H
#define FMOE_PLUGIN_CUDA_PREFILL_ROWS_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/pf_vec.cuh"

namespace fmcu_pf {

struct gather_args {
    const bf16 *x;
    int64_t x_ld;
    uint32_t H, k;
    int vec; /* x rows 16-byte aligned */
    const int32_t *offsets, *pair_local, *pos;
    int mode, ue8m0;
    const float *static_scale; /* QM_TENSOR static */
    const uint32_t *amax;      /* QM_TENSOR dynamic */
    float *tensor_scale;       /* QM_TENSOR dynamic: the scale, written once */
    void *dst;                 /* [R, H] */
    float *scale;              /* QM_TOKEN [R]; QM_GROUP grouped M-major */
    const float *in_glob;      /* QM_BF16, NVFP4 W4A4 (vec, H % 16 == 0): [E] input globals, each pair's
                                  copy quantized with its expert's (nvfp4_quant.cuh) */
};

struct combine_args {
    const bf16 *y; /* [R, H] sorted */
    const float *w;
    const int32_t *pair_local, *pos;
    uint32_t k, H;
    int vec; /* out rows 16-byte aligned */
    bf16 *out;
    int64_t ldo;
};

cudaError_t amax_rows_launch(const bf16 *x, int64_t ld, uint32_t cols, uint32_t *amax, int64_t m, cudaStream_t st);
/* `pairs` threads: at least offsets[E] (= *total). */
cudaError_t pos_launch(const int32_t *sorted, const int32_t *total, int32_t *pos, unsigned pairs, cudaStream_t st);
cudaError_t gather_launch(const gather_args &a, int64_t m, cudaStream_t st);
cudaError_t combine_launch(const combine_args &a, int64_t m, cudaStream_t st);

} // namespace fmcu_pf

#endif
