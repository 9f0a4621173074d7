/*
 * plugins/rocm/rocm_plugin.h - what plugin.c and method.c share: the
 * plugin's state (per context), the device kind and names of this build
 * (the AMD plugin, or the NVIDIA test build of the same sources,
 * FMRO_TEST_CUDA), and the one method.
 */
#ifndef FMOE_PLUGINS_ROCM_ROCM_PLUGIN_H
#define FMOE_PLUGINS_ROCM_ROCM_PLUGIN_H

#include "fusedmoe/plugin.h"
#include "plugins/rocm/kernels.h"

#if defined(FMRO_TEST_CUDA)
#define FMRO_PLUGIN_NAME  "rocm_cuda"
#define FMRO_DEVICE_KIND  FMOE_DEVICE_CUDA
#define FMRO_KERNELS_FILE "libfmoe-rocm_cuda-kernels.so"
#else
#define FMRO_PLUGIN_NAME  "rocm"
#define FMRO_DEVICE_KIND  FMOE_DEVICE_ROCM
#define FMRO_KERNELS_FILE "libfmoe-rocm-kernels.so"
#endif

/* Query score of the non-MFMA path: an accelerator's generic path
 * (docs/PLUGIN-ABI.md, Scores). */
#define FMRO_SCORE 60

typedef struct fmro_state {
    const fmoe_host *host;
    const fmro_kernels *k; /* loaded in init; NULL when it was not (kernels_why) */
    char kernels_why[256];
} fmro_state;

extern const fmoe_method fmro_method;

#endif /* FMOE_PLUGINS_ROCM_ROCM_PLUGIN_H */
