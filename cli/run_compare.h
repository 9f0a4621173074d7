/*
 * cli/run_compare.h - how far a backend's output is from the reference's,
 * and whether that is within tolerance.
 */
#ifndef FMOE_CLI_RUN_COMPARE_H
#define FMOE_CLI_RUN_COMPARE_H

#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

/* Element i passes when |got - ref| <= atol + rtol * |ref|. */
typedef struct run_tolerance {
    double atol, rtol;
    fmoe_dtype dtype; /* the dtype the tolerance is for */
} run_tolerance;

/* The tolerance of the coarsest type in play: the activation dtype and, for
 * unquantized schemes, the weight dtype (quantized weights get bf16's):
 * bf16 2e-2/2e-2, f16 1e-3/1e-3, f32 1e-5/1e-5. */
run_tolerance run_tolerance_for(fmoe_dtype act_dtype, const fmoe_scheme *scheme);

typedef struct run_errors {
    int64_t elements;
    int64_t outside;            /* elements failing the tolerance, non-finite ones included */
    int64_t nonfinite;          /* NaN or infinite in either output */
    double max_abs;             /* max |got - ref| over finite pairs */
    double max_ref;             /* max |ref| over finite values */
    double max_rel;             /* max_abs / max_ref (0 when both are 0, inf when only max_ref is) */
    double nmse;                /* sum (got - ref)^2 / sum ref^2, finite pairs (same convention) */
    int64_t worst;              /* index of the element with the largest excess over tolerance, -1 if none
                                   (the first non-finite one when there are any) */
    float worst_got, worst_ref; /* the two values at `worst` */
} run_errors;

void run_compare(const float *got, const float *ref, int64_t n, const run_tolerance *tol, run_errors *e);

/* A NaN never passes: passed means no element outside and none non-finite. */
int run_passed(const run_errors *e);

/* Why a comparison failed, in one line: how many elements were outside the
 * tolerance and how many were NaN/inf, then the worst element (token and
 * column of a row of `hidden` values) with both values and the bound it
 * broke, e.g. "3 of 512 elements outside |out-ref| <= 2e-02 + 2e-02*|ref|,
 * 3 NaN/inf; first at token 0, column 5: out nan, ref 0.125". "" when it
 * passed. */
void run_failure_text(const run_errors *e, const run_tolerance *tol, int64_t hidden, char *buf, size_t cap);

#endif
