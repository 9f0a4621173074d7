/*
 * plugins/cuda/sm100_gemm.h - the native SM100 block-scaled expert GEMMs
 * (sm100_gemm.cu, sm_100a code only) as the host side (method.c) and the
 * forward (forward.cu) call them. Plain C, C linkage, like cuda_api.h.
 *
 * NVFP4 W4A4 and MXFP4 W4A4 run on the tensor cores' block-scaled MMA
 * (tcgen05.mma kind::mxf4nvf4 through CUTLASS 4.2's sm100 block-scaled
 * grouped GEMM, one group per local expert); what runs around it is ours:
 * per-pair activation quantization into packed codes and swizzled scales
 * (sm100_layout.h, the emulated method's rules), the per-expert argument
 * arrays written on the device from the plan, and f32 epilogues (bias,
 * rounding, activation) as the sm_90a kernels do them. Layout and numerics:
 * sm100_layout.h; docs/CUDA.md "Native SM100 block-scaled path".
 */
#ifndef FMOE_PLUGIN_CUDA_SM100_GEMM_H
#define FMOE_PLUGIN_CUDA_SM100_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/sm100_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fmcu_layer;

/* A layer's native state, filled at finalize (method.c); fmcu_layer.sm100
 * points here when the layer runs natively. */
typedef struct fmcu_sm100_layer {
    int32_t format;                    /* FMCU_SM100_NVFP4 or FMCU_SM100_MXFP4 */
    uint32_t vec;                      /* 16 or 32 elements per scale */
    const uint8_t *w13, *w2;           /* e2m1 codes [E, N, K/2], the checkpoint's packing */
    const uint8_t *sf13, *sf2;         /* weight scales, each expert swizzled (sm100_layout.h) */
    const float *alpha13, *alpha2;     /* [E] accumulator multipliers (NVFP4: 1/(g_w g_in); MXFP4: 1) */
    const float *in_glob13, *in_glob2; /* NVFP4: [E] activation quant multipliers g_in; MXFP4: NULL */
    void *workspace;                   /* ws.total bytes */
    fmcu_sm100_ws ws;
} fmcu_sm100_layer;

/* 1 when this build holds the sm_100a kernels (CUTLASS headers found),
 * else 0 (the native methods are then never chosen). */
int fmcu_sm100_compiled(void);

/* Bytes of one GEMM's per-expert argument arrays (problem shapes, pointer
 * arrays, strides, scale layouts) for `experts` experts. */
size_t fmcu_sm100_args_bytes(uint32_t experts);

/* CUTLASS's workspace of one grouped GEMM of `format` over `experts`
 * experts on `device`; -1 with the reason. */
int fmcu_sm100_gemm_workspace(int32_t format, int device, uint32_t experts, size_t *bytes, char *err, size_t cap);

/* The experts of one forward, after the plan: GEMM1 input quantization,
 * GEMM1 (CUTLASS), bias + activation, GEMM2 input quantization, GEMM2
 * (CUTLASS), bias, then the combine into out [m, H] (row stride ldo).
 * x [m, H] act dtype (row stride x_ld), the plan's pair_local, offsets and
 * sorted (forward_steps.h). Enqueued on `stream`; allocates nothing; 0, or
 * -1 with the failing step in err. */
int fmcu_sm100_forward(const struct fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                       const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted, void *out, int64_t ldo,
                       void *stream, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
