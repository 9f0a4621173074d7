/*
 * cli/conform/schemes.h - the schemes the suite can test, and how close a
 * plugin must come to the reference for each. One table (schemes.c); a new
 * scheme is one entry: its key, the activation dtype of its test grid, the
 * shapes it allows, its tolerance and its weight generator (cli/synth).
 */
#ifndef FMOE_CLI_CONFORM_SCHEMES_H
#define FMOE_CLI_CONFORM_SCHEMES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/synth/synth.h"
#include "fusedmoe/fusedmoe.h"

/* Element i passes when |got - ref| <= atol + rtol*|ref|; the whole output
 * also needs NMSE = sum (got-ref)^2 / sum ref^2 <= nmse (a scale-free gate
 * that an all-zero or wrongly scaled output cannot pass). */
typedef struct cf_tolerance {
    double atol, rtol, nmse;
    /* From the plugin's manifest ([[tolerance]]), else 0 and NULL: the
     * fraction of elements allowed past atol + rtol*|ref| (the NMSE gate
     * still holds), and the entry's reason and link for the report. */
    double mismatch;
    const char *reason, *link;
} cf_tolerance;

/* The weight generator: builds the synthetic checkpoint of a layer
 * (cli/synth/synth.h; every entry uses synth_build, which quantizes float
 * weights into the scheme's checkpoint tensors). */
typedef fmoe_status (*cf_store_fn)(const synth_spec *spec, synth_ckpt **out, char *why, size_t cap);

typedef struct cf_scheme {
    const char *key;      /* canonical scheme key (docs/SCHEMES.md) */
    fmoe_dtype act_dtype; /* activation dtype of the test grid */
    uint32_t h_align;     /* H must be a multiple of this (groups along K of w13, int32 words) */
    uint32_t i_align;     /* I per rank must be a multiple of this (K of w2, block_n of w13) */
    cf_tolerance tol;
    cf_store_fn store; /* NULL: no generator yet, every case UNSUPPORTED */
    const char *why;   /* where the tolerance comes from (docs/CONFORMANCE.md) */
} cf_scheme;

extern const cf_scheme cf_schemes[];
extern const size_t cf_n_schemes;

/* The tolerance for a layer whose activations are `act` under scheme s:
 * the coarser of the two (f32 activations on a bf16 scheme get bf16's). */
cf_tolerance cf_tolerance_for(const cf_scheme *s, fmoe_dtype act);

#endif
