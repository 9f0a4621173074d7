/*
 * plugins/cpu/rowops.h - the per-row steps around the integer GEMMs, in
 * AVX-512 (rowops_avx512.c), for the paths that have it: the gated SiLU of
 * GEMM1's output rounded to bf16, and the asymmetric int8 quantization of a
 * row (qgemm.h's cpu_quant_asym). Each gives the same bits as the portable
 * code it replaces (core/activation.c evaluated in double and rounded to
 * bf16; fmoe_w4a8_quantize_activations), which tests/cpu checks value for
 * value. Why: in a decode step these ran at ~11 ns a value (exp in double,
 * roundf calls), 7% of Mixtral's W4A8 step at M=16.
 */
#ifndef FMOE_PLUGIN_CPU_ROWOPS_H
#define FMOE_PLUGIN_CPU_ROWOPS_H

#include <stdint.h>

#include "fusedmoe/common.h"

/* out[i] = round_bf16(silu(min(g, L)) * clamp(u, -L, L)) with g = h[i],
 * u = h[I + i], L = cfg->swiglu_limit (no clamp when L <= 0): exactly
 * fmoe_activation_row (gated SILU) followed by rounding to bf16. Values it
 * cannot show to round the same in f32 take that double path; returns how
 * many did (tests check the fast path is the common one). */
uint32_t cpu_silu_bf16_avx512(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out);

/* cpu_quant_asym (qgemm.h), the same bits. */
void cpu_quant_asym_avx512(const float *x, uint32_t n, uint32_t kp, uint32_t group, int8_t *q, int32_t *off,
                           float *scale, int32_t *qsum);

#endif
