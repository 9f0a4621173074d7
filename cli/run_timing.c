/* cli/run_timing.c - median forward time within a budget (run_timing.h). */
#include "cli/run_timing.h"

#include <stdlib.h>
#include <time.h>

/* At least MIN_RUNS forwards, then more until the budget is spent. */
#define TIMING_MIN_RUNS 3
#define TIMING_MAX_RUNS 21
#define TIMING_BUDGET_S 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

fmoe_status run_time_forward(fmoe_layer *layer, const fmoe_forward_args *args, run_timing *t)
{
    double times[TIMING_MAX_RUNS], spent = 0;
    int n = 0;
    while (n < TIMING_MAX_RUNS && (n < TIMING_MIN_RUNS || spent < TIMING_BUDGET_S)) {
        double t0 = now_s();
        fmoe_status st = fmoe_layer_forward(layer, args);
        /* A device layer queues its work: the clock stops when it is done
         * (a no-op for host layers). */
        if (st == FMOE_STATUS_OK)
            st = fmoe_layer_synchronize(layer, args->stream);
        times[n] = now_s() - t0;
        if (st != FMOE_STATUS_OK)
            return st;
        spent += times[n++];
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    t->runs = n;
    t->median_s = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    return FMOE_STATUS_OK;
}
