/*
 * plugins/cpu/method_unquantized.c - f32 / bf16 / f16 experts through
 * oneDNN matmul, and bf16 decode through the plugin's own kernels.
 *
 * Compute type: bf16 when both the weights and the activations are bf16
 * (bf16 products accumulated in f32, exactly the reference's products);
 * f32 otherwise (bf16 or f16 weights are widened to f32 at finalize, which
 * is exact).
 *
 * bf16: the weights are repacked once into bgemm.h's tiles, which are
 * oneDNN's BA16a64b2a, so one copy serves both paths: an expert with at
 * most BGEMV_ROWS rows in a chunk (decode) runs through bgemv.c (the pool,
 * the ISA's kernel), a larger one through oneDNN's primitives on the same
 * memory. oneDNN's per-call overhead and its OpenMP scheduling cost more
 * than the whole GEMV of a small expert; for prefill its AMX/brgemm
 * kernels win. Where oneDNN has no optimized bf16 matmul (it would fall
 * back to its reference code, or has none: AVX2-only CPUs) every expert
 * takes the kernels.
 *
 * finalize creates, per GEMM, matmul primitives for row counts 1, 2, 4, ...
 * up to the largest an expert can get in a chunk (at most 1024): src
 * [rows, K], weights [K, N] in the layout oneDNN prefers for one row (the
 * decode case; format "any"), the others created for that same layout,
 * dst f32 [rows, N]. (A run-time M would be one primitive, but oneDNN 2.6
 * serves it with its gemm path, which repacks the weights on every call:
 * 25-50 ms per call for a 6 MB expert.) Each expert's weights are reordered
 * into the layout once; the scratchpad is user-managed; the memory handles
 * are created here and only re-pointed in apply (no allocation in apply).
 * An expert with m rows runs the smallest primitive with >= m rows (rows
 * past m read and write slack rows of the buffers), or the largest in
 * slices. apply:
 *
 *   group pairs by expert (layer.c)
 *   gather   xg[p] = x[t(p)] (x w[t,0] on input) in the compute type   (pool)
 *   GEMM1    h = xg . W13[l]^T per expert                (bgemv / oneDNN)
 *   act      a[p] = round(act(round(h + b13)))                          (pool)
 *   GEMM2    y = a . W2[l]^T per expert                  (bgemv / oneDNN)
 *   epilogue y = round(y + b2) (b2 on TP rank 0)                        (pool)
 *   combine  (layer.c)
 *
 * Both GEMM paths round at the same points with the same float steps, so
 * which path ran an expert changes only the summation order. The kernels
 * path applies round(. + b13) and round(. + b2) as it writes h and y (act
 * and epilogue skip its positions), and when no expert of the chunk needs
 * oneDNN and x is bf16 as is, it reads x's rows in place of the gather.
 * oneDNN threads each matmul itself (its OpenMP runtime); the plugin's
 * pool runs the element-wise steps and the bgemv items.
 */
#include <dnnl.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/kit/half.h"
#include "plugins/cpu/bgemv.h"
#include "plugins/cpu/layer.h"

#define MAX_BUCKETS 11 /* 1, 2, 4, ..., 1024 rows */
/* bf16: experts with at most this many rows in a chunk run the kernels. */
#ifndef BGEMV_ROWS
#define BGEMV_ROWS 16
#endif

/* One GEMM's primitives, by row count. */
typedef struct uq_gemm {
    uint32_t n;
    uint32_t rows[MAX_BUCKETS];
    dnnl_primitive_t prim[MAX_BUCKETS];
    dnnl_memory_t src[MAX_BUCKETS], dst[MAX_BUCKETS];
} uq_gemm;

typedef struct uq_layer {
    cpu_layer L;
    fmoe_dtype w_dtype;
    dnnl_data_type_t cdt; /* compute type: dnnl_bf16 or dnnl_f32 */
    size_t celt;          /* its size in bytes */
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    uq_gemm g13, g2;
    uint32_t slack;      /* rows past the end of xg/h/act/y2 (largest bucket) */
    dnnl_memory_t *wmem; /* [2][E]: each expert's reordered weights */
    void *wbuf[2];
    dnnl_memory_t scratch_mem;
    void *scratch;
    /* bf16 compute type only. */
    cpu_bweights bw[2]; /* W13, W2 in bgemm.h's tiles (= BA16a64b2a) */
    cpu_bgemv bg;
    int onednn_bf16;        /* cpu_state's: oneDNN has an optimized bf16 matmul at all */
    int dnnl_ok;            /* oneDNN serves the larger experts; 0: bgemv runs all */
    void *xg;               /* [chunk*k][H] compute type */
    float *h;               /* [chunk*k][rI] */
    void *act;              /* [chunk*k][I] compute type */
    float *y2;              /* [chunk*k][H] GEMM2 outputs */
    float *rows;            /* [threads][rI] */
    const uint16_t **xrows; /* bf16: [chunk*k] x's row of each position (no gather) */
    /* The current call, for the pool tasks. */
    const fmoe_tensor *x;
    const float *topk_w;
    int64_t t0;
} uq_layer;

int cpu_unquantized_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap)
{
    (void)c;
    if (s->w_strategy != FMOE_QSTRATEGY_NONE || s->a_strategy != FMOE_QSTRATEGY_NONE ||
        (s->w_dtype != FMOE_DTYPE_F32 && s->w_dtype != FMOE_DTYPE_BF16 && s->w_dtype != FMOE_DTYPE_F16)) {
        snprintf(reason, cap, "not an unquantized f32/bf16/f16 scheme");
        return 0;
    }
    return 1;
}

static void uq_free(uq_layer *u)
{
    const fmoe_host *h = u->L.host;
    if (u->wmem)
        for (uint32_t i = 0; i < 2 * u->L.local_experts; i++)
            if (u->wmem[i])
                dnnl_memory_destroy(u->wmem[i]);
    if (u->scratch_mem)
        dnnl_memory_destroy(u->scratch_mem);
    uq_gemm *gs[2] = {&u->g13, &u->g2};
    for (int g = 0; g < 2; g++)
        for (uint32_t b = 0; b < gs[g]->n; b++) {
            if (gs[g]->prim[b])
                dnnl_primitive_destroy(gs[g]->prim[b]);
            if (gs[g]->src[b])
                dnnl_memory_destroy(gs[g]->src[b]);
            if (gs[g]->dst[b])
                dnnl_memory_destroy(gs[g]->dst[b]);
        }
    if (u->stream)
        dnnl_stream_destroy(u->stream);
    if (u->eng)
        dnnl_engine_destroy(u->eng);
    h->free(h->ctx, u->wmem);
    h->free(h->ctx, u->bw[0].w);
    h->free(h->ctx, u->bw[1].w);
    h->free(h->ctx, u->bg.items);
    h->free(h->ctx, u->bg.apack);
    h->free(h->ctx, (void *)u->xrows);
    h->free(h->ctx, u->wbuf[0]);
    h->free(h->ctx, u->wbuf[1]);
    h->free(h->ctx, u->scratch);
    h->free(h->ctx, u->xg);
    h->free(h->ctx, u->h);
    h->free(h->ctx, u->act);
    h->free(h->ctx, u->y2);
    h->free(h->ctx, u->rows);
    cpu_layer_release(&u->L);
    h->free(h->ctx, u);
}

static fmoe_status uq_create(fmoe_create_args *a)
{
    const cpu_state *st = a->state;
    const fmoe_host *h = st->host;
    uq_layer *u = cpu_alloc(h, sizeof *u);
    if (!u)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(u, 0, sizeof *u);
    u->w_dtype = a->scheme->w_dtype;
    int bf16 = u->w_dtype == FMOE_DTYPE_BF16 && a->config->act_dtype == FMOE_DTYPE_BF16;
    u->cdt = bf16 ? dnnl_bf16 : dnnl_f32;
    u->onednn_bf16 = st->onednn_bf16;
    u->celt = bf16 ? 2 : 4;
    uint32_t H = a->hidden_size, I = a->intermediate_per_rank, rI = (a->config->gated ? 2 : 1) * I;
    size_t per_token = (size_t)a->config->top_k * (H * u->celt + rI * sizeof(float) + I * u->celt);
    fmoe_status s = cpu_layer_init(&u->L, a, per_token);
    if (s != FMOE_STATUS_OK) {
        uq_free(u);
        return s;
    }
    cpu_layer *L = &u->L;
    size_t pairs = (size_t)L->chunk * L->k;
    for (u->slack = 1; u->slack < pairs && u->slack < (1u << (MAX_BUCKETS - 1));)
        u->slack *= 2;
    size_t rows = pairs + u->slack;
    u->xg = cpu_alloc(h, rows * H * u->celt);
    u->h = cpu_alloc(h, rows * rI * sizeof(float));
    u->act = cpu_alloc(h, rows * I * u->celt);
    u->y2 = cpu_alloc(h, rows * H * sizeof(float));
    u->rows = cpu_alloc(h, (size_t)cpu_pool_size(L->pool) * (rI > H ? rI : H) * sizeof(float));
    u->wmem = cpu_alloc(h, 2 * (size_t)L->local_experts * sizeof(dnnl_memory_t));
    if (bf16) {
        uint32_t tiles = ((rI > H ? rI : H) + CPU_BNR - 1) / CPU_BNR;
        uint32_t active = pairs < L->local_experts ? (uint32_t)pairs : L->local_experts;
        u->bg.kern = cpu_bkernels_for(L->isa);
        u->bg.items_cap = cpu_bgemv_items_cap(active, tiles);
        u->bg.items = cpu_alloc(h, (size_t)u->bg.items_cap * sizeof(cpu_bgemv_item));
        u->xrows = cpu_alloc(h, pairs * sizeof *u->xrows);
#if defined(FMOE_CPU_HAVE_AMX)
        if (st->amx) {
            uint32_t kmax = H > I ? H : I;
            u->bg.amx = &cpu_bkernels_amx;
            u->bg.apk_stride = (kmax + 31) / 32 * 32;
            u->bg.apack = cpu_alloc(h, (size_t)cpu_pool_size(L->pool) * CPU_BMR * u->bg.apk_stride * sizeof(uint16_t));
        }
#endif
    }
    if (!u->xg || !u->h || !u->act || !u->y2 || !u->rows || !u->wmem ||
        (bf16 && (!u->bg.items || !u->xrows || (u->bg.amx && !u->bg.apack)))) {
        uq_free(u);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    memset(u->wmem, 0, 2 * (size_t)L->local_experts * sizeof(dnnl_memory_t));
    if (dnnl_engine_create(&u->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&u->stream, u->eng, dnnl_stream_default_flags) != dnnl_success) {
        uq_free(u);
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "oneDNN: cannot create a CPU engine and stream");
    }
    cpu_layer_param(L, "w13_weight", u->w_dtype, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, rI, H);
    cpu_layer_param(L, "w2_weight", u->w_dtype, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, H, I);
    /* The reference declares the biases in the weight dtype. */
    if (L->cfg.has_bias) {
        L->bias13 = 2;
        cpu_layer_param(L, "w13_bias", u->w_dtype, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 2, rI, 0);
        L->bias2 = 3;
        cpu_layer_param(L, "w2_bias", u->w_dtype, FMOE_PROJ_W2, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, -1, 2, H, 0);
    }
    a->instance = u;
    return FMOE_STATUS_OK;
}

static fmoe_status uq_declare(fmoe_declare_params_args *a)
{
    uq_layer *u = a->instance;
    a->params = u->L.desc_ptrs;
    a->n_params = u->L.n_params;
    return FMOE_STATUS_OK;
}

/* A matmul primitive src [rows, K] x weights [K, N] -> dst f32 [rows, N],
 * weights in layout *wmd, or (want_any) the layout oneDNN prefers, which
 * goes to *wmd; the scratchpad size goes to *scratch (the largest so far).
 * With no_ref, an implementation that is oneDNN's reference code (its
 * fallback when nothing optimized takes the layout) is refused. */
static dnnl_status_t make_matmul(uq_layer *u, int64_t rows, int64_t K, int64_t N, int want_any, int no_ref,
                                 dnnl_primitive_t *prim, dnnl_memory_desc_t *wmd, size_t *scratch)
{
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {rows, K}, wd = {K, N}, dd = {rows, N};
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_tag(&src, 2, sd, u->cdt, dnnl_ab)) != dnnl_success ||
        (s = dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab)) != dnnl_success)
        return s;
    if (want_any && (s = dnnl_memory_desc_init_by_tag(&wei, 2, wd, u->cdt, dnnl_format_tag_any)) != dnnl_success)
        return s;
    if (!want_any)
        wei = *wmd;
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst)) != dnnl_success)
        return s;
    dnnl_primitive_attr_t attr;
    if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success)
        return s;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_primitive_desc_t pd;
    s = dnnl_primitive_desc_create(&pd, &md, attr, u->eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return s;
    const char *impl = NULL;
    if (no_ref && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0) {
        dnnl_primitive_desc_destroy(pd);
        return dnnl_unimplemented;
    }
    if (want_any)
        *wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sz = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sz > *scratch)
        *scratch = sz;
    s = dnnl_primitive_create(prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* The primitives of one GEMM for 1, 2, 4, ... rows up to u->slack, all on
 * the weights layout chosen for one row (*wmd out), or with `fixed` on the
 * layout *wmd holds (no reference-code fallbacks then); a row count oneDNN
 * cannot serve on that layout ends the list. -1 if even one row fails. */
static int make_gemm(uq_layer *u, uq_gemm *g, int64_t K, int64_t N, int fixed, dnnl_memory_desc_t *wmd, size_t *scratch)
{
    for (uint32_t rows = 1; rows <= u->slack && g->n < MAX_BUCKETS; rows *= 2) {
        uint32_t b = g->n;
        if (make_matmul(u, rows, K, N, !fixed && b == 0, fixed, &g->prim[b], wmd, scratch) != dnnl_success)
            break;
        dnnl_memory_desc_t smd, dmd;
        dnnl_dims_t sd = {rows, K}, dd = {rows, N};
        dnnl_memory_desc_init_by_tag(&smd, 2, sd, u->cdt, dnnl_ab);
        dnnl_memory_desc_init_by_tag(&dmd, 2, dd, dnnl_f32, dnnl_ab);
        g->rows[b] = rows;
        g->n++;
        if (dnnl_memory_create(&g->src[b], &smd, u->eng, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&g->dst[b], &dmd, u->eng, DNNL_MEMORY_NONE) != dnnl_success)
            return -1;
    }
    return g->n > 0 ? 0 : -1;
}

/* Reorder each expert's [N, K] weights (checkpoint dtype) into the
 * primitive's layout; slot 0 = W13, 1 = W2. */
static fmoe_status load_weights(uq_layer *u, int slot, const fmoe_tensor *t, int64_t N, int64_t K,
                                const dnnl_memory_desc_t *wmd, fmoe_error *err)
{
    const fmoe_host *h = u->L.host;
    uint32_t E = u->L.local_experts;
    size_t per = dnnl_memory_desc_get_size(wmd);
    u->wbuf[slot] = cpu_alloc(h, per * E);
    void *tmp = cpu_alloc(h, (size_t)N * K * u->celt);
    if (!u->wbuf[slot] || !tmp) {
        h->free(h->ctx, tmp);
        return h->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory reordering the weights");
    }
    dnnl_memory_desc_t plain;
    dnnl_dims_t wd = {K, N};
    dnnl_memory_desc_init_by_tag(&plain, 2, wd, u->cdt, dnnl_ba);
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t src = NULL;
    fmoe_status rc = FMOE_STATUS_OK;
    if (dnnl_reorder_primitive_desc_create(&rpd, &plain, u->eng, wmd, u->eng, NULL) != dnnl_success ||
        dnnl_primitive_create(&reorder, rpd) != dnnl_success ||
        dnnl_memory_create(&src, &plain, u->eng, tmp) != dnnl_success)
        rc = h->error_set(err, FMOE_STATUS_INTERNAL, "oneDNN: cannot reorder the weights");
    for (uint32_t e = 0; e < E && rc == FMOE_STATUS_OK; e++) {
        size_t n = (size_t)N * K, off = (size_t)e * n;
        if (u->cdt == dnnl_bf16 || u->w_dtype == FMOE_DTYPE_F32)
            memcpy(tmp, (const char *)t->data + off * u->celt, n * u->celt);
        else
            for (size_t i = 0; i < n; i++)
                ((float *)tmp)[i] = fmoe_load_float(t->data, u->w_dtype, (int64_t)(off + i));
        dnnl_memory_t *dst = &u->wmem[(size_t)slot * E + e];
        if (dnnl_memory_create(dst, wmd, u->eng, (char *)u->wbuf[slot] + per * e) != dnnl_success) {
            rc = h->error_set(err, FMOE_STATUS_INTERNAL, "oneDNN: cannot create a weights memory");
            break;
        }
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, *dst}};
        if (dnnl_primitive_execute(reorder, u->stream, 2, args) != dnnl_success ||
            dnnl_stream_wait(u->stream) != dnnl_success)
            rc = h->error_set(err, FMOE_STATUS_INTERNAL, "oneDNN: weights reorder failed");
    }
    if (src)
        dnnl_memory_destroy(src);
    if (reorder)
        dnnl_primitive_destroy(reorder);
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    h->free(h->ctx, tmp);
    return rc;
}

/* f32 compute: the primitives on oneDNN's layout for one row, each
 * expert's weights reordered (and widened) into it. */
static fmoe_status finalize_f32(uq_layer *u, fmoe_finalize_args *a, size_t *scratch)
{
    cpu_layer *L = &u->L;
    dnnl_memory_desc_t wmd13, wmd2;
    if (make_gemm(u, &u->g13, L->H, L->rI, 0, &wmd13, scratch) != 0 ||
        make_gemm(u, &u->g2, L->I, L->H, 0, &wmd2, scratch) != 0)
        return L->host->error_set(a->err, FMOE_STATUS_INTERNAL, "oneDNN: cannot create the f32 matmul primitives");
    fmoe_status s = load_weights(u, 0, a->params[0], L->rI, L->H, &wmd13, a->err);
    return s == FMOE_STATUS_OK ? load_weights(u, 1, a->params[1], L->H, L->I, &wmd2, a->err) : s;
}

/* Drop a GEMM's primitives (the kernels will run all of it). */
static void gemm_release(uq_gemm *g)
{
    for (uint32_t b = 0; b < g->n; b++) {
        dnnl_primitive_destroy(g->prim[b]);
        if (g->src[b])
            dnnl_memory_destroy(g->src[b]);
        if (g->dst[b])
            dnnl_memory_destroy(g->dst[b]);
    }
    memset(g, 0, sizeof *g);
}

int cpu_onednn_bf16_optimized(void)
{
    dnnl_engine_t eng = NULL;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
        return 0;
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {1, 64}, wd = {64, 64};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = NULL;
    int ok = dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_bf16, dnnl_BA16a64b2a) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&dst, 2, sd, dnnl_f32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) == dnnl_success &&
             dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
             strncmp(impl, "ref", 3) != 0;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    return ok;
}

/* bf16 compute: the weights repacked into bgemm.h's tiles for the kernels;
 * oneDNN primitives on that same memory (BA16a64b2a) where oneDNN has an
 * optimized bf16 matmul for it, else the kernels run every expert. */
static fmoe_status finalize_bf16(uq_layer *u, fmoe_finalize_args *a, size_t *scratch)
{
    cpu_layer *L = &u->L;
    const fmoe_host *h = L->host;
    uint32_t E = L->local_experts;
    if (cpu_bweights_pack(&u->bw[0], E, L->rI, L->H, a->params[0]->data, cpu_alloc_weights, (void *)h) != 0 ||
        cpu_bweights_pack(&u->bw[1], E, L->H, L->I, a->params[1]->data, cpu_alloc_weights, (void *)h) != 0)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory repacking the bf16 weights");
    dnnl_memory_desc_t wmd[2];
    dnnl_dims_t d13 = {L->H, L->rI}, d2 = {L->I, L->H};
    u->dnnl_ok = u->onednn_bf16 &&
                 dnnl_memory_desc_init_by_tag(&wmd[0], 2, d13, dnnl_bf16, dnnl_BA16a64b2a) == dnnl_success &&
                 dnnl_memory_desc_init_by_tag(&wmd[1], 2, d2, dnnl_bf16, dnnl_BA16a64b2a) == dnnl_success &&
                 dnnl_memory_desc_get_size(&wmd[0]) == u->bw[0].expert_elems * 2 &&
                 dnnl_memory_desc_get_size(&wmd[1]) == u->bw[1].expert_elems * 2 &&
                 make_gemm(u, &u->g13, L->H, L->rI, 1, &wmd[0], scratch) == 0 &&
                 make_gemm(u, &u->g2, L->I, L->H, 1, &wmd[1], scratch) == 0;
    for (uint32_t i = 0; u->dnnl_ok && i < 2 * E; i++)
        u->dnnl_ok = dnnl_memory_create(&u->wmem[i], &wmd[i / E], u->eng, cpu_bweights_expert(&u->bw[i / E], i % E)) ==
                     dnnl_success;
    if (!u->dnnl_ok) {
        gemm_release(&u->g13);
        gemm_release(&u->g2);
        *scratch = 0;
    }
    cpu_log(h, FMOE_PLUGIN_LOG_DEBUG, "bf16: %s kernels%s for experts with up to %u rows%s", u->bg.kern->name,
            u->bg.amx ? " (amx_bf16 from 3 rows)" : "", BGEMV_ROWS,
            u->dnnl_ok ? ", oneDNN matmul above" : "; no optimized oneDNN bf16 matmul: kernels for all");
    return FMOE_STATUS_OK;
}

static fmoe_status uq_finalize(fmoe_finalize_args *a)
{
    uq_layer *u = a->instance;
    cpu_layer *L = &u->L;
    const fmoe_host *h = L->host;
    if (a->n_params != L->n_params)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                            L->n_params);
    size_t scratch = 0;
    fmoe_status s = u->cdt == dnnl_bf16 ? finalize_bf16(u, a, &scratch) : finalize_f32(u, a, &scratch);
    if (s != FMOE_STATUS_OK)
        return s;
    dnnl_memory_desc_t spmd;
    dnnl_dims_t sd = {(int64_t)(scratch ? scratch : 1)};
    dnnl_memory_desc_init_by_tag(&spmd, 1, sd, dnnl_u8, dnnl_a);
    u->scratch = cpu_alloc(h, scratch);
    if (!u->scratch || dnnl_memory_create(&u->scratch_mem, &spmd, u->eng, u->scratch) != dnnl_success)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory for the oneDNN scratchpad");
    L->b13 = L->bias13 >= 0 ? a->params[L->bias13]->data : NULL;
    L->b2 = L->bias2 >= 0 ? a->params[L->bias2]->data : NULL;
    return FMOE_STATUS_OK;
}

/* Store n f32 values in the compute type. */
static void store_row(const uq_layer *u, void *dst, const float *v, uint32_t n)
{
    if (u->cdt == dnnl_f32) {
        memcpy(dst, v, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (uint32_t i = 0; i < n; i++)
        d[i] = fmoe_f32_to_bf16(v[i]);
}

static void gather_task(void *ctx, uint32_t p, uint32_t worker)
{
    uq_layer *u = ctx;
    cpu_layer *L = &u->L;
    float *row = u->rows + (size_t)worker * (L->rI > L->H ? L->rI : L->H);
    int64_t t = u->t0 + L->order[p] / (int32_t)L->k;
    cpu_layer_input_row(L, u->x, u->topk_w, t, row);
    store_row(u, (char *)u->xg + (size_t)p * L->H * u->celt, row, L->H);
}

/* The experts the kernels run: at most this many rows in the chunk. */
static uint32_t kernel_rows(const uq_layer *u)
{
    return u->cdt != dnnl_bf16 ? 0 : u->dnnl_ok ? BGEMV_ROWS : UINT32_MAX;
}

/* The local expert of position p, and whether the kernels ran it. */
static uint32_t expert_of(const uq_layer *u, uint32_t p, int *on_kernels)
{
    const cpu_layer *L = &u->L;
    uint32_t l = 0;
    while (L->start[l + 1] <= p)
        l++;
    *on_kernels = L->start[l + 1] - L->start[l] <= kernel_rows(u);
    return l;
}

static void act_task(void *ctx, uint32_t p, uint32_t worker)
{
    uq_layer *u = ctx;
    cpu_layer *L = &u->L;
    fmoe_dtype act = L->cfg.act_dtype;
    float *h = u->h + (size_t)p * L->rI;
    float *a = u->rows + (size_t)worker * (L->rI > L->H ? L->rI : L->H);
    int done;
    uint32_t l = expert_of(u, p, &done);
    for (uint32_t n = 0; n < L->rI && !done; n++) {
        float b = L->b13 ? fmoe_load_float(L->b13, u->w_dtype, (int64_t)l * L->rI + n) : 0.0f;
        h[n] = fmoe_round_to(act, h[n] + b);
    }
    cpu_layer_activate(L, h, a);
    store_row(u, (char *)u->act + (size_t)p * L->I * u->celt, a, L->I);
}

static void y_task(void *ctx, uint32_t p, uint32_t worker)
{
    (void)worker;
    uq_layer *u = ctx;
    cpu_layer *L = &u->L;
    fmoe_dtype act = L->cfg.act_dtype;
    float *y = L->y + (size_t)p * L->H;
    const float *y2 = u->y2 + (size_t)p * L->H;
    int done;
    uint32_t l = expert_of(u, p, &done);
    if (done)
        return; /* the kernels wrote y */
    int add_b2 = L->b2 && L->cfg.tp_rank == 0;
    for (uint32_t n = 0; n < L->H; n++) {
        float b = add_b2 ? fmoe_load_float(L->b2, u->w_dtype, (int64_t)l * L->H + n) : 0.0f;
        y[n] = fmoe_round_to(act, y2[n] + b);
    }
}

/* out = in . W^T for `rows` rows (elements of `in` are ielt bytes, rows
 * of in and out K and N wide): the smallest primitive with enough rows, or
 * the largest in slices; padding rows read and write the buffers' slack. */
static int run_gemm(uq_layer *u, const uq_gemm *g, dnnl_memory_t w, int64_t K, int64_t N, char *in, float *out,
                    uint32_t rows)
{
    while (rows > 0) {
        uint32_t b = 0;
        while (b + 1 < g->n && g->rows[b] < rows)
            b++;
        uint32_t take = rows < g->rows[b] ? rows : g->rows[b];
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, g->src[b]},
                                   {DNNL_ARG_WEIGHTS, w},
                                   {DNNL_ARG_DST, g->dst[b]},
                                   {DNNL_ARG_SCRATCHPAD, u->scratch_mem}};
        if (dnnl_memory_set_data_handle(g->src[b], in) != dnnl_success ||
            dnnl_memory_set_data_handle(g->dst[b], out) != dnnl_success ||
            dnnl_primitive_execute(g->prim[b], u->stream, 4, args) != dnnl_success ||
            dnnl_stream_wait(u->stream) != dnnl_success)
            return -1;
        in += (size_t)take * K * u->celt;
        out += (size_t)take * N;
        rows -= take;
    }
    return 0;
}

/* One GEMM (slot 0: W13, K = H; 1: W2, K = I) of every expert with rows:
 * bf16 experts with few rows through the kernels (all of them without
 * oneDNN), which write round(. + bias) to kout, the others through oneDNN
 * into out. oneDNN goes first: a primitive for more rows than the expert
 * has writes the rows after it (run_gemm), which may be a small expert's
 * that the kernels then write. -1 when oneDNN fails. */
static int gemm_phase(uq_layer *u, int slot, char *in, float *out, float *kout, uint32_t K, uint32_t N,
                      const void *bias)
{
    cpu_layer *L = &u->L;
    uint32_t E = L->local_experts, small = kernel_rows(u);
    for (uint32_t l = 0; l < E; l++) {
        uint32_t p0 = L->start[l], rows = L->start[l + 1] - p0;
        if (rows > small && run_gemm(u, slot ? &u->g2 : &u->g13, u->wmem[(size_t)slot * E + l], K, N,
                                     in + (size_t)p0 * K * u->celt, out + (size_t)p0 * N, rows) != 0)
            return -1;
    }
    if (small) {
        cpu_bgemv *g = &u->bg;
        g->w = &u->bw[slot];
        g->start = L->start;
        g->in = (const uint16_t *)in;
        g->in_stride = K;
        g->out = kout;
        g->out_stride = N;
        g->bias = bias;
        g->bias_dtype = u->w_dtype;
        g->round = L->cfg.act_dtype;
        g->max_rows = small == UINT32_MAX ? 0 : small;
        cpu_bgemv_run(g, L->pool);
    }
    return 0;
}

/* Experts of the chunk that oneDNN runs. */
static uint32_t dnnl_experts(const uq_layer *u)
{
    const cpu_layer *L = &u->L;
    uint32_t n = 0, small = kernel_rows(u);
    for (uint32_t l = 0; l < L->local_experts; l++)
        n += L->start[l + 1] - L->start[l] > small;
    return n;
}

/* GEMM1's input: x's rows themselves when every expert of the chunk is on
 * the kernels and x is the compute type as is (bf16, no router weight on
 * the input); else the gather. */
static void gemm1_input(uq_layer *u, uint32_t n, uint32_t big)
{
    cpu_layer *L = &u->L;
    const fmoe_tensor *x = u->x;
    u->bg.in_rows = NULL;
    if (u->cdt == dnnl_bf16 && big == 0 && !L->cfg.apply_router_weight_on_input && x->dtype == FMOE_DTYPE_BF16 &&
        x->strides[1] == 1) {
        for (uint32_t p = 0; p < n; p++)
            u->xrows[p] = (const uint16_t *)x->data + (u->t0 + L->order[p] / (int32_t)L->k) * x->strides[0];
        u->bg.in_rows = u->xrows;
        return;
    }
    cpu_pool_run_elems(L->pool, n, L->H, gather_task, u);
}

static fmoe_status uq_apply(fmoe_apply_args *a)
{
    uq_layer *u = a->instance;
    cpu_layer *L = &u->L;
    int64_t M = a->x->shape[0];
    u->x = a->x;
    u->topk_w = a->topk_weights->data;
    for (int64_t t0 = 0; t0 < M; t0 += L->chunk) {
        int64_t t1 = t0 + L->chunk < M ? t0 + L->chunk : M;
        u->t0 = t0;
        uint32_t n = cpu_layer_group(L, a->topk_ids->data, t0, t1), big = dnnl_experts(u);
        if (u->cdt == dnnl_bf16)
            cpu_pool_wake(L->pool); /* for the kernels, while this thread gathers */
        gemm1_input(u, n, big);
        if (gemm_phase(u, 0, u->xg, u->h, u->h, L->H, L->rI, L->b13) != 0)
            return L->host->error_set(a->err, FMOE_STATUS_INTERNAL, "oneDNN matmul (GEMM1) failed");
        u->bg.in_rows = NULL;
        /* Per pair: 2I values rounded (bias), then the activation. */
        cpu_pool_run_elems(L->pool, n, L->rI + cpu_layer_activate_units(L), act_task, u);
        if (gemm_phase(u, 1, u->act, u->y2, L->y, L->I, L->H, L->cfg.tp_rank == 0 ? L->b2 : NULL) != 0)
            return L->host->error_set(a->err, FMOE_STATUS_INTERNAL, "oneDNN matmul (GEMM2) failed");
        if (big)
            cpu_pool_run_elems(L->pool, n, L->H, y_task, u);
        cpu_layer_combine(L, u->topk_w, t0, t1, a->out);
    }
    return FMOE_STATUS_OK;
}

static void uq_destroy(fmoe_destroy_args *a)
{
    uq_free(a->instance);
}

const fmoe_method cpu_method_unquantized = {
    .struct_size = sizeof(fmoe_method),
    .name = "onednn_unquantized",
    .flags = FMOE_METHOD_EPLB,
    .create = uq_create,
    .declare_params = uq_declare,
    .finalize = uq_finalize,
    .apply = uq_apply,
    .destroy = uq_destroy,
};
