/*
 * core/layer.c - create (select + instantiate + declare), finalize,
 * forward and destroy a layer. Loading is in layer_load.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/ep_group.h"
#include "core/layer.h"
#include "core/tensor.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/eplb.h"
#include "fusedmoe/kit/routing.h"

void fmoe_layer_options_init(fmoe_layer_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->device_kind = FMOE_DEVICE_ANY;
    opts->device_index = -1;
}

static fmoe_status method_error(const fmoe_layer *layer, const char *call, fmoe_status st, const fmoe_error *err)
{
    return fmoe_error_set(st == FMOE_STATUS_OK ? FMOE_STATUS_PLUGIN_ERROR : st, "%s/%s %s failed (%s): %s",
                          layer->chosen->plugin->name, layer->method->name, call, fmoe_status_name(st),
                          fmoe_plugin_error_text(err, "no message"));
}

static fmoe_status run_roundup(fmoe_layer *layer)
{
    layer->hidden = layer->cfg.hidden_size;
    layer->inter = layer->inter_ckpt;
    if (!layer->method->roundup_sizes)
        return FMOE_STATUS_OK;
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_roundup_args a = {.struct_size = sizeof a,
                           .err = &err,
                           .config = &layer->cfg,
                           .scheme = &layer->scheme,
                           .hidden_size = layer->hidden,
                           .intermediate_per_rank = layer->inter};
    fmoe_status st = layer->method->roundup_sizes(&a);
    if (st != FMOE_STATUS_OK)
        return method_error(layer, "roundup_sizes", st, &err);
    /* Padding may only grow a size: shrinking would drop checkpoint data. */
    if (a.hidden_size < layer->hidden || a.intermediate_per_rank < layer->inter)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR,
                              "%s/%s roundup_sizes shrank the layer (hidden %u -> %u, intermediate %u -> %u)",
                              layer->chosen->plugin->name, layer->method->name, layer->hidden, a.hidden_size,
                              layer->inter, a.intermediate_per_rank);
    layer->hidden = a.hidden_size;
    layer->inter = a.intermediate_per_rank;
    return FMOE_STATUS_OK;
}

static fmoe_status instantiate(fmoe_layer *layer)
{
    const fmoe_candidate_rec *c = layer->chosen;
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_create_args a = {.struct_size = sizeof a,
                          .err = &err,
                          .state = c->plugin->plugin_state,
                          .config = &layer->cfg,
                          .scheme = &layer->scheme,
                          .device_kind = c->device_kind,
                          .device_index = c->device_index,
                          .hidden_size = layer->hidden,
                          .intermediate_per_rank = layer->inter,
                          .num_local_experts = layer->local_experts,
                          .num_global_experts = layer->global_experts,
                          .expert_map = layer->cfg.ep_size > 1 ? layer->expert_map : NULL,
                          .ep_group = layer->ep ? layer->ep->group : NULL};
    fmoe_status st = layer->method->create(&a);
    if (st != FMOE_STATUS_OK)
        return method_error(layer, "create", st, &err);
    layer->instance = a.instance;
    fmoe_plugin_error_reset(&err);
    fmoe_declare_params_args d = {.struct_size = sizeof d, .err = &err, .instance = layer->instance};
    st = layer->method->declare_params(&d);
    if (st != FMOE_STATUS_OK)
        return method_error(layer, "declare_params", st, &err);
    return fmoe_layer_alloc_params(layer, d.params, d.n_params);
}

static fmoe_status alloc_routing(fmoe_layer *layer)
{
    size_t slots = (size_t)layer->cfg.max_num_tokens * layer->cfg.top_k;
    layer->route_w = malloc(slots * sizeof *layer->route_w);
    layer->route_ids = malloc(slots * sizeof *layer->route_ids);
    layer->route_scratch = malloc(((size_t)layer->cfg.num_experts + (size_t)fmoe_route_scratch_floats(&layer->cfg)) *
                                  sizeof(float));
    if (!layer->route_w || !layer->route_ids || !layer->route_scratch)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory for routing buffers (%zu slots)", slots);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_layer_create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                              const fmoe_layer_options *opts, fmoe_layer **out)
{
    fmoe_error_clear();
    if (!ctx || !cfg || !scheme || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_create: NULL argument");
    *out = NULL;
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    fmoe_layer_options o;
    fmoe_layer_options_init(&o);
    if (opts)
        memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    fmoe_layer *layer = calloc(1, sizeof *layer);
    if (!layer)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    layer->ctx = ctx;
    layer->routing_bias = -1;
    pthread_mutex_init(&layer->lock, NULL);
    memcpy(&layer->cfg, cfg, cfg->struct_size < sizeof layer->cfg ? cfg->struct_size : sizeof layer->cfg);
    layer->cfg.struct_size = sizeof layer->cfg;
    memcpy(&layer->scheme, scheme,
           scheme->struct_size < sizeof layer->scheme ? scheme->struct_size : sizeof layer->scheme);
    layer->scheme.struct_size = sizeof layer->scheme;
    if (FMOE_HAS_FIELD(&o, ep_group) && o.ep_group && (st = fmoe_layer_ep_bind(layer, &o)) != FMOE_STATUS_OK) {
        fmoe_layer_destroy(layer);
        return st;
    }
    layer->global_experts = fmoe_layer_config_global_experts(&layer->cfg);
    layer->local_experts = fmoe_layer_config_local_experts(&layer->cfg);
    layer->inter_ckpt = fmoe_layer_config_intermediate_per_rank(&layer->cfg);
    layer->expert_map = malloc(layer->global_experts * sizeof *layer->expert_map);
    layer->load = calloc(layer->global_experts, sizeof *layer->load);
    if (!layer->expert_map) {
        fmoe_layer_destroy(layer);
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    st = fmoe_layer_config_expert_map(&layer->cfg, layer->expert_map, layer->global_experts);
    /* A layer on an EP group runs on the group's plugin and device only. */
    fmoe_select_filter filter = {o.device_kind, o.device_index, o.backend, NULL};
    if (layer->ep) {
        filter.backend = layer->ep->plugin->name;
        filter.ep_group = layer->ep->group;
    }
    if (st == FMOE_STATUS_OK)
        st = fmoe_registry_select(&ctx->registry, &layer->cfg, &layer->scheme, &filter, &layer->selection);
    if (st == FMOE_STATUS_OK) {
        layer->chosen = &layer->selection->candidates[layer->selection->chosen];
        layer->method = layer->chosen->method;
        if (layer->ep)
            st = fmoe_layer_ep_check_method(layer);
        if (st == FMOE_STATUS_OK)
            st = run_roundup(layer);
    }
    if (st == FMOE_STATUS_OK)
        st = instantiate(layer);
    if (st == FMOE_STATUS_OK)
        st = alloc_routing(layer);
    if (st != FMOE_STATUS_OK) {
        fmoe_layer_destroy(layer);
        return st;
    }
    *out = layer;
    return FMOE_STATUS_OK;
}

void fmoe_layer_destroy(fmoe_layer *layer)
{
    if (!layer)
        return;
    if (layer->instance) {
        fmoe_destroy_args a = {.struct_size = sizeof a, .instance = layer->instance};
        layer->method->destroy(&a);
    }
    fmoe_layer_tensor_free(layer, &layer->load_dev); /* through the plugin: before the selection goes */
    fmoe_layer_free_params(layer);
    fmoe_selection_destroy(layer->selection);
    free(layer->expert_map);
    free(layer->route_w);
    free(layer->route_ids);
    free(layer->route_scratch);
    free(layer->expert_owner);
    free(layer->load);
    pthread_mutex_destroy(&layer->lock);
    free(layer);
}

const fmoe_selection *fmoe_layer_selection(const fmoe_layer *layer)
{
    return layer ? layer->selection : NULL;
}

const fmoe_layer_config *fmoe_layer_get_config(const fmoe_layer *layer)
{
    return layer ? &layer->cfg : NULL;
}

static fmoe_status finalize_locked(fmoe_layer *layer);

fmoe_status fmoe_layer_finalize(fmoe_layer *layer)
{
    fmoe_error_clear();
    if (!layer)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_finalize: layer is NULL");
    pthread_mutex_lock(&layer->lock);
    fmoe_status st = finalize_locked(layer);
    pthread_mutex_unlock(&layer->lock);
    return st;
}

static fmoe_status finalize_locked(fmoe_layer *layer)
{
    if (layer->state != FMOE_LAYER_CREATED)
        return fmoe_error_set(FMOE_STATUS_BAD_STATE, "fmoe_layer_finalize: layer is already finalized");
    fmoe_status st = fmoe_layer_check_loaded(layer);
    if (st != FMOE_STATUS_OK)
        return st;
    const fmoe_tensor **tensors = calloc(layer->n_method_params ? layer->n_method_params : 1, sizeof *tensors);
    if (!tensors)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < layer->n_method_params; i++)
        tensors[i] = &layer->params[i].tensor;
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_finalize_args a = {.struct_size = sizeof a,
                            .err = &err,
                            .instance = layer->instance,
                            .params = tensors,
                            .n_params = layer->n_method_params,
                            .correction_bias = layer->routing_bias >= 0 ? &layer->params[layer->routing_bias].tensor
                                                                        : NULL};
    st = layer->method->finalize(&a);
    free(tensors);
    if (st != FMOE_STATUS_OK)
        return method_error(layer, "finalize", st, &err);
    layer->state = FMOE_LAYER_FINALIZED;
    return FMOE_STATUS_OK;
}

static fmoe_status check_on_layer_device(const fmoe_layer *layer, const fmoe_tensor *t, const char *what);

/* x/out: [M, H] of the activation dtype, on the layer's device, unit column stride. */
static fmoe_status check_activation(const fmoe_layer *layer, const fmoe_tensor *t, const char *what, int64_t m)
{
    const int64_t shape[2] = {m, layer->cfg.hidden_size};
    fmoe_status st = fmoe_tensor_expect(t, what, layer->cfg.act_dtype, 2, shape);
    if (st != FMOE_STATUS_OK)
        return st;
    if (t->shape[0] > 0 && (t->strides[1] != 1 || t->strides[0] < t->shape[1]))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: rows must be dense (column stride 1, row stride >= %u), got strides [%lld, %lld]",
                              what, layer->cfg.hidden_size, (long long)t->strides[0], (long long)t->strides[1]);
    return check_on_layer_device(layer, t, what);
}

/* A tensor the method reads or writes must be where the method runs: a
 * host pointer handed to a device kernel (or the reverse) would crash the
 * backend instead of failing here. */
static fmoe_status check_on_layer_device(const fmoe_layer *layer, const fmoe_tensor *t, const char *what)
{
    if (t->device_kind != layer->chosen->device_kind || t->device_index != layer->chosen->device_index)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: on %s:%d, but the layer runs on %s:%d", what,
                              fmoe_device_kind_name(t->device_kind), t->device_index,
                              fmoe_device_kind_name(layer->chosen->device_kind), layer->chosen->device_index);
    return FMOE_STATUS_OK;
}

/* Router logits go to the method's apply_logits (monolithic) rather than
 * to the host router; fmoe_layer_forward takes the same branch. */
static int routes_in_method(const fmoe_layer *layer)
{
    const fmoe_method *meth = layer->method;
    return meth->apply_logits && ((meth->flags & FMOE_METHOD_MONOLITHIC) || !meth->apply);
}

static fmoe_status check_routing(const fmoe_layer *layer, const fmoe_tensor *w, const fmoe_tensor *ids, int64_t m,
                                 const char *wname, const char *idname)
{
    const int64_t shape[2] = {m, layer->cfg.top_k};
    fmoe_status st = fmoe_tensor_expect(w, wname, FMOE_DTYPE_F32, 2, shape);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_expect(ids, idname, FMOE_DTYPE_INT32, 2, shape);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!fmoe_tensor_is_contiguous(w) || !fmoe_tensor_is_contiguous(ids))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s and %s must be contiguous", wname, idname);
    if ((st = check_on_layer_device(layer, w, wname)) != FMOE_STATUS_OK)
        return st;
    return check_on_layer_device(layer, ids, idname);
}

static fmoe_status check_routing_out(const fmoe_layer *layer, const fmoe_tensor *t, const char *what, fmoe_dtype dtype,
                                     int64_t m)
{
    const int64_t shape[2] = {m, layer->cfg.top_k};
    fmoe_status st = fmoe_tensor_expect(t, what, dtype, 2, shape);
    if (st == FMOE_STATUS_OK && !fmoe_tensor_is_contiguous(t))
        st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s must be contiguous", what);
    /* Host routing (route_then_apply) checks its own: host memory. */
    if (st == FMOE_STATUS_OK && routes_in_method(layer))
        st = check_on_layer_device(layer, t, what);
    return st;
}

/* Methods flagged SERIALIZED_APPLY never run concurrently within a context. */
static void serial_begin(const fmoe_layer *layer)
{
    if (layer->method->flags & FMOE_METHOD_SERIALIZED_APPLY)
        pthread_mutex_lock(&layer->ctx->serial_apply);
}

static void serial_end(const fmoe_layer *layer)
{
    if (layer->method->flags & FMOE_METHOD_SERIALIZED_APPLY)
        pthread_mutex_unlock(&layer->ctx->serial_apply);
}

static fmoe_status call_apply(fmoe_layer *layer, const fmoe_tensor *x, const fmoe_tensor *w, const fmoe_tensor *ids,
                              fmoe_tensor *out, void *stream)
{
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_apply_args a = {.struct_size = sizeof a,
                         .err = &err,
                         .instance = layer->instance,
                         .x = x,
                         .topk_weights = w,
                         .topk_ids = ids,
                         .out = out,
                         .stream = stream};
    serial_begin(layer);
    fmoe_status st = layer->method->apply(&a);
    serial_end(layer);
    return st == FMOE_STATUS_OK ? st : method_error(layer, "apply", st, &err);
}

static fmoe_status call_apply_logits(fmoe_layer *layer, const fmoe_forward_args *f)
{
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_apply_logits_args a = {.struct_size = sizeof a,
                                .err = &err,
                                .instance = layer->instance,
                                .x = f->x,
                                .router_logits = f->router_logits,
                                .out = f->out,
                                .topk_weights_out = f->topk_weights_out,
                                .topk_ids_out = f->topk_ids_out,
                                .stream = f->stream};
    serial_begin(layer);
    fmoe_status st = layer->method->apply_logits(&a);
    serial_end(layer);
    return st == FMOE_STATUS_OK ? st : method_error(layer, "apply_logits", st, &err);
}

/* A modular method fed router logits: route on the host with the reference
 * router, map logical ids to physical replicas, then apply. */
static fmoe_status route_then_apply(fmoe_layer *layer, const fmoe_forward_args *f, int64_t m)
{
    const fmoe_layer_config *cfg = &layer->cfg;
    const fmoe_tensor *logits = f->router_logits;
    if (logits->device_kind != FMOE_DEVICE_CPU)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "%s/%s is modular and the logits are on %s: pass topk_weights/topk_ids instead",
                              layer->chosen->plugin->name, layer->method->name,
                              fmoe_device_kind_name(logits->device_kind));
    if ((f->topk_weights_out && f->topk_weights_out->device_kind != FMOE_DEVICE_CPU) ||
        (f->topk_ids_out && f->topk_ids_out->device_kind != FMOE_DEVICE_CPU))
        return fmoe_error_set(
            FMOE_STATUS_INVALID_ARGUMENT,
            "topk_weights_out/topk_ids_out: routing is done on the host, so they must be host memory");
    const float *bias = layer->routing_bias >= 0 ? layer->params[layer->routing_bias].tensor.data : NULL;
    fmoe_route_logits(cfg, logits->data, logits->dtype, m, logits->strides[0], logits->strides[1], bias, layer->route_w,
                      layer->route_ids, layer->route_scratch);
    int64_t slots = m * cfg->top_k;
    /* Report the routing before the logical -> physical mapping. */
    if (f->topk_weights_out)
        memcpy(f->topk_weights_out->data, layer->route_w, (size_t)slots * sizeof(float));
    if (f->topk_ids_out)
        memcpy(f->topk_ids_out->data, layer->route_ids, (size_t)slots * sizeof(int32_t));
    if (cfg->num_redundant_experts)
        fmoe_eplb_map_ids(cfg->num_experts, cfg->num_redundant_experts, layer->route_ids, slots);
    fmoe_layer_record_load(layer, layer->route_ids, slots);
    fmoe_tensor w, ids;
    const int64_t shape[2] = {m, cfg->top_k};
    fmoe_tensor_init(&w, FMOE_DTYPE_F32, 2, shape, layer->route_w);
    fmoe_tensor_init(&ids, FMOE_DTYPE_INT32, 2, shape, layer->route_ids);
    if (layer->ep)
        return fmoe_layer_ep_apply(layer, f->x, &w, &ids, f->out, f->stream);
    return call_apply(layer, f->x, &w, &ids, f->out, f->stream);
}

static fmoe_status check_forward(const fmoe_layer *layer, const fmoe_forward_args *f, int64_t *m_out)
{
    if (!f->x || !f->out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "forward: x and out are required");
    int have_topk = f->topk_weights || f->topk_ids;
    if (have_topk == (f->router_logits != NULL))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "forward: give either topk_weights + topk_ids or router_logits, exactly one of them");
    const int64_t any[2] = {-1, layer->cfg.hidden_size};
    fmoe_status st = fmoe_tensor_expect(f->x, "x", layer->cfg.act_dtype, 2, any);
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t m = f->x->shape[0];
    if (m > layer->cfg.max_num_tokens)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "x: %lld tokens exceed max_num_tokens = %u", (long long)m,
                              layer->cfg.max_num_tokens);
    if ((st = check_activation(layer, f->x, "x", m)) != FMOE_STATUS_OK ||
        (st = check_activation(layer, f->out, "out", m)) != FMOE_STATUS_OK)
        return st;
    if (have_topk) {
        if (!f->topk_weights || !f->topk_ids)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "forward: topk_weights and topk_ids go together");
        st = check_routing(layer, f->topk_weights, f->topk_ids, m, "topk_weights", "topk_ids");
    } else {
        const int64_t shape[2] = {m, layer->cfg.num_experts};
        st = fmoe_tensor_expect(f->router_logits, "router_logits", FMOE_DTYPE_INVALID, 2, shape);
        if (st == FMOE_STATUS_OK && f->router_logits->dtype != FMOE_DTYPE_F32 &&
            f->router_logits->dtype != FMOE_DTYPE_BF16)
            st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "router_logits: dtype %s, expected f32 or bf16",
                                fmoe_dtype_name(f->router_logits->dtype));
        if (st == FMOE_STATUS_OK && routes_in_method(layer))
            st = check_on_layer_device(layer, f->router_logits, "router_logits");
        if (st == FMOE_STATUS_OK && f->topk_weights_out)
            st = check_routing_out(layer, f->topk_weights_out, "topk_weights_out", FMOE_DTYPE_F32, m);
        if (st == FMOE_STATUS_OK && f->topk_ids_out)
            st = check_routing_out(layer, f->topk_ids_out, "topk_ids_out", FMOE_DTYPE_INT32, m);
    }
    *m_out = m;
    return st;
}

static fmoe_status forward_locked(fmoe_layer *layer, const fmoe_forward_args *f);

/* The per-layer lock covers the call only: on a device, what it enqueues
 * runs in the order of the caller's stream, as any stream's work does. */
fmoe_status fmoe_layer_forward(fmoe_layer *layer, const fmoe_forward_args *f)
{
    fmoe_error_clear();
    if (!layer || !f)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_forward: NULL argument");
    pthread_mutex_lock(&layer->lock);
    fmoe_status st = forward_locked(layer, f);
    pthread_mutex_unlock(&layer->lock);
    return st;
}

static fmoe_status forward_locked(fmoe_layer *layer, const fmoe_forward_args *f)
{
    if (f->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_forward_args, stream))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_forward_args.struct_size %zu is too small",
                              f->struct_size);
    if (layer->state != FMOE_LAYER_FINALIZED)
        return fmoe_error_set(FMOE_STATUS_BAD_STATE, "forward before fmoe_layer_finalize");
    int64_t m = 0;
    fmoe_status st = check_forward(layer, f, &m);
    /* A bound layer's forward is collective: M_local = 0 still takes part. */
    if (st != FMOE_STATUS_OK || (m == 0 && !layer->ep))
        return st;
    const fmoe_method *meth = layer->method;
    if (f->topk_ids) {
        if (f->topk_ids->device_kind == FMOE_DEVICE_CPU)
            fmoe_layer_record_load(layer, f->topk_ids->data, m * layer->cfg.top_k);
        else if (!layer->ep) /* a group's plugin may count it (layer_ep.c) */
            layer->load_on_device = 1;
    }
    if (f->router_logits) {
        if (routes_in_method(layer))
            return call_apply_logits(layer, f);
        return route_then_apply(layer, f, m);
    }
    if (!meth->apply)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s/%s is monolithic (routes itself): pass router_logits, not topk_weights/topk_ids",
                              layer->chosen->plugin->name, meth->name);
    if (layer->ep)
        return fmoe_layer_ep_apply(layer, f->x, f->topk_weights, f->topk_ids, f->out, f->stream);
    return call_apply(layer, f->x, f->topk_weights, f->topk_ids, f->out, f->stream);
}
