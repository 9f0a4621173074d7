/*
 * base/layer_config_init.c - the defaults of fmoe_layer_config. In base/
 * because every layer reads them: core validates against them, the registry
 * spells a config as flags that differ from them (base/config_args.c).
 * Infallible: never touches the error text (fusedmoe.h).
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"

/* The values fusedmoe.h documents for fmoe_layer_config_init (1.702: the
 * swiglu alpha of gpt-oss, docs/ROUTING.md). */
#define DEFAULT_SWIGLU_ALPHA   1.702f
#define DEFAULT_MAX_NUM_TOKENS 8192u

FMOE_API void fmoe_layer_config_init(fmoe_layer_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->activation = FMOE_ACT_SILU;
    cfg->gated = 1;
    cfg->swiglu_alpha = DEFAULT_SWIGLU_ALPHA;
    cfg->swiglu_limit = 0.0f;
    cfg->act_dtype = FMOE_DTYPE_BF16;
    cfg->scoring = FMOE_SCORING_SOFTMAX;
    cfg->routed_scaling_factor = 1.0f;
    cfg->tp_size = 1;
    cfg->ep_size = 1;
    cfg->placement = FMOE_PLACEMENT_LINEAR;
    cfg->max_num_tokens = DEFAULT_MAX_NUM_TOKENS;
}
