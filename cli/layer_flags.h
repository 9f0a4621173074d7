/*
 * cli/layer_flags.h - the layer-config flags shared by every command that
 * builds a layer (explain, run; later conform and bench).
 *
 * The flag names are exactly those base/config_args.c prints in replay
 * lines, so any line the library logs can be pasted back into the tool.
 */
#ifndef FMOE_CLI_LAYER_FLAGS_H
#define FMOE_CLI_LAYER_FLAGS_H

#include <stdio.h>

#include "fusedmoe/fusedmoe.h"

/* fmoe_layer_config_init() plus the tool's default sizes: 8 experts, top-2,
 * hidden 256, intermediate 512 (silu gated, bf16 activations). */
void layer_flags_defaults(fmoe_layer_config *cfg);

/* Results of layer_flags_parse. */
#define LAYER_FLAG_NOT_MINE 0    /* argv[*i] is not a layer flag */
#define LAYER_FLAG_TAKEN    1    /* applied to cfg; *i is on its last argument */
#define LAYER_FLAG_BAD      (-1) /* usage error, already reported naming the flag */

/* Apply argv[*i] (and its value) to cfg. `cmd` names the command in errors. */
int layer_flags_parse(fmoe_layer_config *cfg, const char *cmd, int argc, char **argv, int *i);

/* The "Layer flags:" block of a command's --help. */
void layer_flags_help(FILE *f);

/* Validate cfg; on failure report fmoe_last_error and return CLI_EXIT_CONFIG,
 * else CLI_EXIT_OK. */
int layer_flags_validate(const fmoe_layer_config *cfg);

#endif
