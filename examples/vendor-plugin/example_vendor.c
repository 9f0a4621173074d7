/*
 * example_vendor.c - a complete, minimal fusedmoe backend written the way a
 * vendor would: only <fusedmoe/plugin.h>, one exported symbol, its own
 * kernels. It serves f32 weights with the gated SiLU activation, f32
 * activations, no bias, no expert parallelism, routing given (modular),
 * and says exactly why it refuses anything else.
 */
#include <fusedmoe/plugin.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct state {
    const fmoe_host *host;
    uint32_t score; /* option "score": what the probe reports */
} state;

typedef struct instance {
    const fmoe_host *host;
    uint32_t hidden, inter, experts, top_k;
    fmoe_param_desc w13, w2;
    const fmoe_param_desc *descs[2];
    const float *w13_data, *w2_data;
    float *act; /* [inter] scratch, sized at create: apply never allocates */
} instance;

/* Options are declared in the manifest ([[option]]), so the host has
 * already refused unknown names and ill-typed values; init still checks,
 * because the plugin may be loaded without its manifest. */
static fmoe_status ex_init(fmoe_init_args *a)
{
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_init_args, state) || !a->host)
        return FMOE_STATUS_INVALID_ARGUMENT;
    uint32_t score = 50;
    for (uint32_t i = 0; i < a->n_options; i++) {
        const fmoe_option *o = a->options[i];
        long long v = 0;
        if (strcmp(o->key, "score") != 0)
            return a->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                      "unknown option '%s' (example_vendor takes: score)", o->key);
        if (fmoe_option_parse_int(o->value, 1, 100, &v) != 0)
            return a->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                      "option 'score' = \"%s\": expected an integer in 1..100", o->value);
        score = (uint32_t)v;
    }
    state *s = a->host->alloc(a->host->ctx, sizeof *s, 0);
    if (!s)
        return a->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    s->host = a->host;
    s->score = score;
    a->state = s;
    return FMOE_STATUS_OK;
}

static void ex_shutdown(void *p)
{
    state *s = p;
    s->host->free(s->host->ctx, s);
}

/* R1: read only what the host's struct holds; write only into the slots
 * it gave (capacity 0 is legal: report nothing). */
static fmoe_status ex_probe(fmoe_probe_args *a)
{
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_probe_args, count))
        return FMOE_STATUS_INVALID_ARGUMENT;
    const state *s = a->state;
    a->count = 0;
    if (a->capacity < 1 || !a->reports || !a->reports[0])
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    if (r->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_device_report, memory_bytes))
        return FMOE_STATUS_OK;
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = s ? s->score : 50;
    snprintf(r->name, sizeof r->name, "Example Silicon host engine");
    snprintf(r->id, sizeof r->id, "cpu");
    a->count = 1;
    return FMOE_STATUS_OK;
}

/* One line saying why a layer is not served, or NULL. */
static const char *refusal(const fmoe_query_args *a)
{
    const fmoe_layer_config *c = a->config;
    if (a->scheme->w_dtype != FMOE_DTYPE_F32 || a->scheme->w_strategy != FMOE_QSTRATEGY_NONE)
        return "only unquantized f32 weights";
    if (c->act_dtype != FMOE_DTYPE_F32)
        return "only f32 activations";
    if (c->activation != FMOE_ACT_SILU || !c->gated || c->swiglu_limit != 0)
        return "only gated SiLU without clamp";
    if (c->has_bias || c->ep_size != 1 || c->enable_eplb || c->apply_router_weight_on_input)
        return "no bias, expert parallelism, EPLB or router weight on input";
    return NULL;
}

static const fmoe_method ex_method;

static fmoe_status ex_query(fmoe_query_args *a)
{
    const char *why = refusal(a);
    if (why) {
        snprintf(a->reason, sizeof a->reason, "example_vendor serves %s", why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    a->method = &ex_method;
    a->score = 50;
    snprintf(a->reason, sizeof a->reason, "example f32 kernels");
    return FMOE_STATUS_OK;
}

static void describe(fmoe_param_desc *d, const char *name, int32_t proj, int64_t e, int64_t r, int64_t c, int32_t axis)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = FMOE_DTYPE_F32;
    d->ndim = 3;
    d->shape[0] = e;
    d->shape[1] = r;
    d->shape[2] = c;
    d->projection = proj;
    d->role = FMOE_ROLE_WEIGHT;
    d->shard_axis = axis;
    d->per_expert = 1;
}

static fmoe_status ex_create(fmoe_create_args *a)
{
    const state *s = a->state;
    instance *in = s->host->alloc(s->host->ctx, sizeof *in, 0);
    if (!in)
        return s->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = s->host;
    in->hidden = a->hidden_size;
    in->inter = a->intermediate_per_rank;
    in->experts = a->num_local_experts;
    in->top_k = a->config->top_k;
    in->act = s->host->alloc(s->host->ctx, (size_t)in->inter * sizeof(float), 0);
    if (!in->act) {
        s->host->free(s->host->ctx, in);
        return s->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    describe(&in->w13, "w13_weight", FMOE_PROJ_W13, in->experts, 2 * (int64_t)in->inter, in->hidden, 0);
    describe(&in->w2, "w2_weight", FMOE_PROJ_W2, in->experts, in->hidden, in->inter, 1);
    in->descs[0] = &in->w13;
    in->descs[1] = &in->w2;
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status ex_declare(fmoe_declare_params_args *a)
{
    instance *in = a->instance;
    a->params = in->descs;
    a->n_params = 2;
    return FMOE_STATUS_OK;
}

static fmoe_status ex_finalize(fmoe_finalize_args *a)
{
    instance *in = a->instance;
    in->w13_data = a->params[0]->data;
    in->w2_data = a->params[1]->data;
    return FMOE_STATUS_OK;
}

static float silu(float v)
{
    return v / (1.0f + expf(-v));
}

static fmoe_status ex_apply(fmoe_apply_args *a)
{
    instance *in = a->instance;
    const uint32_t H = in->hidden, I = in->inter, k = in->top_k;
    float *act = in->act;
    for (int64_t t = 0; t < a->x->shape[0]; t++) {
        const float *x = (const float *)a->x->data + t * a->x->strides[0];
        float *y = (float *)a->out->data + t * a->out->strides[0];
        memset(y, 0, H * sizeof *y);
        for (uint32_t j = 0; j < k; j++) {
            int32_t e = ((const int32_t *)a->topk_ids->data)[t * k + j];
            float w = ((const float *)a->topk_weights->data)[t * k + j];
            if (e < 0 || (uint32_t)e >= in->experts)
                continue;
            const float *w13 = in->w13_data + (size_t)e * 2 * I * H, *w2 = in->w2_data + (size_t)e * H * I;
            for (uint32_t i = 0; i < I; i++) {
                float g = 0, u = 0;
                for (uint32_t h = 0; h < H; h++) {
                    g += x[h] * w13[(size_t)i * H + h];
                    u += x[h] * w13[(size_t)(I + i) * H + h];
                }
                act[i] = silu(g) * u;
            }
            for (uint32_t h = 0; h < H; h++) {
                float s = 0;
                for (uint32_t i = 0; i < I; i++)
                    s += act[i] * w2[(size_t)h * I + i];
                y[h] += w * s;
            }
        }
    }
    return FMOE_STATUS_OK;
}

static void ex_destroy(fmoe_destroy_args *a)
{
    instance *in = a->instance;
    in->host->free(in->host->ctx, in->act);
    in->host->free(in->host->ctx, in);
}

static const fmoe_method ex_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "f32-silu",
    .create = ex_create,
    .declare_params = ex_declare,
    .finalize = ex_finalize,
    .apply = ex_apply,
    .destroy = ex_destroy,
};

static const fmoe_plugin ex_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "example_vendor",
    .vendor = "Example Silicon",
    .version = "1.0.0",
    .build_id = "",
    .init = ex_init,
    .probe = ex_probe,
    .query = ex_query,
    .shutdown = ex_shutdown,
};

/* The one exported symbol, with the ABI checks every plugin needs. */
FMOE_DEFINE_PLUGIN_ENTRY(ex_plugin)
