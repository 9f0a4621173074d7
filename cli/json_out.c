/* cli/json_out.c - JSON output (see json_out.h). */
#include "cli/json_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_args.h"
#include "cli/cli.h"

json_t *cli_json_string(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    /* Invalid UTF-8: keep ASCII, replace every other byte. */
    size_t n = strlen(s);
    char *copy = malloc(n + 1);
    if (!copy)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        copy[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    j = json_string(copy);
    free(copy);
    return j;
}

void cli_json_set(json_t *obj, const char *key, json_t *value)
{
    if (obj && value)
        json_object_set_new(obj, key, value);
}

json_t *cli_json_float(float v)
{
    if (!isfinite(v))
        return json_null();
    /* The shortest decimal that reads back as the same float, so 1.702f
     * prints as 1.702 rather than its double expansion 1.7020000219... */
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    return json_real(strtod(buf, NULL));
}

json_t *cli_layer_json(const fmoe_layer_config *c)
{
    char args[1024];
    fmoe_layer_config_format_args(c, args, sizeof args);
    json_t *o = json_object();
    if (!o)
        return NULL;
    cli_json_set(o, "args", json_string(args));
    cli_json_set(o, "num_experts", json_integer(c->num_experts));
    cli_json_set(o, "num_redundant_experts", json_integer(c->num_redundant_experts));
    cli_json_set(o, "top_k", json_integer(c->top_k));
    cli_json_set(o, "hidden_size", json_integer(c->hidden_size));
    cli_json_set(o, "intermediate_size", json_integer(c->intermediate_size));
    cli_json_set(o, "activation", json_string(fmoe_activation_name(c->activation)));
    cli_json_set(o, "gated", json_boolean(c->gated));
    cli_json_set(o, "has_bias", json_boolean(c->has_bias));
    cli_json_set(o, "swiglu_alpha", cli_json_float(c->swiglu_alpha));
    cli_json_set(o, "swiglu_limit", cli_json_float(c->swiglu_limit));
    cli_json_set(o, "act_dtype", json_string(fmoe_dtype_name(c->act_dtype)));
    cli_json_set(o, "scoring", json_string(fmoe_scoring_name(c->scoring)));
    cli_json_set(o, "renormalize", json_boolean(c->renormalize));
    cli_json_set(o, "grouped_topk", json_boolean(c->grouped_topk));
    cli_json_set(o, "num_expert_group", json_integer(c->num_expert_group));
    cli_json_set(o, "topk_group", json_integer(c->topk_group));
    cli_json_set(o, "has_correction_bias", json_boolean(c->has_correction_bias));
    cli_json_set(o, "routed_scaling_factor", cli_json_float(c->routed_scaling_factor));
    cli_json_set(o, "apply_router_weight_on_input", json_boolean(c->apply_router_weight_on_input));
    cli_json_set(o, "tp_size", json_integer(c->tp_size));
    cli_json_set(o, "tp_rank", json_integer(c->tp_rank));
    cli_json_set(o, "ep_size", json_integer(c->ep_size));
    cli_json_set(o, "ep_rank", json_integer(c->ep_rank));
    cli_json_set(o, "placement",
                 json_string(c->placement == FMOE_PLACEMENT_ROUND_ROBIN ? "round_robin"
                             : c->placement == FMOE_PLACEMENT_LINEAR    ? "linear"
                                                                        : "invalid"));
    cli_json_set(o, "enable_eplb", json_boolean(c->enable_eplb));
    cli_json_set(o, "max_num_tokens", json_integer(c->max_num_tokens));
    return o;
}

int cli_json_print(json_t *root)
{
    if (!root) {
        cli_error("out of memory building the JSON output");
        return CLI_EXIT_INTERNAL;
    }
    int rc = json_dumpf(root, stdout, JSON_INDENT(2));
    json_decref(root);
    if (rc != 0 || fputc('\n', stdout) == EOF) {
        cli_error("cannot write the JSON output");
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}
