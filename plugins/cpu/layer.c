/*
 * plugins/cpu/layer.c - the instance head, pair grouping and combine that
 * every CPU method shares (contract in layer.h).
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE under strict C11 */
#include "plugins/cpu/layer.h"

#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"
#include "plugins/cpu/rowops.h"

/* Chunk buffers (y, the methods' h/activations) stay below this. */
#define CHUNK_BUDGET_BYTES ((size_t)48 << 20)
/* combine keeps a table of the token's slots up to this top_k */
#define MAX_FAST_K 64

void *cpu_alloc(const fmoe_host *h, size_t n)
{
    return h->alloc(h->ctx, n ? n : 1, 64);
}

#define HUGE_PAGE ((size_t)2 << 20)

void *cpu_alloc_weights(void *ctx, size_t size, size_t alignment)
{
    const fmoe_host *h = ctx;
    if (size < 2 * HUGE_PAGE)
        return h->alloc(h->ctx, size ? size : 1, alignment);
    void *p = h->alloc(h->ctx, size, alignment > HUGE_PAGE ? alignment : HUGE_PAGE);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Before the repacking writes it, so the first touch faults in huge
     * pages rather than khugepaged collapsing them later. */
    if (p)
        (void)madvise(p, size / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

fmoe_status cpu_layer_init(cpu_layer *L, const fmoe_create_args *a, size_t per_token_bytes)
{
    const cpu_state *st = a->state;
    const fmoe_host *h = st->host;
    L->host = h;
    memcpy(&L->cfg, a->config, sizeof L->cfg < a->config->struct_size ? sizeof L->cfg : a->config->struct_size);
    memcpy(&L->scheme, a->scheme,
           sizeof L->scheme < a->scheme->struct_size ? sizeof L->scheme : a->scheme->struct_size);
    L->isa = st->isa;
    L->H = a->hidden_size;
    L->I = a->intermediate_per_rank;
    L->rI = (L->cfg.gated ? 2u : 1u) * L->I;
    L->k = L->cfg.top_k;
    L->local_experts = a->num_local_experts;
    L->global_experts = a->num_global_experts;
    L->bias13 = L->bias2 = -1;
#if defined(__x86_64__)
    if (L->isa >= CPU_ISA_AVX512_VNNI && L->cfg.gated && L->cfg.activation == FMOE_ACT_SILU &&
        L->cfg.act_dtype == FMOE_DTYPE_BF16)
        L->act_bf16 = cpu_silu_bf16_avx512;
#endif
    per_token_bytes += (size_t)L->k * (L->H * sizeof(float) + 2 * sizeof(int32_t));
    size_t chunk = CHUNK_BUDGET_BYTES / per_token_bytes;
    chunk = chunk < 1 ? 1 : chunk;
    L->chunk = chunk < L->cfg.max_num_tokens ? (uint32_t)chunk : L->cfg.max_num_tokens;
    if (L->chunk == 0)
        L->chunk = 1;
    size_t pairs = (size_t)L->chunk * L->k;
    L->order = cpu_alloc(h, pairs * sizeof(int32_t));
    L->pos = cpu_alloc(h, pairs * sizeof(int32_t));
    L->start = cpu_alloc(h, ((size_t)L->local_experts + 1) * sizeof(uint32_t));
    L->y = cpu_alloc(h, pairs * L->H * sizeof(float));
    if (a->expert_map) {
        L->expert_map = cpu_alloc(h, L->global_experts * sizeof(int32_t));
        if (L->expert_map)
            memcpy(L->expert_map, a->expert_map, L->global_experts * sizeof(int32_t));
    }
    /* cpu_state is the context's, shared by its layers (the pools' marker). */
    L->pool = cpu_pool_create(h, st->threads, (uint64_t)st->spin_ms * 1000000u, (atomic_uintptr_t *)&st->last_pool);
    if (!L->order || !L->pos || !L->start || !L->y || (a->expert_map && !L->expert_map) || !L->pool)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory (or no threads) creating the layer");
    return FMOE_STATUS_OK;
}

void cpu_layer_release(cpu_layer *L)
{
    const fmoe_host *h = L->host;
    cpu_pool_destroy(L->pool);
    h->free(h->ctx, L->order);
    h->free(h->ctx, L->pos);
    h->free(h->ctx, L->start);
    h->free(h->ctx, L->y);
    h->free(h->ctx, L->expert_map);
}

void cpu_layer_param(cpu_layer *L, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role, int32_t scale_kind,
                     int32_t shard_axis, uint32_t ndim, int64_t d1, int64_t d2)
{
    if (L->n_params >= CPU_MAX_PARAMS)
        return; /* at most 6 are declared; finalize's count check catches a bug */
    fmoe_param_desc *d = &L->descs[L->n_params];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dtype;
    d->ndim = ndim;
    d->shape[0] = L->local_experts;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->scale_kind = scale_kind;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
    L->desc_ptrs[L->n_params] = d;
    L->n_params++;
}

void cpu_layer_param_biases(cpu_layer *L)
{
    if (!L->cfg.has_bias)
        return;
    L->bias13 = (int32_t)L->n_params;
    cpu_layer_param(L, "w13_bias", L->cfg.act_dtype, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 2, L->rI, 0);
    L->bias2 = (int32_t)L->n_params;
    cpu_layer_param(L, "w2_bias", L->cfg.act_dtype, FMOE_PROJ_W2, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, -1, 2, L->H, 0);
}

static int32_t local_of(const cpu_layer *L, int32_t e)
{
    if (e < 0 || (uint32_t)e >= L->global_experts)
        return -1;
    int32_t l = L->expert_map ? L->expert_map[e] : e;
    return l < 0 || (uint32_t)l >= L->local_experts ? -1 : l;
}

uint32_t cpu_layer_group(cpu_layer *L, const int32_t *topk_ids, int64_t t0, int64_t t1)
{
    uint32_t n = (uint32_t)((t1 - t0) * L->k), E = L->local_experts;
    const int32_t *ids = topk_ids + t0 * L->k;
    memset(L->start, 0, ((size_t)E + 1) * sizeof *L->start);
    for (uint32_t q = 0; q < n; q++) {
        int32_t l = local_of(L, ids[q]);
        L->pos[q] = l; /* the expert for now */
        if (l >= 0)
            L->start[l + 1]++;
    }
    for (uint32_t l = 0; l < E; l++)
        L->start[l + 1] += L->start[l];
    for (uint32_t q = 0; q < n; q++) {
        int32_t l = L->pos[q];
        if (l < 0)
            continue;
        uint32_t p = L->start[l]++;
        L->order[p] = (int32_t)q;
        L->pos[q] = (int32_t)p;
    }
    for (uint32_t l = E; l > 0; l--)
        L->start[l] = L->start[l - 1];
    L->start[0] = 0;
    return L->start[E];
}

void cpu_layer_input_row(const cpu_layer *L, const fmoe_tensor *x, const float *topk_w, int64_t t, float *dst)
{
    fmoe_dtype act = L->cfg.act_dtype;
    int64_t base = t * x->strides[0];
    if (L->cfg.apply_router_weight_on_input) {
        float w = topk_w[t * L->k];
        for (uint32_t c = 0; c < L->H; c++)
            dst[c] = fmoe_round_to(act, fmoe_load_float(x->data, act, base + c) * w);
        return;
    }
    if (act == FMOE_DTYPE_F32) {
        memcpy(dst, (const float *)x->data + base, L->H * sizeof(float));
        return;
    }
    for (uint32_t c = 0; c < L->H; c++)
        dst[c] = fmoe_load_float(x->data, act, base + c);
}

void cpu_layer_activate(const cpu_layer *L, const float *h, float *out)
{
    if (L->act_bf16) {
        (void)L->act_bf16(&L->cfg, h, L->I, out);
        return;
    }
    fmoe_activation_row(&L->cfg, h, L->I, out);
    for (uint32_t i = 0; i < L->I; i++)
        out[i] = fmoe_round_to(L->cfg.act_dtype, out[i]);
}

size_t cpu_layer_activate_units(const cpu_layer *L)
{
    return (size_t)L->I * (L->act_bf16 ? 1 : 8); /* ~1 ns a value in AVX-512, ~8 in double */
}

typedef struct combine_ctx {
    cpu_layer *L;
    const float *topk_w;
    int64_t t0;
    fmoe_tensor *out;
} combine_ctx;

static void combine_token(void *ctx, uint32_t item, uint32_t worker)
{
    (void)worker;
    combine_ctx *c = ctx;
    cpu_layer *L = c->L;
    int64_t t = c->t0 + item;
    fmoe_dtype act = L->cfg.act_dtype;
    int on_input = L->cfg.apply_router_weight_on_input != 0;
    int64_t base = t * c->out->strides[0];
    if (L->k > MAX_FAST_K) { /* rare: no room for the row table, look each slot up */
        for (uint32_t col = 0; col < L->H; col++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < L->k; j++) {
                int32_t p = L->pos[item * L->k + j];
                if (p >= 0)
                    acc += L->y[(size_t)p * L->H + col] * (on_input ? 1.0f : c->topk_w[t * L->k + j]);
            }
            fmoe_store_float(c->out->data, act, base + col, acc);
        }
        return;
    }
    const float *rows[MAX_FAST_K];
    float w[MAX_FAST_K];
    uint32_t n = 0;
    for (uint32_t j = 0; j < L->k; j++) {
        int32_t p = L->pos[item * L->k + j];
        if (p < 0)
            continue;
        rows[n] = L->y + (size_t)p * L->H;
        w[n] = on_input ? 1.0f : c->topk_w[t * L->k + j];
        n++;
    }
    for (uint32_t col = 0; col < L->H; col++) {
        float acc = 0.0f;
        for (uint32_t j = 0; j < n; j++)
            acc += rows[j][col] * w[j];
        fmoe_store_float(c->out->data, act, base + col, acc);
    }
}

void cpu_layer_combine(cpu_layer *L, const float *topk_w, int64_t t0, int64_t t1, fmoe_tensor *out)
{
    combine_ctx c = {.L = L, .topk_w = topk_w, .t0 = t0, .out = out};
    cpu_pool_run_elems(L->pool, (uint32_t)(t1 - t0), (size_t)L->k * L->H, combine_token, &c);
}
