/* cli/run_weights.c - the synthetic checkpoint of `run` (see run_weights.h). */
#include "cli/run_weights.h"

#include <stdlib.h>

#include "cli/cli.h"

/* Whether every per-expert parameter has one slot per local expert (a
 * parameter indexed by global experts needs every expert built). */
static int indexed_locally(fmoe_layer *layer, const fmoe_layer_config *cfg)
{
    uint32_t local = fmoe_layer_config_local_experts(cfg);
    for (uint32_t i = 0; i < fmoe_layer_param_count(layer); i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        if (fmoe_layer_param(layer, i, &p) != FMOE_STATUS_OK || (p.per_expert && p.shape[0] != (int64_t)local))
            return 0;
    }
    return 1;
}

int run_build_checkpoint(fmoe_layer *layer, const char *who, const run_checkpoint *ck, synth_ckpt **out)
{
    fmoe_scheme scheme = {.struct_size = sizeof scheme};
    if (ck->scheme) {
        scheme = *ck->scheme;
    } else if (fmoe_scheme_parse(fmoe_selection_scheme_key(fmoe_layer_selection(layer)), &scheme) != FMOE_STATUS_OK) {
        cli_error("the %s layer's scheme: %s", who, fmoe_last_error());
        return CLI_EXIT_INTERNAL;
    }
    synth_spec spec = {.seed = ck->seed,
                       .cfg = ck->cfg,
                       .scheme = &scheme,
                       .correction_bias = ck->correction_bias,
                       .dead_expert = -1,
                       .local_only = (uint32_t)indexed_locally(layer, ck->cfg)};
    char why[768];
    fmoe_status st = synth_build(&spec, out, why, sizeof why);
    if (st == FMOE_STATUS_OK)
        return CLI_EXIT_OK;
    if (st == FMOE_STATUS_UNSUPPORTED) {
        cli_error("run cannot synthesize weights for the %s layer: %s", who, why);
        return CLI_EXIT_CONFIG;
    }
    cli_error("synthesizing the weights of the %s layer: %s", who, why);
    return st == FMOE_STATUS_OUT_OF_MEMORY ? CLI_EXIT_INTERNAL : cli_exit_for_status(st);
}

int run_load_built(fmoe_layer *layer, const char *who, const synth_ckpt *built)
{
    char why[768];
    fmoe_status st = synth_load(layer, built, why, sizeof why);
    if (st != FMOE_STATUS_OK) {
        cli_error("the %s layer: %s", who, why);
        /* A parameter the checkpoint cannot hold is the layer's (config) problem. */
        return st == FMOE_STATUS_UNSUPPORTED ? CLI_EXIT_CONFIG : cli_exit_for_status(st);
    }
    st = fmoe_layer_finalize(layer);
    if (st != FMOE_STATUS_OK) {
        cli_error("finalizing the %s layer: %s", who, fmoe_last_error());
        /* Everything was loaded, so a refusal here is the backend's fault. */
        return st == FMOE_STATUS_OUT_OF_MEMORY || st == FMOE_STATUS_UNSUPPORTED ? cli_exit_for_status(st)
                                                                                : CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

int run_load_layer(fmoe_layer *layer, const char *who, const run_checkpoint *ck)
{
    synth_ckpt *built = NULL;
    int rc = run_build_checkpoint(layer, who, ck, &built);
    if (rc == CLI_EXIT_OK)
        rc = run_load_built(layer, who, built);
    synth_free(built);
    return rc;
}
