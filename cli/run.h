/*
 * cli/run.h - what the parts of `fusedmoe run` share: its options, its
 * timing and the report it prints (cli/run_report.c).
 */
#ifndef FMOE_CLI_RUN_H
#define FMOE_CLI_RUN_H

#include <stdint.h>

#include "cli/cli.h"
#include "cli/run_compare.h"
#include "cli/run_timing.h"
#include "fusedmoe/fusedmoe.h"

/* One run, as the command line asked for it. */
typedef struct run_opts {
    const char *scheme_key; /* --scheme: a key or a config.json path */
    const char *modules;    /* --modules: expert module prefix in that config, or NULL */
    uint32_t tokens;
    uint64_t seed;
    int seed_given;
    const char *backend; /* --backend glob, or NULL */
    int logits;          /* pass router logits instead of top-k routing */
    int json;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    /* Expert parallelism on a group (cli/run_ep.c): --gpus N ranks in this
     * process, or --ep-id-file PATH with --ep N --ep-rank R (this process is
     * one rank); --ep-dispatch, --ep-mode, --ep-wait-ms. */
    uint32_t gpus;
    const char *ep_id_file;
    int32_t ep_dispatch, ep_mode;
    uint32_t ep_wait_ms;
} run_opts;

/* Everything the report shows. */
typedef struct run_report {
    const run_opts *o;
    const char *rerun;
    char selected[256], oracle[256];
    const fmoe_selection *sel;
    run_tolerance tol;
    run_errors err;
    const float *out, *ref; /* for the worst element */
    run_timing timing;
} run_report;

/* The command line that repeats this run exactly (global options, command,
 * seed and layer flags), shell-quoted where needed. */
void run_rerun_line(const cli_globals *g, const run_opts *o, char *buf, size_t cap);

/* The report as text on stdout. */
void run_print_text(const run_report *r);

/* The report as one JSON document on stdout; returns an exit code. */
int run_print_json(const run_report *r);

#endif
