/*
 * plugins/cuda/mx_w4a8.h - the forward of FMCU_Q_MXFP4_A8 (scheme
 * fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic, DeepSeek-V4's MegaMoE
 * arithmetic; plugins/reference/method_megamoe.c is the oracle), as
 * forward.cu calls it after the plan. Device-side C++ only.
 *
 * Hopper has no MMA over e2m1 x e4m3 with a scale per 32, but every value
 * the scheme multiplies is exact in bf16: an e4m3 code times a power-of-two
 * scale (4 significant bits; the input rule keeps the scale >= 2^-22), and
 * e2m1 times a UE8M0 scale (the W4A16 MXFP4 path's operand). So the
 * activations are quantized as the reference quantizes them and written
 * back dequantized as bf16 ("fake-quant"), and the 4-bit weight GEMMs
 * (wq_gemm.h: stream, tiled, wgmma) multiply them unchanged:
 *
 *   fq_x      x -> bf16 rows holding e4m3(x / s) * s per 32 (the input rule)
 *   GEMM1     h = fq_x . W13^T, f32 accumulation, stored bf16 [pairs, 2I]
 *             (the plain store: the reference reads gate and up as bf16)
 *   swiglu    per (pair, 32-group): clamp compared in bf16, silu * up in
 *             f32 (expf, true division), times the routing weight, then the
 *             requantization of that f32 value (sf from the bits of
 *             amax / 448; all-zero group sf 0) -> bf16 rows of e4m3 * sf
 *   GEMM2     y = that . W2^T, stored bf16, unweighted (the weight is in)
 *   combine   out_t = bf16(f32 sum of the token's local y in slot order)
 *
 * Only the GEMMs' f32 summation order differs from the reference.
 */
#ifndef FMOE_PLUGIN_CUDA_MX_W4A8_H
#define FMOE_PLUGIN_CUDA_MX_W4A8_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/wq_gemm.h"

/* One of fmcu_wq_stream_launch, fmcu_wq_wgmma_launch, fmcu_wq_gemm_launch:
 * the tier forward.cu chose (the plan's row tiles `bm` are that tier's). */
typedef cudaError_t (*fmcu_mx_gemm_fn)(const fmcu_wq_gemm_args &a, cudaStream_t stream);

/* The experts and combine of m tokens: x [m, H] bf16 rows (row stride
 * x_ld, any alignment; may be the workspace's a1, which fq_x then
 * overwrites in place), topk_w [m * k] dense, the plan `pl` made with row
 * tile bm. Writes out [m, H] (row stride ldo). 0, or -1 with the failed
 * launch in err. */
int fmcu_mx_a8_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                       const fmcu_fwd::plan_args &pl, uint32_t bm, fmcu_mx_gemm_fn gemm, int sms, void *out,
                       int64_t ldo, cudaStream_t st, char *err, size_t cap);

#endif
