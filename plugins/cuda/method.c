/*
 * plugins/cuda/method.c - the per-layer calls of the CUDA methods: create
 * (device state, workspace), declare_params (layout.c), finalize (post-load
 * processing on the host, then upload), apply / apply_logits (fmcu_forward)
 * and destroy.
 *
 * Finalize does what vLLM's process_weights_after_loading does, on the
 * host copies the core filled: a gated per-tensor W13 is requantized to
 * one scale per expert (max of w1's and w3's, formats.h
 * fmoe_fp8_requantize_w13); static input scales become one per GEMM (the
 * max over experts); UE8M0 block scales are widened to f32. Everything is
 * then uploaded once; the host copies are not used afterwards.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/cuda_plugin.h"
#include "plugins/cuda/layout.h"
#include "plugins/cuda/sm100_gemm.h" /* native SM100 path (h-sm100) */
#include "plugins/cuda/tier.h"

#define MAX_BUFFERS 32

typedef struct fmcu_instance {
    const fmoe_host *host;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    fmcu_layer layer;
    fmoe_param_desc descs[FMCU_MAX_PARAMS];
    const fmoe_param_desc *desc_ptrs[FMCU_MAX_PARAMS];
    uint32_t n_params;
    void *buffers[MAX_BUFFERS]; /* device allocations freed at destroy */
    uint32_t n_buffers;
    fmcu_sm100_layer sm100; /* native SM100 path: format != 0 when chosen (h-sm100) */
} fmcu_instance;

static fmoe_status device_error(fmcu_instance *in, fmoe_error *err, const char *text)
{
    return in->host->error_set(err, FMOE_STATUS_DEVICE_ERROR, "%s", text);
}

/* Allocate device memory owned by the instance. */
static void *device_alloc(fmcu_instance *in, size_t bytes, char *why, size_t cap)
{
    void *p = NULL;
    if (in->n_buffers >= MAX_BUFFERS) {
        snprintf(why, cap, "internal: more than %d device buffers", MAX_BUFFERS);
        return NULL;
    }
    if (fmcu_malloc(in->layer.device, &p, bytes, why, cap) != 0)
        return NULL;
    in->buffers[in->n_buffers++] = p;
    return p;
}

/* Upload `bytes` from host to a new device buffer. */
static const void *upload(fmcu_instance *in, const void *src, size_t bytes, char *why, size_t cap)
{
    void *d = device_alloc(in, bytes, why, cap);
    if (!d || fmcu_upload(in->layer.device, d, src, bytes, why, cap) != 0)
        return NULL;
    return d;
}

static void destroy_instance(fmcu_instance *in)
{
    for (uint32_t i = 0; i < in->n_buffers; i++)
        fmcu_free(in->layer.device, in->buffers[i]);
    in->host->free(in->host->ctx, in);
}

static fmoe_status cuda_create(fmoe_create_args *a)
{
    const fmcu_state *st = a->state;
    const fmoe_host *h = st->host;
    char why[256];
    fmcu_instance *in = h->alloc(h->ctx, sizeof *in, 0);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    memcpy(&in->cfg, a->config, sizeof in->cfg < a->config->struct_size ? sizeof in->cfg : a->config->struct_size);
    memcpy(&in->scheme, a->scheme,
           sizeof in->scheme < a->scheme->struct_size ? sizeof in->scheme : a->scheme->struct_size);
    const fmoe_layer_config *c = &in->cfg;
    fmcu_layer *L = &in->layer;
    L->device = a->device_index;
    if (fmcu_check_config(c, &in->scheme, a->hidden_size, a->intermediate_per_rank, why, sizeof why) != 0 ||
        fmcu_declare(c, &in->scheme, a->hidden_size, a->intermediate_per_rank, a->num_local_experts, in->descs,
                     &in->n_params, why, sizeof why) != 0) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    }
    for (uint32_t i = 0; i < in->n_params; i++)
        in->desc_ptrs[i] = &in->descs[i];

    L->hidden = a->hidden_size;
    L->inter = a->intermediate_per_rank;
    L->rows13 = (c->gated ? 2u : 1u) * L->inter;
    L->local_experts = a->num_local_experts;
    L->global_experts = a->num_global_experts;
    L->logical_experts = c->num_experts;
    L->redundant_experts = c->num_redundant_experts;
    L->top_k = c->top_k;
    L->max_tokens = c->max_num_tokens;
    L->act_dtype = c->act_dtype;
    L->activation = c->activation;
    L->gated = (int)c->gated;
    L->swiglu_alpha = c->swiglu_alpha;
    L->swiglu_limit = c->swiglu_limit;
    L->on_input = c->apply_router_weight_on_input != 0;
    L->add_b2 = c->has_bias && c->tp_rank == 0;
    L->quant = fmcu_scheme_quant(&in->scheme, why, sizeof why);
    L->a_dynamic = (int)in->scheme.a_dynamic;
    L->ue8m0 = in->scheme.w_scale_dtype == FMOE_DTYPE_UE8M0;
    L->block_n = in->scheme.w_block_n;
    L->block_k = in->scheme.w_block_k;
    L->scoring = c->scoring;
    L->renormalize = (int)c->renormalize;
    L->grouped = (int)c->grouped_topk;
    L->num_expert_group = c->num_expert_group;
    L->topk_group = c->topk_group;
    L->has_correction_bias = (int)c->has_correction_bias;
    L->routed_scaling_factor = c->routed_scaling_factor;
    L->opt = st->opt;

    /* The one-launch decode's grid barrier, our grouped GEMM's tile counter
     * and the wide plan's counts and done counter start from zero (the last
     * CTA of each resets them after each call). */
    static const uint32_t zero_sync[2] = {0, 0};
    fmcu_workspace_layout(L->max_tokens, L->top_k, L->hidden, L->inter, L->local_experts, L->logical_experts, L->quant,
                          L->block_k, &L->ws);
    uint32_t *zero_plan = calloc((size_t)L->local_experts + 1, sizeof *zero_plan);
    if (!zero_plan) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    int zeroed = fmcu_prepare_kernels(L->device, why, sizeof why) == 0 &&
                 (L->workspace = device_alloc(in, L->ws.total, why, sizeof why)) != NULL &&
                 fmcu_upload(L->device, (char *)L->workspace + L->ws.grid_sync, zero_sync, sizeof zero_sync, why,
                             sizeof why) == 0 &&
                 fmcu_upload(L->device, (char *)L->workspace + L->ws.gg_sched, zero_sync, sizeof zero_sync, why,
                             sizeof why) == 0 &&
                 fmcu_upload(L->device, (char *)L->workspace + L->ws.plan_sync, zero_plan,
                             ((size_t)L->local_experts + 1) * sizeof *zero_plan, why, sizeof why) == 0;
    free(zero_plan);
    if (!zeroed || !(L->in_scales = device_alloc(in, 2 * sizeof(float), why, sizeof why)) ||
        (a->expert_map && !(L->expert_map = upload(in, a->expert_map, (size_t)a->num_global_experts * sizeof(int32_t),
                                                   why, sizeof why)))) {
        fmoe_status s = device_error(in, a->err, why);
        destroy_instance(in);
        return s;
    }
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status cuda_declare(fmoe_declare_params_args *a)
{
    fmcu_instance *in = a->instance;
    a->params = in->desc_ptrs;
    a->n_params = in->n_params;
    return FMOE_STATUS_OK;
}

static const fmoe_tensor *param_named(const fmcu_instance *in, const fmoe_tensor *const *p, const char *name)
{
    for (uint32_t i = 0; i < in->n_params; i++)
        if (strcmp(in->descs[i].name, name) == 0)
            return p[i];
    return NULL;
}

static size_t numel(const fmoe_tensor *t)
{
    size_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

static size_t bytes_of(const fmoe_tensor *t)
{
    size_t es = t->dtype == FMOE_DTYPE_F32 || t->dtype == FMOE_DTYPE_INT32  ? 4
                : t->dtype == FMOE_DTYPE_BF16 || t->dtype == FMOE_DTYPE_F16 ? 2
                                                                            : 1;
    return numel(t) * es;
}

/* Per-tensor FP8: one W13 scale per expert (requantized when gated) and the
 * static input scales. */
static fmoe_status finalize_tensor(fmcu_instance *in, const fmoe_tensor *const *p, fmoe_error *err, char *why,
                                   size_t cap)
{
    fmcu_layer *L = &in->layer;
    const fmoe_tensor *w13 = param_named(in, p, "w13_weight"), *s13 = param_named(in, p, "w13_weight_scale");
    uint32_t E = L->local_experts;
    float *one = malloc((E ? E : 1) * sizeof(float));
    uint8_t *q = NULL;
    if (!one)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (L->gated) {
        q = malloc(bytes_of(w13) ? bytes_of(w13) : 1);
        if (!q) {
            free(one);
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(q, w13->data, bytes_of(w13));
        if (refq_fp8_requant_w13(q, E, L->inter, L->hidden, s13->data, one) != 0) {
            free(q);
            free(one);
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                       "w13_weight_scale: every value must be finite and > 0");
        }
    } else {
        memcpy(one, s13->data, E * sizeof(float));
    }
    L->w13 = upload(in, q ? q : w13->data, bytes_of(w13), why, cap);
    L->w13_scale = L->w13 ? upload(in, one, E * sizeof(float), why, cap) : NULL;
    free(q);
    free(one);
    if (!L->w13_scale)
        return device_error(in, err, why);
    if (in->scheme.a_dynamic)
        return FMOE_STATUS_OK;
    float in_scales[2];
    const char *names[2] = {"w13_input_scale", "w2_input_scale"};
    for (int i = 0; i < 2; i++) {
        const fmoe_tensor *t = param_named(in, p, names[i]);
        int unequal = 0;
        if (refq_max_scale(t->data, numel(t), &in_scales[i], &unequal) != 0)
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s: every value must be finite and > 0",
                                       names[i]);
        if (unequal) {
            char line[160];
            snprintf(line, sizeof line, "%s differs across experts; using the max %g for all of them", names[i],
                     (double)in_scales[i]);
            in->host->log(in->host->ctx, FMOE_PLUGIN_LOG_INFO, line);
        }
    }
    if (fmcu_upload(L->device, L->in_scales, in_scales, sizeof in_scales, why, cap) != 0)
        return device_error(in, err, why);
    return FMOE_STATUS_OK;
}

/* Weight scales of the channel and block strategies (UE8M0 widened). */
static const float *upload_scales(fmcu_instance *in, const fmoe_tensor *t, char *why, size_t cap)
{
    if (t->dtype != FMOE_DTYPE_UE8M0)
        return upload(in, t->data, bytes_of(t), why, cap);
    float *f = refq_ue8m0_to_f32(t->data, numel(t));
    if (!f) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    const float *d = upload(in, f, numel(t) * sizeof(float), why, cap);
    free(f);
    return d;
}

/* Upload one projection built on the host (wq_pack.h). */
static int upload_wq(fmcu_instance *in, fmcu_wq_host *h, fmcu_wq_proj *d, char *why, size_t cap)
{
    uint32_t E = h->experts;
    d->k = h->k;
    d->kp = h->kp;
    d->groups = h->groups;
    d->group = h->group;
    d->mx_fold = h->mx_fold;
    d->w = upload(in, h->w, h->w_bytes, why, cap);
    d->scale = d->w ? upload(in, h->scale, h->scale_count * sizeof(float), why, cap) : NULL;
    if (!d->scale)
        return -1;
    if (h->zero && !(d->zero = upload(in, h->zero, h->scale_count, why, cap)))
        return -1;
    if (h->sf8 && !(d->sf8 = upload(in, h->sf8, h->scale_count, why, cap)))
        return -1;
    if (h->kgrp && !(d->kgrp = upload(in, h->kgrp, (size_t)E * (h->kp / 16) * sizeof(uint16_t), why, cap)))
        return -1;
    if (h->perm && !(d->perm = upload(in, h->perm, (size_t)E * h->kp * sizeof(int32_t), why, cap)))
        return -1;
    return 0;
}

/* NVFP4's per-expert multipliers: the accumulator's 1 / g_w (W4A4: also
 * 1 / g_in) and W4A4's activation quant multiplier g_in. */
static fmoe_status finalize_nvfp4_globals(fmcu_instance *in, const fmoe_tensor *const *p, fmoe_error *err, char *why,
                                          size_t cap)
{
    fmcu_layer *L = &in->layer;
    uint32_t E = L->local_experts, r = L->gated ? 2 : 1;
    int a4 = L->quant == FMCU_Q_NVFP4_A4, differ = 0, unused = 0;
    float *g = malloc(sizeof(float) * 8 * (E ? E : 1));
    if (!g)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    float *g13 = g, *g2 = g + E, *i13 = g + 2 * E, *i2 = g + 3 * E, *m13 = g + 4 * E, *m2 = g + 5 * E;
    const char *bad = NULL;
    if (refq_nvfp4_weight_global(param_named(in, p, "w13_weight_global_scale")->data, E, r, g13, &differ) != 0)
        bad = "w13_weight_global_scale";
    else if (refq_nvfp4_weight_global(param_named(in, p, "w2_weight_global_scale")->data, E, 1, g2, &unused) != 0)
        bad = "w2_weight_global_scale";
    else if (a4 && refq_nvfp4_input_global(param_named(in, p, "w13_input_global_scale")->data, E, r,
                                           FMOE_NVFP4_GLOBAL_QUANT, i13) != 0)
        bad = "w13_input_global_scale";
    else if (a4 && refq_nvfp4_input_global(param_named(in, p, "w2_input_global_scale")->data, E, 1,
                                           FMOE_NVFP4_GLOBAL_QUANT, i2) != 0)
        bad = "w2_input_global_scale";
    if (bad) {
        free(g);
        return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s: every value must be finite and > 0", bad);
    }
    if (differ)
        in->host->log(in->host->ctx, FMOE_PLUGIN_LOG_WARN,
                      "w13_weight_global_scale: gate and up global scales differ for some experts; both halves use "
                      "the gate's (column 0), as the kernels do");
    for (uint32_t e = 0; e < E; e++) {
        m13[e] = a4 ? (float)(1.0 / ((double)g13[e] * i13[e])) : 1.0f / g13[e];
        m2[e] = a4 ? (float)(1.0 / ((double)g2[e] * i2[e])) : 1.0f / g2[e];
    }
    L->wq.w13.out_mul = upload(in, m13, E * sizeof(float), why, cap);
    L->wq.w2.out_mul = L->wq.w13.out_mul ? upload(in, m2, E * sizeof(float), why, cap) : NULL;
    int ok = L->wq.w2.out_mul != NULL;
    if (ok && a4) {
        L->wq.w13.in_glob = upload(in, i13, E * sizeof(float), why, cap);
        L->wq.w2.in_glob = L->wq.w13.in_glob ? upload(in, i2, E * sizeof(float), why, cap) : NULL;
        ok = L->wq.w2.in_glob != NULL;
    }
    free(g);
    return ok ? FMOE_STATUS_OK : device_error(in, err, why);
}

/* --- native SM100 block-scaled path (h-sm100; sm100_gemm.h) ----------- */

/* The checkpoint's packed codes as they are (CUTLASS reads the same nibble
 * order), the block scales swizzled per expert, NVFP4's globals as the
 * emulated method takes them, the path's workspace. */
static fmoe_status finalize_sm100(fmcu_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    fmcu_layer *L = &in->layer;
    fmcu_sm100_layer *S = &in->sm100;
    char why[256];
    const uint32_t E = L->local_experts, H = L->hidden, I = L->inter, vec = S->format == FMCU_SM100_MXFP4 ? 32 : 16;
    const size_t b13 = (size_t)fmcu_sm100_sf_bytes(L->rows13, H / vec) * E;
    const size_t b2 = (size_t)fmcu_sm100_sf_bytes(H, I / vec) * E;
    const fmoe_tensor *w13 = param_named(in, p, "w13_weight_packed"), *w2 = param_named(in, p, "w2_weight_packed");
    uint8_t *sf = malloc(b13 + b2);
    if (!sf)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    S->vec = vec;
    fmcu_sm100_swizzle_weight_sf(E, L->rows13, H / vec, param_named(in, p, "w13_weight_scale")->data, sf);
    fmcu_sm100_swizzle_weight_sf(E, H, I / vec, param_named(in, p, "w2_weight_scale")->data, sf + b13);
    S->w13 = upload(in, w13->data, bytes_of(w13), why, sizeof why);
    S->w2 = S->w13 ? upload(in, w2->data, bytes_of(w2), why, sizeof why) : NULL;
    S->sf13 = S->w2 ? upload(in, sf, b13, why, sizeof why) : NULL;
    S->sf2 = S->sf13 ? upload(in, sf + b13, b2, why, sizeof why) : NULL;
    free(sf);
    if (!S->sf2)
        return device_error(in, err, why);
    if (S->format == FMCU_SM100_NVFP4) {
        fmoe_status st = finalize_nvfp4_globals(in, p, err, why, sizeof why);
        if (st != FMOE_STATUS_OK)
            return st;
        S->alpha13 = L->wq.w13.out_mul;
        S->alpha2 = L->wq.w2.out_mul;
        S->in_glob13 = L->wq.w13.in_glob;
        S->in_glob2 = L->wq.w2.in_glob;
    } else {
        float *one = malloc((E ? E : 1) * sizeof(float));
        if (!one)
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        for (uint32_t e = 0; e < E; e++)
            one[e] = 1.0f;
        S->alpha13 = S->alpha2 = upload(in, one, E * sizeof(float), why, sizeof why);
        free(one);
        if (!S->alpha13)
            return device_error(in, err, why);
    }
    size_t gemm_ws = 0;
    if (fmcu_sm100_gemm_workspace(S->format, L->device, E, &gemm_ws, why, sizeof why) != 0)
        return device_error(in, err, why);
    fmcu_sm100_workspace_layout((uint64_t)L->max_tokens * L->top_k, E, H, I, L->gated, vec, fmcu_sm100_args_bytes(E),
                                gemm_ws, gemm_ws, &S->ws);
    if (!(S->workspace = device_alloc(in, S->ws.total, why, sizeof why)))
        return device_error(in, err, why);
    L->sm100 = S;
    return FMOE_STATUS_OK;
}
/* --- end SM100 ---------------------------------------------------------- */

/* The prefill tier's bf16 scratch for e2m1 weights (wq_pack.h fmcu_wq.dq):
 * only where that tier could serve the layer (prefill_sm90.cu
 * fmcu_prefill_supported_why says the rest) and some call could run on it:
 * max_num_tokens reaches fmcu_wq_scratch_min_rows rows an expert (past
 * the fused form's 320 with prefill_dequant_fused = auto, from 150 with
 * off, from 0 with the tier forced; never with on, which converts inside
 * the GEMM and needs none). */
static fmoe_status finalize_dequant(fmcu_instance *in, fmoe_error *err)
{
    fmcu_layer *L = &in->layer;
    char why[256];
    uint64_t rows = (uint64_t)L->max_tokens * L->top_k / (L->local_experts ? L->local_experts : 1);
    if (!FMCU_Q_IS_E2M1(L->quant) || L->act_dtype != FMOE_DTYPE_BF16 || L->on_input || L->hidden % 16 ||
        L->inter % 16 || rows < fmcu_wq_scratch_min_rows(L->opt.prefill_dequant_fused, L->local_experts, L->opt.tier))
        return FMOE_STATUS_OK;
    fmcu_device_info dev;
    if (fmcu_device_query(L->device, &dev, why, sizeof why) != 0)
        return device_error(in, err, why);
    uint32_t n = fmcu_wq_dequant_experts(L->rows13, L->hidden, L->inter, L->local_experts, L->opt.prefill_dequant_mib);
    if (dev.major != 9 || n == 0)
        return FMOE_STATUS_OK;
    size_t bytes = (size_t)n * fmcu_wq_dequant_expert_bytes(L->rows13, L->hidden, L->inter);
    if (!(L->wq.dq = device_alloc(in, bytes, why, sizeof why)))
        return device_error(in, err, why);
    L->wq.dq_experts = n;
    return FMOE_STATUS_OK;
}

/* The 4-bit and int schemes: weights repacked (wq_pack.h) and uploaded,
 * the per-pair input buffers of act-order and W4A4 allocated. */
static fmoe_status finalize_wq(fmcu_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    fmcu_layer *L = &in->layer;
    const fmoe_scheme *s = &in->scheme;
    char why[256];
    if (in->sm100.format) /* native SM100 path (h-sm100) */
        return finalize_sm100(in, p, err);
    uint32_t E = L->local_experts, H = L->hidden, I = L->inter;
    fmcu_wq_host h13, h2;
    int rc;
    if (L->quant == FMCU_Q_WNA16) {
        int32_t bits = s->w_dtype == FMOE_DTYPE_INT4 ? 4 : 8;
        int grouped = s->w_strategy == FMOE_QSTRATEGY_GROUP, ao = s->w_actorder == FMOE_ACTORDER_GROUP;
        uint32_t g = s->w_group_size, g13 = grouped ? g : H, g2 = grouped ? g : I;
        uint32_t G2 = grouped ? (ao ? in->cfg.intermediate_size : I) / g : 1;
        const fmoe_tensor *z13 = param_named(in, p, "w13_weight_zero_point"),
                          *z2 = param_named(in, p, "w2_weight_zero_point");
        const fmoe_tensor *x13 = param_named(in, p, "w13_weight_g_idx"), *x2 = param_named(in, p, "w2_weight_g_idx");
        const fmoe_tensor *s13 = param_named(in, p, "w13_weight_scale"), *s2 = param_named(in, p, "w2_weight_scale");
        L->wq.format = bits == 4 ? FMCU_WQ_INT4 : FMCU_WQ_INT8;
        rc = fmcu_wq_build_int(E, L->rows13, H, bits, H / g13, g13, param_named(in, p, "w13_weight_packed")->data,
                               s13->data, s13->dtype, z13 ? z13->data : NULL, x13 ? x13->data : NULL, &h13, why,
                               sizeof why);
        if (rc != 0)
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "w13: %s", why);
        rc = fmcu_wq_build_int(E, H, I, bits, G2, g2, param_named(in, p, "w2_weight_packed")->data, s2->data, s2->dtype,
                               z2 ? z2->data : NULL, x2 ? x2->data : NULL, &h2, why, sizeof why);
        if (rc != 0) {
            fmcu_wq_host_free(&h13);
            return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "w2: %s", why);
        }
    } else {
        /* MXFP4 x FP8 (MegaMoE) has the same e2m1 pairs and UE8M0 scales
         * under vLLM's DeepseekV4MegaMoEExperts names (layout.c). */
        int a8 = L->quant == FMCU_Q_MXFP4_A8, mx = L->quant == FMCU_Q_MXFP4 || L->quant == FMCU_Q_MXFP4_A4 || a8;
        uint32_t blk = mx ? 32 : 16;
        L->wq.format = FMCU_WQ_FP4;
        L->wq.fp4_block = blk;
        rc = fmcu_wq_build_fp4(E, L->rows13, H, blk, mx,
                               param_named(in, p, a8 ? "w13_weight" : "w13_weight_packed")->data,
                               param_named(in, p, "w13_weight_scale")->data, &h13, why, sizeof why);
        if (rc != 0)
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "w13: %s", why);
        rc = fmcu_wq_build_fp4(E, H, I, blk, mx, param_named(in, p, a8 ? "w2_weight" : "w2_weight_packed")->data,
                               param_named(in, p, "w2_weight_scale")->data, &h2, why, sizeof why);
        if (rc != 0) {
            fmcu_wq_host_free(&h13);
            return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "w2: %s", why);
        }
    }
    rc = upload_wq(in, &h13, &L->wq.w13, why, sizeof why) == 0 && upload_wq(in, &h2, &L->wq.w2, why, sizeof why) == 0;
    fmcu_wq_host_free(&h13);
    fmcu_wq_host_free(&h2);
    if (!rc)
        return device_error(in, err, why);
    size_t pairs = (size_t)L->max_tokens * L->top_k;
    int a4 = FMCU_Q_IS_A4(L->quant);
    if ((L->wq.w13.perm || a4) &&
        !(L->wq.a1 = device_alloc(in, pairs * (L->wq.w13.perm ? L->wq.w13.kp : H) * 2, why, sizeof why)))
        return device_error(in, err, why);
    if ((L->wq.w2.perm || a4) &&
        !(L->wq.a2 = device_alloc(in, pairs * (L->wq.w2.perm ? L->wq.w2.kp : I) * 2, why, sizeof why)))
        return device_error(in, err, why);
    fmoe_status st = finalize_dequant(in, err);
    if (st != FMOE_STATUS_OK)
        return st;
    if (L->quant == FMCU_Q_NVFP4 || L->quant == FMCU_Q_NVFP4_A4)
        return finalize_nvfp4_globals(in, p, err, why, sizeof why);
    return FMOE_STATUS_OK;
}

static fmoe_status cuda_finalize(fmoe_finalize_args *a)
{
    fmcu_instance *in = a->instance;
    fmcu_layer *L = &in->layer;
    char why[256];
    if (a->n_params != in->n_params)
        return in->host->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                                   in->n_params);
    const fmoe_tensor *const *p = a->params;
    const fmoe_tensor *w2 = param_named(in, p, "w2_weight");
    if (FMCU_Q_IS_WQ(L->quant)) {
        fmoe_status s = finalize_wq(in, p, a->err);
        if (s != FMOE_STATUS_OK)
            return s;
    } else if (L->quant == FMCU_Q_TENSOR) {
        fmoe_status s = finalize_tensor(in, p, a->err, why, sizeof why);
        if (s != FMOE_STATUS_OK)
            return s;
        L->w2_scale = upload(in, param_named(in, p, "w2_weight_scale")->data, L->local_experts * sizeof(float), why,
                             sizeof why);
        if (!L->w2_scale)
            return device_error(in, a->err, why);
    } else {
        L->w13 = upload(in, param_named(in, p, "w13_weight")->data, bytes_of(param_named(in, p, "w13_weight")), why,
                        sizeof why);
        if (!L->w13)
            return device_error(in, a->err, why);
        if (L->quant != FMCU_Q_NONE) {
            L->w13_scale = upload_scales(in, param_named(in, p, "w13_weight_scale"), why, sizeof why);
            L->w2_scale = L->w13_scale ? upload_scales(in, param_named(in, p, "w2_weight_scale"), why, sizeof why)
                                       : NULL;
            if (!L->w2_scale)
                return device_error(in, a->err, why);
        }
    }
    if (!FMCU_Q_IS_WQ(L->quant) && !(L->w2 = upload(in, w2->data, bytes_of(w2), why, sizeof why)))
        return device_error(in, a->err, why);
    if (in->cfg.has_bias) {
        const fmoe_tensor *b13 = param_named(in, p, "w13_bias"), *b2 = param_named(in, p, "w2_bias");
        L->b13 = upload(in, b13->data, bytes_of(b13), why, sizeof why);
        L->b2 = L->b13 ? upload(in, b2->data, bytes_of(b2), why, sizeof why) : NULL;
        if (!L->b2)
            return device_error(in, a->err, why);
    }
    if (a->correction_bias) {
        L->correction_bias = upload(in, a->correction_bias->data, numel(a->correction_bias) * sizeof(float), why,
                                    sizeof why);
        if (!L->correction_bias)
            return device_error(in, a->err, why);
    }
    return FMOE_STATUS_OK;
}

static int on_host(const fmoe_tensor *t)
{
    return t->device_kind == FMOE_DEVICE_CPU;
}

static fmoe_status run(fmcu_instance *in, fmoe_error *err, fmcu_call *c)
{
    char why[256];
    if (fmcu_forward(&in->layer, c, why, sizeof why) != 0)
        return device_error(in, err, why);
    return FMOE_STATUS_OK;
}

static void call_io(fmcu_call *c, const fmoe_tensor *x, fmoe_tensor *out, void *stream)
{
    c->m = x->shape[0];
    c->x = x->data;
    c->x_ld = x->strides[0];
    c->x_host = on_host(x);
    c->out = out->data;
    c->out_ld = out->strides[0];
    c->out_host = on_host(out);
    c->stream = stream;
}

static fmoe_status cuda_apply(fmoe_apply_args *a)
{
    fmcu_instance *in = a->instance;
    fmcu_call c;
    memset(&c, 0, sizeof c);
    call_io(&c, a->x, a->out, a->stream);
    c.topk_w = a->topk_weights->data;
    c.topk_ids = a->topk_ids->data;
    c.topk_host = on_host(a->topk_weights) || on_host(a->topk_ids);
    if (on_host(a->topk_weights) != on_host(a->topk_ids))
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                   "topk_weights and topk_ids must both be host or both be device memory");
    return run(in, a->err, &c);
}

static fmoe_status cuda_apply_logits(fmoe_apply_logits_args *a)
{
    fmcu_instance *in = a->instance;
    fmcu_call c;
    memset(&c, 0, sizeof c);
    call_io(&c, a->x, a->out, a->stream);
    const fmoe_tensor *lg = a->router_logits;
    c.logits = lg->data;
    c.logits_dtype = lg->dtype;
    c.logits_ld = lg->strides[0];
    c.logits_cs = lg->strides[1];
    c.logits_host = on_host(lg);
    if (c.logits_host && c.logits_cs != 1)
        return in->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED,
                                   "host router_logits must have unit column stride (they are staged row by row)");
    c.topk_w_out = a->topk_weights_out ? a->topk_weights_out->data : NULL;
    c.topk_ids_out = a->topk_ids_out ? a->topk_ids_out->data : NULL;
    int host_w = a->topk_weights_out && on_host(a->topk_weights_out);
    int host_i = a->topk_ids_out && on_host(a->topk_ids_out);
    if ((a->topk_weights_out && a->topk_ids_out && host_w != host_i))
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                   "topk_weights_out and topk_ids_out must both be host or both be device memory");
    c.topk_out_host = host_w || host_i;
    return run(in, a->err, &c);
}

static void cuda_destroy(fmoe_destroy_args *a)
{
    destroy_instance(a->instance);
}

/* One method table: `create_fn` makes the instance; apply_logits (NULL: the
 * method is modular only) routes on the GPU. */
#define METHOD_TABLE(var, method_name, method_flags, create_fn, logits_fn) \
    static const fmoe_method var = { \
        .struct_size = sizeof(fmoe_method), \
        .name = method_name, \
        .flags = method_flags, \
        .create = create_fn, \
        .declare_params = cuda_declare, \
        .finalize = cuda_finalize, \
        .apply = cuda_apply, \
        .apply_logits = logits_fn, \
        .destroy = cuda_destroy, \
    }

/* Each method monolithic, and modular for an EP group, where the routing
 * travels with the tokens. */
#define METHOD(var, method_name) \
    METHOD_TABLE(var, method_name, FMOE_METHOD_MONOLITHIC | FMOE_METHOD_EPLB | FMOE_METHOD_GRAPH_SAFE, cuda_create, \
                 cuda_apply_logits); \
    METHOD_TABLE(var##_modular, method_name, FMOE_METHOD_EPLB | FMOE_METHOD_GRAPH_SAFE, cuda_create, NULL)

METHOD(method_bf16, "bf16");
METHOD(method_fp8_tensor, "fp8_w8a8_tensor");
METHOD(method_fp8_channel, "fp8_w8a8_channel");
METHOD(method_fp8_block, "fp8_w8a8_block");
/* The names say what the sm_90a kernels do: weights dequantized in
 * registers into bf16/f16 mma.sync operands; NVFP4 W4A4's fp4 x fp4
 * products are emulated there (Hopper has no fp4 tensor cores). */
METHOD(method_wna16, "wna16_dequant_mma");
METHOD(method_mxfp4, "mxfp4_w4a16_dequant_mma");
METHOD(method_nvfp4, "nvfp4_w4a16_dequant_mma");
METHOD(method_nvfp4_a4, "nvfp4_w4a4_emulated_bf16_mma");
METHOD(method_mxfp4_a4, "mxfp4_w4a4_emulated_bf16_mma");
/* MXFP4 x FP8 with DeepSeek-V4's MegaMoE arithmetic (mx_w4a8.h): e4m3
 * activations per 32 quantized as the reference does and multiplied as
 * their exact bf16 values (Hopper has no e2m1 x e4m3 MMA with a scale per
 * 32). */
METHOD(method_mxfp4_a8, "mxfp4_w4a8_emulated_bf16_mma");

/* --- native SM100 block-scaled path (h-sm100; sm100_gemm.h) ----------- */

/* The native methods' create: the common one, then the format the device
 * runs natively (the query chose this method on the same device). */
static fmoe_status cuda_create_sm100(fmoe_create_args *a)
{
    fmoe_status s = cuda_create(a);
    if (s != FMOE_STATUS_OK)
        return s;
    fmcu_instance *in = a->instance;
    fmcu_device_info info;
    char why[200];
    if (fmcu_device_query(a->device_index, &info, why, sizeof why) != 0 ||
        !(in->sm100.format = fmcu_sm100_native(in->layer.quant, info.major, info.minor, in->layer.hidden,
                                               in->layer.inter))) {
        const fmoe_host *h = in->host;
        destroy_instance(in);
        a->instance = NULL;
        return h->error_set(a->err, FMOE_STATUS_INTERNAL,
                            "the native SM100 method was chosen for a layer or device it does not serve");
    }
    return FMOE_STATUS_OK;
}

/* Block-scaled tensor-core MMA on compute capability 10.x (tcgen05, CUTLASS's
 * sm100 grouped GEMM): NVFP4 and MXFP4 W4A4 natively, no emulation. Not for
 * layers on an EP group (they keep the emulated method). */
#define METHOD_SM100(var, text) \
    METHOD_TABLE(var, text, FMOE_METHOD_MONOLITHIC | FMOE_METHOD_EPLB | FMOE_METHOD_GRAPH_SAFE, cuda_create_sm100, \
                 cuda_apply_logits)
METHOD_SM100(method_nvfp4_a4_sm100, "nvfp4_w4a4_sm100_blockscaled");
METHOD_SM100(method_mxfp4_a4_sm100, "mxfp4_w4a4_sm100_blockscaled");
/* --- end SM100 ---------------------------------------------------------- */

const fmoe_method *fmcu_method(int quant, int modular)
{
    switch (quant) {
    case FMCU_Q_TENSOR:
        return modular ? &method_fp8_tensor_modular : &method_fp8_tensor;
    case FMCU_Q_CHANNEL:
        return modular ? &method_fp8_channel_modular : &method_fp8_channel;
    case FMCU_Q_BLOCK:
        return modular ? &method_fp8_block_modular : &method_fp8_block;
    case FMCU_Q_WNA16:
        return modular ? &method_wna16_modular : &method_wna16;
    case FMCU_Q_MXFP4:
        return modular ? &method_mxfp4_modular : &method_mxfp4;
    case FMCU_Q_NVFP4:
        return modular ? &method_nvfp4_modular : &method_nvfp4;
    case FMCU_Q_NVFP4_A4:
        return modular ? &method_nvfp4_a4_modular : &method_nvfp4_a4;
    case FMCU_Q_MXFP4_A4:
        return modular ? &method_mxfp4_a4_modular : &method_mxfp4_a4;
    case FMCU_Q_MXFP4_A8:
        return modular ? &method_mxfp4_a8_modular : &method_mxfp4_a8;
    default:
        return modular ? &method_bf16_modular : &method_bf16;
    }
}

/* --- native SM100 block-scaled path (h-sm100) ---------------------------- */
const fmoe_method *fmcu_method_on_device(int quant, int modular, int device, uint32_t hidden, uint32_t inter)
{
    fmcu_device_info info;
    char why[200];
    if (!modular && fmcu_sm100_compiled() && fmcu_device_query(device, &info, why, sizeof why) == 0) {
        int native = fmcu_sm100_native(quant, info.major, info.minor, hidden, inter);
        if (native == FMCU_SM100_NVFP4)
            return &method_nvfp4_a4_sm100;
        if (native == FMCU_SM100_MXFP4)
            return &method_mxfp4_a4_sm100;
    }
    return fmcu_method(quant, modular);
}
/* --- end SM100 ----------------------------------------------------------- */
