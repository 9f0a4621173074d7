/*
 * plugins/cpu/method_int.c - integer methods through the qgemm kernels:
 *
 *   int8_w8a8  int8:channel|tensor/int8:token:dynamic   int8 weights with
 *              an f32 scale per row (channel) or per expert and half
 *              (tensor); activations symmetric int8 per token (vLLM).
 *   w4a8_int8  int4:channel|group<g>[:scale-bf16]/int8:token:dynamic:asym
 *              (Arm / KleidiAI semantics): int4 values held in int8, f32
 *              channel or bf16 group scales; activations asymmetric int8
 *              per row (qai8dx, fmoe_w4a8_quantize_activations).
 *
 * Parameters, size rules and finalize checks are the reference plugin's
 * (plugins/reference/method_int8.c, method_w4a8.c), so checkpoints load
 * unchanged. finalize repacks into the tile layout (qgemm.h). apply, per
 * chunk of tokens, with the pool:
 *
 *   quantize  each token's GEMM1 input (x w[t,0] on input)    per token
 *   GEMM1     h = round(sa * (q . W13^T) + b13)                per (expert, tiles)
 *   act       quantize round(act(h)) as GEMM2 input            per pair
 *   GEMM2     y = round(sa * (q . W2^T) + b2)                  per (expert, tiles)
 *   combine   (layer.c)                                         per token
 *
 * A (expert, tiles) item streams its tiles' weights once and runs every
 * row routed to that expert through them (mr rows per kernel call), so in
 * decode each active expert's weights are read from memory once.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/kit/half.h"
#include "plugins/cpu/layer.h"
#include "plugins/cpu/qgemm.h"
#include "plugins/cpu/rowops.h"

/* Target number of GEMM items per thread (load balance vs. per-item cost). */
#define ITEMS_PER_THREAD 16
/* build_items orders experts by rows up to this many (more: first, as they come). */
#define MAX_SORTED_ROWS 16
/* How far ahead (in tiles of the item) the kernels prefetch a second stream:
 * the next tile (32-112 KiB on) streamed 5-12% faster than four on at every
 * decode point of bench/cpu, and than no second stream (docs/CPU.md). */
#ifndef AHEAD_TILES
#define AHEAD_TILES 1
#endif

typedef struct q_item {
    uint32_t expert, t0, t1;
} q_item;

typedef struct q_layer {
    cpu_layer L;
    int w4; /* 1: W4A8, 0: W8A8 */
    const cpu_kernels *kern;
    /* cpu_quant_asym, or its AVX-512 version (rowops.h, the same bits). */
    void (*quant_asym)(const float *x, uint32_t n, uint32_t kp, uint32_t group, int8_t *q, int32_t *off, float *scale,
                       int32_t *qsum);
    cpu_qweights w13, w2;
    float *row_scales[2]; /* W8A8 per-tensor: per-row scales built at finalize */
    /* GEMM1 inputs, per token of the chunk (qc: cpu_qcorr words, when the
     * groups are small enough for them, else NULL). */
    int8_t *q1;
    float *s1;
    int32_t *o1, *qs1, *qc1;
    /* GEMM1 outputs and GEMM2 inputs, per position. */
    float *h;
    int8_t *q2;
    float *s2;
    int32_t *o2, *qs2, *qc2;
    float *rows; /* [threads][max(H, I)] */
    q_item *items;
    uint32_t items_cap;
    /* The current call. */
    const fmoe_tensor *x;
    const float *topk_w;
    int64_t t0;
    int gemm; /* 1 or 2 */
} q_layer;

static int act_int8_token(const fmoe_scheme *s)
{
    return s->a_dtype == FMOE_DTYPE_INT8 && s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic;
}

int cpu_int8_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap)
{
    (void)c;
    if (s->w_dtype != FMOE_DTYPE_INT8 || !s->w_symmetric || s->w_scale_dtype != FMOE_DTYPE_F32 ||
        (s->w_strategy != FMOE_QSTRATEGY_CHANNEL && s->w_strategy != FMOE_QSTRATEGY_TENSOR) ||
        s->w_actorder != FMOE_ACTORDER_NONE) {
        snprintf(reason, cap, "int8 weights must be symmetric, per channel or tensor, f32 scales, no act-order");
        return 0;
    }
    if (!act_int8_token(s) || !s->a_symmetric) {
        snprintf(reason, cap, "int8 weights need dynamic symmetric per-token int8 activations");
        return 0;
    }
    return 1;
}

int cpu_w4a8_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap)
{
    (void)c;
    if (s->w_dtype != FMOE_DTYPE_INT4 || !s->w_symmetric || s->w_actorder != FMOE_ACTORDER_NONE ||
        (s->w_scale_dtype != FMOE_DTYPE_F32 && s->w_scale_dtype != FMOE_DTYPE_BF16 &&
         s->w_scale_dtype != FMOE_DTYPE_F16) ||
        (s->w_strategy != FMOE_QSTRATEGY_CHANNEL && s->w_strategy != FMOE_QSTRATEGY_GROUP)) {
        snprintf(reason, cap, "int4 weights must be symmetric, per channel or group, no act-order");
        return 0;
    }
    if (!act_int8_token(s) || s->a_symmetric) {
        snprintf(reason, cap, "int4 weights are served with dynamic asymmetric per-token int8 activations (W4A8 Arm)");
        return 0;
    }
    if (s->w_strategy == FMOE_QSTRATEGY_GROUP && (s->w_group_size == 0 || s->w_group_size % 8 != 0)) {
        snprintf(reason, cap, "int4 group size %u is not a multiple of 8 (the kernels' K step)", s->w_group_size);
        return 0;
    }
    return 1;
}

static void q_free(q_layer *q)
{
    const fmoe_host *h = q->L.host;
    cpu_qweights *ws[2] = {&q->w13, &q->w2};
    for (int i = 0; i < 2; i++) {
        h->free(h->ctx, ws[i]->w);
        h->free(h->ctx, ws[i]->gscale);
        h->free(h->ctx, ws[i]->gscale16);
        h->free(h->ctx, ws[i]->wsum);
        h->free(h->ctx, q->row_scales[i]);
    }
    void *bufs[] = {q->q1, q->s1, q->o1, q->qs1, q->qc1, q->h, q->q2, q->s2, q->o2, q->qs2, q->qc2, q->rows, q->items};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        h->free(h->ctx, bufs[i]);
    cpu_layer_release(&q->L);
    h->free(h->ctx, q);
}

static uint32_t pad_k(uint32_t k, int w4)
{
    return w4 ? (k + 7) / 8 * 8 : (k + 3) / 4 * 4;
}

static void declare(q_layer *q)
{
    cpu_layer *L = &q->L;
    int64_t rI = L->rI, H = L->H, I = L->I;
    const fmoe_scheme *s = &L->scheme;
    if (!q->w4) {
        fmoe_dtype i8 = FMOE_DTYPE_INT8;
        cpu_layer_param(L, "w13_weight", i8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, rI, H);
        cpu_layer_param(L, "w2_weight", i8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, H, I);
        if (s->w_strategy == FMOE_QSTRATEGY_CHANNEL) {
            cpu_layer_param(L, "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE,
                            FMOE_SCALE_CHANNEL, 0, 3, rI, 1);
            cpu_layer_param(L, "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE,
                            FMOE_SCALE_CHANNEL, -1, 3, H, 1);
        } else { /* per tensor: [E, 2] (w1, w3) gated, [E] otherwise; W2 [E] */
            int pair = L->cfg.gated != 0;
            cpu_layer_param(L, "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE,
                            FMOE_SCALE_TENSOR, -1, pair ? 2 : 1, pair ? 2 : 0, 0);
            cpu_layer_param(L, "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE,
                            FMOE_SCALE_TENSOR, -1, 1, 0, 0);
        }
    } else {
        int g = s->w_strategy == FMOE_QSTRATEGY_GROUP;
        uint32_t G13 = g ? L->H / s->w_group_size : 1, G2 = g ? L->I / s->w_group_size : 1;
        int32_t kind = g ? FMOE_SCALE_GROUP : FMOE_SCALE_CHANNEL;
        cpu_layer_param(L, "w13_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, rI,
                        H);
        cpu_layer_param(L, "w2_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, H, I);
        cpu_layer_param(L, "w13_weight_scale", s->w_scale_dtype, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, kind, 0, 3, rI,
                        G13);
        cpu_layer_param(L, "w2_weight_scale", s->w_scale_dtype, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, kind, g ? 1 : -1,
                        3, H, G2);
    }
    cpu_layer_param_biases(L);
}

static fmoe_status q_create(fmoe_create_args *a)
{
    const cpu_state *st = a->state;
    const fmoe_host *h = st->host;
    const fmoe_scheme *s = a->scheme;
    int w4 = s->w_dtype == FMOE_DTYPE_INT4;
    uint32_t H = a->hidden_size, I = a->intermediate_per_rank, rI = (a->config->gated ? 2 : 1) * I;
    if (w4 && s->w_strategy == FMOE_QSTRATEGY_GROUP && (H % s->w_group_size || I % s->w_group_size))
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "W4A8: group_size %u must divide hidden_size %u and intermediate_size_per_partition %u",
                            s->w_group_size, H, I);
    q_layer *q = cpu_alloc(h, sizeof *q);
    if (!q)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(q, 0, sizeof *q);
    q->w4 = w4;
    uint32_t kp1 = pad_k(H, w4), kp2 = pad_k(I, w4);
    uint32_t G1 = w4 && s->w_strategy == FMOE_QSTRATEGY_GROUP ? H / s->w_group_size : 1;
    uint32_t G2 = w4 && s->w_strategy == FMOE_QSTRATEGY_GROUP ? I / s->w_group_size : 1;
    size_t per_token = kp1 + 12 + G1 * 8 + (size_t)a->config->top_k * (rI * 4 + kp2 + 12 + G2 * 8);
    fmoe_status rc = cpu_layer_init(&q->L, a, per_token);
    if (rc != FMOE_STATUS_OK) {
        q_free(q);
        return rc;
    }
    cpu_layer *L = &q->L;
    q->kern = cpu_kernels_for(L->isa);
    q->quant_asym = cpu_quant_asym;
#if defined(__x86_64__)
    if (L->isa >= CPU_ISA_AVX512_VNNI)
        q->quant_asym = cpu_quant_asym_avx512;
#endif
    size_t T = L->chunk, P = (size_t)L->chunk * L->k;
    q->q1 = cpu_alloc(h, T * kp1);
    q->s1 = cpu_alloc(h, T * sizeof(float));
    q->o1 = cpu_alloc(h, T * sizeof(int32_t));
    q->qs1 = cpu_alloc(h, T * G1 * sizeof(int32_t));
    q->h = cpu_alloc(h, P * rI * sizeof(float));
    q->q2 = cpu_alloc(h, P * kp2);
    q->s2 = cpu_alloc(h, P * sizeof(float));
    q->o2 = cpu_alloc(h, P * sizeof(int32_t));
    q->qs2 = cpu_alloc(h, P * G2 * sizeof(int32_t));
    /* Group correction words for the VNNI kernel (qgemm.h), groups of up to 64. */
    int qc = w4 && G1 > 1 && cpu_qcorr_fits(s->w_group_size) && L->isa >= CPU_ISA_AVX512_VNNI;
    if (qc) {
        q->qc1 = cpu_alloc(h, T * G1 * sizeof(int32_t));
        q->qc2 = cpu_alloc(h, P * G2 * sizeof(int32_t));
    }
    uint32_t wide = rI > H ? rI : H;
    q->rows = cpu_alloc(h, (size_t)cpu_pool_size(L->pool) * wide * sizeof(float));
    uint32_t tiles13 = (rI + CPU_NR - 1) / CPU_NR, tiles2 = (H + CPU_NR - 1) / CPU_NR;
    size_t experts = L->local_experts < P ? L->local_experts : P;
    q->items_cap = (uint32_t)(experts * (tiles13 > tiles2 ? tiles13 : tiles2));
    q->items = cpu_alloc(h, (size_t)q->items_cap * sizeof(q_item));
    if (!q->q1 || !q->s1 || !q->o1 || !q->qs1 || !q->h || !q->q2 || !q->s2 || !q->o2 || !q->qs2 || !q->rows ||
        !q->items || (qc && (!q->qc1 || !q->qc2))) {
        q_free(q);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    declare(q);
    a->instance = q;
    return FMOE_STATUS_OK;
}

static fmoe_status q_declare(fmoe_declare_params_args *a)
{
    q_layer *q = a->instance;
    a->params = q->L.desc_ptrs;
    a->n_params = q->L.n_params;
    return FMOE_STATUS_OK;
}

/* Per-row scales [E, rows] from per-expert (and per-half) ones. */
static float *tensor_row_scales(q_layer *q, int slot, const float *s, uint32_t rows, uint32_t halves)
{
    const fmoe_host *h = q->L.host;
    uint32_t E = q->L.local_experts;
    float *out = cpu_alloc(h, (size_t)E * rows * sizeof(float));
    if (out)
        for (uint32_t e = 0; e < E; e++)
            for (uint32_t n = 0; n < rows; n++)
                out[(size_t)e * rows + n] = s[(size_t)e * halves + n / (rows / halves)];
    q->row_scales[slot] = out;
    return out;
}

/* Scales of any float dtype -> f32 (exact), into a temporary. */
static float *scales_f32(q_layer *q, const fmoe_tensor *t)
{
    size_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    float *out = cpu_alloc(q->L.host, n * sizeof(float));
    if (out)
        for (size_t i = 0; i < n; i++)
            out[i] = fmoe_load_float(t->data, t->dtype, (int64_t)i);
    return out;
}

static fmoe_status q_finalize(fmoe_finalize_args *a)
{
    q_layer *q = a->instance;
    cpu_layer *L = &q->L;
    const fmoe_host *h = L->host;
    if (a->n_params != L->n_params)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                            L->n_params);
    const fmoe_tensor *const *p = a->params;
    uint32_t E = L->local_experts;
    cpu_qweights *ws[2] = {&q->w13, &q->w2};
    uint32_t rows[2] = {L->rI, L->H}, cols[2] = {L->H, L->I};
    for (int i = 0; i < 2; i++) {
        int rc;
        if (!q->w4) {
            const float *s = p[2 + i]->data;
            if (L->scheme.w_strategy == FMOE_QSTRATEGY_TENSOR)
                s = tensor_row_scales(q, i, s, rows[i], i == 0 && L->cfg.gated ? 2 : 1);
            rc = s ? cpu_qweights_int8(ws[i], E, rows[i], cols[i], p[i]->data, s, cpu_alloc_weights, (void *)h) : -1;
        } else {
            float *s = scales_f32(q, p[2 + i]);
            uint32_t g = L->scheme.w_strategy == FMOE_QSTRATEGY_GROUP ? L->scheme.w_group_size : cols[i];
            rc = s ? cpu_qweights_int4(ws[i], E, rows[i], cols[i], g, p[i]->data, s, cpu_alloc_weights, (void *)h) : -1;
            h->free(h->ctx, s);
        }
        if (rc == -2)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s: int4 values must be in [-8, 7]",
                                L->descs[i].name);
        if (rc != 0)
            return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory repacking %s", L->descs[i].name);
    }
    L->b13 = L->bias13 >= 0 ? p[L->bias13]->data : NULL;
    L->b2 = L->bias2 >= 0 ? p[L->bias2]->data : NULL;
    cpu_log(h, FMOE_PLUGIN_LOG_DEBUG, "%s: repacked %u experts (%s kernels, %s weights)", q->w4 ? "w4a8" : "int8", E,
            q->kern->name, q->w4 ? "packed int4" : "int8");
    return FMOE_STATUS_OK;
}

/* --- apply ------------------------------------------------------------- */

static float *worker_row(q_layer *q, uint32_t worker)
{
    uint32_t wide = q->L.rI > q->L.H ? q->L.rI : q->L.H;
    return q->rows + (size_t)worker * wide;
}

static void quant_row(q_layer *q, const cpu_qweights *w, const float *x, uint32_t n, int8_t *dst, float *s, int32_t *o,
                      int32_t *qs, int32_t *qc)
{
    if (!q->w4) {
        cpu_quant_sym(x, n, w->kp, dst, s);
        return;
    }
    q->quant_asym(x, n, w->kp, w->group, dst, o, s, qs);
    if (qc)
        cpu_qcorr(*o, qs, w->groups, w->group, qc);
}

static void quant1_task(void *ctx, uint32_t i, uint32_t worker)
{
    q_layer *q = ctx;
    float *row = worker_row(q, worker);
    cpu_layer_input_row(&q->L, q->x, q->topk_w, q->t0 + i, row);
    quant_row(q, &q->w13, row, q->L.H, q->q1 + (size_t)i * q->w13.kp, &q->s1[i], &q->o1[i],
              q->qs1 + (size_t)i * q->w13.groups, q->qc1 ? q->qc1 + (size_t)i * q->w13.groups : NULL);
}

static void quant2_task(void *ctx, uint32_t p, uint32_t worker)
{
    q_layer *q = ctx;
    cpu_layer *L = &q->L;
    float *a = worker_row(q, worker);
    cpu_layer_activate(L, q->h + (size_t)p * L->rI, a);
    quant_row(q, &q->w2, a, L->I, q->q2 + (size_t)p * q->w2.kp, &q->s2[p], &q->o2[p], q->qs2 + (size_t)p * q->w2.groups,
              q->qc2 ? q->qc2 + (size_t)p * q->w2.groups : NULL);
}

/* One (expert, tiles) item of GEMM1 or GEMM2 over every row of the expert. */
static void gemm_task(void *ctx, uint32_t i, uint32_t worker)
{
    (void)worker;
    q_layer *q = ctx;
    cpu_layer *L = &q->L;
    q_item it = q->items[i];
    int g1 = q->gemm == 1;
    const cpu_qweights *w = g1 ? &q->w13 : &q->w2;
    uint32_t N = w->n, p0 = L->start[it.expert], p1 = L->start[it.expert + 1], mr = q->kern->mr;
    const void *bias = g1 ? L->b13 : (L->cfg.tp_rank == 0 ? L->b2 : NULL);
    fmoe_dtype act = L->cfg.act_dtype;
    cpu_qtile_fn fn = q->w4 ? q->kern->i4 : q->kern->i8;
    cpu_qtile t;
    t.kp = w->kp;
    t.group = w->group;
    t.groups = w->groups;
    for (uint32_t tile = it.t0; tile < it.t1; tile++) {
        t.w = cpu_qweights_tile(w, it.expert, tile);
        /* A second stream for the kernels' prefetch: the tile AHEAD_TILES on,
         * while it is still this item's. */
        t.ahead = tile + AHEAD_TILES < it.t1 ? cpu_qweights_tile(w, it.expert, tile + AHEAD_TILES) : NULL;
        t.gscale = cpu_qweights_gscale(w, it.expert, tile);
        t.gscale16 = cpu_qweights_gscale16(w, it.expert, tile);
        t.wsum = cpu_qweights_wsum(w, it.expert, tile);
        uint32_t n0 = tile * CPU_NR, nn = N - n0 < CPU_NR ? N - n0 : CPU_NR;
        float b[CPU_NR];
        for (uint32_t r = 0; r < nn; r++)
            b[r] = bias ? fmoe_load_float(bias, act, (int64_t)it.expert * N + n0 + r) : 0.0f;
        for (uint32_t p = p0; p < p1; p += mr) {
            t.mr = p1 - p < mr ? p1 - p : mr;
            float sa[CPU_MR_MAX];
            for (uint32_t m = 0; m < t.mr; m++) {
                if (g1) {
                    uint32_t tok = (uint32_t)L->order[p + m] / L->k;
                    t.a[m] = q->q1 + (size_t)tok * w->kp;
                    t.off[m] = q->o1[tok];
                    t.qsum[m] = q->qs1 + (size_t)tok * w->groups;
                    t.qcorr[m] = q->qc1 ? q->qc1 + (size_t)tok * w->groups : NULL;
                    sa[m] = q->s1[tok];
                } else {
                    t.a[m] = q->q2 + (size_t)(p + m) * w->kp;
                    t.off[m] = q->o2[p + m];
                    t.qsum[m] = q->qs2 + (size_t)(p + m) * w->groups;
                    t.qcorr[m] = q->qc2 ? q->qc2 + (size_t)(p + m) * w->groups : NULL;
                    sa[m] = q->s2[p + m];
                }
            }
            fn(&t);
            for (uint32_t m = 0; m < t.mr; m++) {
                float *dst = g1 ? q->h + (size_t)(p + m) * L->rI + n0 : L->y + (size_t)(p + m) * L->H + n0;
                for (uint32_t r = 0; r < nn; r++)
                    dst[r] = fmoe_round_to(act, t.out[m][r] * sa[m] + b[r]);
            }
        }
    }
}

/* Cut every active expert's tiles into items, about ITEMS_PER_THREAD per thread. */
static uint32_t build_items(q_layer *q, const cpu_qweights *w)
{
    cpu_layer *L = &q->L;
    uint32_t active = 0;
    for (uint32_t l = 0; l < L->local_experts; l++)
        active += L->start[l + 1] > L->start[l];
    if (active == 0)
        return 0;
    uint64_t want = (uint64_t)cpu_pool_size(L->pool) * ITEMS_PER_THREAD;
    uint64_t total = (uint64_t)active * w->tiles;
    uint32_t piece = cpu_pool_size(L->pool) == 1 ? w->tiles : (uint32_t)((total + want - 1) / want);
    piece = piece < 1 ? 1 : piece > w->tiles ? w->tiles : piece;
    /* Experts with the most rows (the most compute per byte) first, so the
     * last items are quick ones and the threads finish together: pass r
     * takes the experts of r rows, pass 0 those above MAX_SORTED_ROWS. */
    uint32_t n = 0;
    for (uint32_t r = 0;; r = r == 0 ? MAX_SORTED_ROWS : r - 1) {
        for (uint32_t l = 0; l < L->local_experts; l++) {
            uint32_t rows = L->start[l + 1] - L->start[l];
            if (rows == 0 || (r ? rows != r : rows <= MAX_SORTED_ROWS))
                continue;
            for (uint32_t t = 0; t < w->tiles && n < q->items_cap; t += piece)
                q->items[n++] = (q_item){l, t, t + piece < w->tiles ? t + piece : w->tiles};
        }
        if (r == 1)
            break;
    }
    return n;
}

static fmoe_status q_apply(fmoe_apply_args *a)
{
    q_layer *q = a->instance;
    cpu_layer *L = &q->L;
    int64_t M = a->x->shape[0];
    q->x = a->x;
    q->topk_w = a->topk_weights->data;
    for (int64_t t0 = 0; t0 < M; t0 += L->chunk) {
        int64_t t1 = t0 + L->chunk < M ? t0 + L->chunk : M;
        q->t0 = t0;
        uint32_t n = cpu_layer_group(L, a->topk_ids->data, t0, t1);
        if (n > 0) {
            cpu_pool_wake(L->pool); /* for GEMM1, while this thread quantizes */
            cpu_pool_run_elems(L->pool, (uint32_t)(t1 - t0), L->H, quant1_task, q);
            q->gemm = 1;
            cpu_pool_run(L->pool, build_items(q, &q->w13), gemm_task, q);
            /* Per pair: the activation, then I values quantized (~1 ns each in
             * AVX-512, ~4 in C). */
            size_t quant = (size_t)L->I * (q->quant_asym == cpu_quant_asym ? 4 : 1);
            cpu_pool_run_elems(L->pool, n, cpu_layer_activate_units(L) + quant, quant2_task, q);
            q->gemm = 2;
            cpu_pool_run(L->pool, build_items(q, &q->w2), gemm_task, q);
        }
        cpu_layer_combine(L, q->topk_w, t0, t1, a->out);
    }
    return FMOE_STATUS_OK;
}

static void q_destroy(fmoe_destroy_args *a)
{
    q_free(a->instance);
}

const fmoe_method cpu_method_int8 = {
    .struct_size = sizeof(fmoe_method),
    .name = "int8_w8a8",
    .flags = FMOE_METHOD_EPLB,
    .create = q_create,
    .declare_params = q_declare,
    .finalize = q_finalize,
    .apply = q_apply,
    .destroy = q_destroy,
};

const fmoe_method cpu_method_w4a8 = {
    .struct_size = sizeof(fmoe_method),
    .name = "w4a8_int8",
    .flags = FMOE_METHOD_EPLB,
    .create = q_create,
    .declare_params = q_declare,
    .finalize = q_finalize,
    .apply = q_apply,
    .destroy = q_destroy,
};
