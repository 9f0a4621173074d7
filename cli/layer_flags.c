/*
 * cli/layer_flags.c - layer-config flags (see layer_flags.h).
 *
 * One table drives parsing and --help, so a flag cannot be documented
 * without being accepted or the other way round.
 */
#include "cli/layer_flags.h"

#include <stddef.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"

typedef enum flag_kind {
    KIND_U32,        /* uint32_t field = N */
    KIND_F32,        /* float field = X */
    KIND_SET,        /* uint32_t field = 1 */
    KIND_CLEAR,      /* uint32_t field = 0 */
    KIND_GROUPS,     /* num_expert_group = G and grouped_topk = 1 */
    KIND_ACTIVATION, /* int32_t field = fmoe_activation_from_name */
    KIND_DTYPE,      /* fmoe_dtype field = fmoe_dtype_from_name */
    KIND_SCORING,    /* int32_t field = fmoe_scoring_from_name */
    KIND_PLACEMENT,  /* int32_t field = linear | round_robin */
} flag_kind;

typedef struct layer_flag {
    const char *name;
    flag_kind kind;
    size_t offset;
    const char *metavar; /* NULL for flags without a value */
    const char *help;
} layer_flag;

#define F(field) offsetof(fmoe_layer_config, field)

static const layer_flag flags[] = {
    {"--experts", KIND_U32, F(num_experts), "N", "logical experts (default 8)"},
    {"--top-k", KIND_U32, F(top_k), "K", "experts per token (default 2)"},
    {"--hidden", KIND_U32, F(hidden_size), "H", "hidden size (default 256)"},
    {"--intermediate", KIND_U32, F(intermediate_size), "I", "intermediate size before TP split (default 512)"},
    {"--activation", KIND_ACTIVATION, F(activation), "NAME",
     "silu, gelu, gelu_tanh, relu2, swigluoai, swiglustep (default silu)"},
    {"--no-gated", KIND_CLEAR, F(gated), NULL, "w13 has I rows and no gate (default gated)"},
    {"--bias", KIND_SET, F(has_bias), NULL, "w13 and w2 have biases"},
    {"--swiglu-alpha", KIND_F32, F(swiglu_alpha), "X", "swigluoai alpha (default 1.702)"},
    {"--swiglu-limit", KIND_F32, F(swiglu_limit), "X", "clamp limit; 0 = none (default 0)"},
    {"--dtype", KIND_DTYPE, F(act_dtype), "T", "activation dtype: f32, bf16, f16 (default bf16)"},
    {"--scoring", KIND_SCORING, F(scoring), "S", "softmax, sigmoid, sqrtsoftplus (default softmax)"},
    {"--renormalize", KIND_SET, F(renormalize), NULL, "divide the top-k weights by their sum"},
    {"--groups", KIND_GROUPS, F(num_expert_group), "G", "grouped top-k over G expert groups"},
    {"--topk-group", KIND_U32, F(topk_group), "T", "groups kept by grouped top-k"},
    {"--correction-bias", KIND_SET, F(has_correction_bias), NULL, "e_score_correction_bias for selection"},
    {"--scaling-factor", KIND_F32, F(routed_scaling_factor), "X", "multiplies the routing weights (default 1)"},
    {"--weight-on-input", KIND_SET, F(apply_router_weight_on_input), NULL, "apply the routing weight to x (top-k 1)"},
    {"--tp", KIND_U32, F(tp_size), "N", "tensor-parallel size (default 1)"},
    {"--tp-rank", KIND_U32, F(tp_rank), "R", "tensor-parallel rank (default 0)"},
    {"--ep", KIND_U32, F(ep_size), "N", "expert-parallel size (default 1)"},
    {"--ep-rank", KIND_U32, F(ep_rank), "R", "expert-parallel rank (default 0)"},
    {"--placement", KIND_PLACEMENT, F(placement), "P", "expert placement: linear, round_robin (default linear)"},
    {"--eplb", KIND_SET, F(enable_eplb), NULL, "enable EPLB (redundant expert replicas)"},
    {"--redundant", KIND_U32, F(num_redundant_experts), "N", "redundant experts, with --eplb (default 0)"},
    {"--max-tokens", KIND_U32, F(max_num_tokens), "N", "largest forward in tokens (default 8192)"},
};

#undef F

void layer_flags_defaults(fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = 8;
    cfg->top_k = 2;
    cfg->hidden_size = 256;
    cfg->intermediate_size = 512;
}

void layer_flags_help(FILE *f)
{
    fputs("Layer flags:\n", f);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char left[40];
        snprintf(left, sizeof left, "%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
                 flags[i].metavar ? flags[i].metavar : "");
        fprintf(f, "  %-22s %s\n", left, flags[i].help);
    }
}

static int bad_value(const char *cmd, const layer_flag *fl, const char *value, const char *expected)
{
    return cli_usage(cmd, "%s: invalid value '%s' (expected %s)", fl->name, value, expected), LAYER_FLAG_BAD;
}

static int apply(fmoe_layer_config *cfg, const char *cmd, const layer_flag *fl, const char *value)
{
    char *field = (char *)cfg + fl->offset;
    uint32_t u = 0;
    float x = 0;
    int32_t e = 0;
    switch (fl->kind) {
    case KIND_U32:
    case KIND_GROUPS:
        if (cli_parse_u32(value, &u) != 0)
            return bad_value(cmd, fl, value, "a whole number from 0 to 4294967295");
        memcpy(field, &u, sizeof u);
        if (fl->kind == KIND_GROUPS)
            cfg->grouped_topk = 1;
        return LAYER_FLAG_TAKEN;
    case KIND_F32:
        if (cli_parse_float(value, &x) != 0)
            return bad_value(cmd, fl, value, "a finite number");
        memcpy(field, &x, sizeof x);
        return LAYER_FLAG_TAKEN;
    case KIND_ACTIVATION:
        if ((e = fmoe_activation_from_name(value)) == FMOE_ACT_INVALID)
            return bad_value(cmd, fl, value, "silu, gelu, gelu_tanh, relu2, swigluoai or swiglustep");
        break;
    case KIND_DTYPE:
        /* Any dtype name parses; fmoe_layer_config_validate says which ones
         * an activation may have. */
        if ((e = fmoe_dtype_from_name(value)) == FMOE_DTYPE_INVALID)
            return bad_value(cmd, fl, value, "f32, bf16 or f16");
        break;
    case KIND_SCORING:
        if ((e = fmoe_scoring_from_name(value)) == FMOE_SCORING_INVALID)
            return bad_value(cmd, fl, value, "softmax, sigmoid or sqrtsoftplus");
        break;
    case KIND_PLACEMENT:
        if (strcmp(value, "linear") == 0)
            e = FMOE_PLACEMENT_LINEAR;
        else if (strcmp(value, "round_robin") == 0)
            e = FMOE_PLACEMENT_ROUND_ROBIN;
        else
            return bad_value(cmd, fl, value, "linear or round_robin");
        break;
    case KIND_SET:
    case KIND_CLEAR:
        return LAYER_FLAG_BAD; /* not reached: these take no value */
    }
    memcpy(field, &e, sizeof e);
    return LAYER_FLAG_TAKEN;
}

int layer_flags_parse(fmoe_layer_config *cfg, const char *cmd, int argc, char **argv, int *i)
{
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        const layer_flag *fl = &flags[k];
        if (!fl->metavar) {
            if (!cli_opt_flag(argv[*i], fl->name))
                continue;
            uint32_t v = fl->kind == KIND_SET;
            memcpy((char *)cfg + fl->offset, &v, sizeof v);
            return LAYER_FLAG_TAKEN;
        }
        const char *value = NULL;
        int r = cli_opt_value(argc, argv, i, fl->name, &value);
        if (r == CLI_OPT_NO)
            continue;
        if (r == CLI_OPT_MISSING)
            return cli_usage(cmd, "%s needs a value (%s)", fl->name, fl->metavar), LAYER_FLAG_BAD;
        return apply(cfg, cmd, fl, value);
    }
    return LAYER_FLAG_NOT_MINE;
}

int layer_flags_validate(const fmoe_layer_config *cfg)
{
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st == FMOE_STATUS_OK)
        return CLI_EXIT_OK;
    return cli_fail(st, NULL); /* the library names the field */
}
