/*
 * plugins/cuda/cuda_api.h - the C boundary between the plugin's host side
 * (C11: plugin.c, method.c, layout.c) and its device side (CUDA C++17:
 * runtime.cu, forward.cu, ...). Plain C types only: no CUDA header is
 * needed to include it, and every function has C linkage.
 *
 * Every function returns 0, or -1 with one line of text in `err` (cap
 * bytes) naming the CUDA call that failed and its error string. None of
 * them throws, aborts or prints.
 */
#ifndef FMOE_PLUGIN_CUDA_API_H
#define FMOE_PLUGIN_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cuda/layout.h"
#include "plugins/cuda/options.h"
#include "plugins/cuda/timing.h"
#include "plugins/cuda/wq_pack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Devices (runtime.cu)                                                      */
/* ------------------------------------------------------------------------ */

typedef struct fmcu_device_info {
    char name[128];
    char pci_id[64];
    int major, minor; /* compute capability */
    int multiprocessors;
    uint64_t memory_bytes;
    int driver_version;  /* cudaDriverGetVersion: 13000 = 13.0; 0: no driver */
    int runtime_version; /* cudaRuntimeGetVersion (the static cudart linked in) */
} fmcu_device_info;

/* Number of CUDA devices; -1 with the reason (no driver, no device...). */
int fmcu_device_count(int *count, char *err, size_t cap);
int fmcu_device_query(int device, fmcu_device_info *info, char *err, size_t cap);
/* Versions even when no device is there (driver 0 when none is installed). */
void fmcu_versions(int *driver, int *runtime);

int fmcu_malloc(int device, void **ptr, size_t bytes, char *err, size_t cap);
void fmcu_free(int device, void *ptr);
/* Synchronous host -> device copy (finalize only). */
int fmcu_upload(int device, void *dst, const void *src, size_t bytes, char *err, size_t cap);
/* Copy to (to_device = 1) or from the device on `stream`; NULL stream: complete on return. */
int fmcu_copy(int device, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *err, size_t cap);
/* Wait for `stream`, or for the whole device when NULL. */
int fmcu_synchronize(int device, void *stream, char *err, size_t cap);

/* Timing: timing.h (timing.cu). */

/* ------------------------------------------------------------------------ */
/* A layer as the device side sees it (filled by method.c)                   */
/* ------------------------------------------------------------------------ */

/* Quantization of the GEMM inputs and weights. */
#define FMCU_Q_NONE    0 /* bf16 x bf16 */
#define FMCU_Q_TENSOR  1 /* fp8, one weight scale per expert, one activation scale (static or dynamic) */
#define FMCU_Q_CHANNEL 2 /* fp8, weight scale per output row, activation scale per token row (dynamic) */
#define FMCU_Q_BLOCK   3 /* fp8, weight scale per bn x bk tile, activation scale per 1 x bk group (dynamic) */
/* 4-bit and int weights (wq_gemm.cu): weights repacked at finalize
 * (wq_pack.h), dequantized in registers into bf16/f16 MMA operands. */
#define FMCU_Q_WNA16    4 /* int4/int8 x act dtype, scale per (row, group), zero points, act-order */
#define FMCU_Q_MXFP4    5 /* e2m1 x ue8m0 per 32 (W4A16, gpt-oss) */
#define FMCU_Q_NVFP4    6 /* e2m1 x e4m3 per 16 x global per expert (W4A16) */
#define FMCU_Q_NVFP4_A4 7 /* NVFP4 W4A4: activations NVFP4-quantized per pair (emulated on bf16 MMA) */
/* MXFP4 x FP8 (DeepSeek-V4's MegaMoE arithmetic, mx_w4a8.h): e4m3 activations
 * per 32 with UE8M0 scales, emulated on bf16 MMA (exact values), SwiGLU with the
 * routing weight before GEMM2's requantization. */
#define FMCU_Q_MXFP4_A8 8
/* MXFP4 W4A4: activations MXFP4-quantized per pair with the OCP scale choice
 * (emulated on bf16 MMA: e2m1 x 2^e is exact in bf16; native on SM100). */
#define FMCU_Q_MXFP4_A4 9
/* W4A4: the GEMM inputs quantized per pair by the staging kernel. */
#define FMCU_Q_IS_A4(q) ((q) == FMCU_Q_NVFP4_A4 || (q) == FMCU_Q_MXFP4_A4)
#define FMCU_Q_IS_WQ(q) ((q) >= FMCU_Q_WNA16)
/* fp8 GEMM operands (1-byte weights and inputs). */
#define FMCU_Q_IS_FP8(q) ((q) == FMCU_Q_TENSOR || (q) == FMCU_Q_CHANNEL || (q) == FMCU_Q_BLOCK)
/* e2m1 weights the prefill tier dequantizes to bf16 (prefill_dequant.h): MXFP4, NVFP4 W4A16 and W4A4, not MXFP4 x FP8.
 */
#define FMCU_Q_IS_E2M1(q) ((q) == FMCU_Q_MXFP4 || (q) == FMCU_Q_NVFP4 || FMCU_Q_IS_A4(q))

typedef struct fmcu_layer {
    int device;
    /* Sizes (per rank, padded). */
    uint32_t hidden, inter, rows13; /* H, I, r*I */
    uint32_t local_experts, global_experts, logical_experts, redundant_experts;
    uint32_t top_k, max_tokens;
    int32_t act_dtype; /* FMOE_DTYPE_BF16 or FMOE_DTYPE_F16 */
    /* Expert function. */
    int32_t activation; /* FMOE_ACT_* */
    int gated;
    float swiglu_alpha, swiglu_limit;
    int on_input; /* apply_router_weight_on_input (top_k == 1) */
    int add_b2;   /* has_bias && tp_rank == 0 */
    /* Quantization. */
    int32_t quant;             /* FMCU_Q_* */
    int a_dynamic;             /* TENSOR: dynamic input scale */
    int ue8m0;                 /* BLOCK: activation scales 2^ceil(log2) (DeepGEMM) */
    uint32_t block_n, block_k; /* BLOCK */
    /* Routing (monolithic). */
    int32_t scoring;
    int renormalize, grouped, has_correction_bias;
    uint32_t num_expert_group, topk_group;
    float routed_scaling_factor;
    /* The plugin's options (options.h), copied at create: the forward's
     * choices (tier, plan width, decode tail and one-launch decode, prefill
     * launch shapes) read them from here. */
    fmcu_options opt;

    /* Device memory, set by finalize (weights) and create (workspace). */
    const void *w13, *w2;              /* [E, r*I, H], [E, H, I]: bf16 or fp8 codes */
    const float *w13_scale, *w2_scale; /* TENSOR [E]; CHANNEL [E, N]; BLOCK [E, ceil(N/bn), ceil(K/bk)] */
    const void *b13, *b2;              /* [E, r*I], [E, H] act dtype, or NULL */
    const float *correction_bias;      /* [logical] or NULL */
    const int32_t *expert_map;         /* [global] local or -1, or NULL (identity) */
    float *in_scales;                  /* [2]: TENSOR's GEMM1/GEMM2 input scales (static: set at finalize) */

    /* The FMCU_Q_WNA16 / MXFP4 / NVFP4 weights (finalize, wq_pack.h). */
    fmcu_wq wq;
    /* The native SM100 block-scaled path's state (sm100_gemm.h), set by
     * finalize when the layer runs natively (compute capability 10.x), else
     * NULL; fmcu_forward then hands the experts to fmcu_sm100_forward. */
    const struct fmcu_sm100_layer *sm100;

    /* Workspace: one allocation, buffers at the offsets of `ws`. */
    void *workspace;
    fmcu_ws ws;
} fmcu_layer;

/* One forward. x/out/logits/topk tensors are dense rows with the given
 * row strides (elements); *_host says the pointer is host memory, which
 * the call stages through the workspace (and then synchronizes `stream`,
 * so only device pointers are graph-capturable). */
typedef struct fmcu_call {
    int64_t m;
    const void *x;
    int64_t x_ld;
    int x_host;
    void *out;
    int64_t out_ld;
    int out_host;
    /* Modular: routing given (dense [m, k]). */
    const float *topk_w;
    const int32_t *topk_ids;
    int topk_host;
    /* Monolithic: logits [m, E_logical] (F32 or BF16), strides in elements. */
    const void *logits;
    int32_t logits_dtype;
    int64_t logits_ld, logits_cs;
    int logits_host;
    float *topk_w_out;
    int32_t *topk_ids_out;
    int topk_out_host; /* optional, logical ids */
    void *stream;
} fmcu_call;

/* Run the layer; no allocation, and no host synchronization unless a host
 * pointer must be staged back. */
int fmcu_forward(const fmcu_layer *layer, const fmcu_call *call, char *err, size_t cap);

/* Make the GEMM kernels take their shared memory (once per process). */
int fmcu_prepare_kernels(int device, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
