/*
 * cli/rng.h - the seeded random numbers behind `run`'s synthetic layer.
 *
 * Every tensor is drawn from its own stream, keyed by (seed, tensor name,
 * index), so a value depends only on the seed and what it is - not on which
 * backend asks first, the order parameters are declared in, or which EP/TP
 * rank is loading. Two layers built from one seed hold identical weights.
 */
#ifndef FMOE_CLI_RNG_H
#define FMOE_CLI_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_rng {
    uint64_t state;
    int have_spare;
    double spare;
} cli_rng;

void cli_rng_init(cli_rng *r, uint64_t seed, const char *stream, uint64_t index);

/* Uniform 64-bit values (splitmix64). */
uint64_t cli_rng_next(cli_rng *r);

/* Standard normal (Box-Muller). */
double cli_rng_normal(cli_rng *r);

/* out[i] = scale * N(0,1), i < n, from the stream (seed, stream, index). */
void cli_rng_fill_normal(float *out, size_t n, float scale, uint64_t seed, const char *stream, uint64_t index);

/* A seed for when the user gave none: differs from run to run. */
uint64_t cli_rng_fresh_seed(void);

#endif
