/*
 * base/config_args.h - a layer config as command-line flags of the
 * `fusedmoe` CLI (explain/run/conform), so every logged decision carries a
 * replay line a user can paste. The CLI parses exactly these flags
 * (cli/layer_flags.c); tests check the round trip.
 */
#ifndef FMOE_BASE_CONFIG_ARGS_H
#define FMOE_BASE_CONFIG_ARGS_H

#include <stddef.h>

#include "fusedmoe/common.h"

/* Flags that differ from fmoe_layer_config_init() defaults, plus the sizes:
 * "--experts 8 --top-k 2 --hidden 256 --intermediate 512 --activation gelu ...".
 * Always NUL-terminates; truncates if cap is too small. */
void fmoe_layer_config_format_args(const fmoe_layer_config *cfg, char *buf, size_t cap);

#endif
