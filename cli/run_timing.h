/*
 * cli/run_timing.h - wall-clock timing of a layer's forward for `run`: the
 * median of a few forwards within a time budget (the call before has
 * warmed the layer up). A rough number for the report; benchmarks are
 * `fusedmoe bench`'s job.
 */
#ifndef FMOE_CLI_RUN_TIMING_H
#define FMOE_CLI_RUN_TIMING_H

#include "fusedmoe/fusedmoe.h"

/* The selected backend's forward time: the median of `runs` forwards. */
typedef struct run_timing {
    int runs;
    double median_s;
} run_timing;

/* Time fmoe_layer_forward(layer, args); the status of the first failure. */
fmoe_status run_time_forward(fmoe_layer *layer, const fmoe_forward_args *args, run_timing *t);

#endif
