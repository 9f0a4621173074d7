/* cli/synth/normal.c - fast seeded normal values (see normal.h). */
#include "cli/synth/normal.h"

#include <math.h>
#include <pthread.h>

#include "cli/rng.h"

/* Layers of equal area A under f(x) = exp(-x^2/2), x >= 0. Layer 0 is the
 * rectangle [0, R] x [0, f(R)] plus the tail beyond R, of virtual width
 * x0 = A / f(R); layer i >= 1 is [0, x_i] x [f(x_i), f(x_{i+1})], with
 * f(x_{i+1}) = f(x_i) + A / x_i and x_1 = R, x_256 = 0. R is the one for
 * which the top layer closes at x = 0. */
#define LAYERS 256
#define TAIL_R 3.6541528853610088
#define STEP   0x1.0p-24 /* a magnitude counts halves of 2^-23 of a layer's width */

static struct {
    double x[LAYERS + 1], f[LAYERS + 1]; /* edges and f at them */
    uint32_t k[LAYERS];                  /* magnitude below which a candidate of layer i is inside */
    float w[2 * LAYERS];                 /* x_i * STEP, then its negation (the sign bit follows the layer's) */
} zig;

static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static double density(double x)
{
    return exp(-0.5 * x * x);
}

static void zig_init(void)
{
    double r = TAIL_R, fr = density(r);
    double area = r * fr + sqrt(acos(-1.0) / 2.0) * erfc(r / sqrt(2.0));
    zig.x[0] = area / fr;
    zig.x[1] = r;
    for (int i = 1; i < LAYERS - 1; i++) {
        double y = density(zig.x[i]) + area / zig.x[i];
        zig.x[i + 1] = y < 1.0 ? sqrt(-2.0 * log(y)) : 0.0;
    }
    zig.x[LAYERS] = 0.0;
    for (int i = 0; i <= LAYERS; i++)
        zig.f[i] = density(zig.x[i]);
    zig.f[0] = fr; /* layer 0's rectangle tops out at f(R) */
    for (int i = 0; i < LAYERS; i++) {
        zig.k[i] = (uint32_t)(zig.x[i + 1] / zig.x[i] * 0x1.0p24);
        zig.w[i] = (float)(zig.x[i] * STEP);
        zig.w[i + LAYERS] = -zig.w[i];
    }
}

/* A uniform double in (0, 1]. */
static double uniform(cli_rng *r)
{
    return (double)((cli_rng_next(r) >> 11) + 1) * 0x1.0p-53;
}

/* The candidate c (bits 0-7 layer, 8 sign, 9-31 magnitude) fell outside
 * its layer's inner rectangle: the tail or wedge test, then fresh
 * candidates until one is accepted. */
static float __attribute__((noinline)) slow_path(cli_rng *r, uint32_t c)
{
    for (;;) {
        uint32_t layer = c & (LAYERS - 1), mag = (c >> 8) | 1u;
        double sign = (c & LAYERS) ? -1.0 : 1.0;
        if (mag < zig.k[layer])
            return (float)mag * zig.w[c & (2 * LAYERS - 1)];
        if (layer == 0) { /* beyond R: Marsaglia's exponential tail */
            for (;;) {
                double a = -log(uniform(r)) / TAIL_R, b = -log(uniform(r));
                if (2.0 * b > a * a)
                    return (float)(sign * (TAIL_R + a));
            }
        }
        double x = (double)mag * zig.x[layer] * STEP;
        double y = zig.f[layer] + uniform(r) * (zig.f[layer + 1] - zig.f[layer]);
        if (y < density(x))
            return (float)(sign * x);
        c = (uint32_t)cli_rng_next(r);
    }
}

static inline float candidate(cli_rng *r, uint32_t c)
{
    uint32_t mag = (c >> 8) | 1u;
    if (mag < zig.k[c & (LAYERS - 1)])
        return (float)mag * zig.w[c & (2 * LAYERS - 1)];
    return slow_path(r, c);
}

void synth_fill_normal(float *out, size_t n, float scale, uint64_t seed, const char *stream, uint64_t index)
{
    pthread_once(&zig_once, zig_init);
    cli_rng r;
    cli_rng_init(&r, seed, stream, index);
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t b = cli_rng_next(&r);
        out[i] = scale * candidate(&r, (uint32_t)b);
        out[i + 1] = scale * candidate(&r, (uint32_t)(b >> 32));
    }
    if (i < n)
        out[i] = scale * candidate(&r, (uint32_t)cli_rng_next(&r));
}
