/*
 * plugins/cuda/prefill_dequant.h - the e2m1 weights of a run of experts
 * dequantized into bf16 rows (prefill_dequant.cu), which the prefill path
 * (prefill_sm90.cu) then multiplies with its bf16 grouped GEMM.
 *
 * Why: prefill is compute-bound, and the 4-bit kernels that dequantize in
 * registers (wq_wgmma.cu) spend the tensor cores' time converting
 * (bench/cuda/RESULTS.md, "4-bit weights: against issue 31's targets"); written out once per
 * call, each weight is converted once instead of once per row tile.
 *
 * Exact: an e2m1 value times its UE8M0 (MXFP4) or E4M3 (NVFP4) block scale
 * has at most 6 significant bits and an exponent inside bf16's range, so it
 * is a bf16 value, the one the register-level kernels feed their MMAs
 * (wq_dev.cuh dq_fp4_bf16 computes it here too). NVFP4's 1/global is not
 * applied: it stays the GEMM's per-expert output factor.
 *
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_PREFILL_DEQUANT_H
#define FMOE_PLUGIN_CUDA_PREFILL_DEQUANT_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "plugins/cuda/wq_pack.h"

namespace fmcu_pf {

struct dequant_args {
    const uint8_t *w;       /* the projection's chunks [E, N, kp/32] (wq_pack.h), 16 bytes each */
    const uint8_t *sf8;     /* its block scale codes [E, N, kp/block] */
    uint32_t block;         /* 16 (NVFP4, e4m3 codes) or 32 (MXFP4, ue8m0 codes) */
    uint32_t N, K, kp;      /* rows, columns (a multiple of 16), padded columns (wq_pack.h) */
    uint32_t e0, count;     /* experts e0 .. e0 + count - 1 */
    const int32_t *offsets; /* [E + 1] device, the plan's: experts without rows are skipped */
    __nv_bfloat16 *dst;     /* [count, N, K] */
};

/* Enqueue the dequantization on `st`: dst[j, n, k] = the weight (n, k) of
 * expert e0 + j, for each expert that has rows. Returns the launch's error,
 * cudaErrorInvalidValue for arguments it cannot serve (K % 16, a block
 * other than 16 or 32, misaligned pointers). */
cudaError_t dequant_launch(const dequant_args &a, cudaStream_t st);

} // namespace fmcu_pf

#endif
