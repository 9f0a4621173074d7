/*
 * cli/synth/normal.h - the normal values behind the synthetic weights.
 *
 * A 256-layer ziggurat (Marsaglia & Tsang's method) over the 64-bit draws of
 * a cli/rng.h stream: each draw gives two candidates (8 bits of layer, a
 * sign, 23 bits of magnitude), about 98.5% of which are accepted with one
 * table look-up and one multiply; the rest fall to the exact wedge or tail
 * test, which draws again from the same stream. Values are exact N(0,1)
 * samples up to the 2^-24 resolution of a layer's width, and never zero:
 * a magnitude is an odd multiple of half a step.
 */
#ifndef FMOE_CLI_SYNTH_NORMAL_H
#define FMOE_CLI_SYNTH_NORMAL_H

#include <stddef.h>
#include <stdint.h>

/* out[i] = scale * N(0,1), i < n, from the stream (seed, stream, index)
 * (cli_rng_init): the same values whichever thread asks. Never zero when
 * scale is a nonzero normal float no smaller than 1e-30. */
void synth_fill_normal(float *out, size_t n, float scale, uint64_t seed, const char *stream, uint64_t index);

#endif
