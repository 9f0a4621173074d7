/* cli/conform/layers.c - layers through the public API (see layers.h). */
#include "cli/conform/layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/guard.h"
#include "cli/halfconv.h"
#include "cli/rng.h"
#include "cli/run_device.h"
#include "cli/synth/synth.h"

fmoe_status cf_create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme, const char *backend,
                      int32_t dev_kind, int32_t dev_index, fmoe_layer **out)
{
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = backend;
    lo.device_kind = dev_kind;
    lo.device_index = dev_index;
    *out = NULL;
    fmoe_status st = fmoe_layer_create(ctx, cfg, scheme, &lo, out);
    if (st != FMOE_STATUS_OK)
        *out = NULL;
    return st;
}

fmoe_status cf_build(const cf_weights *w, synth_ckpt **out, char *why, size_t cap)
{
    *out = NULL;
    if (!w->cs->store) {
        snprintf(why, cap, "the suite has no weight generator for %s", w->cs->key);
        return FMOE_STATUS_UNSUPPORTED;
    }
    fmoe_scheme scheme = {.struct_size = sizeof scheme};
    if (fmoe_scheme_parse(w->cs->key, &scheme) != FMOE_STATUS_OK) {
        snprintf(why, cap, "suite bug: scheme key '%s' does not parse: %s", w->cs->key, fmoe_last_error());
        return FMOE_STATUS_INTERNAL;
    }
    synth_spec spec = {.seed = w->seed,
                       .cfg = w->cfg,
                       .scheme = &scheme,
                       .correction_bias = w->correction_bias,
                       .dead_expert = w->dead_expert};
    return w->cs->store(&spec, out, why, cap);
}

fmoe_status cf_load_built(fmoe_layer *layer, const synth_ckpt *ck, char *why, size_t cap)
{
    fmoe_status st = synth_load(layer, ck, why, cap);
    if (st != FMOE_STATUS_OK)
        return st;
    st = fmoe_layer_finalize(layer);
    if (st != FMOE_STATUS_OK)
        snprintf(why, cap, "finalize: %s", fmoe_last_error());
    return st;
}

fmoe_status cf_load(fmoe_layer *layer, const cf_weights *w, char *why, size_t cap)
{
    synth_ckpt *ck = NULL;
    fmoe_status st = cf_build(w, &ck, why, cap);
    if (st == FMOE_STATUS_OK)
        st = cf_load_built(layer, ck, why, cap);
    synth_free(ck);
    return st;
}

/* Logical ids -> physical replicas under EPLB (as `fusedmoe run` does:
 * replica l + j*L holds logical l; slot i takes replica i % count). */
static void map_to_replicas(const fmoe_layer_config *c, int32_t *ids, int64_t n)
{
    uint32_t l = c->num_experts, r = c->num_redundant_experts;
    for (int64_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)ids[i];
        uint32_t count = 1 + r / l + (id < r % l ? 1 : 0);
        ids[i] = (int32_t)(id + (uint32_t)(i % count) * l);
    }
}

void cf_inputs_store_x(const fmoe_layer_config *cfg, cf_inputs *in)
{
    cli_store_floats(cfg->act_dtype, in->x, in->xf, (size_t)in->m * cfg->hidden_size);
}

void cf_inputs_free(cf_inputs *in)
{
    free(in->x);
    free(in->xf);
    free(in->logits);
    free(in->bias);
    free(in->topk_w);
    free(in->topk_ids);
    memset(in, 0, sizeof *in);
}

int cf_inputs_make(const fmoe_layer_config *cfg, int64_t m, uint64_t seed, cf_inputs *in, char *why, size_t cap)
{
    memset(in, 0, sizeof *in);
    size_t mm = (size_t)m, h = cfg->hidden_size, e = cfg->num_experts, k = cfg->top_k;
    in->m = m;
    /* at least one element, so M = 0 still has valid pointers */
    in->x = malloc((mm * h + 1) * sizeof(float));
    in->xf = malloc((mm * h + 1) * sizeof(float));
    in->logits = malloc((mm * e + 1) * sizeof(float));
    in->topk_w = malloc((mm * k + 1) * sizeof(float));
    in->topk_ids = malloc((mm * k + 1) * sizeof(int32_t));
    in->bias = malloc(e * sizeof(float));
    if (!in->x || !in->xf || !in->logits || !in->topk_w || !in->topk_ids || !in->bias) {
        cf_inputs_free(in);
        snprintf(why, cap, "out of memory for %lld tokens", (long long)m);
        return -1;
    }
    cli_rng_fill_normal(in->xf, mm * h, 1.0f, seed, "x", 0);
    cf_inputs_store_x(cfg, in);
    cli_rng_fill_normal(in->logits, mm * e, 1.0f, seed, "router_logits", 0);
    cli_rng_fill_normal(in->bias, e, 0.1f, seed, "e_score_correction_bias", 0);
    const int64_t xs[2] = {m, (int64_t)h}, ls[2] = {m, (int64_t)e}, ks[2] = {m, (int64_t)k}, bs[1] = {(int64_t)e};
    fmoe_tensor tb;
    fmoe_status st = fmoe_tensor_init(&in->tx, cfg->act_dtype, 2, xs, in->x);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tlogits, FMOE_DTYPE_F32, 2, ls, in->logits);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tw, FMOE_DTYPE_F32, 2, ks, in->topk_w);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tids, FMOE_DTYPE_INT32, 2, ks, in->topk_ids);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&tb, FMOE_DTYPE_F32, 1, bs, in->bias);
    if (st == FMOE_STATUS_OK && m > 0)
        st = fmoe_reference_route(cfg, &in->tlogits, cfg->has_correction_bias ? &tb : NULL, &in->tw, &in->tids);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, cap, "making the inputs: %s", fmoe_last_error());
        cf_inputs_free(in);
        return -1;
    }
    if (cfg->enable_eplb && cfg->num_redundant_experts)
        map_to_replicas(cfg, in->topk_ids, m * (int64_t)k);
    return 0;
}

/* The tensors of one forward, wherever they live. */
typedef struct fwd_tensors {
    const fmoe_tensor *x, *logits, *w, *ids;
    fmoe_tensor *out;
} fwd_tensors;

static fmoe_status forward_with(fmoe_layer *layer, const fwd_tensors *t, int use_logits)
{
    fmoe_forward_args a = {.struct_size = sizeof a, .x = t->x, .out = t->out};
    if (use_logits) {
        a.router_logits = t->logits;
    } else {
        a.topk_weights = t->w;
        a.topk_ids = t->ids;
    }
    return fmoe_layer_forward(layer, &a);
}

/* Whether the core refused the routing input because of how the method
 * routes, and then switch to the other one: a monolithic method takes
 * router logits only; a modular method on a device cannot have the core
 * route logits that are in device memory, so it takes top-k routing (the
 * same routing: cf_inputs_make routed those logits). */
static int switch_routing(fmoe_status st, int *use_logits)
{
    if (st == FMOE_STATUS_INVALID_ARGUMENT && !*use_logits && strstr(fmoe_last_error(), "monolithic")) {
        *use_logits = 1;
        return 1;
    }
    if (st == FMOE_STATUS_UNSUPPORTED && *use_logits && strstr(fmoe_last_error(), "modular")) {
        *use_logits = 0;
        return 1;
    }
    return 0;
}

static void forward_failed(char *why, size_t cap)
{
    snprintf(why, cap, "%s", fmoe_last_error());
}

/* A host layer: out is host memory with the canary after it. */
static fmoe_status forward_on_host(fmoe_layer *layer, const fmoe_layer_config *cfg, const cf_inputs *in, int use_logits,
                                   float *out_f32, int *guard_ok, char *why, size_t cap)
{
    size_t n = (size_t)in->m * cfg->hidden_size, bytes = n * fmoe_dtype_size(cfg->act_dtype);
    unsigned char *buf = cf_guarded_alloc(bytes);
    *guard_ok = 1;
    if (!buf) {
        snprintf(why, cap, "out of memory for out [%lld, %u]", (long long)in->m, cfg->hidden_size);
        return FMOE_STATUS_OUT_OF_MEMORY;
    }
    const int64_t shape[2] = {in->m, cfg->hidden_size};
    fmoe_tensor out;
    fmoe_status st = fmoe_tensor_init(&out, cfg->act_dtype, 2, shape, buf);
    fwd_tensors t = {.x = &in->tx, .logits = &in->tlogits, .w = &in->tw, .ids = &in->tids, .out = &out};
    for (int attempt = 0; st == FMOE_STATUS_OK && attempt < 2; attempt++) {
        memset(buf, 0xFF, bytes); /* NaN in f32, bf16 and f16 */
        st = forward_with(layer, &t, use_logits);
        if (!switch_routing(st, &use_logits))
            break;
        st = FMOE_STATUS_OK;
    }
    if (st != FMOE_STATUS_OK)
        forward_failed(why, cap);
    *guard_ok = cf_guard_intact(buf);
    if (st == FMOE_STATUS_OK)
        cli_load_floats(cfg->act_dtype, out_f32, buf, n);
    cf_guarded_free(buf);
    return st;
}

/* --- a device layer: every tensor in its memory ------------------------- */

/* The layer's device memory through the public API (fmoe_layer_tensor_*),
 * as UINT8 tensors of the bytes. `st` keeps the library's status. */
typedef struct layer_memory {
    fmoe_layer *layer;
    int32_t kind, index;
    fmoe_status st;
} layer_memory;

static fmoe_tensor bytes_at(const layer_memory *m, const void *p, size_t bytes, int on_device)
{
    const int64_t shape[1] = {(int64_t)bytes};
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_UINT8, 1, shape, (void *)p);
    if (on_device) {
        t.device_kind = m->kind;
        t.device_index = m->index;
    }
    return t;
}

static void *lm_alloc(void *ctx, size_t bytes, char *why, size_t cap)
{
    layer_memory *m = ctx;
    const int64_t shape[1] = {(int64_t)bytes};
    fmoe_tensor t;
    m->st = fmoe_layer_tensor_alloc(m->layer, FMOE_DTYPE_UINT8, 1, shape, &t);
    if (m->st == FMOE_STATUS_OK)
        return t.data;
    snprintf(why, cap, "allocating %zu bytes on %s:%d: %s", bytes, fmoe_device_kind_name(m->kind), m->index,
             fmoe_last_error());
    return NULL;
}

static int lm_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_device, char *why, size_t cap)
{
    layer_memory *m = ctx;
    fmoe_tensor d = bytes_at(m, dst, bytes, to_device), s = bytes_at(m, src, bytes, !to_device);
    m->st = fmoe_layer_tensor_copy(m->layer, &d, &s);
    if (m->st == FMOE_STATUS_OK)
        return 0;
    snprintf(why, cap, "copying %zu bytes %s %s:%d: %s", bytes, to_device ? "to" : "from",
             fmoe_device_kind_name(m->kind), m->index, fmoe_last_error());
    return -1;
}

/* The status of a failed device step: the library's, or out of memory
 * when a staging buffer could not be had. */
static fmoe_status lm_failed(const layer_memory *m)
{
    return m->st != FMOE_STATUS_OK ? m->st : FMOE_STATUS_OUT_OF_MEMORY;
}

static void lm_free(void *ctx, void *ptr)
{
    layer_memory *m = ctx;
    fmoe_tensor t = bytes_at(m, ptr, 1, 1);
    fmoe_layer_tensor_free(m->layer, &t);
}

/* One device tensor shaped like `host` (its bytes copied in, the canary
 * after them); *dev owns the memory, *view is what the forward gets. */
static int dev_tensor(const cf_device_ops *ops, const fmoe_tensor *host, const void *bytes_in, void **dev,
                      fmoe_tensor *view, char *why, size_t cap)
{
    const layer_memory *m = ops->ctx;
    size_t bytes = (size_t)fmoe_tensor_numel(host) * fmoe_dtype_size(host->dtype);
    *dev = cf_device_put(ops, bytes_in, bytes, why, cap);
    if (!*dev)
        return -1;
    fmoe_tensor_init(view, host->dtype, host->ndim, host->shape, *dev);
    view->device_kind = m->kind;
    view->device_index = m->index;
    return 0;
}

enum { D_X, D_LOGITS, D_W, D_IDS, D_OUT, D_COUNT };

/* Put the inputs and the NaN-poisoned out (`poison`, bytes of 0xFF) on the
 * device. 0, or -1 with `why`. */
static int dev_inputs(const cf_device_ops *ops, const cf_inputs *in, const fmoe_tensor *out, const void *poison,
                      void **dev, fmoe_tensor *views, char *why, size_t cap)
{
    const fmoe_tensor *host[D_COUNT] = {&in->tx, &in->tlogits, &in->tw, &in->tids, out};
    const void *data[D_COUNT] = {in->x, in->logits, in->topk_w, in->topk_ids, poison};
    for (int i = 0; i < D_COUNT; i++)
        if (dev_tensor(ops, host[i], data[i], &dev[i], &views[i], why, cap) != 0)
            return -1;
    return 0;
}

/* A device layer: x, the routing and out are device tensors, each with the
 * canary after it. out is poisoned in device memory before each call, and
 * after it the whole of out and its canary come back to be checked. */
static fmoe_status forward_on_device(fmoe_layer *layer, const fmoe_layer_config *cfg, const cf_inputs *in,
                                     int use_logits, float *out_f32, int *guard_ok, char *why, size_t cap)
{
    layer_memory lm = {.layer = layer, .st = FMOE_STATUS_OK};
    run_device_is_remote(layer, &lm.kind, &lm.index);
    const cf_device_ops ops = {.ctx = &lm, .alloc = lm_alloc, .copy = lm_copy, .free = lm_free};
    size_t n = (size_t)in->m * cfg->hidden_size, bytes = n * fmoe_dtype_size(cfg->act_dtype);
    const int64_t shape[2] = {in->m, cfg->hidden_size};
    fmoe_tensor host_out, views[D_COUNT];
    void *dev[D_COUNT] = {0};
    memset(views, 0, sizeof views);
    unsigned char *buf = malloc(bytes + 1);
    fmoe_status st = FMOE_STATUS_OUT_OF_MEMORY;
    *guard_ok = 1;
    snprintf(why, cap, "out of memory for out [%lld, %u]", (long long)in->m, cfg->hidden_size);
    if (buf) {
        memset(buf, 0xFF, bytes); /* NaN in f32, bf16 and f16 */
        fmoe_tensor_init(&host_out, cfg->act_dtype, 2, shape, buf);
        st = dev_inputs(&ops, in, &host_out, buf, dev, views, why, cap) == 0 ? FMOE_STATUS_OK : lm_failed(&lm);
    }
    fwd_tensors t = {
        .x = &views[D_X], .logits = &views[D_LOGITS], .w = &views[D_W], .ids = &views[D_IDS], .out = &views[D_OUT]};
    for (int attempt = 0; st == FMOE_STATUS_OK && attempt < 2; attempt++) {
        if (attempt && cf_device_fill(&ops, dev[D_OUT], buf, bytes, why, cap) != 0) {
            st = lm_failed(&lm);
            break;
        }
        st = forward_with(layer, &t, use_logits);
        if (st != FMOE_STATUS_OK)
            forward_failed(why, cap);
        if (!switch_routing(st, &use_logits))
            break;
        st = FMOE_STATUS_OK;
    }
    if (st == FMOE_STATUS_OK && (st = fmoe_layer_synchronize(layer, NULL)) != FMOE_STATUS_OK)
        snprintf(why, cap, "synchronize after the forward: %s", fmoe_last_error());
    int got = st == FMOE_STATUS_OK ? cf_device_get(&ops, dev[D_OUT], bytes, buf, why, cap) : 1;
    if (got < 0)
        st = lm_failed(&lm);
    *guard_ok = got != 0;
    if (st == FMOE_STATUS_OK)
        cli_load_floats(cfg->act_dtype, out_f32, buf, n);
    for (int i = 0; i < D_COUNT; i++)
        if (dev[i])
            lm_free(&lm, dev[i]);
    free(buf);
    return st;
}

int cf_layer_fed(fmoe_layer *layer, char *why, size_t cap)
{
    int32_t kind, index;
    if (!run_device_is_remote(layer, &kind, &index))
        return 1;
    const int64_t one[1] = {1};
    fmoe_tensor t;
    fmoe_status st = fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_UINT8, 1, one, &t);
    if (st == FMOE_STATUS_OK) {
        fmoe_layer_tensor_free(layer, &t);
        return 1;
    }
    snprintf(why, cap,
             "conform links no device runtime, so it gives a layer on %s:%d device tensors through the "
             "plugin's memory table (ABI 1.1), and that failed: %s",
             fmoe_device_kind_name(kind), index, fmoe_last_error());
    return 0;
}

fmoe_status cf_forward(fmoe_layer *layer, const fmoe_layer_config *cfg, const cf_inputs *in, int use_logits,
                       float *out_f32, int *guard_ok, char *why, size_t cap)
{
    /* Host layers keep the cheaper path: no copies at all. */
    if (run_device_is_remote(layer, NULL, NULL))
        return forward_on_device(layer, cfg, in, use_logits, out_f32, guard_ok, why, cap);
    return forward_on_host(layer, cfg, in, use_logits, out_f32, guard_ok, why, cap);
}

int cf_compare(const float *got, const float *ref, int64_t m, uint32_t h, const unsigned char *skip_row,
               const cf_tolerance *tol, char *why, size_t cap)
{
    int64_t unwritten = 0, nonfinite = 0, outside = 0, worst = -1, first_bad = -1, counted = 0;
    double worst_excess = 0, sq_err = 0, sq_ref = 0;
    for (int64_t t = 0; t < m; t++) {
        if (skip_row && skip_row[t])
            continue;
        counted += h;
        for (uint32_t c = 0; c < h; c++) {
            int64_t i = t * (int64_t)h + c;
            double a = got[i], b = ref[i];
            if (!isfinite(a) || !isfinite(b)) {
                if (isnan(a) && isfinite(b))
                    unwritten++;
                else
                    nonfinite++;
                if (first_bad < 0)
                    first_bad = i;
                continue;
            }
            double d = fabs(a - b), excess = d - (tol->atol + tol->rtol * fabs(b));
            sq_err += d * d;
            sq_ref += b * b;
            if (excess > 0) {
                outside++;
                if (excess > worst_excess) {
                    worst_excess = excess;
                    worst = i;
                }
            }
        }
    }
    double nmse = sq_ref > 0 ? sq_err / sq_ref : (sq_err > 0 ? INFINITY : 0.0);
    if (unwritten || nonfinite) {
        snprintf(why, cap,
                 "%lld element(s) NaN (not written: still the NaN poison) and %lld other non-finite; "
                 "first at token %lld col %lld (got %g, ref %g)",
                 (long long)unwritten, (long long)nonfinite, (long long)(first_bad / h), (long long)(first_bad % h),
                 (double)got[first_bad], (double)ref[first_bad]);
        return 0;
    }
    /* The manifest's allowance: a whole number of elements, rounded down. */
    int64_t allowed = (int64_t)floor(tol->mismatch * (double)counted);
    if (outside > allowed) {
        snprintf(why, cap,
                 "%lld element(s) outside %g + %g*|ref|%s; worst token %lld col %lld: got %.6g ref %.6g; "
                 "nmse %.3g",
                 (long long)outside, tol->atol, tol->rtol,
                 tol->mismatch > 0 ? " (more than the manifest's mismatch allows)" : "", (long long)(worst / h),
                 (long long)(worst % h), (double)got[worst], (double)ref[worst], nmse);
        return 0;
    }
    if (nmse > tol->nmse) {
        snprintf(why, cap, "nmse %.3g above the gate %.3g (a scale or sign error)", nmse, tol->nmse);
        return 0;
    }
    if (outside)
        snprintf(why, cap,
                 "nmse %.2e; %lld of %lld element(s) outside %g + %g*|ref|, within the manifest's mismatch "
                 "%g (%s: %s)",
                 nmse, (long long)outside, (long long)counted, tol->atol, tol->rtol, tol->mismatch,
                 tol->reason ? tol->reason : "", tol->link ? tol->link : "");
    else
        snprintf(why, cap, "nmse %.2e", nmse);
    return 1;
}
