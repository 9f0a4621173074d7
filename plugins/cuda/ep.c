/*
 * plugins/cuda/ep.c - the fmoe_ep_ops of the CUDA plugins (ep.h): arguments
 * checked here, in C, and the transport (ep_api.h) called around the bound
 * layer's own method: dispatch, the method's apply on the received rows,
 * combine. Any cuda method runs on a group this way (modular
 * prepare -> experts -> finalize, docs/EP.md); the megamoe plugin compiles
 * this file in too, for its SM90 method, and hands it its own fused forward
 * (ep.h fmcu_ep_fused), which a forward tries first (docs/MEGAMOE.md).
 */
#include "plugins/cuda/ep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/ep_api.h"

typedef struct fmcu_group {
    const fmoe_host *host;
    const fmcu_ep_fused *fused;
    fmcu_ep *ep;
    int device;
    uint32_t rank, size, max_tokens, hidden, top_k, num_experts;
    int32_t act_dtype;
} fmcu_group;

static fmoe_status fail(const fmoe_host *h, fmoe_error *err, fmoe_status st, const char *why)
{
    return h->error_set(err, st, "%s", why);
}

static fmoe_status ep_unique_id(fmoe_ep_unique_id_args *a)
{
    const fmcu_ep_env env = fmcu_ep_env_of(a->state);
    const fmoe_host *h = env.host;
    char why[512];
    if (a->device_kind != FMOE_DEVICE_CUDA)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "EP unique id: this plugin's devices are CUDA");
    if (fmcu_ep_unique_id(env.opt->nccl_library, a->bytes, a->capacity, &a->length, why, sizeof why) != 0)
        return fail(h, a->err, FMOE_STATUS_UNSUPPORTED, why);
    return FMOE_STATUS_OK;
}

static fmoe_status ep_group_create(fmoe_ep_group_args *a)
{
    const fmcu_ep_env env = fmcu_ep_env_of(a->state);
    const fmoe_host *h = env.host;
    const fmcu_ep_options *o = env.opt;
    char why[512];
    if (a->device_kind != FMOE_DEVICE_CUDA || a->device_index < 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "EP group: not a CUDA device of this plugin");
    if (a->mode != FMOE_EP_MODE_LOW_LATENCY && a->mode != FMOE_EP_MODE_HIGH_THROUGHPUT)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "EP group: mode %d is not an FMOE_EP_MODE_*",
                            a->mode);
    if (!a->comm == !a->unique_id)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP group: give exactly one of a communicator and a unique id");
    fmcu_group *g = h->alloc(h->ctx, sizeof *g, 0);
    if (!g)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(g, 0, sizeof *g);
    *g = (fmcu_group){.host = h,
                      .fused = env.fused,
                      .device = a->device_index,
                      .rank = a->rank,
                      .size = a->size,
                      .max_tokens = a->max_tokens_per_rank,
                      .hidden = a->hidden_size,
                      .top_k = a->top_k,
                      .num_experts = a->num_experts,
                      .act_dtype = a->act_dtype};
    fmcu_ep_params p = {.device = a->device_index,
                        .rank = a->rank,
                        .size = a->size,
                        .max_tokens = a->max_tokens_per_rank,
                        .hidden = a->hidden_size,
                        .top_k = a->top_k,
                        .num_experts = a->num_experts,
                        .act_dtype = a->act_dtype,
                        .dispatch = a->dispatch,
                        .mode = a->mode,
                        .timeout_ms = o->timeout_ms,
                        .timing = a->timing != 0,
                        .transport = o->transport,
                        .nccl_library = o->nccl_library,
                        .comm = a->comm,
                        .unique_id = a->unique_id,
                        .unique_id_length = a->unique_id_length,
                        .extra_bytes = env.fused ? env.fused->extra_bytes(a->size, a->max_tokens_per_rank,
                                                                          a->hidden_size, a->top_k)
                                                 : 0};
    if (fmcu_ep_create(&p, &g->ep, why, sizeof why) != 0) {
        h->free(h->ctx, g);
        return fail(h, a->err, FMOE_STATUS_DEVICE_ERROR, why);
    }
    a->group = g;
    a->expert_capacity = (uint64_t)a->size * a->max_tokens_per_rank;
    return FMOE_STATUS_OK;
}

static void ep_group_destroy(fmoe_ep_group_destroy_args *a)
{
    fmcu_group *g = a->group;
    if (!g)
        return;
    fmcu_ep_destroy(g->ep);
    g->host->free(g->host->ctx, g);
}

/* A [rows, cols] tensor on the group's device, dense unless ld says otherwise. */
static int device_matrix(const fmcu_group *g, const fmoe_tensor *t, fmoe_dtype dtype, int64_t cols)
{
    return t && t->device_kind == FMOE_DEVICE_CUDA && t->device_index == g->device && t->dtype == dtype &&
           t->ndim == 2 && t->shape[1] == cols && t->strides[1] == 1 && t->strides[0] >= cols;
}

static fmoe_tensor matrix(const fmcu_group *g, fmoe_dtype dtype, int64_t rows, int64_t cols, void *data)
{
    fmoe_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.dtype = dtype;
    t.device_kind = FMOE_DEVICE_CUDA;
    t.device_index = g->device;
    t.ndim = 2;
    t.shape[0] = rows, t.shape[1] = cols;
    t.strides[0] = cols, t.strides[1] = 1;
    t.data = data;
    return t;
}

static fmoe_status ep_forward(fmoe_ep_forward_args *a)
{
    fmcu_group *g = a->group;
    const fmoe_host *h = g->host;
    char why[512];
    const int64_t m = a->x ? a->x->shape[0] : -1;
    if (!a->x || !device_matrix(g, a->x, (fmoe_dtype)g->act_dtype, g->hidden) || !a->out ||
        !device_matrix(g, a->out, (fmoe_dtype)g->act_dtype, g->hidden) || a->out->shape[0] != m)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP forward: x and out must be [M, %u] tensors of the group's activation dtype on CUDA "
                            "device %d, rows contiguous",
                            g->hidden, g->device);
    if (!device_matrix(g, a->topk_ids, FMOE_DTYPE_INT32, g->top_k) ||
        !device_matrix(g, a->topk_weights, FMOE_DTYPE_F32, g->top_k) || a->topk_ids->shape[0] != m ||
        a->topk_weights->shape[0] != m || a->topk_ids->strides[0] != g->top_k ||
        a->topk_weights->strides[0] != g->top_k)
        return h->error_set(
            a->err, FMOE_STATUS_INVALID_ARGUMENT,
            "EP forward: topk_ids (INT32) and topk_weights (F32) must be dense [M, %u] on CUDA device %d", g->top_k,
            g->device);
    if (!a->method || !a->method->apply)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "EP forward: the bound method has no apply");
    /* The layer's device load record (ABI 1.5): the dispatch kernel counts
     * into it. */
    uint64_t *load = FMOE_HAS_FIELD(a, load_recorded) ? a->load_counts : NULL;
    int64_t n = 0;
    if (fmcu_ep_check(g->ep, why, sizeof why) != 0)
        return fail(h, a->err, FMOE_STATUS_DEVICE_ERROR, why);
    int rc = fmcu_ep_set_owner(g->ep, a->expert_owner, a->num_global_experts, a->stream, why, sizeof why);
    if (rc == 0 && g->fused) {
        const fmoe_status st = g->fused->forward(g->ep, a);
        if (st != FMOE_STATUS_UNSUPPORTED)
            return st;
    }
    if (rc == 0)
        rc = fmcu_ep_dispatch(g->ep, a->x->data, a->x->strides[0], a->topk_ids->data, a->topk_weights->data, m, load,
                              a->stream, &n, why, sizeof why);
    if (rc != 0)
        return fail(h, a->err, rc == FMCU_EP_MISUSE ? FMOE_STATUS_INVALID_ARGUMENT : FMOE_STATUS_DEVICE_ERROR, why);
    if (load)
        a->load_recorded = 1;
    /* n rows: the capacity (low latency), or the received rows with a local
     * expert, packed first (high throughput; none: nothing to apply). */
    fmcu_ep_rows rows;
    fmcu_ep_rows_of(g->ep, &rows);
    fmoe_tensor x = matrix(g, (fmoe_dtype)g->act_dtype, n, g->hidden, rows.x);
    fmoe_tensor y = matrix(g, (fmoe_dtype)g->act_dtype, n, g->hidden, rows.y);
    fmoe_tensor ids = matrix(g, FMOE_DTYPE_INT32, n, g->top_k, rows.ids);
    fmoe_tensor w = matrix(g, FMOE_DTYPE_F32, n, g->top_k, rows.w);
    fmoe_apply_args ap = {.struct_size = sizeof ap,
                          .err = a->err,
                          .instance = a->instance,
                          .x = &x,
                          .topk_weights = &w,
                          .topk_ids = &ids,
                          .out = &y,
                          .stream = a->stream};
    fmoe_status st = n > 0 ? a->method->apply(&ap) : FMOE_STATUS_OK;
    if (st != FMOE_STATUS_OK)
        return st;
    if (fmcu_ep_mark_experts_done(g->ep, a->stream, why, sizeof why) != 0 ||
        fmcu_ep_combine(g->ep, a->out->data, a->out->strides[0], a->topk_ids->data, m, a->stream, why, sizeof why) != 0)
        return fail(h, a->err, FMOE_STATUS_DEVICE_ERROR, why);
    return FMOE_STATUS_OK;
}

static fmoe_status ep_timing(fmoe_ep_timing_args *a)
{
    fmcu_group *g = a->group;
    char why[256];
    if (fmcu_ep_timing(g->ep, a->reset != 0, &a->forwards, &a->dispatch_seconds, &a->experts_seconds,
                       &a->combine_seconds, why, sizeof why) != 0)
        return g->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
    return FMOE_STATUS_OK;
}

const fmoe_ep_ops fmcu_ep_ops = {
    .struct_size = sizeof(fmoe_ep_ops),
    .unique_id = ep_unique_id,
    .group_create = ep_group_create,
    .group_destroy = ep_group_destroy,
    .forward = ep_forward,
    .timing = ep_timing,
};
