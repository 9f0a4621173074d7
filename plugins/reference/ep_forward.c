/*
 * plugins/reference/ep_forward.c - the collective forward of a layer on a
 * reference EP group (ep.h). Every rank (a thread, or a process of this
 * machine) runs it for its own layer:
 *
 *   publish   this rank's tokens, routing and expert->rank table  | barrier
 *   dispatch  gather the (token, slot) pairs of every rank whose expert
 *             this rank holds, in (rank, token, slot) order, one row per
 *             pair, converted as the group's dispatch dtype says
 *   experts   the layer's own method on that batch (its apply)      | barrier
 *   combine   each token's rows from their ranks, weighted and
 *             summed in slot order, rounded once                    | barrier
 *
 * Why one row per pair with its expert in slot 0 (the other slots -1) and
 * weight 1: the method then returns y_j itself (round(0 + y_j * 1) = y_j),
 * and the combine computes round(sum_j y_j * w_j) in slot order in f32,
 * exactly as the reference loops do on one device (core/reference_experts.c,
 * refq_experts.c). So with dispatch "activation" the N-rank output equals
 * the single-rank output bit for bit, for every reference method that
 * weights after GEMM2. When the weight goes on the input (k = 1), or
 * inside the expert loop before GEMM2 (the MegaMoE oracle, whose loop sums
 * its slots' outputs unweighted), the row carries the weight and the
 * combine adds the rows unweighted, as those loops do: bit for bit again.
 * Exceptions, within the scheme's tolerance only: FP8 dispatch (the expert
 * sees round(dq(q(x)))) and per-tensor activation scales (the max over a
 * rank's local experts, or the amax of its batch, differ by definition).
 *
 * Each rank's arrays live in its region of the group's shared segment
 * (ep.h), so ranks may be threads or processes of one machine; a forward
 * allocates only its batch's inputs. A test double, not a transport.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "plugins/reference/ep.h"
#include "plugins/reference/quant.h"

#define FP8       FMOE_DTYPE_FP8_E4M3FN
#define FP8_BLOCK 128

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Methods of this plugin whose expert loop applies the routing weight
 * itself, before GEMM2, and then sums the slots unweighted
 * (method_megamoe.c). Known by their table, as only this plugin can. */
static int weights_in_experts(const fmoe_method *m)
{
    return m == &refq_family_megamoe.modular;
}

/* Rank r's arrays in its region. */
typedef struct rank_view {
    const ref_ep_slot *slot;
    char *x;
    float *w;
    int32_t *ids, *owner, *row_of;
    char *out;
} rank_view;

static rank_view view_of(ref_ep_group *g, uint32_t r)
{
    char *base = ref_ep_region(g, r);
    const ref_ep_layout *l = &g->lay;
    return (rank_view){.slot = ref_ep_slot_of(g, r),
                       .x = base + l->x,
                       .w = (float *)(base + l->w),
                       .ids = (int32_t *)(base + l->ids),
                       .owner = (int32_t *)(base + l->owner),
                       .row_of = (int32_t *)(base + l->row_of),
                       .out = base + l->out};
}

static int valid_expert(const rank_view *v, int32_t e)
{
    return e >= 0 && (uint32_t)e < v->slot->num_global;
}

/* Copy token row `src` into batch row `dst` as the dispatch dtype carries
 * it: unchanged, or quantized to e4m3 with f32 scales per token / per 128
 * and dequantized on arrival (the batch is in the activation dtype, which
 * is what a method's apply takes). tmp: [H] f32, q: [H] bytes, sc: [H/128+1]. */
static int carry_row(const ref_ep_group *g, const void *src, void *dst, int64_t dst_off, float *tmp, uint8_t *q,
                     float *sc)
{
    size_t es = g->lay.elem;
    if (g->dispatch == FMOE_EP_DISPATCH_ACTIVATION) {
        memcpy((char *)dst + (size_t)dst_off * es, src, (size_t)g->hidden * es);
        return 0;
    }
    for (uint32_t c = 0; c < g->hidden; c++)
        tmp[c] = fmoe_load_float(src, g->act_dtype, c);
    int64_t block = g->dispatch == FMOE_EP_DISPATCH_FP8_BLOCK ? FP8_BLOCK : g->hidden;
    if (fmoe_fp8_quantize_blocks(FP8, fmoe_fp8_max(FP8), FMOE_FP8_SCALE_F32, 1, g->hidden, 1, block, tmp, q, sc) !=
        FMOE_STATUS_OK)
        return -1;
    for (uint32_t c = 0; c < g->hidden; c++)
        fmoe_store_float(dst, g->act_dtype, dst_off + c, fmoe_fp8_decode(FP8, q[c]) * sc[c / block]);
    return 0;
}

/* This rank's batch: the inputs of its method's apply (its output goes to
 * the rank's region). */
typedef struct batch {
    int64_t rows;
    void *x;      /* [rows, H] act dtype */
    float *w;     /* [rows, k] */
    int32_t *ids; /* [rows, k] */
    float *tmp, *sc;
    uint8_t *q;
} batch;

static void batch_free(batch *b)
{
    free(b->x);
    free(b->w);
    free(b->ids);
    free(b->tmp);
    free(b->sc);
    free(b->q);
    memset(b, 0, sizeof *b);
}

/* Count, allocate and fill this rank's batch from every rank's region, and
 * tell each source rank where its pairs went. 0, or -1 (no memory). */
static int dispatch(ref_ep_group *g, batch *b)
{
    uint32_t k = g->top_k, me = g->rank;
    int64_t rows = 0;
    for (uint32_t r = 0; r < g->size; r++) {
        rank_view v = view_of(g, r);
        for (int64_t i = 0; i < v.slot->m * k; i++)
            rows += valid_expert(&v, v.ids[i]) && v.owner[v.ids[i]] == (int32_t)me;
    }
    size_t n = rows ? (size_t)rows : 1;
    b->rows = rows;
    b->x = malloc(n * g->hidden * g->lay.elem);
    b->w = malloc(n * k * sizeof *b->w);
    b->ids = malloc(n * k * sizeof *b->ids);
    b->tmp = malloc(g->hidden * sizeof *b->tmp);
    b->sc = malloc((g->hidden / FP8_BLOCK + 1) * sizeof *b->sc);
    b->q = malloc(g->hidden);
    if (!b->x || !b->w || !b->ids || !b->tmp || !b->sc || !b->q)
        return -1;
    int64_t row = 0;
    for (uint32_t r = 0; r < g->size; r++) {
        rank_view v = view_of(g, r);
        for (int64_t t = 0; t < v.slot->m; t++)
            for (uint32_t j = 0; j < k; j++) {
                int64_t i = t * k + j;
                int32_t e = v.ids[i];
                if (!valid_expert(&v, e) || v.owner[e] != (int32_t)me)
                    continue;
                const char *src = v.x + (size_t)t * g->hidden * g->lay.elem;
                if (carry_row(g, src, b->x, row * g->hidden, b->tmp, b->q, b->sc) != 0)
                    return -1;
                for (uint32_t c = 0; c < k; c++) {
                    b->ids[row * k + c] = c == 0 ? e : -1;
                    b->w[row * k + c] = c == 0 ? (v.slot->on_input ? v.w[i] : 1.0f) : 0.0f;
                }
                v.row_of[i] = (int32_t)row; /* disjoint: only e's owner writes it */
                row++;
            }
    }
    return 0;
}

/* A dense host matrix (plugins link nothing of libfusedmoe's). */
static void host_matrix(fmoe_tensor *t, fmoe_dtype dtype, const int64_t *shape, void *data)
{
    memset(t, 0, sizeof *t);
    t->struct_size = sizeof *t;
    t->dtype = dtype;
    t->device_kind = FMOE_DEVICE_CPU;
    t->ndim = 2;
    t->shape[0] = shape[0];
    t->shape[1] = shape[1];
    t->strides[0] = shape[1];
    t->strides[1] = 1;
    t->data = data;
}

static fmoe_status run_experts(const fmoe_ep_forward_args *a, ref_ep_group *g, batch *b, char *why, size_t cap)
{
    if (b->rows == 0)
        return FMOE_STATUS_OK;
    const int64_t xs[2] = {b->rows, g->hidden}, ks[2] = {b->rows, g->top_k};
    fmoe_tensor x, y, w, ids;
    host_matrix(&x, g->act_dtype, xs, b->x);
    host_matrix(&y, g->act_dtype, xs, view_of(g, g->rank).out);
    host_matrix(&w, FMOE_DTYPE_F32, ks, b->w);
    host_matrix(&ids, FMOE_DTYPE_INT32, ks, b->ids);
    fmoe_apply_args ap = {.struct_size = sizeof ap,
                          .err = a->err,
                          .instance = a->instance,
                          .x = &x,
                          .topk_weights = &w,
                          .topk_ids = &ids,
                          .out = &y,
                          .stream = a->stream};
    fmoe_status st = a->method->apply(&ap);
    if (st != FMOE_STATUS_OK)
        snprintf(why, cap, "%s apply on %lld rows failed (status %d)", a->method->name, (long long)b->rows, st);
    return st;
}

/* out_t = round(sum_j y_j * w_j) in slot order over valid slots, y_j read
 * from the batch output of the rank that holds slot j's expert. */
static void combine(const fmoe_ep_forward_args *a, ref_ep_group *g)
{
    uint32_t k = g->top_k, hid = g->hidden;
    rank_view mine = view_of(g, g->rank);
    const fmoe_tensor *out = a->out;
    for (int64_t t = 0; t < mine.slot->m; t++)
        for (uint32_t n = 0; n < hid; n++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < k; j++) {
                int64_t i = t * k + j;
                int32_t e = mine.ids[i];
                if (!valid_expert(&mine, e))
                    continue;
                rank_view src = view_of(g, (uint32_t)mine.owner[e]);
                float y = fmoe_load_float(src.out, g->act_dtype, (int64_t)mine.row_of[i] * hid + n);
                acc += y * (mine.slot->on_input ? 1.0f : mine.w[i]);
            }
            fmoe_store_float(out->data, g->act_dtype, t * out->strides[0] + n, acc);
        }
}

/* The first rank whose layer places the experts differently from rank 0's
 * (another placement or redundant count would route tokens to the wrong
 * rank silently), or -1. Every rank computes the same answer. */
static int placement_differs(ref_ep_group *g)
{
    rank_view v0 = view_of(g, 0);
    for (uint32_t r = 1; r < g->size; r++) {
        rank_view v = view_of(g, r);
        if (v.slot->num_global != v0.slot->num_global ||
            memcmp(v.owner, v0.owner, v0.slot->num_global * sizeof *v0.owner) != 0)
            return (int)r;
    }
    return -1;
}

/* Copy this rank's tokens, routing and expert table into its region. */
static void publish(const fmoe_ep_forward_args *a, ref_ep_group *g)
{
    rank_view v = view_of(g, g->rank);
    ref_ep_slot *slot = ref_ep_slot_of(g, g->rank);
    int64_t m = a->x->shape[0];
    size_t row = (size_t)g->hidden * g->lay.elem;
    for (int64_t t = 0; t < m; t++)
        memcpy(v.x + (size_t)t * row, (const char *)a->x->data + (size_t)(t * a->x->strides[0]) * g->lay.elem, row);
    memcpy(v.w, a->topk_weights->data, (size_t)m * g->top_k * sizeof(float));
    memcpy(v.ids, a->topk_ids->data, (size_t)m * g->top_k * sizeof(int32_t));
    memcpy(v.owner, a->expert_owner, (size_t)a->num_global_experts * sizeof(int32_t));
    slot->m = m;
    slot->num_global = a->num_global_experts;
    /* "on_input": the rows carry the weight and the combine does not. */
    slot->on_input = a->config->apply_router_weight_on_input != 0 || weights_in_experts(a->method);
    slot->failed = 0;
    slot->failure[0] = '\0';
}

fmoe_status ref_ep_forward(fmoe_ep_forward_args *a)
{
    ref_ep_group *g = a->group;
    const fmoe_host *h = g->host;
    char why[600] = "";
    double t0 = now_s();
    if (a->x->shape[0] > g->max_tokens || a->num_global_experts != g->num_experts)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP forward: %lld tokens and %u experts, the group holds %u and %u (the host checks this)",
                            (long long)a->x->shape[0], a->num_global_experts, g->max_tokens, g->num_experts);
    publish(a, g);
    ref_ep_slot *mine = ref_ep_slot_of(g, g->rank);
    batch b = {0};
    fmoe_status st = FMOE_STATUS_OK;
    if (ref_ep_barrier(g, "dispatch", why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    int bad = placement_differs(g);
    if (bad >= 0) {
        /* Every rank sees it and returns, after one more barrier so that
         * no rank publishes its next forward while another still reads. */
        uint32_t n_bad = ref_ep_slot_of(g, (uint32_t)bad)->num_global;
        ref_ep_barrier(g, "the placement check", why, sizeof why);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP forward: rank %d's layer places its %u physical experts differently from rank 0's "
                            "(placement or num_redundant_experts differ between the ranks' layers)",
                            bad, n_bad);
    }
    if (dispatch(g, &b) != 0) {
        mine->failed = 1;
        snprintf(mine->failure, sizeof mine->failure, "out of memory for its batch of %lld rows", (long long)b.rows);
    }
    double t1 = now_s();
    if (!mine->failed && (st = run_experts(a, g, &b, mine->failure, sizeof mine->failure)) != FMOE_STATUS_OK)
        mine->failed = 1;
    batch_free(&b);
    double t2 = now_s();
    if (ref_ep_barrier(g, "experts", why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    for (uint32_t r = 0; r < g->size; r++) {
        const ref_ep_slot *s = ref_ep_slot_of(g, r);
        if (s->failed) {
            /* Every rank sees the same flags and stops here. This rank's own
             * method error text, if it failed, is already in a->err. */
            int self = r == g->rank;
            char failure[600];
            snprintf(failure, sizeof failure, "EP forward: rank %u's experts failed: %s", r, s->failure);
            ref_ep_barrier(g, "the failure check", why, sizeof why);
            if (self && st != FMOE_STATUS_OK)
                return st;
            return h->error_set(a->err, self ? FMOE_STATUS_OUT_OF_MEMORY : FMOE_STATUS_DEVICE_ERROR, "%s", failure);
        }
    }
    combine(a, g);
    /* Nobody overwrites a region another rank may still be reading. */
    if (ref_ep_barrier(g, "combine", why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    if (g->timing)
        ref_ep_add_timing(g, t1 - t0, t2 - t1, now_s() - t2);
    return FMOE_STATUS_OK;
}
