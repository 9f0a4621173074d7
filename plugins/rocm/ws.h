/*
 * plugins/rocm/ws.h - what the plugin's C side and its kernels agree on
 * and both include (no fusedmoe header: the .hip sources include it): the
 * quantization kinds, the padding and sorting block, and the workspace
 * layout (computed by layout.c, read by the kernels).
 */
#ifndef FMOE_PLUGINS_ROCM_WS_H
#define FMOE_PLUGINS_ROCM_WS_H

#include <stddef.h>
#include <stdint.h>

/* AITER's QuantType, as the kernels see it. */
#define FMRO_Q_BF16    1 /* QuantType.No */
#define FMRO_Q_TENSOR  2 /* per_Tensor: static or dynamic input scale */
#define FMRO_Q_CHANNEL 3 /* per_Token: weights per channel, inputs per token */
#define FMRO_Q_BLOCK   4 /* per_128x128: 128x128 weight blocks, 1x128 input groups */

/* H and I are padded (with zeros) to this for the 16x16 pre-shuffle, whose
 * tiles are 16 rows x 32 elements. */
#define FMRO_PAD 32
/* Rows of moe_sorting's blocks: each block of sorted rows belongs to one
 * expert (AITER's block_m). */
#define FMRO_SORT_BLOCK 32
/* Byte offsets of the workspace buffers (256-byte aligned). P = Mmax * k
 * pairs; C = moe_sorting's capacity, B its blocks (sorting.h). */
typedef struct fmro_ws {
    size_t counts;        /* [L] u32: routed pairs per local expert */
    size_t starts;        /* [L] u32: first sorted entry of each expert's run */
    size_t pos_of;        /* [P] i32: sorted entry of each (token, slot), -1 when dropped */
    size_t sorted_ids;    /* [C] u32 FMRO_SORT_ID */
    size_t sorted_w;      /* [C] f32 */
    size_t sorted_expert; /* [B] i32 local expert per block, -1 past the end */
    size_t num_valid;     /* [2] u32 */
    size_t amax;          /* [2] u32: f32 bits of the dynamic per-tensor amax of GEMM1 / GEMM2 inputs */
    size_t a1, a1_scale;  /* [Mmax, Hp] bf16 or fnuz bytes; [Mmax, groups of H] f32 */
    size_t act;           /* [C, Ip] bf16: stage 1 output */
    size_t a2, a2_scale;  /* [C, Ip] fnuz bytes; [C, groups of I] f32 */
    size_t y;             /* [C, H] f32: stage 2 output per sorted entry */
    size_t total;
    uint32_t capacity, blocks; /* C and B for Mmax */
} fmro_ws;

#endif /* FMOE_PLUGINS_ROCM_WS_H */
