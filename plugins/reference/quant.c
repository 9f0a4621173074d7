/*
 * plugins/reference/quant.c - the calls every quantized reference method
 * shares: create (instance, expert map, routing buffers, then the family's
 * declare), finalize (the family's post-load processing), apply through
 * refq_run, apply_logits (routing first, EPLB replicas as the unquantized
 * method), destroy. The scheme-specific parts are in method_*.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/kit/eplb.h"
#include "fusedmoe/kit/routing.h"
#include "plugins/reference/quant.h"

static const refq_family *const families[] = {
    &refq_family_fp8,  &refq_family_mxfp8,    &refq_family_mxfp4,    &refq_family_nvfp4,   &refq_family_wna16,
    &refq_family_int8, &refq_family_w4a8_fp8, &refq_family_w4a8_int, &refq_family_megamoe,
};

const refq_family *refq_family_of(const fmoe_scheme *s)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i]->serves(s))
            return families[i];
    return NULL;
}

const fmoe_method *ref_quant_method(const fmoe_scheme *s, int monolithic)
{
    const refq_family *f = refq_family_of(s);
    return !f ? NULL : monolithic ? &f->monolithic : &f->modular;
}

int ref_quant_layer_ok(const fmoe_scheme *s, const fmoe_layer_config *c, char *why, size_t cap)
{
    const refq_family *f = refq_family_of(s);
    return !f || !f->layer_ok || f->layer_ok(c, why, cap);
}

static void *host_alloc(const fmoe_host *h, size_t n)
{
    return h->alloc(h->ctx, n ? n : 1, 0);
}

void refq_param(refq_instance *in, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role, int32_t scale_kind,
                int32_t shard_axis, uint32_t flags, uint32_t ndim, int64_t d1, int64_t d2)
{
    if (in->n_params >= REFQ_MAX_PARAMS)
        return; /* families declare at most 12; refq_finalize's count check catches a bug */
    fmoe_param_desc *d = &in->descs[in->n_params];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dtype;
    d->ndim = ndim;
    d->shape[0] = in->local_experts;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->scale_kind = scale_kind;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
    d->flags = flags;
    in->desc_ptrs[in->n_params] = d;
    in->n_params++;
}

void refq_param_tensor(refq_instance *in, const char *name, int32_t proj, int32_t role)
{
    int pair = proj == FMOE_PROJ_W13 && in->r == 2;
    refq_param(in, name, FMOE_DTYPE_F32, proj, role, FMOE_SCALE_TENSOR, -1, 0, pair ? 2 : 1, pair ? 2 : 0, 0);
}

void refq_param_biases(refq_instance *in)
{
    if (!in->cfg.has_bias)
        return;
    in->bias13 = (int32_t)in->n_params;
    refq_param(in, "w13_bias", in->cfg.act_dtype, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 0, 2,
               (int64_t)in->r * in->inter, 0);
    in->bias2 = (int32_t)in->n_params;
    refq_param(in, "w2_bias", in->cfg.act_dtype, FMOE_PROJ_W2, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, -1, 0, 2, in->hidden,
               0);
}

const fmoe_tensor *refq_get(const refq_instance *in, const fmoe_tensor *const *params, const char *name)
{
    for (uint32_t i = 0; i < in->n_params; i++)
        if (strcmp(in->descs[i].name, name) == 0)
            return params[i];
    return NULL;
}

float *refq_floats(refq_instance *in, int slot, size_t n)
{
    const fmoe_host *h = in->host;
    h->free(h->ctx, in->per_expert[slot]);
    in->per_expert[slot] = host_alloc(h, n * sizeof(float));
    return in->per_expert[slot];
}

fmoe_status refq_size_error(refq_instance *in, fmoe_error *err, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s", text);
}

void refq_log(refq_instance *in, int32_t level, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    in->host->log(in->host->ctx, level, text);
}

static void destroy_instance(refq_instance *in)
{
    const fmoe_host *h = in->host;
    refq_matrix_free(&in->w13);
    refq_matrix_free(&in->w2);
    for (size_t i = 0; i < sizeof in->per_expert / sizeof in->per_expert[0]; i++)
        h->free(h->ctx, in->per_expert[i]);
    h->free(h->ctx, in->expert_map);
    h->free(h->ctx, in->route_w);
    h->free(h->ctx, in->route_ids);
    h->free(h->ctx, in->route_scratch);
    h->free(h->ctx, in);
}

static fmoe_status alloc_buffers(refq_instance *in, const fmoe_create_args *a)
{
    const fmoe_host *h = in->host;
    size_t slots = (size_t)in->cfg.max_num_tokens * in->cfg.top_k;
    in->route_w = host_alloc(h, slots * sizeof(float));
    in->route_ids = host_alloc(h, slots * sizeof(int32_t));
    in->route_scratch = host_alloc(h,
                                   (size_t)(in->cfg.num_experts + fmoe_route_scratch_floats(&in->cfg)) * sizeof(float));
    if (a->expert_map) {
        in->expert_map = host_alloc(h, in->global_experts * sizeof(int32_t));
        if (in->expert_map)
            memcpy(in->expert_map, a->expert_map, in->global_experts * sizeof(int32_t));
    }
    if (!in->route_w || !in->route_ids || !in->route_scratch || (a->expert_map && !in->expert_map))
        return FMOE_STATUS_OUT_OF_MEMORY;
    return FMOE_STATUS_OK;
}

fmoe_status refq_create(fmoe_create_args *a)
{
    const ref_state *st = a->state;
    const fmoe_host *h = st->host;
    const refq_family *family = refq_family_of(a->scheme);
    if (!family)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "no reference method serves this scheme");
    refq_instance *in = host_alloc(h, sizeof *in);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    in->family = family;
    memcpy(&in->cfg, a->config, sizeof in->cfg < a->config->struct_size ? sizeof in->cfg : a->config->struct_size);
    memcpy(&in->scheme, a->scheme,
           sizeof in->scheme < a->scheme->struct_size ? sizeof in->scheme : a->scheme->struct_size);
    in->nvfp4_dequant = st->nvfp4_dequant;
    in->hidden = a->hidden_size;
    in->inter = a->intermediate_per_rank;
    in->local_experts = a->num_local_experts;
    in->global_experts = a->num_global_experts;
    in->r = in->cfg.gated ? 2 : 1;
    in->bias13 = in->bias2 = -1;
    fmoe_status s = alloc_buffers(in, a);
    if (s != FMOE_STATUS_OK) {
        destroy_instance(in);
        return h->error_set(a->err, s, "out of memory");
    }
    if ((s = family->declare(in, a->err)) != FMOE_STATUS_OK) {
        destroy_instance(in);
        return s;
    }
    a->instance = in;
    return FMOE_STATUS_OK;
}

fmoe_status refq_declare(fmoe_declare_params_args *a)
{
    refq_instance *in = a->instance;
    a->params = in->desc_ptrs;
    a->n_params = in->n_params;
    return FMOE_STATUS_OK;
}

fmoe_status refq_finalize(fmoe_finalize_args *a)
{
    refq_instance *in = a->instance;
    if (a->n_params != in->n_params)
        return in->host->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                                   in->n_params);
    in->correction_bias = a->correction_bias ? a->correction_bias->data : NULL;
    in->b13 = in->bias13 >= 0 ? a->params[in->bias13]->data : NULL;
    in->b2 = in->bias2 >= 0 ? a->params[in->bias2]->data : NULL;
    return in->family->finalize(in, a->params, a->err);
}

static fmoe_status run(refq_instance *in, fmoe_error *err, const fmoe_tensor *x, const float *w, const int32_t *ids,
                       fmoe_tensor *out)
{
    if (in->family->run)
        return in->family->run(in, err, x, w, ids, out);
    refq_problem p = {
        .cfg = &in->cfg,
        .hidden = in->hidden,
        .inter = in->inter,
        .local_experts = in->local_experts,
        .global_experts = in->global_experts,
        .expert_map = in->expert_map,
        .w13 = &in->w13,
        .w2 = &in->w2,
        .a1 = &in->a1,
        .a2 = &in->a2,
        .bias_dtype = in->cfg.act_dtype,
        .b13 = in->b13,
        .b2 = in->b2,
        .m = x->shape[0],
        .x = x->data,
        .x_ld = x->strides[0],
        .out = out->data,
        .out_ld = out->strides[0],
        .topk_w = w,
        .topk_ids = ids,
    };
    if (refq_run(&p) != 0)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory in the quantized reference loop");
    return FMOE_STATUS_OK;
}

fmoe_status refq_apply(fmoe_apply_args *a)
{
    refq_instance *in = a->instance;
    return run(in, a->err, a->x, a->topk_weights->data, a->topk_ids->data, a->out);
}

fmoe_status refq_apply_logits(fmoe_apply_logits_args *a)
{
    refq_instance *in = a->instance;
    const fmoe_layer_config *cfg = &in->cfg;
    const fmoe_tensor *lg = a->router_logits;
    int64_t m = a->x->shape[0], k = cfg->top_k;
    fmoe_route_logits(cfg, lg->data, lg->dtype, m, lg->strides[0], lg->strides[1], in->correction_bias, in->route_w,
                      in->route_ids, in->route_scratch);
    if (a->topk_weights_out)
        memcpy(a->topk_weights_out->data, in->route_w, (size_t)(m * k) * sizeof(float));
    if (a->topk_ids_out)
        memcpy(a->topk_ids_out->data, in->route_ids, (size_t)(m * k) * sizeof(int32_t));
    if (cfg->num_redundant_experts)
        fmoe_eplb_map_ids(cfg->num_experts, cfg->num_redundant_experts, in->route_ids, m * k);
    return run(in, a->err, a->x, in->route_w, in->route_ids, a->out);
}

void refq_destroy(fmoe_destroy_args *a)
{
    destroy_instance(a->instance);
}
