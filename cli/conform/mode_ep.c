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
 *   linear.hot.m0 the same on a linear placement (for plugins that place
 *                 experts in contiguous ranges only, such as megamoe)
 *   eplb          EPLB replicas (6 logical + 2 redundant experts)
 *   fp8_token     FP8 per-token dispatch; both sides get the tokens as the
 *                 dispatch carries them (FP8 dispatch quantizes activations)
 *
 * each in both modes of the group: low latency (ids as above) and high
 * throughput (the same ids with ".ht": the plugin may apply its method to
 * the received rows only). Every case also checks the expert load record:
 * the ranks' records, summed, must equal the count of the routing's slots
 * per physical expert (after the checked forward, and again after the CUDA
 * graph replays where the plugin replays: a whole multiple of it). A plugin
 * that does not keep the record for device routing (UNSUPPORTED) passes,
 * and the case says so. A high-throughput group on a device waits on the
 * host, so each rank also tries to capture its forward in a graph: the
 * capture must be refused with a reason naming high_throughput, else the
 * case fails.
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
    int32_t mode;
} ep_variant;

#define LL FMOE_EP_MODE_LOW_LATENCY
#define HT FMOE_EP_MODE_HIGH_THROUGHPUT
static const ep_variant variants[] = {
    {"linear", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_ACTIVATION, LL},
    {"rr.hot.m0", FMOE_PLACEMENT_ROUND_ROBIN, 1, 1, 0, FMOE_EP_DISPATCH_ACTIVATION, LL},
    {"linear.hot.m0", FMOE_PLACEMENT_LINEAR, 1, 1, 0, FMOE_EP_DISPATCH_ACTIVATION, LL},
    {"eplb", FMOE_PLACEMENT_LINEAR, 0, 0, 1, FMOE_EP_DISPATCH_ACTIVATION, LL},
    {"fp8_token", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_FP8_TOKEN, LL},
    {"linear.ht", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_ACTIVATION, HT},
    {"rr.hot.m0.ht", FMOE_PLACEMENT_ROUND_ROBIN, 1, 1, 0, FMOE_EP_DISPATCH_ACTIVATION, HT},
    {"linear.hot.m0.ht", FMOE_PLACEMENT_LINEAR, 1, 1, 0, FMOE_EP_DISPATCH_ACTIVATION, HT},
    {"eplb.ht", FMOE_PLACEMENT_LINEAR, 0, 0, 1, FMOE_EP_DISPATCH_ACTIVATION, HT},
    {"fp8_token.ht", FMOE_PLACEMENT_LINEAR, 0, 0, 0, FMOE_EP_DISPATCH_FP8_TOKEN, HT},
};
#undef LL
#undef HT

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

/* The ranks' load records against the routing: 0 with what was checked
 * in `said`, or -1 with why. */
static int check_load(const fmoe_layer_config *cfg, const cf_inputs *in, uint32_t total, const ep_rank_result *res,
                      uint32_t n, char *said, size_t cap)
{
    const uint32_t g = fmoe_layer_config_global_experts(cfg);
    uint64_t want[64] = {0}, got[64] = {0}, replayed[64] = {0};
    if (g > 64) {
        snprintf(said, cap, "%u experts: the load check holds 64", g);
        return -1;
    }
    for (uint64_t i = 0; i < (uint64_t)total * cfg->top_k; i++)
        if (in->topk_ids[i] >= 0 && (uint32_t)in->topk_ids[i] < g)
            want[in->topk_ids[i]]++;
    int replays = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (!res[i].load) {
            if (res[i].load_status == FMOE_STATUS_UNSUPPORTED) {
                snprintf(said, cap, "; the load record is not kept for this routing (UNSUPPORTED)");
                return 0;
            }
            snprintf(said, cap, "rank %u's load record could not be read (%s)", i,
                     fmoe_status_name(res[i].load_status));
            return -1;
        }
        replays &= res[i].load_replayed != NULL;
        for (uint32_t e = 0; e < g; e++) {
            got[e] += res[i].load[e];
            replayed[e] += res[i].load_replayed ? res[i].load_replayed[e] : 0;
        }
    }
    for (uint32_t e = 0; e < g; e++)
        if (got[e] != want[e]) {
            snprintf(said, cap,
                     "load record: physical expert %u got %llu slots over the ranks, the routing sends it %llu", e,
                     (unsigned long long)got[e], (unsigned long long)want[e]);
            return -1;
        }
    if (!replays) {
        snprintf(said, cap, "; load record equal to the routing's");
        return 0;
    }
    /* The replays ran the same forward q times: each expert's count is q
     * times its share, for one q >= 1. */
    uint64_t q = 0;
    for (uint32_t e = 0; e < g && !q; e++)
        if (want[e])
            q = replayed[e] / want[e];
    for (uint32_t e = 0; e < g; e++)
        if (q == 0 || replayed[e] != q * want[e]) {
            snprintf(said, cap,
                     "load record after the graph replays: physical expert %u has %llu slots, not a multiple q >= 1 "
                     "(q = %llu) of the %llu one forward sends it",
                     e, (unsigned long long)replayed[e], (unsigned long long)q, (unsigned long long)want[e]);
            return -1;
        }
    snprintf(said, cap, "; load record equal to the routing's, and %llu times it after the graph replays",
             (unsigned long long)q);
    return 0;
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
                    .mode = v->mode,
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
    char load[512];
    if (!cf_compare(got, expect, total, cfg.hidden_size, NULL, &tol, why, sizeof why))
        set(o, CF_FAIL, "%u ranks vs one device: %s", n, why);
    else if (check_load(&cfg, &in, total, res, n, load, sizeof load) != 0)
        set(o, CF_FAIL, "%u ranks: %s", n, load);
    else {
        uint32_t lo = m[0], hi = m[0];
        for (uint32_t i = 1; i < n; i++) {
            lo = m[i] < lo ? m[i] : lo;
            hi = m[i] > hi ? m[i] : hi;
        }
        set(o, CF_PASS, "%u ranks (tokens %u..%u per rank, %s) equal one device%s%s", n, lo, hi,
            fmoe_ep_mode_name(v->mode), load,
            res[0].capture_refused ? "; graph capture refused on every rank, naming the mode" : "");
    }
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
