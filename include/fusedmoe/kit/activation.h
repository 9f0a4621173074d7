/*
 * fusedmoe/kit/activation.h - the expert activations of spec/interface.md §5 on one
 * row, in f32.
 *
 * Gated: h holds 2*I values [gate(I) | up(I)], for every activation
 * (gpt-oss checkpoints interleave gate/up for SWIGLUOAI; the loader
 * separates them, so one layout serves all).
 * Non-gated: h holds I values. out receives I values.
 *
 *  SILU       silu(g)*u; with swiglu_limit L > 0: silu(min(g,L))*clamp(u,-L,L)
 *  GELU       gelu_erf(g)*u        (non-gated: gelu_erf(h))
 *  GELU_TANH  gelu_tanh(g)*u       (non-gated: gelu_tanh(h))
 *  RELU2      relu(g)^2*u          (non-gated: relu(h)^2)
 *  SWIGLUOAI  g=min(g,L), u=clamp(u,-L,L), g*sigmoid(alpha*g)*(u+1), with
 *             alpha = swiglu_alpha and L = swiglu_limit (gated only)
 *  SWIGLUSTEP min(silu(g),7)*clamp(u,-7,7) (gated only)
 */
#ifndef FMOE_KIT_ACTIVATION_H
#define FMOE_KIT_ACTIVATION_H

#include <stdint.h>

#include "fusedmoe/common.h"

void fmoe_activation_row(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out);

/* Scalar building blocks (also used by tests and other plugins' epilogues). */
float fmoe_silu(float x);
float fmoe_gelu_erf(float x);
float fmoe_gelu_tanh(float x);
float fmoe_sigmoid(float x);

#endif
