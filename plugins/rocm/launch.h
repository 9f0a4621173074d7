/*
 * plugins/rocm/launch.h - the host-side launchers of the kernel sources
 * (one per .hip file, so every kernel is launched from the file that
 * defines it). Used by runtime.hip's forward; C++ (hipcc / nvcc) only.
 */
#ifndef FMOE_PLUGINS_ROCM_LAUNCH_H
#define FMOE_PLUGINS_ROCM_LAUNCH_H

#include "plugins/rocm/dialect.h"
#include "plugins/rocm/kernels.h"

/* Sizes of one forward's sorting (the call's m, not max_tokens). */
struct fmro_sizes {
    uint32_t m, k, pairs, local;
    uint32_t capacity, blocks; /* moe_sorting's, for this m */
};

/* moe_sorting.hip: pos_of, sorted_ids / _w / _expert, num_valid in the
 * workspace (same arrays as sorting.c for the first capacity / blocks
 * entries). */
void fmro_launch_sorting(const fmro_layer_dev *L, const fmro_call *c, const fmro_sizes *z, fmro_stream s);

/* moe_stages.hip: input quantization, stage 1 (+ activation), the
 * intermediate's quantization, stage 2, the combine into out. */
void fmro_launch_stages(const fmro_layer_dev *L, const fmro_call *c, const fmro_sizes *z, fmro_stream s);

/* mfma_stages.hip (AMD targets only): stage 2 on the matrix cores. Built
 * and checked for MFMA code, not launched by the forward yet. */
void fmro_launch_mfma_stage2(const fmro_layer_dev *L, const fmro_sizes *z, int fp8, fmro_stream s);

/* Fill n u32 words with v (buffers the forward resets). */
void fmro_launch_fill(uint32_t *p, size_t n, uint32_t v, fmro_stream s);

#endif /* FMOE_PLUGINS_ROCM_LAUNCH_H */
