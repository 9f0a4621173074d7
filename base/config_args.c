/* base/config_args.c - layer config -> CLI flags (see config_args.h). */
#include "base/config_args.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"

static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n < cap - *len ? (size_t)n : cap - *len - 1;
}

void fmoe_layer_config_format_args(const fmoe_layer_config *c, char *buf, size_t cap)
{
    fmoe_layer_config d;
    fmoe_layer_config_init(&d);
    size_t len = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    add(buf, cap, &len, "--experts %u --top-k %u --hidden %u --intermediate %u", c->num_experts, c->top_k,
        c->hidden_size, c->intermediate_size);
    if (c->activation != d.activation)
        add(buf, cap, &len, " --activation %s", fmoe_activation_name(c->activation));
    if (!c->gated)
        add(buf, cap, &len, " --no-gated");
    if (c->has_bias)
        add(buf, cap, &len, " --bias");
    if (c->swiglu_alpha != d.swiglu_alpha)
        add(buf, cap, &len, " --swiglu-alpha %.9g", (double)c->swiglu_alpha);
    if (c->swiglu_limit != d.swiglu_limit)
        add(buf, cap, &len, " --swiglu-limit %.9g", (double)c->swiglu_limit);
    if (c->act_dtype != d.act_dtype)
        add(buf, cap, &len, " --dtype %s", fmoe_dtype_name(c->act_dtype));
    if (c->scoring != d.scoring)
        add(buf, cap, &len, " --scoring %s", fmoe_scoring_name(c->scoring));
    if (c->renormalize)
        add(buf, cap, &len, " --renormalize");
    if (c->grouped_topk)
        add(buf, cap, &len, " --groups %u --topk-group %u", c->num_expert_group, c->topk_group);
    if (c->has_correction_bias)
        add(buf, cap, &len, " --correction-bias");
    if (c->routed_scaling_factor != d.routed_scaling_factor)
        add(buf, cap, &len, " --scaling-factor %.9g", (double)c->routed_scaling_factor);
    if (c->apply_router_weight_on_input)
        add(buf, cap, &len, " --weight-on-input");
    if (c->tp_size != 1 || c->tp_rank != 0)
        add(buf, cap, &len, " --tp %u --tp-rank %u", c->tp_size, c->tp_rank);
    if (c->ep_size != 1 || c->ep_rank != 0)
        add(buf, cap, &len, " --ep %u --ep-rank %u", c->ep_size, c->ep_rank);
    if (c->placement != d.placement)
        add(buf, cap, &len, " --placement %s", c->placement == FMOE_PLACEMENT_ROUND_ROBIN ? "round_robin" : "linear");
    if (c->enable_eplb)
        add(buf, cap, &len, " --eplb --redundant %u", c->num_redundant_experts);
    if (c->max_num_tokens != d.max_num_tokens)
        add(buf, cap, &len, " --max-tokens %u", c->max_num_tokens);
}
