/* cli/run_compare.c - output comparison (see run_compare.h). */
#include "cli/run_compare.h"

#include <math.h>
#include <stdio.h>

static int coarseness(fmoe_dtype d)
{
    switch (d) {
    case FMOE_DTYPE_F32:
        return 0;
    case FMOE_DTYPE_F16:
        return 1;
    default:
        return 2; /* bf16, and anything quantized */
    }
}

run_tolerance run_tolerance_for(fmoe_dtype act_dtype, const fmoe_scheme *scheme)
{
    fmoe_dtype d = act_dtype;
    int unquantized = scheme->w_strategy == FMOE_QSTRATEGY_NONE && scheme->a_strategy == FMOE_QSTRATEGY_NONE;
    fmoe_dtype w = unquantized ? scheme->w_dtype : FMOE_DTYPE_BF16;
    if (coarseness(w) > coarseness(d))
        d = w;
    switch (coarseness(d)) {
    case 0:
        return (run_tolerance){1e-5, 1e-5, FMOE_DTYPE_F32};
    case 1:
        return (run_tolerance){1e-3, 1e-3, FMOE_DTYPE_F16};
    default:
        return (run_tolerance){2e-2, 2e-2, FMOE_DTYPE_BF16};
    }
}

static double ratio(double num, double den)
{
    if (den > 0)
        return num / den;
    return num > 0 ? INFINITY : 0.0;
}

void run_compare(const float *got, const float *ref, int64_t n, const run_tolerance *tol, run_errors *e)
{
    *e = (run_errors){.elements = n, .worst = -1};
    double sq_err = 0, sq_ref = 0, worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], b = ref[i];
        double excess = INFINITY; /* a NaN or inf is as far out as it gets */
        if (!isfinite(a) || !isfinite(b)) {
            e->nonfinite++;
        } else {
            double diff = fabs(a - b), mag = fabs(b);
            if (diff > e->max_abs)
                e->max_abs = diff;
            if (mag > e->max_ref)
                e->max_ref = mag;
            sq_err += diff * diff;
            sq_ref += mag * mag;
            excess = diff - (tol->atol + tol->rtol * mag);
        }
        if (excess > 0) {
            e->outside++;
            if (excess > worst_excess) {
                worst_excess = excess;
                e->worst = i;
                e->worst_got = got[i];
                e->worst_ref = ref[i];
            }
        }
    }
    e->max_rel = ratio(e->max_abs, e->max_ref);
    e->nmse = ratio(sq_err, sq_ref);
}

int run_passed(const run_errors *e)
{
    return e->outside == 0 && e->nonfinite == 0;
}

void run_failure_text(const run_errors *e, const run_tolerance *tol, int64_t hidden, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (run_passed(e))
        return;
    int n = snprintf(buf, cap, "%lld of %lld elements outside |out-ref| <= %.0e + %.0e*|ref| (%s), %lld NaN/inf",
                     (long long)e->outside, (long long)e->elements, tol->atol, tol->rtol, fmoe_dtype_name(tol->dtype),
                     (long long)e->nonfinite);
    if (n < 0 || (size_t)n >= cap || e->worst < 0 || hidden <= 0)
        return;
    snprintf(buf + n, cap - (size_t)n, "; %s at token %lld, column %lld: out %.6g, ref %.6g",
             e->nonfinite ? "first non-finite" : "worst", (long long)(e->worst / hidden),
             (long long)(e->worst % hidden), (double)e->worst_got, (double)e->worst_ref);
}
