/*
 * cli/conform/mode_ep.c - `conform --mode ep`: a plugin that serves
 * expert parallelism (plugin ABI 1.3 fmoe_ep_ops, docs/EP.md) must give the
 * same output on N ranks as on one. For every scheme the plugin claims and
 * N = 2 and 4 ranks (threads of this process, on N devices of the plugin or
 * on the host), the same synthetic checkpoint and tokens go to the plugin's
 * single-device layer and to its N-rank layers; the ranks' outputs must
 * match the single-device one within the scheme's tolerance (docs/
 * CONFORMANCE.md). Variants:
 *
 *   linear        linear placement, every rank with tokens
 *   rr.hot.m0     round-robin placement, every token's first slot on expert
 *                 0 (one hot expert), and M = 0 on every odd rank
 *   eplb          EPLB replicas (6 logical + 2 redundant experts)
 *   fp8_token     FP8 per-token dispatch; both sides get the tokens as the
 *                 dispatch carries them (FP8 dispatch quantizes activations)
 *
 * Schemes with per-tensor activation scales are UNSUPPORTED here: their
 * scale is the max over the rank's local experts (static) or the amax of
 * its batch (dynamic), so an EP rank computes another function than one
 * device does, by definition (as in vLLM).
 *
 * Case ids: ep/<scheme>/n<N>.<variant>. A plugin without EP gets one
 * UNSUPPORTED case, ep/none.
 */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/conform.h"
#include "cli/conform/layers.h"
#include "cli/ep_ranks.h"
#include "cli/halfconv.h"

int cf_plugin_claims_scheme(const cf_plugin *p, const char *key);

#define EP_H 128
#define EP_I 128

typedef struct ep_variant {
    const char *name;
    int32_t placement;
    int hot, m0, eplb;
    int32_t dispatch;
} ep_variant;

static const ep_variant variants[] = {
    {"linear", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_ACTIVATION},
    {"rr.hot.m0", FMOE_PLACEMENT_ROUND_ROBIN, 1, 1, 0, FMOE_EP_DISPATCH_ACTIVATION},
    {"eplb", FMOE_PLACEMENT_LINEAR, 0, 0, 1, FMOE_EP_DISPATCH_ACTIVATION},
    {"fp8_token", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_FP8_TOKEN},
};

static const uint32_t rank_counts[] = {2, 4};

typedef struct outcome {
    int status;
    char why[1024];
} outcome;

static void set(outcome *o, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set(outcome *o, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    o->status = status;
    vsnprintf(o->why, sizeof o->why, fmt, ap);
    va_end(ap);
}

static void layer_for(const ep_variant *v, const cf_scheme *cs, fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = v->eplb ? 6 : 8;
    cfg->num_redundant_experts = v->eplb ? 2 : 0;
    cfg->enable_eplb = v->eplb ? 1 : 0;
    cfg->top_k = 2;
    cfg->hidden_size = EP_H;
    cfg->intermediate_size = EP_I;
    cfg->act_dtype = cs->act_dtype;
    cfg->placement = v->placement;
    cfg->max_num_tokens = 64;
}

/* Every token's slot 0 on expert 0, keeping the ids of a token distinct. */
static void make_hot(cf_inputs *in, uint32_t k)
{
    for (int64_t t = 0; t < in->m; t++) {
        int32_t *ids = in->topk_ids + t * k;
        for (uint32_t j = 1; j < k; j++)
            if (ids[j] == 0)
                ids[j] = ids[0];
        ids[0] = 0;
    }
}

static void run_case(cf_run *r, const cf_scheme *cs, const fmoe_scheme *scheme, const ep_variant *v, uint32_t n,
                     outcome *o)
{
    const char *plugin = r->plugin->name;
    fmoe_layer_config cfg;
    layer_for(v, cs, &cfg);
    int32_t kind, base;
    char why[1024];
    if (ep_devices_for(r->ctx, plugin, n, &kind, &base, why, sizeof why) != 0) {
        set(o, CF_UNSUPPORTED, "%s", why);
        return;
    }
    uint32_t m[4], total = 0;
    for (uint32_t i = 0; i < n; i++) {
        m[i] = v->m0 && i % 2 ? 0 : 3 + 2 * i;
        total += m[i];
    }
    cf_inputs in = {0};
    synth_ckpt *built = NULL;
    fmoe_layer *one = NULL;
    float *expect = NULL, *got = NULL;
    void *out = NULL;
    ep_rank_result res[4];
    int ran = 0;
    cf_weights w = {.seed = r->o->seed, .cfg = &cfg, .cs = cs, .dead_expert = -1};
    if (cf_inputs_make(&cfg, total, r->o->seed, &in, why, sizeof why) != 0) {
        set(o, CF_FAIL, "%s", why);
        goto done;
    }
    w.correction_bias = in.bias;
    if (v->hot)
        make_hot(&in, cfg.top_k);
    if (ep_round_through_dispatch(cfg.act_dtype, v->dispatch, in.x, total, cfg.hidden_size) != 0) {
        set(o, CF_FAIL, "out of memory");
        goto done;
    }
    fmoe_status st = cf_build(&w, &built, why, sizeof why);
    if (st != FMOE_STATUS_OK) {
        set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "%s", why);
        goto done;
    }
    /* The plugin on one device: what the ranks must reproduce. */
    st = cf_create(r->ctx, &cfg, scheme, plugin, base < 0 ? FMOE_DEVICE_ANY : kind, base < 0 ? -1 : 0, &one);
    if (st != FMOE_STATUS_OK) {
        set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "one device: %s", fmoe_last_error());
        goto done;
    }
    size_t elems = (size_t)total * cfg.hidden_size;
    expect = malloc((elems + 1) * sizeof *expect);
    got = malloc((elems + 1) * sizeof *got);
    out = malloc((elems + 1) * sizeof(float));
    int guard = 1;
    if (!expect || !got || !out) {
        set(o, CF_FAIL, "out of memory");
        goto done;
    }
    if ((st = cf_load_built(one, built, why, sizeof why)) != FMOE_STATUS_OK ||
        (st = cf_forward(one, &cfg, &in, 0, expect, &guard, why, sizeof why)) != FMOE_STATUS_OK) {
        set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "one device: %s", why);
        goto done;
    }
    fmoe_ep_group_options io;
    fmoe_ep_group_options_init(&io);
    io.backend = plugin;
    fmoe_ep_unique_id id;
    if ((st = fmoe_ep_unique_id_make(r->ctx, &io, &id)) != FMOE_STATUS_OK) {
        set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "unique id: %s", fmoe_last_error());
        goto done;
    }
    ep_plan plan = {.ctx = r->ctx,
                    .cfg = &cfg,
                    .scheme = scheme,
                    .backend = plugin,
                    .size = n,
                    .first = 0,
                    .count = n,
                    .max_tokens = 16,
                    .m = m,
                    .dispatch = v->dispatch,
                    .mode = FMOE_EP_MODE_LOW_LATENCY,
                    .id = &id,
                    .device_kind = kind,
                    .device_base = base,
                    .built = built,
                    .x = in.x,
                    .topk_w = in.topk_w,
                    .topk_ids = in.topk_ids,
                    .out = out,
                    .timed = 0};
    ran = 1;
    if (ep_ranks_run(&plan, res) != 0) {
        for (uint32_t i = 0; i < n; i++)
            if (res[i].status != FMOE_STATUS_OK) {
                set(o, res[i].status == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "rank %u: %s", i,
                    res[i].error);
                break;
            }
        goto done;
    }
    cli_load_floats(cfg.act_dtype, got, out, elems);
    cf_tolerance tol = cf_tolerance_for(cs, cfg.act_dtype);
    if (!cf_compare(got, expect, total, cfg.hidden_size, NULL, &tol, why, sizeof why))
        set(o, CF_FAIL, "%u ranks vs one device: %s", n, why);
    else
        set(o, CF_PASS, "%u ranks (tokens %u..%u per rank) equal one device", n, m[1], m[n - 1]);
done:
    if (ran)
        ep_ranks_free(res, n);
    fmoe_layer_destroy(one);
    synth_free(built);
    cf_inputs_free(&in);
    free(expect);
    free(got);
    free(out);
}

void cf_mode_ep(cf_run *r)
{
    const char *plugin = r->plugin->name;
    fmoe_ep_group_options io;
    fmoe_ep_group_options_init(&io);
    io.backend = plugin;
    fmoe_ep_unique_id id;
    if (fmoe_ep_unique_id_make(r->ctx, &io, &id) != FMOE_STATUS_OK) {
        if (cf_begin(r, "none"))
            cf_end(r, CF_UNSUPPORTED, "no expert parallelism: %s", fmoe_last_error());
        return;
    }
    size_t total = 0;
    for (size_t i = 0; i < cf_n_schemes; i++)
        if ((!r->o->scheme_glob || fnmatch(r->o->scheme_glob, cf_schemes[i].key, 0) == 0) &&
            cf_plugin_claims_scheme(r->plugin, cf_schemes[i].key))
            total += sizeof rank_counts / sizeof rank_counts[0] * (sizeof variants / sizeof variants[0]);
    cf_progress_start(r, total);
    for (size_t i = 0; i < cf_n_schemes; i++) {
        const cf_scheme *cs = &cf_schemes[i];
        if ((r->o->scheme_glob && fnmatch(r->o->scheme_glob, cs->key, 0) != 0) ||
            !cf_plugin_claims_scheme(r->plugin, cs->key))
            continue;
        fmoe_scheme scheme = {.struct_size = sizeof scheme};
        if (fmoe_scheme_parse(cs->key, &scheme) != FMOE_STATUS_OK)
            continue;
        for (size_t ni = 0; ni < sizeof rank_counts / sizeof rank_counts[0]; ni++)
            for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
                if (!cf_begin(r, "%s/n%u.%s", cs->key, rank_counts[ni], variants[vi].name))
                    continue;
                outcome o = {0};
                if (!cs->store)
                    set(&o, CF_UNSUPPORTED, "the suite has no weight generator for this scheme yet");
                else if (scheme.a_strategy == FMOE_QSTRATEGY_TENSOR)
                    set(&o, CF_UNSUPPORTED,
                        "per-tensor activation scales depend on the rank: the max over its local experts' "
                        "static scales, or the amax of its batch (docs/EP.md), so N ranks need not equal one "
                        "device");
                else
                    run_case(r, cs, &scheme, &variants[vi], rank_counts[ni], &o);
                cf_end(r, o.status, "%s", o.why);
            }
    }
}
