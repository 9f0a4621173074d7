/* cli/run_device.c - a forward on the layer's own device (run_device.h). */
#include "cli/run_device.h"

#include <stdlib.h>
#include <string.h>

/* A tensor like `like` on the layer's device, holding its values if `copy`. */
static fmoe_status on_device(fmoe_layer *layer, const fmoe_tensor *like, int copy, fmoe_tensor *out)
{
    fmoe_status st = fmoe_layer_tensor_alloc(layer, like->dtype, like->ndim, like->shape, out);
    if (st == FMOE_STATUS_OK && copy)
        st = fmoe_layer_tensor_copy(layer, out, like);
    return st;
}

int run_device_is_remote(const fmoe_layer *layer, int32_t *kind, int32_t *index)
{
    const fmoe_selection *sel = fmoe_layer_selection(layer);
    int32_t chosen = sel ? fmoe_selection_chosen(sel) : -1;
    fmoe_candidate c = {.struct_size = sizeof c, .device_kind = FMOE_DEVICE_CPU};
    if (chosen >= 0 && fmoe_selection_candidate(sel, (uint32_t)chosen, &c) != FMOE_STATUS_OK) {
        c.device_kind = FMOE_DEVICE_CPU;
        c.device_index = 0;
    }
    if (kind)
        *kind = c.device_kind;
    if (index)
        *index = c.device_index;
    /* The core's rule (core/layer_memory.c): only the CPU is host memory. */
    return c.device_kind != FMOE_DEVICE_CPU;
}

/* A twin of `t` (NULL: none) on the layer's device, holding its values if
 * `copy`; `*use` is what the forward gets. */
static fmoe_status twin(fmoe_layer *layer, const fmoe_tensor *t, int copy, fmoe_tensor *dev, const fmoe_tensor **use)
{
    *use = t ? dev : NULL;
    return t ? on_device(layer, t, copy, dev) : FMOE_STATUS_OK;
}

fmoe_status run_device_io_open(fmoe_layer *layer, const fmoe_forward_args *host, run_device_io *io)
{
    memset(io, 0, sizeof *io);
    io->args = *host;
    io->remote = run_device_is_remote(layer, NULL, NULL);
    if (!io->remote)
        return FMOE_STATUS_OK;
    const fmoe_tensor *use;
    fmoe_forward_args *a = &io->args;
    fmoe_status st = twin(layer, host->x, 1, &io->x, &a->x);
    if (st == FMOE_STATUS_OK)
        st = twin(layer, host->router_logits, 1, &io->logits, &a->router_logits);
    if (st == FMOE_STATUS_OK)
        st = twin(layer, host->topk_weights, 1, &io->w, &a->topk_weights);
    if (st == FMOE_STATUS_OK)
        st = twin(layer, host->topk_ids, 1, &io->ids, &a->topk_ids);
    if (st == FMOE_STATUS_OK && (st = twin(layer, host->out, 0, &io->out, &use)) == FMOE_STATUS_OK)
        a->out = use ? &io->out : NULL;
    if (st == FMOE_STATUS_OK && (st = twin(layer, host->topk_weights_out, 0, &io->w_out, &use)) == FMOE_STATUS_OK)
        a->topk_weights_out = use ? &io->w_out : NULL;
    if (st == FMOE_STATUS_OK && (st = twin(layer, host->topk_ids_out, 0, &io->ids_out, &use)) == FMOE_STATUS_OK)
        a->topk_ids_out = use ? &io->ids_out : NULL;
    if (st != FMOE_STATUS_OK)
        run_device_io_close(layer, io);
    return st;
}

fmoe_status run_device_io_fetch(fmoe_layer *layer, const run_device_io *io, const fmoe_forward_args *host)
{
    if (!io->remote)
        return FMOE_STATUS_OK;
    fmoe_status st = fmoe_layer_synchronize(layer, host->stream);
    if (st == FMOE_STATUS_OK && host->out)
        st = fmoe_layer_tensor_copy(layer, host->out, &io->out);
    if (st == FMOE_STATUS_OK && host->topk_weights_out)
        st = fmoe_layer_tensor_copy(layer, host->topk_weights_out, &io->w_out);
    if (st == FMOE_STATUS_OK && host->topk_ids_out)
        st = fmoe_layer_tensor_copy(layer, host->topk_ids_out, &io->ids_out);
    return st;
}

void run_device_io_close(fmoe_layer *layer, run_device_io *io)
{
    fmoe_tensor *all[] = {&io->x, &io->logits, &io->w, &io->ids, &io->out, &io->w_out, &io->ids_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fmoe_layer_tensor_free(layer, all[i]);
    io->args = (fmoe_forward_args){0};
}

/* Logical ids -> physical replicas, the rule of docs/PLACEMENT.md. */
static fmoe_status map_replicas(const fmoe_layer_config *cfg, int32_t *ids, int64_t n)
{
    if (!cfg->enable_eplb || !cfg->num_redundant_experts)
        return FMOE_STATUS_OK;
    uint32_t most = 1 + (cfg->num_redundant_experts + cfg->num_experts - 1) / cfg->num_experts;
    int32_t *l2p = malloc((size_t)cfg->num_experts * most * sizeof *l2p);
    uint32_t *count = malloc(cfg->num_experts * sizeof *count);
    fmoe_status st = l2p && count ? fmoe_layer_config_logical_to_physical(cfg, l2p, most, count)
                                  : FMOE_STATUS_OUT_OF_MEMORY;
    for (int64_t i = 0; st == FMOE_STATUS_OK && i < n; i++) {
        uint32_t l = (uint32_t)ids[i];
        ids[i] = l2p[(size_t)l * most + (uint32_t)(i % count[l])];
    }
    free(l2p);
    free(count);
    return st;
}

fmoe_status run_device_forward(fmoe_layer *layer, const fmoe_layer_config *cfg, const fmoe_tensor *x,
                               const fmoe_tensor *logits, const float *route_w, const int32_t *route_ids,
                               fmoe_tensor *y, fmoe_tensor *tw, fmoe_tensor *ti, run_timing *timing)
{
    fmoe_tensor dx = {0}, dl = {0}, dy = {0}, dw = {0}, di = {0};
    fmoe_status st = on_device(layer, x, 1, &dx);
    if (st == FMOE_STATUS_OK)
        st = on_device(layer, logits, 1, &dl);
    if (st == FMOE_STATUS_OK)
        st = on_device(layer, y, 0, &dy);
    if (st == FMOE_STATUS_OK)
        st = on_device(layer, tw, 0, &dw);
    if (st == FMOE_STATUS_OK)
        st = on_device(layer, ti, 0, &di);
    fmoe_forward_args a = {.struct_size = sizeof a,
                           .x = &dx,
                           .router_logits = &dl,
                           .out = &dy,
                           .topk_weights_out = &dw,
                           .topk_ids_out = &di};
    int device = dx.device_kind != FMOE_DEVICE_CPU, given = 0;
    if (st == FMOE_STATUS_OK)
        st = fmoe_layer_forward(layer, &a);
    if (st == FMOE_STATUS_UNSUPPORTED && device) {
        /* A modular method: routing is host work, so hand it the routing. */
        int64_t n = fmoe_tensor_numel(ti);
        memcpy(tw->data, route_w, (size_t)n * sizeof(float));
        memcpy(ti->data, route_ids, (size_t)n * sizeof(int32_t));
        int32_t *phys = malloc((size_t)n * sizeof *phys);
        fmoe_tensor tp = *ti;
        tp.data = phys;
        st = phys ? FMOE_STATUS_OK : FMOE_STATUS_OUT_OF_MEMORY;
        if (st == FMOE_STATUS_OK) {
            memcpy(phys, route_ids, (size_t)n * sizeof *phys);
            st = map_replicas(cfg, phys, n);
        }
        if (st == FMOE_STATUS_OK)
            st = fmoe_layer_tensor_copy(layer, &dw, tw);
        if (st == FMOE_STATUS_OK)
            st = fmoe_layer_tensor_copy(layer, &di, &tp);
        free(phys);
        a = (fmoe_forward_args){.struct_size = sizeof a, .x = &dx, .topk_weights = &dw, .topk_ids = &di, .out = &dy};
        given = 1;
        if (st == FMOE_STATUS_OK)
            st = fmoe_layer_forward(layer, &a);
    }
    if (st == FMOE_STATUS_OK)
        st = fmoe_layer_synchronize(layer, NULL);
    if (st == FMOE_STATUS_OK)
        st = fmoe_layer_tensor_copy(layer, y, &dy);
    if (st == FMOE_STATUS_OK && !given)
        st = fmoe_layer_tensor_copy(layer, tw, &dw);
    if (st == FMOE_STATUS_OK && !given)
        st = fmoe_layer_tensor_copy(layer, ti, &di);
    if (st == FMOE_STATUS_OK && timing) {
        a.topk_weights_out = NULL;
        a.topk_ids_out = NULL;
        st = run_time_forward(layer, &a, timing);
    }
    fmoe_layer_tensor_free(layer, &dx);
    fmoe_layer_tensor_free(layer, &dl);
    fmoe_layer_tensor_free(layer, &dy);
    fmoe_layer_tensor_free(layer, &dw);
    fmoe_layer_tensor_free(layer, &di);
    return st;
}
