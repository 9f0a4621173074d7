/*
 * fusedmoe/kit/refq.h - the reference (oracle) expert computation
 * for quantized schemes (docs/REFERENCE-METHODS.md has the semantics per
 * scheme). Three pieces, one file each:
 *
 *   refq_matrix  (refq_weights.c, refq_int.c)  one projection's weights of
 *                all local experts, in a kernel-neutral form, and the row
 *                dequantizer: row n of expert e as K f32 values;
 *   refq_actq    (refq_act.c)                  how a GEMM input row is
 *                quantized (fake-quantized: quantize with the codecs, then
 *                dequantize, so the GEMM sees exactly the values a kernel
 *                multiplies);
 *   refq_run     (refq_experts.c)              the expert loop:
 *
 *     for token t, slot j, e = topk_ids[t,j]  (skipped if not local)
 *       x  = round_act(x_t * w[t,0]) when the router weight is on the input
 *       xq = actq1(x)                              GEMM1 input quantization
 *       h  = round_act(xq . dq(W13[l])^T + b13[l]) f32 accumulation
 *       a  = round_act(act(h))
 *       aq = actq2(a)                              GEMM2 input requantization
 *       y  = round_act(aq . dq(W2[l])^T + b2[l])   b2 on TP rank 0 only
 *       out_t = round_act(sum_j y_j * w[t,j])      in f32, slot order
 *
 * Dequantize-then-multiply is the same arithmetic as a kernel's integer /
 * fp8 dot product with the scales applied per block, up to f32 rounding
 * of the products (relative 2^-24 per term).
 *
 * libc/libm only, no error text (linked into plugins): functions return 0,
 * or -1 for a bad argument / no memory, as reference_experts.c.
 */
#ifndef FMOE_KIT_REFQ_H
#define FMOE_KIT_REFQ_H

#include <stdint.h>

#include "fusedmoe/common.h"

/* ------------------------------------------------------------------------ */
/* Weights                                                                   */
/* ------------------------------------------------------------------------ */

#define REFQ_W_FP8   1 /* fp8 bytes, f32 scale per bn x bk tile */
#define REFQ_W_NVFP4 2 /* e2m1 pairs, e4m3 scale per 16, f32 global per expert */
#define REFQ_W_MXFP4 3 /* e2m1 pairs, ue8m0 scale per 32 */
#define REFQ_W_INT \
    4 /* int8 values (int4 or int8 range), f32 scale per \
         (row, group), optional zero point, optional g_idx */

typedef struct refq_matrix {
    int32_t format;      /* REFQ_W_* */
    uint32_t experts;    /* local experts */
    uint32_t rows, cols; /* N, K of one expert */
    /* FP8: values [E, N, K] bytes of fp8_dtype; scales [E, ceil(N/bn),
     * ceil(K/bk)] f32 dequant multipliers. */
    fmoe_dtype fp8_dtype;
    uint32_t bn, bk;
    /* NVFP4 / MXFP4: values [E, N, K/2] packed pairs; block scales
     * [E, N, K/16] e4m3fn bytes / [E, N, K/32] ue8m0 bytes (`sf`).
     * NVFP4 global factor per expert in `global` (convention as
     * formats.h FMOE_NVFP4_GLOBAL_*). */
    const uint8_t *sf;
    const float *global;
    int32_t global_convention;
    /* INT: values [E, N, K] int8 (the signed value, bias removed), with K in
     * the order of `perm` when act-order sorted; scales [E, N, G] f32;
     * zero points [E, N, G] int8 or NULL (symmetric);
     * group of column k: gidx[e*K + k] if gidx, else k / group (group = K
     * for channelwise). */
    uint32_t groups, group;
    const int8_t *zero;
    const int32_t *gidx;
    /* Act-order: perm [E, K] or NULL. Column k of the stored values is
     * original column perm[e*K + k]; refq_run permutes the GEMM input the
     * same way (Marlin's sorted layout). */
    const int32_t *perm;
    const void *values;
    const float *scales;
    /* Buffers refq_matrix_free releases (malloc'd by the builders). */
    void *owned[6];
} refq_matrix;

/* Row n of expert e, dequantized: out[0..cols). */
void refq_matrix_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out);

/* Release the buffers the matrix owns (not the borrowed ones). */
void refq_matrix_free(refq_matrix *m);

/* Store a malloc'd buffer in the matrix's owned list; -1 if full. */
int refq_matrix_own(refq_matrix *m, void *buf);

/* ------------------------------------------------------------------------ */
/* Activation quantization                                                   */
/* ------------------------------------------------------------------------ */

#define REFQ_A_NONE 0 /* weight-only schemes: GEMM input stays in act dtype */
#define REFQ_A_FP8_TENSOR \
    1                       /* fp8, one scale: static (per-expert value given) or \
                               dynamic (amax over the whole GEMM input) */
#define REFQ_A_FP8_TOKEN  2 /* fp8, dynamic, one scale per row */
#define REFQ_A_FP8_GROUP  3 /* fp8, dynamic, one scale per `group` columns of a row */
#define REFQ_A_NVFP4      4 /* e2m1, e4m3 scale per 16, global per expert (given) */
#define REFQ_A_MXFP4      5 /* e2m1, ue8m0 scale per 32 (OCP recipe) */
#define REFQ_A_INT8_TOKEN 6 /* int8 symmetric, dynamic per row: s = amax/127 */
#define REFQ_A_INT8_ASYM  7 /* int8 asymmetric per row (KleidiAI qai8dx, W4A8) */

typedef struct refq_actq {
    int32_t kind;     /* REFQ_A_* */
    uint32_t group;   /* FP8_GROUP */
    int32_t rule;     /* FP8 dynamic scale rule: FMOE_FP8_SCALE_F32 / _UE8M0 */
    uint32_t dynamic; /* FP8_TENSOR: 1 = dynamic */
    /* FP8_TENSOR static: the dequant scale, per local expert (after finalize
     * every entry holds the max over experts, vLLM's single scale).
     * NVFP4: the global factor per local expert in `convention`. */
    const float *scale;
    int32_t convention; /* NVFP4: FMOE_NVFP4_GLOBAL_QUANT / _DEQUANT */
} refq_actq;

/* Fake-quantize one row of n values in place. `tensor_scale` is the scale
 * for FP8_TENSOR (static or the dynamic one refq_run computed); `expert`
 * picks the per-expert static/global factor. scratch: REFQ_ACTQ_SCRATCH(n)
 * bytes, 8-byte aligned. 0, or -1 on a bad kind/size. */
#define REFQ_ACTQ_SCRATCH(n) ((size_t)(n)*8u + 64u)
int refq_actq_row(const refq_actq *q, uint32_t expert, float tensor_scale, float *x, uint32_t n, uint8_t *scratch);

/* The dynamic per-tensor scale of values with maximum magnitude amax. */
float refq_fp8_tensor_scale(float amax);

/* Number of columns `kind` needs n to be a multiple of (1 if any). */
uint32_t refq_actq_multiple(const refq_actq *q);

/* ------------------------------------------------------------------------ */
/* Post-load processing (finalize), refq_prep.c and refq_int.c. Per-expert    */
/* arrays hold the local experts. All return 0, or -1 (bad value / memory).   */
/* ------------------------------------------------------------------------ */

/* Per-tensor FP8 W13 of a gated layer: requantize each expert's gate and up
 * halves (I rows of K each) in q [E, 2I, K] to one scale max(s_w1, s_w3)
 * in f32 (fmoe_fp8_requantize_w13); pair_scales [E, 2], scale_out [E].
 * -1 if a scale is not finite and > 0. */
int refq_fp8_requant_w13(uint8_t *q, uint32_t experts, uint32_t inter, uint32_t cols, const float *pair_scales,
                         float *scale_out);

/* Largest of v[0..n) (static input scales: vLLM's one scale per GEMM);
 * *unequal = 1 if the values differ. -1 if one is not finite and > 0. */
int refq_max_scale(const float *v, size_t n, float *out, int *unequal);

/* UE8M0 bytes -> f32 (exact); NULL on no memory. */
float *refq_ue8m0_to_f32(const uint8_t *b, size_t n);

/* NVFP4 W13 weight global factor per expert from the [E, r] checkpoint
 * values: the gate's (column 0), as vLLM; *differ = 1 if any expert's gate
 * and up factors differ (then the up half is dequantized with the gate's,
 * exactly as the kernels do). r = 1 copies. -1 if one is not finite and > 0. */
int refq_nvfp4_weight_global(const float *pairs, uint32_t experts, uint32_t r, float *out, int *differ);

/* NVFP4 input global factor per expert from [E, r]: the one giving the
 * larger dequant scale (quant multipliers: min; dequant scales: max). */
int refq_nvfp4_input_global(const float *pairs, uint32_t experts, uint32_t r, int32_t convention, float *out);

/* INT weights. `bits` 4 or 8, pf = 32 / bits.
 * From vLLM's transposed pack-quantized layout, words [E, K/pf, N] (the
 * checkpoint's [N, K/pf] per expert, read transposed): values [E, N, K]. */
int refq_int_values_kn(refq_matrix *m, int32_t bits, const uint32_t *words);
/* From the untransposed layout, words [E, N, K/pf]. */
int refq_int_values_nk(refq_matrix *m, int32_t bits, const uint32_t *words);
/* int4 values held in int8 [E, N, K] (W4A8 Arm checkpoints): borrowed
 * after a range check [-8, 7]. */
int refq_int_values_int8(refq_matrix *m, const int8_t *values, int32_t bits);
/* Scales of dtype F32/BF16/F16 -> f32 [E, N, G]. transposed: source is
 * [E, G, N] (vLLM WNA16), else [E, N, G]. */
int refq_int_scales(refq_matrix *m, const void *src, fmoe_dtype dtype, int transposed);
/* Zero points packed along N, words [E, G, N/pf] (vLLM WNA16's transposed
 * weight_zero_point) -> int8 [E, N, G]. */
int refq_int_zero_points(refq_matrix *m, int32_t bits, const uint32_t *words);
/* Act-order: g_idx [E, K] (each in [0, groups)) -> perm, sorted g_idx and
 * the values reordered to perm (vLLM marlin_sort_g_idx + repack). Call after
 * the values. */
int refq_int_act_order(refq_matrix *m, const int32_t *g_idx);

/* ------------------------------------------------------------------------ */
/* The expert loop                                                           */
/* ------------------------------------------------------------------------ */

typedef struct refq_problem {
    const fmoe_layer_config *cfg; /* validated */
    uint32_t hidden, inter;       /* H, I per rank */
    uint32_t local_experts, global_experts;
    const int32_t *expert_map; /* [global] local index or -1; NULL: identity */
    const refq_matrix *w13;    /* N = r*I, K = H */
    const refq_matrix *w2;     /* N = H, K = I */
    const refq_actq *a1, *a2;  /* GEMM1 / GEMM2 input quantization */
    /* Biases [E_local, r*I], [E_local, H] of dtype bias_dtype, or NULL. */
    fmoe_dtype bias_dtype;
    const void *b13, *b2;
    int64_t m;
    const void *x;
    int64_t x_ld; /* act_dtype rows */
    void *out;
    int64_t out_ld;
    const float *topk_w;     /* [M, k] */
    const int32_t *topk_ids; /* [M, k] global physical ids */
} refq_problem;

/* 0 on success, -1 if scratch memory could not be allocated or a
 * quantizer refused the sizes (validated at create, so a bug). */
int refq_run(const refq_problem *p);

#endif
