/*
 * core/layer_ep.c - a layer bound to an EP group (fusedmoe.h
 * fmoe_layer_options.ep_group; docs/EP.md): the checks that tie the layer's
 * config to the group, the expert -> rank table the plugin dispatches by,
 * the collective forward through the plugin's fmoe_ep_ops, and the expert
 * load record (docs/PLACEMENT.md, "Load record").
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/ep_group.h"
#include "core/layer.h"
#include "core/tensor.h"

#define PREFIX "fmoe_layer_create: EP group: "

/* The layer's config against the group's options: each mismatch names
 * both values, so a rank built from the wrong config says which field. */
static fmoe_status check_config(fmoe_layer_config *cfg, const fmoe_ep_group_options *g)
{
    int defaults = cfg->ep_size == 1 && cfg->ep_rank == 0;
    if (!defaults && (cfg->ep_size != g->size || cfg->ep_rank != g->rank))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "the layer config says ep_size %u, ep_rank %u; the group is rank %u of %u "
                                     "(leave ep_size/ep_rank at 1/0 to take the group's)",
                              cfg->ep_size, cfg->ep_rank, g->rank, g->size);
    if (cfg->tp_size != 1)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "tp_size = %u: a layer on an EP group holds whole experts (tp_size 1)",
                              cfg->tp_size);
    uint32_t global = fmoe_layer_config_global_experts(cfg);
    struct {
        const char *name;
        uint64_t layer, group;
    } same[] = {{"hidden_size", cfg->hidden_size, g->hidden_size},
                {"top_k", cfg->top_k, g->top_k},
                {"global experts (num_experts + num_redundant_experts)", global, g->num_experts},
                {"act_dtype", (uint64_t)cfg->act_dtype, (uint64_t)g->act_dtype}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        if (same[i].layer == same[i].group)
            continue;
        if (i == 3)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "the layer's act_dtype is %s, the group's %s",
                                  fmoe_dtype_name(cfg->act_dtype), fmoe_dtype_name(g->act_dtype));
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "the layer's %s is %llu, the group's %llu",
                              same[i].name, (unsigned long long)same[i].layer, (unsigned long long)same[i].group);
    }
    return FMOE_STATUS_OK;
}

/* owner[g] = the rank whose expert map holds physical expert g. */
static fmoe_status build_owner(fmoe_layer *layer)
{
    uint32_t global = layer->global_experts;
    layer->expert_owner = malloc(global * sizeof *layer->expert_owner);
    int32_t *map = malloc(global * sizeof *map);
    if (!layer->expert_owner || !map) {
        free(map);
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (uint32_t g = 0; g < global; g++)
        layer->expert_owner[g] = -1;
    fmoe_layer_config c = layer->cfg;
    for (uint32_t r = 0; r < c.ep_size; r++) {
        c.ep_rank = r;
        fmoe_status st = fmoe_layer_config_expert_map(&c, map, global);
        if (st != FMOE_STATUS_OK) {
            free(map);
            return st;
        }
        for (uint32_t g = 0; g < global; g++)
            if (map[g] >= 0)
                layer->expert_owner[g] = (int32_t)r;
    }
    free(map);
    for (uint32_t g = 0; g < global; g++)
        if (layer->expert_owner[g] < 0)
            return fmoe_error_set(FMOE_STATUS_INTERNAL, "EP placement left physical expert %u without a rank", g);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_layer_ep_bind(fmoe_layer *layer, fmoe_layer_options *opts)
{
    fmoe_ep_group *g = opts->ep_group;
    const fmoe_ep_group_options *go = &g->opts;
    if (g->ctx != layer->ctx)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "the group belongs to another context");
    fmoe_status st = check_config(&layer->cfg, go);
    if (st != FMOE_STATUS_OK)
        return st;
    if ((opts->device_kind != FMOE_DEVICE_ANY && opts->device_kind != go->device_kind) ||
        (opts->device_index >= 0 && opts->device_index != go->device_index))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "the layer options ask for %s:%d, the group is on %s:%d",
                              fmoe_device_kind_name(opts->device_kind), opts->device_index,
                              fmoe_device_kind_name(go->device_kind), go->device_index);
    layer->cfg.ep_size = go->size;
    layer->cfg.ep_rank = go->rank;
    /* The method sees the rows the group hands it, not this rank's tokens. */
    layer->cfg.max_num_tokens = (uint32_t)g->expert_capacity;
    if ((st = fmoe_layer_config_validate(&layer->cfg)) != FMOE_STATUS_OK) {
        fmoe_error_prefix(PREFIX "the layer config with the group's ep_size %u, ep_rank %u", go->size, go->rank);
        return st;
    }
    layer->global_experts = fmoe_layer_config_global_experts(&layer->cfg);
    if ((st = build_owner(layer)) != FMOE_STATUS_OK)
        return st;
    opts->device_kind = go->device_kind;
    opts->device_index = go->device_index;
    layer->ep = g;
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_layer_ep_check_method(const fmoe_layer *layer)
{
    const fmoe_method *m = layer->method;
    if (m->flags & FMOE_METHOD_MONOLITHIC || !m->apply)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "%s/%s routes inside the method (monolithic); a layer on an EP group needs a modular "
                              "method (its routing is dispatched with the tokens)",
                              layer->chosen->plugin->name, m->name);
    /* The ranks of a group apply concurrently (inside the plugin's
     * forward, past the host's serializing lock). */
    if (m->flags & FMOE_METHOD_SERIALIZED_APPLY)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "%s/%s must not apply concurrently (SERIALIZED_APPLY); the ranks of an EP group do",
                              layer->chosen->plugin->name, m->name);
    return FMOE_STATUS_OK;
}

/* The layer's device record, made at its first forward with device
 * routing (that forward must not be captured in a graph: the plugin's own
 * placement upload needs the same). Zeroed through a host copy. */
static fmoe_status device_load_record(fmoe_layer *layer)
{
    if (layer->load_dev.data)
        return FMOE_STATUS_OK;
    const int64_t n = layer->global_experts;
    uint64_t *zero = calloc((size_t)n, sizeof *zero);
    if (!zero)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_tensor host;
    fmoe_status st = fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_INT64, 1, &n, &layer->load_dev);
    if (st == FMOE_STATUS_OK && (st = fmoe_tensor_init(&host, FMOE_DTYPE_INT64, 1, &n, zero)) == FMOE_STATUS_OK)
        st = fmoe_layer_tensor_copy(layer, &layer->load_dev, &host);
    free(zero);
    if (st != FMOE_STATUS_OK) {
        fmoe_layer_tensor_free(layer, &layer->load_dev);
        fmoe_error_prefix("EP forward: the expert load record on the device");
    }
    return st;
}

/* counts[] += the device record; with reset, zero it. The device is
 * synchronized first: the record is written by the forwards' streams. */
static fmoe_status read_device_load(fmoe_layer *layer, uint64_t *counts, uint32_t len, uint32_t reset)
{
    const int64_t n = len;
    uint64_t *dev = calloc(len, sizeof *dev);
    if (!dev)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_tensor host;
    fmoe_status st = fmoe_layer_synchronize(layer, NULL);
    if (st == FMOE_STATUS_OK && (st = fmoe_tensor_init(&host, FMOE_DTYPE_INT64, 1, &n, dev)) == FMOE_STATUS_OK)
        st = fmoe_layer_tensor_copy(layer, &host, &layer->load_dev);
    if (st == FMOE_STATUS_OK) {
        for (uint32_t i = 0; i < len; i++)
            counts[i] += dev[i];
        if (reset) {
            memset(dev, 0, (size_t)len * sizeof *dev);
            st = fmoe_layer_tensor_copy(layer, &layer->load_dev, &host);
        }
    }
    free(dev);
    if (st != FMOE_STATUS_OK)
        fmoe_error_prefix("fmoe_layer_expert_load: reading the record on the device");
    return st;
}

fmoe_status fmoe_layer_ep_apply(fmoe_layer *layer, const fmoe_tensor *x, const fmoe_tensor *w, const fmoe_tensor *ids,
                                fmoe_tensor *out, void *stream)
{
    const fmoe_ep_group *g = layer->ep;
    int64_t m = x->shape[0];
    if (m > g->opts.max_tokens_per_rank)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "x: %lld tokens on EP rank %u exceed the group's max_tokens_per_rank = %u (refused, "
                              "not truncated)",
                              (long long)m, g->opts.rank, g->opts.max_tokens_per_rank);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_ep_forward_args a = {.struct_size = sizeof a,
                              .err = &err,
                              .state = g->plugin->plugin_state,
                              .group = g->group,
                              .method = layer->method,
                              .instance = layer->instance,
                              .config = &layer->cfg,
                              .expert_owner = layer->expert_owner,
                              .num_global_experts = layer->global_experts,
                              .x = x,
                              .topk_weights = w,
                              .topk_ids = ids,
                              .out = out,
                              .stream = stream};
    if (ids->device_kind != FMOE_DEVICE_CPU && g->plugin->abi_minor >= 5) {
        fmoe_status ls = device_load_record(layer);
        if (ls != FMOE_STATUS_OK)
            return ls;
        a.load_counts = layer->load_dev.data;
    }
    fmoe_status st = g->ops->forward(&a);
    if (st == FMOE_STATUS_OK && ids->device_kind != FMOE_DEVICE_CPU) {
        if (a.load_counts && a.load_recorded)
            layer->load_dev_used = 1;
        else
            layer->load_on_device = 1;
    }
    if (st != FMOE_STATUS_OK)
        return fmoe_error_set(st == FMOE_STATUS_OK ? FMOE_STATUS_PLUGIN_ERROR : st,
                              "%s/%s EP forward on rank %u of %u failed (%s): %s", g->plugin->name, layer->method->name,
                              g->opts.rank, g->opts.size, fmoe_status_name(st),
                              fmoe_plugin_error_text(&err, "no message"));
    return FMOE_STATUS_OK;
}

void fmoe_layer_record_load(fmoe_layer *layer, const int32_t *ids, int64_t slots)
{
    if (!layer->load)
        return;
    for (int64_t i = 0; i < slots; i++)
        if (ids[i] >= 0 && (uint32_t)ids[i] < layer->global_experts)
            layer->load[ids[i]]++;
}

fmoe_status fmoe_layer_expert_load(fmoe_layer *layer, uint64_t *counts, uint32_t len, uint32_t reset)
{
    fmoe_error_clear();
    if (!layer || !counts)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_expert_load: layer and counts are required");
    if (len != layer->global_experts)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_layer_expert_load: len = %u, expected %u (global physical experts)", len,
                              layer->global_experts);
    pthread_mutex_lock(&layer->lock);
    fmoe_status st = FMOE_STATUS_OK;
    if (!layer->load)
        st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "fmoe_layer_expert_load: no record (out of memory at create)");
    else if (layer->load_on_device)
        st = fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                            "fmoe_layer_expert_load: a forward's routing stayed on %s:%d, where the core cannot count "
                            "it and %s did not (a device plugin counts it on an EP group from plugin ABI 1.5: "
                            "docs/PLACEMENT.md)",
                            fmoe_device_kind_name(layer->chosen->device_kind), layer->chosen->device_index,
                            layer->chosen->plugin->name);
    else {
        memcpy(counts, layer->load, (size_t)len * sizeof *counts);
        if (layer->load_dev_used)
            st = read_device_load(layer, counts, len, reset);
        if (reset && st == FMOE_STATUS_OK)
            memset(layer->load, 0, (size_t)len * sizeof *layer->load);
    }
    pthread_mutex_unlock(&layer->lock);
    return st;
}
