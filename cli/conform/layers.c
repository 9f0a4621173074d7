/* cli/conform/layers.c - layers through the public API (see layers.h). */
#include "cli/conform/layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/guard.h"
#include "cli/halfconv.h"
#include "cli/rng.h"
#include "cli/synth/synth.h"

fmoe_status cf_create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                      const char *backend, int32_t dev_kind, int32_t dev_index, fmoe_layer **out)
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
    synth_spec spec = {.seed = w->seed, .cfg = w->cfg, .scheme = &scheme, .correction_bias = w->correction_bias,
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

static fmoe_status forward_with(fmoe_layer *layer, const cf_inputs *in, int use_logits, fmoe_tensor *out)
{
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &in->tx, .out = out};
    if (use_logits) {
        a.router_logits = &in->tlogits;
    } else {
        a.topk_weights = &in->tw;
        a.topk_ids = &in->tids;
    }
    return fmoe_layer_forward(layer, &a);
}

fmoe_status cf_forward(fmoe_layer *layer, const fmoe_layer_config *cfg, const cf_inputs *in, int use_logits,
                       float *out_f32, int *guard_ok)
{
    size_t n = (size_t)in->m * cfg->hidden_size, bytes = n * fmoe_dtype_size(cfg->act_dtype);
    unsigned char *buf = cf_guarded_alloc(bytes);
    *guard_ok = 1;
    if (!buf)
        return FMOE_STATUS_OUT_OF_MEMORY;
    const int64_t shape[2] = {in->m, cfg->hidden_size};
    fmoe_tensor out;
    fmoe_status st = fmoe_tensor_init(&out, cfg->act_dtype, 2, shape, buf);
    for (int attempt = 0; st == FMOE_STATUS_OK && attempt < 2; attempt++) {
        memset(buf, 0xFF, bytes); /* NaN in f32, bf16 and f16 */
        st = forward_with(layer, in, use_logits, &out);
        /* A monolithic method takes router logits only; give it those. */
        if (st == FMOE_STATUS_INVALID_ARGUMENT && !use_logits && strstr(fmoe_last_error(), "monolithic")) {
            use_logits = 1;
            st = FMOE_STATUS_OK;
            continue;
        }
        break;
    }
    *guard_ok = cf_guard_intact(buf);
    if (st == FMOE_STATUS_OK)
        cli_load_floats(cfg->act_dtype, out_f32, buf, n);
    cf_guarded_free(buf);
    return st;
}

int cf_compare(const float *got, const float *ref, int64_t m, uint32_t h, const unsigned char *skip_row,
               const cf_tolerance *tol, char *why, size_t cap)
{
    int64_t unwritten = 0, nonfinite = 0, outside = 0, worst = -1, first_bad = -1;
    double worst_excess = 0, sq_err = 0, sq_ref = 0;
    for (int64_t t = 0; t < m; t++) {
        if (skip_row && skip_row[t])
            continue;
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
        snprintf(why, cap, "%lld element(s) NaN (not written: still the NaN poison) and %lld other non-finite; "
                 "first at token %lld col %lld (got %g, ref %g)", (long long)unwritten, (long long)nonfinite,
                 (long long)(first_bad / h), (long long)(first_bad % h), (double)got[first_bad],
                 (double)ref[first_bad]);
        return 0;
    }
    if (outside) {
        snprintf(why, cap, "%lld element(s) outside %g + %g*|ref|; worst token %lld col %lld: got %.6g ref %.6g; "
                 "nmse %.3g", (long long)outside, tol->atol, tol->rtol, (long long)(worst / h),
                 (long long)(worst % h), (double)got[worst], (double)ref[worst], nmse);
        return 0;
    }
    if (nmse > tol->nmse) {
        snprintf(why, cap, "nmse %.3g above the gate %.3g (a scale or sign error)", nmse, tol->nmse);
        return 0;
    }
    snprintf(why, cap, "nmse %.2e", nmse);
    return 1;
}
