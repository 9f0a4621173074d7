/*
 * plugins/rocm/method.c - the per-layer calls of the rocm plugin's one
 * method (AITER's 2-stage fused_moe): create (mask, workspace),
 * declare_params (layout.c), finalize (prepare.c on the host, then one
 * upload), apply (the kernel library's forward on the caller's stream)
 * and destroy.
 *
 * EP is AITER's mask mode: the create call's expert_map becomes the
 * E + S + 1 expert mask (expert_mask.h; S = 0, this ABI has no fused
 * shared experts), and the kernels read local ids as cumsum(mask) - 1 of
 * the global top-k ids: masked and out-of-range ids are dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/rocm/expert_mask.h"
#include "plugins/rocm/layout.h"
#include "plugins/rocm/prepare.h"
#include "plugins/rocm/rocm_plugin.h"

#define MAX_BUFFERS 12

typedef struct fmro_instance {
    const fmoe_host *host;
    const fmro_kernels *k;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    fmoe_param_desc descs[FMRO_MAX_PARAMS];
    const fmoe_param_desc *desc_ptrs[FMRO_MAX_PARAMS];
    uint32_t n_params;
    fmro_layer_dev dev;
    void *buffers[MAX_BUFFERS]; /* device allocations freed at destroy */
    uint32_t n_buffers;
} fmro_instance;

static void *device_alloc(fmro_instance *in, size_t bytes, char *why, size_t cap)
{
    void *p = NULL;
    if (in->n_buffers >= MAX_BUFFERS) {
        snprintf(why, cap, "internal: more than %d device buffers", MAX_BUFFERS);
        return NULL;
    }
    if (in->k->alloc(in->dev.device, &p, bytes, why, cap) != 0)
        return NULL;
    in->buffers[in->n_buffers++] = p;
    return p;
}

static const void *upload(fmro_instance *in, const void *src, size_t bytes, char *why, size_t cap)
{
    void *d = device_alloc(in, bytes, why, cap);
    if (!d || (bytes && in->k->copy(in->dev.device, 1, d, src, bytes, NULL, why, cap) != 0))
        return NULL;
    return d;
}

static void destroy_instance(fmro_instance *in)
{
    for (uint32_t i = 0; i < in->n_buffers; i++)
        in->k->release(in->dev.device, in->buffers[i]);
    in->host->free(in->host->ctx, in);
}

static int32_t kernel_activation(int32_t act)
{
    return act == FMOE_ACT_GELU ? FMRO_ACT_GELU : act == FMOE_ACT_SWIGLUOAI ? FMRO_ACT_SWIGLUOAI : FMRO_ACT_SILU;
}

/* local_of[global] from the expert map through the mask (mask mode). */
static int local_ids(const int32_t *expert_map, uint32_t global, uint32_t local_experts, int32_t *local_of, char *why,
                     size_t cap)
{
    uint32_t len = fmro_expert_mask_len(global, 0);
    int32_t *mask = malloc(len * sizeof *mask), *local = malloc(len * sizeof *local);
    int rc = -1;
    if (!mask || !local) {
        snprintf(why, cap, "out of memory");
    } else {
        int64_t n = fmro_expert_mask_build(expert_map, global, 0, mask, why, cap);
        if (n >= 0 && fmro_expert_mask_local_ids(mask, len, local, why, cap) == n) {
            if ((uint64_t)n != local_experts) {
                snprintf(why, cap, "expert mask: %lld local experts, the layer has %u", (long long)n, local_experts);
            } else {
                memcpy(local_of, local, global * sizeof *local_of);
                rc = 0;
            }
        }
    }
    free(mask);
    free(local);
    return rc;
}

static fmoe_status rocm_create(fmoe_create_args *a)
{
    fmro_state *st = a->state;
    const fmoe_host *h = st->host;
    char why[256];
    if (!st->k)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", st->kernels_why);
    fmro_instance *in = h->alloc(h->ctx, sizeof *in, 0);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    in->k = st->k;
    memcpy(&in->cfg, a->config, sizeof in->cfg < a->config->struct_size ? sizeof in->cfg : a->config->struct_size);
    memcpy(&in->scheme, a->scheme,
           sizeof in->scheme < a->scheme->struct_size ? sizeof in->scheme : a->scheme->struct_size);
    const fmoe_layer_config *c = &in->cfg;
    fmro_layer_dev *L = &in->dev;
    L->device = a->device_index;
    if (fmro_check_config(c, &in->scheme, why, sizeof why) != 0 ||
        fmro_declare(c, &in->scheme, a->hidden_size, a->intermediate_per_rank, a->num_local_experts, in->descs,
                     &in->n_params, why, sizeof why) != 0) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    }
    for (uint32_t i = 0; i < in->n_params; i++)
        in->desc_ptrs[i] = &in->descs[i];
    L->quant = fmro_scheme_quant(&in->scheme, why, sizeof why);
    L->a_dynamic = (int32_t)in->scheme.a_dynamic;
    L->hidden = a->hidden_size;
    L->inter = a->intermediate_per_rank;
    L->hidden_pad = fmro_pad(L->hidden);
    L->inter_pad = fmro_pad(L->inter);
    L->top_k = c->top_k;
    L->local_experts = a->num_local_experts;
    L->global_experts = a->num_global_experts;
    L->activation = kernel_activation(c->activation);
    L->swiglu_alpha = c->swiglu_alpha;
    L->swiglu_limit = c->swiglu_limit;
    L->on_input = c->apply_router_weight_on_input != 0;
    L->add_b2 = c->has_bias && c->tp_rank == 0;
    L->group = 128;
    L->max_tokens = c->max_num_tokens;
    int32_t *local_of = malloc((a->num_global_experts ? a->num_global_experts : 1) * sizeof *local_of);
    int ok = local_of != NULL;
    if (!ok)
        snprintf(why, sizeof why, "out of memory");
    if (ok && a->expert_map)
        ok = local_ids(a->expert_map, a->num_global_experts, a->num_local_experts, local_of, why, sizeof why) == 0;
    else if (ok)
        for (uint32_t g = 0; g < a->num_global_experts; g++)
            local_of[g] = g < a->num_local_experts ? (int32_t)g : -1;
    if (!ok) {
        free(local_of);
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    }
    ok = fmro_workspace_layout(L->max_tokens, L->top_k, L->hidden, L->inter, L->local_experts, L->quant, L->group,
                               &L->ws, why, sizeof why) == 0 &&
         (L->local_of = upload(in, local_of, (size_t)a->num_global_experts * sizeof *local_of, why, sizeof why)) &&
         (L->workspace = device_alloc(in, L->ws.total, why, sizeof why));
    free(local_of);
    if (!ok) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    }
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status rocm_declare(fmoe_declare_params_args *a)
{
    fmro_instance *in = a->instance;
    a->params = in->desc_ptrs;
    a->n_params = in->n_params;
    return FMOE_STATUS_OK;
}

static const void *param_data(const fmro_instance *in, const fmoe_tensor *const *p, const char *name)
{
    for (uint32_t i = 0; i < in->n_params; i++)
        if (strcmp(in->descs[i].name, name) == 0)
            return p[i]->data;
    return NULL;
}

static fmoe_status rocm_finalize(fmoe_finalize_args *a)
{
    fmro_instance *in = a->instance;
    fmro_layer_dev *L = &in->dev;
    const fmoe_host *h = in->host;
    char why[256];
    if (a->n_params != in->n_params)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "finalize: %u parameters, declared %u", a->n_params,
                            in->n_params);
    fmro_prepare_in pin = {
        .quant = L->quant,
        .a_dynamic = L->a_dynamic,
        .experts = L->local_experts,
        .hidden = L->hidden,
        .inter = L->inter,
        .w13 = param_data(in, a->params, "w13_weight"),
        .w2 = param_data(in, a->params, "w2_weight"),
        .w13_scale = param_data(in, a->params, "w13_weight_scale"),
        .w2_scale = param_data(in, a->params, "w2_weight_scale"),
        .w13_input_scale = param_data(in, a->params, "w13_input_scale"),
        .w2_input_scale = param_data(in, a->params, "w2_input_scale"),
    };
    fmro_prepared p;
    if (fmro_prepare(&pin, &p, why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    float statics[2] = {p.a13_scale, p.a2_scale};
    const void *b13 = param_data(in, a->params, "w13_bias"), *b2 = param_data(in, a->params, "w2_bias");
    size_t E = L->local_experts;
    int ok = (L->w13 = upload(in, p.w13, p.w13_bytes, why, sizeof why)) &&
             (L->w2 = upload(in, p.w2, p.w2_bytes, why, sizeof why));
    if (ok && L->quant != FMRO_Q_BF16)
        ok = (L->w13_scale = upload(in, p.w13_scale, p.w13_scales * sizeof(float), why, sizeof why)) &&
             (L->w2_scale = upload(in, p.w2_scale, p.w2_scales * sizeof(float), why, sizeof why));
    if (ok && L->quant == FMRO_Q_TENSOR && !L->a_dynamic)
        ok = (L->a_static_scale = upload(in, statics, sizeof statics, why, sizeof why)) != NULL;
    if (ok && b13)
        ok = (L->b13 = upload(in, b13, E * 2 * L->inter * 2, why, sizeof why)) &&
             (L->b2 = upload(in, b2, E * L->hidden * 2, why, sizeof why));
    fmro_prepared_free(&p);
    return ok ? FMOE_STATUS_OK : h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
}

/* A tensor the kernels read or write: on the layer's device, 2-D, rows
 * contiguous. */
static int tensor_ok(const fmro_instance *in, const fmoe_tensor *t, fmoe_dtype dtype, int64_t cols, const char *name,
                     char *why, size_t cap)
{
    if (t->device_kind != FMRO_DEVICE_KIND || t->device_index != in->dev.device)
        return snprintf(why, cap, "%s must be in the memory of the layer's device (%s:%d)", name,
                        FMRO_DEVICE_KIND == FMOE_DEVICE_CUDA ? "cuda" : "rocm", in->dev.device),
               -1;
    if (t->dtype != dtype || t->ndim != 2 || t->shape[1] != cols || t->strides[1] != 1)
        return snprintf(why, cap, "%s: expected a [M, %lld] %s tensor with unit column stride", name, (long long)cols,
                        dtype == FMOE_DTYPE_BF16  ? "bf16"
                        : dtype == FMOE_DTYPE_F32 ? "f32"
                                                  : "int32"),
               -1;
    return 0;
}

static fmoe_status rocm_apply(fmoe_apply_args *a)
{
    fmro_instance *in = a->instance;
    char why[256];
    const fmro_layer_dev *L = &in->dev;
    int64_t m = a->x->shape[0];
    if (tensor_ok(in, a->x, FMOE_DTYPE_BF16, L->hidden, "x", why, sizeof why) != 0 ||
        tensor_ok(in, a->out, FMOE_DTYPE_BF16, L->hidden, "out", why, sizeof why) != 0 ||
        tensor_ok(in, a->topk_weights, FMOE_DTYPE_F32, L->top_k, "topk_weights", why, sizeof why) != 0 ||
        tensor_ok(in, a->topk_ids, FMOE_DTYPE_INT32, L->top_k, "topk_ids", why, sizeof why) != 0)
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    if (a->topk_weights->strides[0] != L->top_k || a->topk_ids->strides[0] != L->top_k || a->out->shape[0] != m ||
        a->topk_ids->shape[0] != m || a->topk_weights->shape[0] != m)
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                   "x, out, topk_weights and topk_ids must have the same M rows (routing contiguous)");
    if (m <= 0)
        return FMOE_STATUS_OK;
    fmro_call c = {
        .x = a->x->data,
        .topk_w = a->topk_weights->data,
        .topk_ids = a->topk_ids->data,
        .out = a->out->data,
        .x_ld = a->x->strides[0],
        .out_ld = a->out->strides[0],
        .m = (uint32_t)(m > UINT32_MAX ? UINT32_MAX : m),
        .stream = a->stream,
    };
    if (in->k->forward(L, &c, why, sizeof why) != 0)
        return in->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static void rocm_destroy(fmoe_destroy_args *a)
{
    destroy_instance(a->instance);
}

/* No apply_logits: routing is the host's (or conform's), as AITER's
 * fused_moe takes topk ids and weights. */
const fmoe_method fmro_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "aiter_2stage",
    .flags = FMOE_METHOD_EXPERT_MASK,
    .create = rocm_create,
    .declare_params = rocm_declare,
    .finalize = rocm_finalize,
    .apply = rocm_apply,
    .destroy = rocm_destroy,
};
