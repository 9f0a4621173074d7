/*
 * cli/conform/mode_support.c - `conform --mode support`: the matrix
 * scheme x activation dtype x activation (gated or not) x routing x device
 * of what the plugin claims, and whether its answers hold.
 *
 * For each combination the registry asks the plugin (fmoe_context_explain,
 * which calls its query). A combination it accepts must then create, load,
 * finalize and forward, pinned to it and that device, with every output
 * written; one it refuses must be refused with a reason, and a pinned
 * fmoe_layer_create must fail UNSUPPORTED the same way.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/conform.h"
#include "cli/conform/layers.h"

int cf_plugin_claims_scheme(const cf_plugin *p, const char *key);

#define SUPPORT_M 4

typedef struct combo {
    fmoe_dtype act;
    int32_t activation;
    uint32_t gated;
    int routing; /* 0 softmax top-k, 1 grouped sigmoid + bias (logits), 2 weight on input (k=1) */
} combo;

static const char *const routing_names[] = {"softmax", "grouped-sigmoid-bias", "weight-on-input"};

static void make_config(const cf_scheme *cs, const combo *c, fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = 16;
    cfg->top_k = 2;
    cfg->hidden_size = cs->h_align > 1 ? cs->h_align : 64;
    cfg->intermediate_size = cs->i_align > 1 ? cs->i_align : 32;
    cfg->act_dtype = c->act;
    cfg->activation = c->activation;
    cfg->gated = c->gated;
    cfg->max_num_tokens = 64;
    if (c->activation == FMOE_ACT_SWIGLUOAI)
        cfg->swiglu_limit = 7.0f;
    if (c->routing == 1) {
        cfg->scoring = FMOE_SCORING_SIGMOID;
        cfg->renormalize = 1;
        cfg->grouped_topk = 1;
        cfg->num_expert_group = 4;
        cfg->topk_group = 2;
        cfg->has_correction_bias = 1;
        cfg->routed_scaling_factor = 2.5f;
    } else if (c->routing == 2) {
        cfg->top_k = 1;
        cfg->apply_router_weight_on_input = 1;
    }
}

/* The plugin's verdict for (cfg, scheme) on one device, from the registry. */
static int32_t verdict_for(cf_run *r, const fmoe_layer_config *cfg, const fmoe_scheme *scheme, int32_t kind,
                           int32_t index, char *reason, size_t cap)
{
    fmoe_selection *sel = NULL;
    int32_t v = -1;
    reason[0] = '\0';
    if (fmoe_context_explain(r->ctx, cfg, scheme, &sel) != FMOE_STATUS_OK && !sel) {
        snprintf(reason, cap, "%s", fmoe_last_error());
        return -1;
    }
    for (uint32_t i = 0; sel && i < fmoe_selection_candidate_count(sel); i++) {
        fmoe_candidate c = {.struct_size = sizeof c};
        if (fmoe_selection_candidate(sel, i, &c) != FMOE_STATUS_OK || strcmp(c.plugin, r->plugin->name) != 0)
            continue;
        if (c.device_kind != FMOE_DEVICE_ANY && (c.device_kind != kind || c.device_index != index))
            continue;
        v = c.verdict;
        snprintf(reason, cap, "%s", c.reason ? c.reason : "");
        if (c.device_kind != FMOE_DEVICE_ANY)
            break;
    }
    fmoe_selection_destroy(sel);
    return v;
}

/* Create, load, finalize, forward: CF_PASS when all of it worked,
 * CF_UNSUPPORTED when conform cannot give the layer its tensors, else
 * CF_FAIL; `why` says which. */
static int runs(cf_run *r, const cf_scheme *cs, const fmoe_layer_config *cfg, const fmoe_scheme *scheme, int32_t kind,
                int32_t index, char *why, size_t cap)
{
    fmoe_layer *layer = NULL;
    fmoe_status st = cf_create(r->ctx, cfg, scheme, r->plugin->name, kind, index, &layer);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, cap, "its query accepted, but create failed (%s): %s", fmoe_status_name(st), fmoe_last_error());
        return CF_FAIL;
    }
    if (!cf_layer_fed(layer, why, cap)) {
        fmoe_layer_destroy(layer);
        return CF_UNSUPPORTED;
    }
    cf_inputs in;
    char w2[512];
    int ok = 0;
    if (cf_inputs_make(cfg, SUPPORT_M, r->o->seed, &in, why, cap) != 0) {
        fmoe_layer_destroy(layer);
        return CF_FAIL;
    }
    cf_weights w = {.seed = r->o->seed, .cfg = cfg, .cs = cs, .correction_bias = in.bias, .dead_expert = -1};
    st = cf_load(layer, &w, w2, sizeof w2);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, cap, "its query accepted, but loading/finalize failed (%s): %s", fmoe_status_name(st), w2);
    } else {
        float out[SUPPORT_M * 1024];
        int guard = 1;
        st = cf_forward(layer, cfg, &in, cfg->grouped_topk, out, &guard, w2, sizeof w2);
        if (st != FMOE_STATUS_OK) {
            snprintf(why, cap, "its query accepted, but forward failed (%s): %s", fmoe_status_name(st), w2);
        } else if (!guard) {
            snprintf(why, cap, "forward wrote past the end of out");
        } else {
            ok = 1;
            for (size_t i = 0; i < (size_t)SUPPORT_M * cfg->hidden_size && ok; i++)
                if (!isfinite(out[i])) {
                    snprintf(why, cap, "forward left out[%zu] NaN/inf (unwritten?)", i);
                    ok = 0;
                }
        }
    }
    cf_inputs_free(&in);
    fmoe_layer_destroy(layer);
    return ok ? CF_PASS : CF_FAIL;
}

typedef struct device {
    int32_t kind, index;
} device;

void cf_mode_support(cf_run *r)
{
    device devs[16];
    size_t nd = 0;
    for (uint32_t i = 0; i < fmoe_context_device_count(r->ctx) && nd < 16; i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        if (fmoe_context_device(r->ctx, i, &d) == FMOE_STATUS_OK && strcmp(d.plugin, r->plugin->name) == 0 &&
            d.available)
            devs[nd++] = (device){d.kind, d.index};
    }
    if (nd == 0) {
        if (cf_begin(r, "devices"))
            cf_end(r, CF_UNSUPPORTED, "the plugin reports no available device on this machine");
        return;
    }
    static const fmoe_dtype acts[] = {FMOE_DTYPE_F32, FMOE_DTYPE_BF16, FMOE_DTYPE_F16};
    static const struct {
        int32_t a;
        uint32_t gated;
    } fns[] = {{FMOE_ACT_SILU, 1},      {FMOE_ACT_SILU, 0},      {FMOE_ACT_GELU, 1},  {FMOE_ACT_GELU, 0},
               {FMOE_ACT_GELU_TANH, 1}, {FMOE_ACT_GELU_TANH, 0}, {FMOE_ACT_RELU2, 1}, {FMOE_ACT_RELU2, 0},
               {FMOE_ACT_SWIGLUOAI, 1}, {FMOE_ACT_SWIGLUSTEP, 1}};
    const size_t per = 3 * (sizeof fns / sizeof fns[0]) * 3;
    size_t total = 0;
    for (size_t s = 0; s < cf_n_schemes; s++)
        if (cf_plugin_claims_scheme(r->plugin, cf_schemes[s].key))
            total += per * nd;
    cf_progress_start(r, total);
    for (size_t s = 0; s < cf_n_schemes; s++) {
        const cf_scheme *cs = &cf_schemes[s];
        if (r->o->scheme_glob && fnmatch(r->o->scheme_glob, cs->key, 0) != 0)
            continue;
        if (!cf_plugin_claims_scheme(r->plugin, cs->key))
            continue;
        fmoe_scheme scheme = {.struct_size = sizeof scheme};
        if (fmoe_scheme_parse(cs->key, &scheme) != FMOE_STATUS_OK)
            continue;
        size_t claimed = 0, refused = 0;
        for (size_t d = 0; d < nd; d++)
            for (size_t a = 0; a < 3; a++)
                for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++)
                    for (int rt = 0; rt < 3; rt++) {
                        combo c = {acts[a], fns[f].a, fns[f].gated, rt};
                        char dev[32];
                        cli_device_string(devs[d].kind, devs[d].index, dev, sizeof dev);
                        if (!cf_begin(r, "%s/%s/%s.%s.%s.%s", cs->key, dev, fmoe_dtype_name(c.act),
                                      fmoe_activation_name(c.activation), c.gated ? "gated" : "nongated",
                                      routing_names[rt]))
                            continue;
                        fmoe_layer_config cfg;
                        make_config(cs, &c, &cfg);
                        char reason[512], why[768];
                        int verdict;
                        int32_t v = verdict_for(r, &cfg, &scheme, devs[d].kind, devs[d].index, reason, sizeof reason);
                        if (v == FMOE_VERDICT_SELECTED || v == FMOE_VERDICT_ACCEPTED) {
                            claimed++;
                            if (!cs->store)
                                cf_end(r, CF_UNSUPPORTED, "claimed; the suite cannot synthesize %s weights yet",
                                       cs->key);
                            else if ((verdict = runs(r, cs, &cfg, &scheme, devs[d].kind, devs[d].index, why,
                                                     sizeof why)) == CF_PASS)
                                cf_end(r, CF_PASS, "claimed, and it runs");
                            else
                                cf_end(r, verdict, "%s", why);
                        } else if (v == FMOE_VERDICT_REFUSED) {
                            refused++;
                            fmoe_layer *l = NULL;
                            fmoe_status st = cf_create(r->ctx, &cfg, &scheme, r->plugin->name, devs[d].kind,
                                                       devs[d].index, &l);
                            fmoe_layer_destroy(l);
                            if (!reason[0])
                                cf_end(r, CF_FAIL, "refused without a reason (R8: UNSUPPORTED + reason)");
                            else if (st != FMOE_STATUS_UNSUPPORTED)
                                cf_end(r, CF_FAIL, "its query refused (%s), but a pinned create returned %s", reason,
                                       fmoe_status_name(st));
                            else
                                cf_end(r, CF_PASS, "refused: %s", reason);
                        } else if (v == FMOE_VERDICT_ERROR) {
                            cf_end(r, CF_FAIL, "its query failed: %s", reason);
                        } else {
                            cf_end(r, CF_UNSUPPORTED, "not a candidate here (%s)", reason[0] ? reason : "no verdict");
                        }
                    }
        if (r->o->verbose)
            printf("support: %s %s: %zu combinations claimed, %zu refused\n", r->plugin->name, cs->key, claimed,
                   refused);
    }
}
