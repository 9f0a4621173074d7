/*
 * plugins/rocm/prepare.h - finalize on the host: the loaded checkpoint
 * tensors made into what the kernels read (AITER's
 * process_weights_after_loading), in plain C so CI checks it without a GPU
 * (tests/rocm/test_prepare.c):
 *
 *   fp8: a gated per-tensor W13 requantized to one scale per expert (the
 *   max of w1's and w3's, as vLLM and the reference); every e4m3fn byte
 *   made e4m3fnuz (0x80 -> 0x00; a 0x7F / 0xFF NaN code refuses the
 *   tensor) and every dequant scale doubled (fnuz.h); static input scales
 *   reduced to one per GEMM (the max over experts) and doubled;
 *   both: each expert's W13 [2I, H] and W2 [H, I] zero-padded to
 *   [2Ip, Hp] (gate rows at 0, up rows at Ip) and [Hp, Ip], Hp and Ip
 *   multiples of FMRO_PAD, then pre-shuffled into AITER's 16x16 layout
 *   (shuffle.h).
 */
#ifndef FMOE_PLUGINS_ROCM_PREPARE_H
#define FMOE_PLUGINS_ROCM_PREPARE_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

typedef struct fmro_prepare_in {
    int32_t quant;                   /* FMRO_Q_* */
    int a_dynamic;                   /* FMRO_Q_TENSOR: dynamic input scales */
    uint32_t experts, hidden, inter; /* local experts, H, I per rank (gated: W13 has 2I rows) */
    const void *w13, *w2;            /* [E, 2I, H], [E, H, I]: bf16 or e4m3fn bytes */
    const float *w13_scale;          /* tensor [E, 2]; channel [E, 2I]; block [E, 2I/128, ceil(H/128)] */
    const float *w2_scale;           /* tensor [E]; channel [E, H]; block [E, ceil(H/128), ceil(I/128)] */
    const float *w13_input_scale;    /* static tensor: [E, 2] */
    const float *w2_input_scale;     /* static tensor: [E] */
} fmro_prepare_in;

typedef struct fmro_prepared {
    uint32_t hidden_pad, inter_pad;
    void *w13, *w2; /* [E, 2Ip, Hp], [E, Hp, Ip] shuffled (malloc'd) */
    size_t w13_bytes, w2_bytes;
    float *w13_scale, *w2_scale; /* doubled (malloc'd); tensor: [E] each */
    size_t w13_scales, w2_scales;
    float a13_scale, a2_scale; /* static tensor: one per GEMM, doubled; else 0 */
    size_t zeros_rewritten;    /* 0x80 bytes made 0x00 */
} fmro_prepared;

/* 0, or -1 with the reason (naming the tensor) in why; *out is then
 * released. */
int fmro_prepare(const fmro_prepare_in *in, fmro_prepared *out, char *why, size_t cap);
void fmro_prepared_free(fmro_prepared *p);

#endif /* FMOE_PLUGINS_ROCM_PREPARE_H */
