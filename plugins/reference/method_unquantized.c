/*
 * plugins/reference/method_unquantized.c - the unquantized method: f32/bf16/
 * f16 weights in the checkpoint layout (w13 [E, r*I, H], w2 [E, H, I]),
 * computed by the core's reference loop. Supports EP expert maps, EPLB
 * replicas and, in the monolithic flavour, routing inside apply_logits.
 */
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/eplb.h"
#include "fusedmoe/kit/reference_experts.h"
#include "fusedmoe/kit/routing.h"
#include "plugins/reference/reference.h"

#define MAX_PARAMS 4

typedef struct ref_instance {
    const fmoe_host *host;
    fmoe_layer_config cfg;
    fmoe_dtype w_dtype;
    uint32_t hidden, inter, local_experts, global_experts;
    int32_t *expert_map; /* NULL: identity */
    fmoe_param_desc descs[MAX_PARAMS];
    const fmoe_param_desc *desc_ptrs[MAX_PARAMS];
    uint32_t n_params;
    const void *w13, *w2, *b13, *b2; /* host params, valid until destroy */
    const float *correction_bias;
    /* Monolithic routing buffers, sized at create (no allocation in apply). */
    float *route_w;
    int32_t *route_ids;
    float *route_scratch;
} ref_instance;

static void *host_alloc(const fmoe_host *h, size_t n)
{
    return h->alloc(h->ctx, n ? n : 1, 0);
}

static void add_param(ref_instance *in, const char *name, int32_t proj, int32_t role, uint32_t ndim, int64_t d1,
                      int64_t d2, int32_t shard_axis)
{
    fmoe_param_desc *d = &in->descs[in->n_params];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = in->w_dtype;
    d->ndim = ndim;
    d->shape[0] = in->local_experts;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
    in->desc_ptrs[in->n_params] = d;
    in->n_params++;
}

static void destroy_instance(ref_instance *in)
{
    const fmoe_host *h = in->host;
    h->free(h->ctx, in->expert_map);
    h->free(h->ctx, in->route_w);
    h->free(h->ctx, in->route_ids);
    h->free(h->ctx, in->route_scratch);
    h->free(h->ctx, in);
}

static fmoe_status ref_create(fmoe_create_args *a)
{
    const ref_state *st = a->state;
    const fmoe_host *h = st->host;
    ref_instance *in = host_alloc(h, sizeof *in);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    memcpy(&in->cfg, a->config, sizeof in->cfg < a->config->struct_size ? sizeof in->cfg : a->config->struct_size);
    in->w_dtype = a->scheme->w_dtype;
    in->hidden = a->hidden_size;
    in->inter = a->intermediate_per_rank;
    in->local_experts = a->num_local_experts;
    in->global_experts = a->num_global_experts;
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
    if (!in->route_w || !in->route_ids || !in->route_scratch || (a->expert_map && !in->expert_map)) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    uint32_t rows13 = (in->cfg.gated ? 2u : 1u) * in->inter;
    add_param(in, "w13_weight", FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, 3, rows13, in->hidden, 0);
    add_param(in, "w2_weight", FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, 3, in->hidden, in->inter, 1);
    if (in->cfg.has_bias) {
        add_param(in, "w13_bias", FMOE_PROJ_W13, FMOE_ROLE_BIAS, 2, rows13, 0, 0);
        add_param(in, "w2_bias", FMOE_PROJ_W2, FMOE_ROLE_BIAS, 2, in->hidden, 0, -1);
    }
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status ref_declare(fmoe_declare_params_args *a)
{
    ref_instance *in = a->instance;
    a->params = in->desc_ptrs;
    a->n_params = in->n_params;
    return FMOE_STATUS_OK;
}

static fmoe_status ref_finalize(fmoe_finalize_args *a)
{
    ref_instance *in = a->instance;
    if (a->n_params != in->n_params)
        return in->host->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                                   in->n_params);
    /* The reference computes straight from the host copies. */
    in->w13 = a->params[0]->data;
    in->w2 = a->params[1]->data;
    in->b13 = in->cfg.has_bias ? a->params[2]->data : NULL;
    in->b2 = in->cfg.has_bias ? a->params[3]->data : NULL;
    in->correction_bias = a->correction_bias ? a->correction_bias->data : NULL;
    return FMOE_STATUS_OK;
}

static fmoe_status run_experts(ref_instance *in, fmoe_error *err, const fmoe_tensor *x, const float *w,
                               const int32_t *ids, fmoe_tensor *out)
{
    fmoe_ref_problem p = {
        .cfg = &in->cfg,
        .hidden = in->hidden,
        .inter = in->inter,
        .local_experts = in->local_experts,
        .global_experts = in->global_experts,
        .expert_map = in->expert_map,
        .w_dtype = in->w_dtype,
        .w13 = in->w13,
        .w2 = in->w2,
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
    if (fmoe_ref_experts_unquantized(&p) != 0)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory in the reference loop");
    return FMOE_STATUS_OK;
}

static fmoe_status ref_apply(fmoe_apply_args *a)
{
    ref_instance *in = a->instance;
    return run_experts(in, a->err, a->x, a->topk_weights->data, a->topk_ids->data, a->out);
}

static fmoe_status ref_apply_logits(fmoe_apply_logits_args *a)
{
    ref_instance *in = a->instance;
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
    return run_experts(in, a->err, a->x, in->route_w, in->route_ids, a->out);
}

static void ref_destroy(fmoe_destroy_args *a)
{
    destroy_instance(a->instance);
}

const fmoe_method ref_method_unquantized = {
    .struct_size = sizeof(fmoe_method),
    .name = "unquantized",
    .flags = FMOE_METHOD_EPLB,
    .create = ref_create,
    .declare_params = ref_declare,
    .finalize = ref_finalize,
    .apply = ref_apply,
    .apply_logits = NULL,
    .destroy = ref_destroy,
};

const fmoe_method ref_method_unquantized_monolithic = {
    .struct_size = sizeof(fmoe_method),
    .name = "unquantized-monolithic",
    .flags = FMOE_METHOD_EPLB | FMOE_METHOD_MONOLITHIC,
    .create = ref_create,
    .declare_params = ref_declare,
    .finalize = ref_finalize,
    .apply = NULL,
    .apply_logits = ref_apply_logits,
    .destroy = ref_destroy,
};
