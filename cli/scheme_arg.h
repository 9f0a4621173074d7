/*
 * cli/scheme_arg.h - the value of --scheme: a scheme key (docs/SCHEMES.md)
 * or the path of a checkpoint's config.json, whose quantization_config then
 * decides the scheme of one MoE layer (fmoe_quant_config_scheme).
 */
#ifndef FMOE_CLI_SCHEME_ARG_H
#define FMOE_CLI_SCHEME_ARG_H

#include "fusedmoe/fusedmoe.h"

/* Default module prefix resolved in a config.json (HF Qwen/DeepSeek naming). */
#define CLI_SCHEME_DEFAULT_MODULES "model.layers.0.mlp.experts"

/* 1 if `value` names a file rather than a key: it ends in ".json" (keys
 * never contain '.') or names an existing file or checkpoint directory
 * (which stands for its config.json). */
int cli_scheme_is_path(const char *value);

/* Fill `out` from --scheme `value`. For a config.json, the experts under
 * `modules` (NULL: the default; gate_proj/up_proj/down_proj names) are all
 * resolved, `num_experts` of them. Returns CLI_EXIT_OK, or an exit code
 * after printing the error (3 for a bad key, file or unsupported scheme). */
int cli_scheme_from_arg(const char *value, const char *modules, uint32_t num_experts, fmoe_scheme *out);

#endif
