/*
 * cli/run_model.h - `fusedmoe run` on a checkpoint directory (--model, or
 * the bundled model when run has no options): cli/run_model.c.
 */
#ifndef FMOE_CLI_RUN_MODEL_H
#define FMOE_CLI_RUN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"

#ifndef FMOE_DEFAULT_MODEL_DIR
#define FMOE_DEFAULT_MODEL_DIR "models/qwen3-moe-tiny"
#endif

typedef struct run_model_opts {
    const char *model_dir;
    int64_t layer;   /* -1: every MoE layer */
    uint32_t tokens; /* 0: every row of the input, else 16 */
    uint64_t seed;
    int seed_given;
    uint32_t tp, tp_rank, ep, ep_rank, redundant;
    int32_t placement;
    const char *input, *output, *backend;
    int json;
} run_model_opts;

/* Parse; -1 to go on, else an exit code (help printed, usage error). */
int run_model_parse(int argc, char **argv, run_model_opts *o);

void run_model_help(FILE *f);

/* The whole command; returns the exit code. */
int cmd_run_model(const cli_globals *g, int argc, char **argv);

/* 1 if `run`'s arguments ask for a checkpoint run: none at all, or an
 * option only checkpoint runs have (--model, --layer, --input, --output). */
int run_is_model_mode(int argc, char **argv);

#endif
