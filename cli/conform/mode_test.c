/*
 * cli/conform/mode_test.c - `conform --mode test`: every scheme the plugin
 * claims, against the reference plugin through the same public API, on a
 * grid of shapes, routings and edge cases (docs/CONFORMANCE.md, "test").
 *
 * Case ids are test/<scheme>/<variant>:<shape>, the shape spelled in full
 * (m16.e8.k2.h128.i64.silu.gated) so one id never is a substring of another.
 * The default grid varies one axis at a time around a base layer and adds
 * the regression cases of spec/testing.md §6; --exhaustive adds the full
 * product M x E x k x (H,I) x gated x bias.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/conform.h"
#include "cli/conform/layers.h"

/* What a case does besides a plain top-k forward. */
enum {
    K_PLAIN,   /* top-k routing given */
    K_LOGITS,  /* router logits given: the plugin (or the core) routes */
    K_EP_SUM,  /* `shards` EP ranks; their outputs sum to the unsharded output */
    K_TP_SUM,  /* `shards` TP ranks; likewise */
    K_SKEW,    /* every token's first slot on the last expert */
    K_DUP_IDS, /* the same expert twice in a row (NaN-logit routers, #6) */
    K_BAD_IDS, /* ids 123456789 and -1 in topk_ids contribute 0 (#7, #8) */
    K_NAN_ROW, /* NaN and inf in one row must not spread to other rows */
    K_DEAD,    /* one expert with weights ~1e-23 (#4): finite, near zero */
    K_REPEAT,  /* two forwards give identical bytes */
};

typedef struct tcase {
    char name[160];
    fmoe_layer_config cfg;
    int64_t m;
    int kind;
    uint32_t shards;
} tcase;

typedef struct grid {
    tcase *c;
    size_t n, cap;
} grid;

static void shape_name(const fmoe_layer_config *c, int64_t m, char *buf, size_t cap)
{
    snprintf(buf, cap, "m%lld.e%u.k%u.h%u.i%u.%s.%s%s", (long long)m, c->num_experts, c->top_k, c->hidden_size,
             c->intermediate_size, fmoe_activation_name(c->activation), c->gated ? "gated" : "nongated",
             c->has_bias ? ".bias" : "");
}

static void add(grid *g, const char *variant, const fmoe_layer_config *cfg, int64_t m, int kind, uint32_t shards)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 64;
        tcase *n = realloc(g->c, nc * sizeof *n);
        if (!n)
            return;
        g->c = n;
        g->cap = nc;
    }
    tcase *t = &g->c[g->n];
    char shape[96];
    t->cfg = *cfg;
    if (t->cfg.max_num_tokens < m)
        t->cfg.max_num_tokens = (uint32_t)m;
    shape_name(cfg, m, shape, sizeof shape);
    snprintf(t->name, sizeof t->name, "%s:%s", variant, shape);
    t->m = m;
    t->kind = kind;
    t->shards = shards;
    if (fmoe_layer_config_validate(&t->cfg) == FMOE_STATUS_OK)
        g->n++;
}

/* v rounded up to a multiple of a. */
static uint32_t round_up(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a * a;
}

static fmoe_layer_config base_config(const cf_scheme *cs)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = 8;
    c.top_k = 2;
    c.hidden_size = round_up(128, cs->h_align);
    c.intermediate_size = round_up(64, cs->i_align);
    c.act_dtype = cs->act_dtype;
    c.max_num_tokens = 1024;
    return c;
}

/* Whether the scheme quantizes activations with one dynamic scale per
 * tensor (the amax of the whole GEMM input). */
static int dynamic_tensor_scale(const cf_scheme *cs)
{
    fmoe_scheme s = {.struct_size = sizeof s};
    return fmoe_scheme_parse(cs->key, &s) == FMOE_STATUS_OK && s.a_strategy == FMOE_QSTRATEGY_TENSOR && s.a_dynamic;
}

/* Whether the scheme quantizes weights or activations. */
static int quantized(const cf_scheme *cs)
{
    fmoe_scheme s = {.struct_size = sizeof s};
    return fmoe_scheme_parse(cs->key, &s) == FMOE_STATUS_OK &&
           (s.w_strategy != FMOE_QSTRATEGY_NONE || s.a_strategy != FMOE_QSTRATEGY_NONE);
}

/*
 * The default grid of a quantized scheme leaves out, to --exhaustive, the
 * variants that exercise the core's routing and activation math rather than
 * the quantized path (that math is the same code for every scheme and is
 * covered by the unquantized entries): four of the six activations (it
 * keeps silu, non-gated gelu and gated swigluoai, whose clamp and +1 shift
 * move the GEMM2 input range), four of the six logit routings, the second
 * skew, ep-sum4 and e64; and e256 where the scheme's small layer is 128 x 128
 * (e257 stays). Everything else - tokens, sizes, top-k, bias, EP/TP/EPLB,
 * the regression cases - runs for every scheme.
 */
static void build_grid(const cf_scheme *cs, int exhaustive, grid *g)
{
    const fmoe_layer_config base = base_config(cs);
    fmoe_layer_config c;
    const int full = exhaustive || !quantized(cs);
    static const int64_t ms[] = {0, 1, 3, 16, 64, 257, 1024};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        add(g, "tokens", &base, ms[i], K_PLAIN, 1);
    /* experts and top-k */
    /* many experts on a small layer (the expert count is what is tested) */
    const uint32_t small_h = round_up(64, cs->h_align), small_i = round_up(32, cs->i_align);
    if (full) {
        c = base;
        c.num_experts = 64;
        add(g, "experts", &c, 64, K_PLAIN, 1);
    }
    if (full || small_h * small_i < 128 * 128) {
        c = base;
        c.num_experts = 256;
        c.top_k = 8;
        c.hidden_size = small_h;
        c.intermediate_size = small_i;
        add(g, "experts", &c, 64, K_PLAIN, 1);
    }
    c = base;
    c.top_k = 1;
    add(g, "topk", &c, 16, K_PLAIN, 1);
    c = base;
    c.top_k = 8;
    add(g, "topk", &c, 16, K_PLAIN, 1);
    /* sizes that are not multiples of any tile, where the scheme allows (an
     * odd number of its groups otherwise) */
    c = base;
    c.hidden_size = round_up(72, cs->h_align);
    c.intermediate_size = round_up(40, cs->i_align);
    add(g, "sizes", &c, 33, K_PLAIN, 1);
    if (cs->h_align == 1 && cs->i_align == 1) {
        c = base;
        c.hidden_size = 130;
        c.intermediate_size = 33;
        add(g, "sizes", &c, 17, K_PLAIN, 1);
    }
    /* activations, gated and not, and bias */
    static const int32_t acts[] = {FMOE_ACT_SILU,  FMOE_ACT_GELU,      FMOE_ACT_GELU_TANH,
                                   FMOE_ACT_RELU2, FMOE_ACT_SWIGLUOAI, FMOE_ACT_SWIGLUSTEP};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (uint32_t gated = 0; gated <= 1; gated++) {
            if (acts[a] == FMOE_ACT_SILU && gated)
                continue; /* the base */
            if (!full && !(acts[a] == FMOE_ACT_GELU && !gated) && !(acts[a] == FMOE_ACT_SWIGLUOAI && gated))
                continue;
            c = base;
            c.activation = acts[a];
            c.gated = gated;
            if (acts[a] == FMOE_ACT_SWIGLUOAI)
                c.swiglu_limit = 7.0f;
            add(g, "act", &c, 16, K_PLAIN, 1);
        }
    c = base;
    c.swiglu_limit = 7.0f;
    add(g, "act-limit7", &c, 16, K_PLAIN, 1);
    c = base;
    c.has_bias = 1;
    add(g, "bias", &c, 16, K_PLAIN, 1);
    c = base;
    c.has_bias = 1;
    c.gated = 0;
    c.activation = FMOE_ACT_GELU;
    add(g, "bias", &c, 16, K_PLAIN, 1);
    /* routing variants, through router logits (a monolithic plugin routes itself) */
    c = base;
    add(g, "route-softmax", &c, 16, K_LOGITS, 1);
    if (full) {
        c = base;
        c.renormalize = 1;
        add(g, "route-softmax-renorm", &c, 16, K_LOGITS, 1);
        c = base;
        c.scoring = FMOE_SCORING_SIGMOID;
        c.renormalize = 1;
        add(g, "route-sigmoid", &c, 16, K_LOGITS, 1);
        c = base;
        c.scoring = FMOE_SCORING_SQRTSOFTPLUS;
        c.renormalize = 1;
        add(g, "route-sqrtsoftplus", &c, 16, K_LOGITS, 1);
        c = base;
        c.routed_scaling_factor = 2.5f;
        add(g, "route-scaled", &c, 16, K_LOGITS, 1);
    }
    c = base;
    c.num_experts = 64;
    c.top_k = 6;
    c.scoring = FMOE_SCORING_SIGMOID;
    c.renormalize = 1;
    c.grouped_topk = 1;
    c.num_expert_group = 8;
    c.topk_group = 4;
    c.has_correction_bias = 1;
    c.routed_scaling_factor = 2.5f;
    add(g, "route-grouped-bias", &c, 32, K_LOGITS, 1);
    c = base;
    c.top_k = 1;
    c.apply_router_weight_on_input = 1;
    add(g, "weight-on-input", &c, 16, K_LOGITS, 1);
    c = base;
    c.top_k = 1;
    c.apply_router_weight_on_input = 1;
    add(g, "weight-on-input-topk", &c, 16, K_PLAIN, 1);
    /* expert parallelism: expert_map with -1, and shards summing to the whole */
    c = base;
    c.ep_size = 4;
    c.ep_rank = 2;
    add(g, "ep-shard", &c, 16, K_PLAIN, 1);
    c = base;
    c.ep_size = 2;
    add(g, "ep-sum2", &c, 16, K_EP_SUM, 2);
    c = base;
    c.ep_size = 4;
    c.placement = FMOE_PLACEMENT_ROUND_ROBIN;
    add(g, "ep-sum4-rr", &c, 16, K_EP_SUM, 4);
    if (full) {
        c = base;
        c.num_experts = 64;
        c.top_k = 6;
        c.ep_size = 4;
        add(g, "ep-sum4", &c, 64, K_EP_SUM, 4);
    }
    /* tensor parallelism: I/TP = 96, not a multiple of 128 (#13), where the
     * scheme's I alignment allows; else one aligned unit per rank */
    c = base;
    c.intermediate_size = 2 * (96 % cs->i_align == 0 ? 96 : cs->i_align);
    c.tp_size = 2;
    add(g, "tp-sum2", &c, 16, K_TP_SUM, 2);
    /* EPLB: physical experts != logical (#15) */
    c = base;
    c.enable_eplb = 1;
    c.num_redundant_experts = 3;
    add(g, "eplb", &c, 16, K_PLAIN, 1);
    /* skewed and edge routing */
    c = base;
    add(g, "skew", &c, 64, K_SKEW, 1);
    if (full) {
        c = base;
        c.top_k = 1;
        add(g, "skew", &c, 64, K_SKEW, 1);
    }
    c = base;
    add(g, "dup-ids", &c, 16, K_DUP_IDS, 1);
    c = base;
    add(g, "bad-ids", &c, 16, K_BAD_IDS, 1);
    c = base;
    c.ep_size = 2;
    c.ep_rank = 1;
    add(g, "bad-ids-ep", &c, 16, K_BAD_IDS, 1);
    /* (not with dynamic per-tensor activation scales: the inf is in every
     * row's scale by definition) */
    if (!dynamic_tensor_scale(cs)) {
        c = base;
        add(g, "nan-row", &c, 16, K_NAN_ROW, 1);
    }
    c = base;
    add(g, "dead-expert", &c, 16, K_DEAD, 1);
    c = base;
    add(g, "repeat-bitwise", &c, 64, K_REPEAT, 1);
    /* regression shapes: E not a power of two and E > 1024 (#11), M=1 on a small w2 (#12) */
    c = base;
    c.num_experts = 257;
    c.hidden_size = small_h;
    c.intermediate_size = small_i;
    add(g, "experts", &c, 64, K_PLAIN, 1);
    /* E > 1024 on the smallest layer the scheme allows; in the default grid
     * only where that is at most 32 x 128 (1025 experts of a 128 x 128
     * int4-group128 layer cost more than the rest of its grid) */
    c = base;
    c.num_experts = 1025;
    c.top_k = 8;
    c.hidden_size = round_up(32, cs->h_align);
    c.intermediate_size = round_up(16, cs->i_align);
    if (exhaustive || c.hidden_size * c.intermediate_size <= 32 * 128)
        add(g, "experts", &c, 16, K_PLAIN, 1);
    c = base;
    c.intermediate_size = round_up(16, cs->i_align);
    add(g, "small-w2", &c, 1, K_PLAIN, 1);
    if (!exhaustive)
        return;
    static const uint32_t es[] = {8, 64, 256}, ks[] = {1, 2, 8};
    const uint32_t hs[2] = {base.hidden_size, cs->h_align > 1 ? 3 * cs->h_align : 200};
    const uint32_t is[2] = {base.intermediate_size, cs->i_align > 1 ? 3 * cs->i_align : 72};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
        for (size_t ei = 0; ei < 3; ei++)
            for (size_t ki = 0; ki < 3; ki++)
                for (size_t si = 0; si < 2; si++)
                    for (uint32_t gated = 0; gated <= 1; gated++)
                        for (uint32_t bias = 0; bias <= 1; bias++) {
                            c = base;
                            c.num_experts = es[ei];
                            c.top_k = ks[ki];
                            c.hidden_size = hs[si];
                            c.intermediate_size = is[si];
                            c.gated = gated;
                            c.has_bias = bias;
                            add(g, "full", &c, ms[mi], K_PLAIN, 1);
                        }
    /* gpt-oss 2880 (#19) and M*topk > 65535 (#11) */
    c = base;
    c.num_experts = 4;
    c.top_k = 2;
    c.hidden_size = 2880;
    c.intermediate_size = 2880;
    c.activation = FMOE_ACT_SWIGLUOAI;
    c.swiglu_limit = 7.0f;
    add(g, "gpt-oss", &c, 3, K_PLAIN, 1);
    c = base;
    c.num_experts = 16;
    c.top_k = 8;
    c.hidden_size = round_up(32, cs->h_align);
    c.intermediate_size = round_up(16, cs->i_align); /* I = 16 is no group-32 scheme's */
    c.max_num_tokens = 8200;
    add(g, "many-slots", &c, 8200, K_PLAIN, 1);
}

/* --- one case ------------------------------------------------------------ */

typedef struct outcome {
    int status;
    char why[1024];
} outcome;

static void set(outcome *o, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set(outcome *o, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->why, sizeof o->why, fmt, ap);
    va_end(ap);
    o->status = status;
}

static void mutate_inputs(const tcase *tc, cf_inputs *in, unsigned char *skip)
{
    const fmoe_layer_config *c = &tc->cfg;
    int64_t m = in->m;
    uint32_t k = c->top_k, e = c->num_experts;
    for (int64_t t = 0; t < m; t++) {
        int32_t *ids = &in->topk_ids[t * k];
        if (tc->kind == K_SKEW) {
            ids[0] = (int32_t)e - 1;
            for (uint32_t j = 1; j < k; j++)
                ids[j] = (int32_t)((t + j - 1) % (e - 1));
        } else if (tc->kind == K_DUP_IDS && k >= 2 && t % 2 == 0) {
            ids[1] = ids[0];
        } else if (tc->kind == K_BAD_IDS && t % 3 == 0) {
            ids[0] = 123456789;
        } else if (tc->kind == K_BAD_IDS && t % 3 == 1) {
            ids[k - 1] = -1;
        }
    }
    if (tc->kind == K_NAN_ROW && m > 2) {
        uint32_t h = c->hidden_size;
        for (uint32_t i = 0; i < h; i++)
            in->xf[1 * h + i] = NAN;
        in->xf[2 * h + h / 2] = INFINITY;
        cf_inputs_store_x(c, in);
        skip[1] = skip[2] = 1;
    }
}

/* Whether the reference's output of a sharded layer depends on the shard
 * beyond the experts and columns it holds: a per-tensor activation scale
 * is taken over what the rank sees (its local experts' static scales, its
 * own GEMM2 input), a per-token one over the rank's slice of each row (TP).
 * Those schemes are checked shard by shard: the plugin's shards against
 * the reference's same shards, summed. */
static int shard_dependent(const fmoe_scheme *scheme, int kind)
{
    return scheme->a_strategy == FMOE_QSTRATEGY_TENSOR ||
           (kind == K_TP_SUM && scheme->a_strategy == FMOE_QSTRATEGY_TOKEN);
}

/* Forward every layer of `lay` (n) and sum the outputs into sum. */
static fmoe_status forward_sum(fmoe_layer **lay, uint32_t n, const cf_inputs *in, int use_logits, float *got,
                               float *sum, size_t len, int *guard_ok, char *why, size_t cap)
{
    for (uint32_t s = 0; s < n; s++) {
        fmoe_status st = cf_forward(lay[s], fmoe_layer_get_config(lay[s]), in, use_logits, got, guard_ok, why, cap);
        if (st != FMOE_STATUS_OK || !*guard_ok)
            return st;
        for (size_t i = 0; i < len; i++)
            sum[i] = s ? sum[i] + got[i] : got[i];
    }
    return FMOE_STATUS_OK;
}

/* The plugin's manifest may loosen the suite's tolerance for a scheme
 * ([[tolerance]]: a fraction of elements allowed past the per-element
 * bound, with the reason and link; docs/CONFORMANCE.md, Tolerances). */
static void manifest_tolerance(const cf_run *r, const char *key, cf_tolerance *tol)
{
    uint32_t n = fmoe_context_plugin_count(r->ctx);
    for (uint32_t i = 0; i < n; i++) {
        fmoe_plugin_info info = {.struct_size = sizeof info};
        if (fmoe_context_plugin(r->ctx, i, &info) != FMOE_STATUS_OK || strcmp(info.name, r->plugin->name) != 0)
            continue;
        fmoe_plugin_tolerance t = {.struct_size = sizeof t};
        if (fmoe_context_plugin_tolerance(r->ctx, i, key, &t) == FMOE_STATUS_OK) {
            tol->mismatch = t.mismatch;
            tol->reason = t.reason;
            tol->link = t.link;
        }
        return;
    }
}

static void run_case(cf_run *r, const cf_scheme *cs, const fmoe_scheme *scheme, const tcase *tc, outcome *o)
{
    const char *plugin = r->plugin->name;
    fmoe_layer_config full = tc->cfg;
    uint32_t shards = tc->kind == K_EP_SUM || tc->kind == K_TP_SUM ? tc->shards : 1;
    if (tc->kind == K_EP_SUM)
        full.ep_size = 1, full.ep_rank = 0;
    if (tc->kind == K_TP_SUM)
        full.tp_size = 1, full.tp_rank = 0;
    int per_shard_ref = shards > 1 && shard_dependent(scheme, tc->kind);
    fmoe_layer *ref = NULL, *lay[8] = {0}, *rlay[8] = {0};
    synth_ckpt *ck = NULL;
    char why[768];
    size_t n = (size_t)tc->m * full.hidden_size;
    float *got = calloc(n + 1, sizeof(float)), *sum = calloc(n + 1, sizeof(float)),
          *expect = calloc(n + 1, sizeof(float));
    unsigned char *skip = calloc((size_t)tc->m + 1, 1);
    cf_inputs in = {0};
    int have_inputs = 0;
    if (!got || !sum || !expect || !skip) {
        set(o, CF_FAIL, "out of memory");
        goto done;
    }
    fmoe_status st = cf_create(r->ctx, &full, scheme, "reference", FMOE_DEVICE_ANY, -1, &ref);
    if (st == FMOE_STATUS_UNSUPPORTED) {
        set(o, CF_UNSUPPORTED, "the reference does not serve this layer: %s", fmoe_last_error());
        goto done;
    }
    if (st != FMOE_STATUS_OK) {
        set(o, CF_FAIL, "creating the reference layer: %s", fmoe_last_error());
        goto done;
    }
    for (uint32_t s = 0; s < shards; s++) {
        fmoe_layer_config c = tc->cfg;
        if (tc->kind == K_EP_SUM)
            c.ep_rank = s;
        if (tc->kind == K_TP_SUM)
            c.tp_rank = s;
        st = cf_create(r->ctx, &c, scheme, plugin, FMOE_DEVICE_ANY, -1, &lay[s]);
        if (st == FMOE_STATUS_UNSUPPORTED) {
            set(o, CF_UNSUPPORTED, "%s", fmoe_last_error());
            goto done;
        }
        if (st != FMOE_STATUS_OK) {
            set(o, CF_FAIL, "creating the layer (rank %u): %s", s, fmoe_last_error());
            goto done;
        }
        if (!cf_layer_fed(lay[s], why, sizeof why)) {
            set(o, CF_UNSUPPORTED, "%s", why);
            goto done;
        }
        if (per_shard_ref &&
            cf_create(r->ctx, &c, scheme, "reference", FMOE_DEVICE_ANY, -1, &rlay[s]) != FMOE_STATUS_OK) {
            set(o, CF_UNSUPPORTED, "the reference does not serve shard %u: %s", s, fmoe_last_error());
            goto done;
        }
    }
    if (cf_inputs_make(&full, tc->m, r->o->seed, &in, why, sizeof why) != 0) {
        set(o, CF_FAIL, "%s", why);
        goto done;
    }
    have_inputs = 1;
    /* One checkpoint (unsharded) for every layer of the case. */
    cf_weights w = {.seed = r->o->seed,
                    .cfg = &full,
                    .cs = cs,
                    .correction_bias = in.bias,
                    .dead_expert = tc->kind == K_DEAD ? 0 : -1};
    st = cf_build(&w, &ck, why, sizeof why);
    if (st == FMOE_STATUS_OK)
        st = cf_load_built(ref, ck, why, sizeof why);
    for (uint32_t s = 0; s < shards && per_shard_ref && st == FMOE_STATUS_OK; s++)
        st = cf_load_built(rlay[s], ck, why, sizeof why);
    if (st != FMOE_STATUS_OK) {
        set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "reference: %s", why);
        goto done;
    }
    for (uint32_t s = 0; s < shards; s++) {
        st = cf_load_built(lay[s], ck, why, sizeof why);
        if (st != FMOE_STATUS_OK) {
            set(o, st == FMOE_STATUS_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL, "%s", why);
            goto done;
        }
    }
    if (tc->kind == K_DEAD) /* route every token through the dead expert */
        for (int64_t t = 0; t < tc->m; t++)
            in.topk_ids[t * full.top_k] = 0;
    mutate_inputs(tc, &in, skip);
    int use_logits = tc->kind == K_LOGITS, guard_ok = 1;
    st = forward_sum(lay, shards, &in, use_logits, got, sum, n, &guard_ok, why, sizeof why);
    if (st != FMOE_STATUS_OK) {
        set(o, CF_FAIL, "forward%s: %s", shards > 1 ? " (a shard)" : "", why);
        goto done;
    }
    if (!guard_ok) {
        set(o, CF_FAIL, "forward wrote past the end of out (the canary after [%lld, %u] changed)", (long long)tc->m,
            full.hidden_size);
        goto done;
    }
    if (tc->kind == K_REPEAT) {
        float *again = malloc((n + 1) * sizeof(float));
        snprintf(why, sizeof why, "out of memory");
        st = again ? cf_forward(lay[0], &full, &in, 0, again, &guard_ok, why, sizeof why) : FMOE_STATUS_OUT_OF_MEMORY;
        int same = st == FMOE_STATUS_OK && memcmp(again, sum, n * sizeof(float)) == 0;
        free(again);
        if (st != FMOE_STATUS_OK) {
            set(o, CF_FAIL, "the second forward failed: %s", why);
            goto done;
        }
        if (!same) {
            set(o, CF_FAIL, "a second forward on the same input gave different bytes");
            goto done;
        }
    }
    if (per_shard_ref)
        st = forward_sum(rlay, shards, &in, use_logits, got, expect, n, &guard_ok, why, sizeof why);
    else
        st = cf_forward(ref, &full, &in, use_logits, expect, &guard_ok, why, sizeof why);
    if (st != FMOE_STATUS_OK) {
        set(o, CF_FAIL, "reference forward: %s", why);
        goto done;
    }
    if (tc->m == 0) {
        set(o, CF_PASS, "M = 0 is a successful no-op");
        goto done;
    }
    cf_tolerance tol = cf_tolerance_for(cs, full.act_dtype);
    manifest_tolerance(r, cs->key, &tol);
    if (shards > 1)
        tol.atol *= shards; /* each shard's output was rounded to the activation dtype */
    if (tc->kind == K_DEAD)
        tol.nmse = INFINITY; /* rows through the dead expert are near zero */
    int ok = cf_compare(sum, expect, tc->m, full.hidden_size, skip, &tol, why, sizeof why);
    set(o, ok ? CF_PASS : CF_FAIL, "%s%s", why, per_shard_ref ? " (shard by shard)" : "");
done:
    if (have_inputs)
        cf_inputs_free(&in);
    synth_free(ck);
    for (uint32_t s = 0; s < 8; s++) {
        fmoe_layer_destroy(lay[s]);
        fmoe_layer_destroy(rlay[s]);
    }
    fmoe_layer_destroy(ref);
    free(got);
    free(sum);
    free(expect);
    free(skip);
}

/* Whether one of the manifest's scheme globs matches `key`. */
int cf_plugin_claims_scheme(const cf_plugin *p, const char *key);
int cf_plugin_claims_scheme(const cf_plugin *p, const char *key)
{
    const char *s = p->schemes && p->schemes[0] ? p->schemes : "*";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (fnmatch(tok, key, 0) == 0)
            return 1;
    }
    return 0;
}

/* Whether the reference plugin accepts the base layer of this scheme. */
static int reference_serves(cf_run *r, const fmoe_scheme *scheme, const cf_scheme *cs, char *why, size_t cap)
{
    fmoe_layer_config c = base_config(cs);
    fmoe_selection *sel = NULL;
    fmoe_status st = fmoe_context_explain(r->ctx, &c, scheme, &sel);
    int ok = 0;
    snprintf(why, cap, "the reference plugin is not loaded, so there is nothing to compare with");
    for (uint32_t i = 0; sel && i < fmoe_selection_candidate_count(sel); i++) {
        fmoe_candidate cand = {.struct_size = sizeof cand};
        if (fmoe_selection_candidate(sel, i, &cand) != FMOE_STATUS_OK || strcmp(cand.plugin, "reference") != 0)
            continue;
        if (cand.verdict == FMOE_VERDICT_SELECTED || cand.verdict == FMOE_VERDICT_ACCEPTED)
            ok = 1;
        else
            snprintf(why, cap, "the reference does not serve it yet: %s", cand.reason);
    }
    (void)st;
    fmoe_selection_destroy(sel);
    return ok;
}

void cf_mode_test(cf_run *r)
{
    grid *g = calloc(cf_n_schemes, sizeof *g);
    size_t total = 0;
    if (!g) {
        cli_error("out of memory");
        return;
    }
    for (size_t i = 0; i < cf_n_schemes; i++) {
        const cf_scheme *cs = &cf_schemes[i];
        if (r->o->scheme_glob && fnmatch(r->o->scheme_glob, cs->key, 0) != 0)
            continue;
        if (!cf_plugin_claims_scheme(r->plugin, cs->key))
            continue;
        build_grid(cs, r->o->exhaustive, &g[i]);
        total += g[i].n;
    }
    cf_progress_start(r, total);
    for (size_t i = 0; i < cf_n_schemes; i++) {
        const cf_scheme *cs = &cf_schemes[i];
        fmoe_scheme scheme = {.struct_size = sizeof scheme};
        if (g[i].n && fmoe_scheme_parse(cs->key, &scheme) != FMOE_STATUS_OK) {
            cli_error("suite bug: scheme key '%s' does not parse: %s", cs->key, fmoe_last_error());
            g[i].n = 0;
        }
        /* One verdict for the whole scheme when nothing can be compared. */
        const char *skip_why = !cs->store ? "the suite has no weight generator for this scheme yet" : NULL;
        char ref_why[512];
        if (g[i].n && !skip_why && !reference_serves(r, &scheme, cs, ref_why, sizeof ref_why))
            skip_why = ref_why;
        if (g[i].n && skip_why) {
            r->progress_done += g[i].n - 1;
            if (cf_begin(r, "%s/*", cs->key))
                cf_end(r, CF_UNSUPPORTED, "%s", skip_why);
            g[i].n = 0;
        }
        for (size_t j = 0; j < g[i].n; j++) {
            if (!cf_begin(r, "%s/%s", cs->key, g[i].c[j].name))
                continue;
            outcome o = {0};
            run_case(r, cs, &scheme, &g[i].c[j], &o);
            cf_end(r, o.status, "%s", o.why);
        }
        free(g[i].c);
    }
    free(g);
}
