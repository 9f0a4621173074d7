/*
 * cli/run_ep.h - `fusedmoe run` on an expert-parallel group: --gpus N (N
 * ranks as threads of this process) or --ep N --ep-rank R --ep-id-file PATH
 * (this process is rank R). cli/run_ep.c says what it checks.
 */
#ifndef FMOE_CLI_RUN_EP_H
#define FMOE_CLI_RUN_EP_H

#include "cli/run.h"

/* Run and report; returns the exit code (as `run`'s). */
int run_ep(const cli_globals *g, run_opts *o, fmoe_context *ctx);

#endif
