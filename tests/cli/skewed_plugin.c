/*
 * tests/cli/skewed_plugin.c - a backend that is wrong on purpose, so the CLI
 * tests can see `fusedmoe run` catch it. It declares the unquantized
 * parameters exactly like a real backend (so loading and finalize go
 * through the core as usual) and then misbehaves as its one option says:
 *
 *   [plugins.skewed.options]
 *   mode = "zero"           apply writes zeros: run must FAIL (exit 1)
 *   mode = "fail_finalize"  finalize reports a plugin error (exit 5)
 *   mode = "fail_apply"     apply reports a device error (exit 5)
 *   mode = "nan"            apply writes NaN: run must FAIL and say so
 *
 * It scores 100 on the host CPU, so it outranks the reference.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/plugin.h"

#define MODE_ZERO          0
#define MODE_FAIL_FINALIZE 1
#define MODE_FAIL_APPLY    2
#define MODE_NAN           3

typedef struct sk_state {
    const fmoe_host *host;
    int mode;
} sk_state;

typedef struct sk_instance {
    const sk_state *st;
    fmoe_param_desc descs[4];
    const fmoe_param_desc *ptrs[4];
    uint32_t n;
} sk_instance;

static fmoe_status sk_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    sk_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    st->host = h;
    st->mode = MODE_ZERO;
    for (uint32_t i = 0; i < a->n_options; i++) {
        const fmoe_option *o = a->options[i];
        static const char *const modes[] = {"zero", "fail_finalize", "fail_apply", "nan"};
        int found = -1;
        for (int m = 0; m < 4; m++)
            if (strcmp(o->key, "mode") == 0 && strcmp(o->value, modes[m]) == 0)
                found = m;
        if (found < 0) {
            h->free(h->ctx, st);
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "bad option %s = %s", o->key, o->value);
        }
        st->mode = found;
    }
    a->state = st;
    return FMOE_STATUS_OK;
}

static void sk_shutdown(void *state)
{
    sk_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status sk_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = 100;
    snprintf(r->name, sizeof r->name, "skewed test device");
    snprintf(r->id, sizeof r->id, "cpu");
    a->count = 1;
    return FMOE_STATUS_OK;
}

static void add(sk_instance *in, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role, uint32_t ndim,
                int64_t e, int64_t d1, int64_t d2, int32_t shard_axis)
{
    fmoe_param_desc *d = &in->descs[in->n];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dtype;
    d->ndim = ndim;
    d->shape[0] = e;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
    in->ptrs[in->n++] = d;
}

static fmoe_status sk_create(fmoe_create_args *a)
{
    const sk_state *st = a->state;
    const fmoe_host *h = st->host;
    sk_instance *in = h->alloc(h->ctx, sizeof *in, 0);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->st = st;
    const fmoe_layer_config *c = a->config;
    int64_t e = a->num_local_experts, hid = a->hidden_size, inter = a->intermediate_per_rank;
    int64_t rows = (c->gated ? 2 : 1) * inter;
    fmoe_dtype w = a->scheme->w_dtype;
    add(in, "w13_weight", w, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, 3, e, rows, hid, 0);
    add(in, "w2_weight", w, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, 3, e, hid, inter, 1);
    if (c->has_bias) {
        add(in, "w13_bias", w, FMOE_PROJ_W13, FMOE_ROLE_BIAS, 2, e, rows, 0, 0);
        add(in, "w2_bias", w, FMOE_PROJ_W2, FMOE_ROLE_BIAS, 2, e, hid, 0, -1);
    }
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status sk_declare(fmoe_declare_params_args *a)
{
    sk_instance *in = a->instance;
    a->params = in->ptrs;
    a->n_params = in->n;
    return FMOE_STATUS_OK;
}

static fmoe_status sk_finalize(fmoe_finalize_args *a)
{
    const sk_instance *in = a->instance;
    if (in->st->mode == MODE_FAIL_FINALIZE)
        return in->st->host->error_set(a->err, FMOE_STATUS_PLUGIN_ERROR, "skewed: finalize fails on purpose");
    return FMOE_STATUS_OK;
}

static fmoe_status sk_apply(fmoe_apply_args *a)
{
    const sk_instance *in = a->instance;
    if (in->st->mode == MODE_FAIL_APPLY)
        return in->st->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "skewed: apply fails on purpose");
    /* All-zero bytes are 0.0 in f32, bf16 and f16 alike; all-one bytes are
     * a NaN in each of them. */
    const fmoe_tensor *o = a->out;
    size_t esize = o->dtype == FMOE_DTYPE_F32 ? 4 : 2;
    int fill = in->st->mode == MODE_NAN ? 0xff : 0;
    for (int64_t r = 0; r < o->shape[0]; r++)
        memset((char *)o->data + (size_t)(r * o->strides[0]) * esize, fill, (size_t)o->shape[1] * esize);
    return FMOE_STATUS_OK;
}

static void sk_destroy(fmoe_destroy_args *a)
{
    sk_instance *in = a->instance;
    in->st->host->free(in->st->host->ctx, in);
}

static const fmoe_method sk_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "skewed",
    .create = sk_create,
    .declare_params = sk_declare,
    .finalize = sk_finalize,
    .apply = sk_apply,
    .destroy = sk_destroy,
};

static fmoe_status sk_query(fmoe_query_args *a)
{
    const fmoe_scheme *s = a->scheme;
    if (s->w_strategy != FMOE_QSTRATEGY_NONE || s->a_strategy != FMOE_QSTRATEGY_NONE) {
        snprintf(a->reason, sizeof a->reason, "skewed serves unquantized layers only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    a->method = &sk_method;
    a->score = 100;
    snprintf(a->reason, sizeof a->reason, "skewed accepts (and will be wrong)");
    return FMOE_STATUS_OK;
}

static const fmoe_plugin sk_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "skewed",
    .vendor = "fusedmoe tests",
    .version = "0.0.1",
    .build_id = "",
    .init = sk_init,
    .probe = sk_probe,
    .query = sk_query,
    .shutdown = sk_shutdown,
};

FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *a)
{
    if (!a || !a->host || a->host->abi_major != FMOE_ABI_MAJOR)
        return FMOE_STATUS_ABI_MISMATCH;
    a->plugin = &sk_plugin;
    return FMOE_STATUS_OK;
}
