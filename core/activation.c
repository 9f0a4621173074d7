/*
 * core/activation.c - the expert activations (see fusedmoe/kit/activation.h and
 * docs/ROUTING.md). libm only: this file is linked into plugins that do not
 * link libfusedmoe.
 *
 * Inputs and outputs are f32; each output value is evaluated in double and
 * rounded once. That makes the oracle the exactly rounded math rather than
 * one more f32 approximation: in f32, gelu_erf(-5) = 0.5x(1 + erf(x/sqrt2))
 * loses most of its digits to cancellation, and x * sigmoid(x) goes through
 * a subnormal for very negative x. Kernels are judged against these values
 * with the tolerances the conformance suite owns.
 *
 * A clamp limit L applies only when L > 0 (0 means "no clamp", the config
 * default); SWIGLUSTEP's 7 is part of its definition, not a setting. Clamps
 * keep NaN (as torch.clamp does) instead of turning it into the limit.
 */
#include "fusedmoe/kit/activation.h"

#include <math.h>

#define INV_SQRT2        0.70710678118654752440 /* 1/sqrt(2) */
#define SQRT_2_OVER_PI   0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_TANH_CUBIC  0.044715
#define SWIGLUSTEP_LIMIT 7.0

static double sigmoid_d(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

/* silu(x) = x * sigmoid(x), written as x / (1 + e^-x). */
static double silu_d(double x)
{
    return x / (1.0 + exp(-x));
}

static double gelu_erf_d(double x)
{
    /* erfc keeps the digits that 1 + erf(..) loses for negative x. */
    return 0.5 * x * erfc(-x * INV_SQRT2);
}

static double gelu_tanh_d(double x)
{
    double inner = SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x);
    return 0.5 * x * (1.0 + tanh(inner));
}

static double relu2_d(double x)
{
    double r = x > 0.0 ? x : 0.0;
    return r * r;
}

/* min(x, hi) that keeps NaN (fmin would return hi). */
static double min_keep_nan(double x, double hi)
{
    return x > hi ? hi : x;
}

/* clamp(x, lo, hi) that keeps NaN. */
static double clamp_keep_nan(double x, double lo, double hi)
{
    if (x < lo)
        return lo;
    if (x > hi)
        return hi;
    return x;
}

float fmoe_sigmoid(float x)
{
    return (float)sigmoid_d(x);
}

float fmoe_silu(float x)
{
    return (float)silu_d(x);
}

float fmoe_gelu_erf(float x)
{
    return (float)gelu_erf_d(x);
}

float fmoe_gelu_tanh(float x)
{
    return (float)gelu_tanh_d(x);
}

/* The gate part alone, for the activations whose non-gated form is f(h). */
static double gate_fn(int32_t activation, double g)
{
    switch (activation) {
    case FMOE_ACT_SILU:
        return silu_d(g);
    case FMOE_ACT_GELU:
        return gelu_erf_d(g);
    case FMOE_ACT_GELU_TANH:
        return gelu_tanh_d(g);
    case FMOE_ACT_RELU2:
        return relu2_d(g);
    default:
        return NAN; /* validation rejects the rest; NaN makes misuse visible */
    }
}

/* gpt-oss SwiGLU. Its checkpoints interleave gate and up along 2I; the
 * loader separates them, so h is [gate | up] here as for every gated
 * activation (docs/ROUTING.md). */
static void swigluoai_row(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out)
{
    double limit = cfg->swiglu_limit;
    double alpha = cfg->swiglu_alpha;
    for (uint32_t i = 0; i < I; i++) {
        double g = h[i];
        double u = h[I + i];
        if (limit > 0.0) {
            g = min_keep_nan(g, limit);
            u = clamp_keep_nan(u, -limit, limit);
        }
        out[i] = (float)(g * sigmoid_d(alpha * g) * (u + 1.0));
    }
}

static void swiglustep_row(const float *h, uint32_t I, float *out)
{
    for (uint32_t i = 0; i < I; i++) {
        double g = min_keep_nan(silu_d(h[i]), SWIGLUSTEP_LIMIT);
        double u = clamp_keep_nan(h[I + i], -SWIGLUSTEP_LIMIT, SWIGLUSTEP_LIMIT);
        out[i] = (float)(g * u);
    }
}

/* gate(I) | up(I) halves. SILU honours the clamp limit; the others have none. */
static void gated_halves_row(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out)
{
    int clamp = cfg->activation == FMOE_ACT_SILU && cfg->swiglu_limit > 0.0f;
    double limit = cfg->swiglu_limit;
    for (uint32_t i = 0; i < I; i++) {
        double g = h[i];
        double u = h[I + i];
        if (clamp) {
            g = min_keep_nan(g, limit);
            u = clamp_keep_nan(u, -limit, limit);
        }
        out[i] = (float)(gate_fn(cfg->activation, g) * u);
    }
}

void fmoe_activation_row(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out)
{
    if (!cfg->gated) {
        for (uint32_t i = 0; i < I; i++)
            out[i] = (float)gate_fn(cfg->activation, h[i]);
        return;
    }
    switch (cfg->activation) {
    case FMOE_ACT_SWIGLUOAI:
        swigluoai_row(cfg, h, I, out);
        return;
    case FMOE_ACT_SWIGLUSTEP:
        swiglustep_row(h, I, out);
        return;
    default:
        gated_halves_row(cfg, h, I, out);
        return;
    }
}
