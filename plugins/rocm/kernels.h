/*
 * plugins/rocm/kernels.h - the one C interface between the plugin (plain
 * C, links no GPU runtime) and its kernel library (the .hip sources,
 * compiled with hipcc for AMD targets into libfmoe-rocm-kernels.so, or
 * with nvcc into the NVIDIA test build's libfmoe-rocm_cuda-kernels.so).
 *
 * The plugin dlopens the kernel library only when it has a device to run
 * on (kernel_lib.h), so libfmoe-rocm.so itself loads on any machine and
 * the GPU runtime the library links (libamdhip64 or a static cudart)
 * stays private to it. The library exports one symbol,
 * fmro_kernels_entry, returning a static table.
 */
#ifndef FMOE_PLUGINS_ROCM_KERNELS_H
#define FMOE_PLUGINS_ROCM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/rocm/ws.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FMRO_KERNELS_VERSION 1

/* Activations of the kernels (AITER's ActivationType). */
#define FMRO_ACT_SILU      1
#define FMRO_ACT_GELU      2
#define FMRO_ACT_SWIGLUOAI 3

typedef struct fmro_device_info {
    char name[128];
    char arch[64]; /* "gfx942:sramecc+:xnack-" or "sm_90" */
    char pci_id[64];
    uint64_t memory_bytes;
    int runtime_version, driver_version;
    int warp_size;
} fmro_device_info;

/* One layer on the device: everything the kernels read, uploaded at
 * finalize. Device pointers unless said otherwise. */
typedef struct fmro_layer_dev {
    int32_t device;
    int32_t quant;     /* FMRO_Q_* */
    int32_t a_dynamic; /* FMRO_Q_TENSOR */
    uint32_t hidden, hidden_pad, inter, inter_pad;
    uint32_t top_k, local_experts, global_experts;
    int32_t activation; /* FMRO_ACT_* (gated) */
    float swiglu_alpha, swiglu_limit;
    uint32_t on_input; /* doweight_stage1: x * w before stage 1, top-1 */
    uint32_t add_b2;   /* TP rank 0 adds w2's bias */
    uint32_t group;    /* FMRO_Q_BLOCK: 128 */
    uint32_t max_tokens;
    const int32_t *local_of; /* [global] local expert (cumsum of the mask - 1), -1 when masked */
    const void *w13, *w2;    /* shuffled [E, 2Ip, Hp], [E, Hp, Ip]: bf16 or e4m3fnuz */
    const float *w13_scale;  /* fnuz dequant scales, checkpoint layout (prepare.h) */
    const float *w2_scale;
    const float *a_static_scale; /* [2] static per-tensor input scales (fnuz), or NULL */
    const uint16_t *b13, *b2;    /* bf16 [E, 2I], [E, H] or NULL */
    void *workspace;             /* fmro_ws.total bytes */
    fmro_ws ws;
} fmro_layer_dev;

typedef struct fmro_call {
    const void *x;           /* [m, H] bf16, row stride x_ld elements */
    const float *topk_w;     /* [m, k] */
    const int32_t *topk_ids; /* [m, k] global ids */
    void *out;               /* [m, H] bf16, row stride out_ld */
    int64_t x_ld, out_ld;
    uint32_t m; /* 1 .. max_tokens */
    void *stream;
} fmro_call;

typedef struct fmro_kernels {
    uint32_t version;     /* FMRO_KERNELS_VERSION */
    const char *platform; /* "hip" or "cuda" */
    int (*device_count)(int *count, char *why, size_t cap);
    int (*device_info)(int device, fmro_device_info *info, char *why, size_t cap);
    int (*alloc)(int device, void **ptr, size_t bytes, char *why, size_t cap);
    void (*release)(int device, void *ptr);
    /* to_device 1: host -> device, 0: device -> host; stream NULL: synchronous */
    int (*copy)(int device, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *why,
                size_t cap);
    int (*synchronize)(int device, void *stream, char *why, size_t cap);
    /* The whole forward on `call->stream`: moe_sorting, input quantization,
     * stage 1, the intermediate's quantization, stage 2 and the combine. */
    int (*forward)(const fmro_layer_dev *layer, const fmro_call *call, char *why, size_t cap);
} fmro_kernels;

typedef const fmro_kernels *(*fmro_kernels_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* FMOE_PLUGINS_ROCM_KERNELS_H */
