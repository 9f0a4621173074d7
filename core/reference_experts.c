/*
 * core/reference_experts.c - the oracle expert computation for unquantized
 * weights (contract in fusedmoe/kit/reference_experts.h, math in docs/ROUTING.md).
 *
 * The math is per (token, slot) pair and nothing more:
 *     h = round(x . W13[l]^T + b13[l]);  a = round(act(h));
 *     y = round(a . W2[l]^T + b2[l]);    out = round(sum_j y_j * w_j)
 * with f32 dot products and the sum over slots taken in slot order.
 *
 * The loop order only exists to make that fast enough for a few thousand
 * tokens with H, I ~ 1024 (an oracle that takes minutes is not used):
 *  - tokens are processed in chunks whose per-pair outputs y fit a fixed
 *    budget; inside a chunk the pairs are grouped by local expert;
 *  - an expert's pairs go through in blocks of PAIR_BLOCK, so each weight
 *    row is converted to f32 once and then used PAIR_BLOCK times while hot;
 *  - dot products keep 8 independent partial sums, which lets the compiler
 *    use SIMD (the result is still an f32 accumulation, in another order).
 * Then every token sums its slots' y in slot order and is rounded once.
 *
 * libc/libm only: this file is linked into plugins that do not link
 * libfusedmoe, so failures are reported by return value, not error text.
 */
#include "fusedmoe/kit/reference_experts.h"

#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"

#define PAIR_BLOCK 16
/* Per-chunk outputs y[pairs][H]: 4M floats = 16 MiB. */
#define Y_BUDGET_FLOATS ((int64_t)1 << 22)
#define DOT_LANES       8 /* dot_f32's final reduction is written out for 8 */

typedef struct ref_scratch {
    float *xb;      /* [PAIR_BLOCK][H]  input rows of the block */
    float *hb;      /* [PAIR_BLOCK][rI] GEMM1 outputs */
    float *ab;      /* [PAIR_BLOCK][I]  activations */
    float *row;     /* [max(H, I)]      one weight row as f32 */
    float *y;       /* [chunk*k][H]     per-pair outputs of the chunk */
    int32_t *order; /* [chunk*k]        pair indices grouped by local expert */
    int64_t *start; /* [E_local + 1]    where each expert's pairs begin in order */
    int64_t chunk;  /* tokens per chunk */
} ref_scratch;

/* Dimensions used everywhere, derived once. */
typedef struct ref_dims {
    uint32_t H, I, rI, k;
    fmoe_dtype act;
} ref_dims;

/* f32 dot product with DOT_LANES independent partial sums. Indices are
 * size_t: with uint32_t arithmetic the compiler cannot rule out wrap-around
 * and falls back to element-wise gathers (5x slower). */
static float dot_f32(const float *a, const float *b, uint32_t n)
{
    float part[DOT_LANES] = {0};
    size_t full = n - n % DOT_LANES;
    for (size_t i = 0; i < full; i += DOT_LANES) {
        const float *pa = a + i, *pb = b + i;
        for (size_t j = 0; j < DOT_LANES; j++)
            part[j] += pa[j] * pb[j];
    }
    for (size_t i = full; i < n; i++)
        part[i % DOT_LANES] += a[i] * b[i];
    _Static_assert(DOT_LANES == 8, "the reduction below adds 8 partial sums");
    float s01 = part[0] + part[1], s23 = part[2] + part[3];
    float s45 = part[4] + part[5], s67 = part[6] + part[7];
    return (s01 + s23) + (s45 + s67);
}

/* Row of n weights starting at element `offset`, as f32: F32 data is used in
 * place, BF16/F16 are converted into buf (one loop per dtype so the common
 * BF16 case is a plain shift the compiler can vectorize). */
static const float *weight_row(const void *base, fmoe_dtype dtype, int64_t offset, uint32_t n, float *buf)
{
    const uint16_t *h = (const uint16_t *)base + offset;
    switch (dtype) {
    case FMOE_DTYPE_F32:
        return (const float *)base + offset;
    case FMOE_DTYPE_BF16:
        for (uint32_t i = 0; i < n; i++)
            buf[i] = fmoe_bf16_to_f32(h[i]);
        return buf;
    default:
        for (uint32_t i = 0; i < n; i++)
            buf[i] = fmoe_load_float(base, dtype, offset + i);
        return buf;
    }
}

/* Local expert of pair (t, j), or -1 if it contributes nothing here: id out
 * of [0, E_global), or owned by another rank (map value -1 / out of range). */
static int64_t pair_local_expert(const fmoe_ref_problem *p, int64_t pair)
{
    int32_t e = p->topk_ids[pair];
    if (e < 0 || (uint32_t)e >= p->global_experts)
        return -1;
    int64_t l = p->expert_map ? p->expert_map[e] : e;
    if (l < 0 || l >= (int64_t)p->local_experts)
        return -1;
    return l;
}

/* Input row of pair `pair` (token t) as f32, pre-weighted when the router
 * weight is applied on the input (k == 1, so the pair's weight is w[t,0]). */
static void load_input_row(const fmoe_ref_problem *p, const ref_dims *d, int64_t pair, float *dst)
{
    int64_t t = pair / d->k;
    int64_t base = t * p->x_ld;
    int on_input = p->cfg->apply_router_weight_on_input != 0;
    float w = p->topk_w[t * d->k];
    for (uint32_t c = 0; c < d->H; c++) {
        float v = fmoe_load_float(p->x, d->act, base + c);
        dst[c] = on_input ? fmoe_round_to(d->act, v * w) : v;
    }
}

/* h = round(x . W13[l]^T + b13[l]) for the nb pairs of a block. */
static void block_gemm1(const fmoe_ref_problem *p, const ref_dims *d, int64_t l, int nb, ref_scratch *s)
{
    for (uint32_t n = 0; n < d->rI; n++) {
        int64_t r = l * d->rI + n;
        const float *w = weight_row(p->w13, p->w_dtype, r * d->H, d->H, s->row);
        float bias = p->b13 ? fmoe_load_float(p->b13, p->w_dtype, r) : 0.0f;
        for (int b = 0; b < nb; b++) {
            float h = dot_f32(s->xb + (int64_t)b * d->H, w, d->H) + bias;
            s->hb[(int64_t)b * d->rI + n] = fmoe_round_to(d->act, h);
        }
    }
}

/* y = round(a . W2[l]^T + b2[l]) into the pairs' rows of the chunk's y.
 * b2 only on TP rank 0, so the sum over TP ranks adds it once. */
static void block_gemm2(const fmoe_ref_problem *p, const ref_dims *d, int64_t l, const int64_t *rows, int nb,
                        ref_scratch *s)
{
    int add_b2 = p->b2 && p->cfg->tp_rank == 0;
    for (uint32_t n = 0; n < d->H; n++) {
        int64_t r = l * d->H + n;
        const float *w = weight_row(p->w2, p->w_dtype, r * d->I, d->I, s->row);
        float bias = add_b2 ? fmoe_load_float(p->b2, p->w_dtype, r) : 0.0f;
        for (int b = 0; b < nb; b++) {
            float y = dot_f32(s->ab + (int64_t)b * d->I, w, d->I) + bias;
            s->y[rows[b] * d->H + n] = fmoe_round_to(d->act, y);
        }
    }
}

/* One block of up to PAIR_BLOCK pairs routed to local expert l. `pairs` are
 * global pair indices (t*k + j); `rows` their rows in the chunk's y. */
static void expert_block(const fmoe_ref_problem *p, const ref_dims *d, int64_t l, const int64_t *pairs,
                         const int64_t *rows, int nb, ref_scratch *s)
{
    for (int b = 0; b < nb; b++)
        load_input_row(p, d, pairs[b], s->xb + (int64_t)b * d->H);
    block_gemm1(p, d, l, nb, s);
    for (int b = 0; b < nb; b++) {
        float *a = s->ab + (int64_t)b * d->I;
        fmoe_activation_row(p->cfg, s->hb + (int64_t)b * d->rI, d->I, a);
        for (uint32_t i = 0; i < d->I; i++)
            a[i] = fmoe_round_to(d->act, a[i]);
    }
    block_gemm2(p, d, l, rows, nb, s);
}

/* Group the chunk's pairs [p0, p1) by local expert (a counting sort), so that
 * s->order[s->start[l] .. s->start[l+1]) lists expert l's pairs, ascending. */
static void chunk_group_pairs(const fmoe_ref_problem *p, int64_t p0, int64_t p1, ref_scratch *s)
{
    int64_t n_local = p->local_experts;
    memset(s->start, 0, (size_t)(n_local + 1) * sizeof *s->start);
    for (int64_t q = p0; q < p1; q++) {
        int64_t l = pair_local_expert(p, q);
        if (l >= 0)
            s->start[l + 1]++;
    }
    for (int64_t l = 0; l < n_local; l++)
        s->start[l + 1] += s->start[l];
    /* Fill using a running cursor per expert; start[] is restored after. */
    for (int64_t q = p0; q < p1; q++) {
        int64_t l = pair_local_expert(p, q);
        if (l >= 0)
            s->order[s->start[l]++] = (int32_t)(q - p0);
    }
    for (int64_t l = n_local; l > 0; l--)
        s->start[l] = s->start[l - 1];
    s->start[0] = 0;
}

static void chunk_run_experts(const fmoe_ref_problem *p, const ref_dims *d, int64_t p0, ref_scratch *s)
{
    int64_t pairs[PAIR_BLOCK], rows[PAIR_BLOCK];
    for (int64_t l = 0; l < (int64_t)p->local_experts; l++) {
        for (int64_t i = s->start[l]; i < s->start[l + 1]; i += PAIR_BLOCK) {
            int nb = 0;
            for (int64_t q = i; q < s->start[l + 1] && nb < PAIR_BLOCK; q++, nb++) {
                rows[nb] = s->order[q];
                pairs[nb] = p0 + rows[nb];
            }
            expert_block(p, d, l, pairs, rows, nb, s);
        }
    }
}

/* out_t = round(sum_j y_j * w_j) in slot order; skipped slots add nothing
 * (not even 0 * w, which would turn a NaN/inf weight into NaN). */
static void chunk_combine(const fmoe_ref_problem *p, const ref_dims *d, int64_t t0, int64_t t1, ref_scratch *s)
{
    int on_input = p->cfg->apply_router_weight_on_input != 0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t out_base = t * p->out_ld;
        for (uint32_t n = 0; n < d->H; n++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < d->k; j++) {
                int64_t q = t * d->k + j;
                if (pair_local_expert(p, q) < 0)
                    continue;
                float w = on_input ? 1.0f : p->topk_w[q];
                acc += s->y[(q - t0 * d->k) * d->H + n] * w;
            }
            fmoe_store_float(p->out, d->act, out_base + n, acc);
        }
    }
}

static void scratch_free(ref_scratch *s)
{
    free(s->xb);
    free(s->hb);
    free(s->ab);
    free(s->row);
    free(s->y);
    free(s->order);
    free(s->start);
}

static int scratch_alloc(const fmoe_ref_problem *p, const ref_dims *d, ref_scratch *s)
{
    memset(s, 0, sizeof *s);
    int64_t per_token = (int64_t)d->k * d->H;
    s->chunk = Y_BUDGET_FLOATS / per_token;
    if (s->chunk < 1)
        s->chunk = 1;
    if (s->chunk > p->m)
        s->chunk = p->m;
    uint32_t widest = d->H > d->I ? d->H : d->I;
    s->xb = malloc(sizeof(float) * PAIR_BLOCK * d->H);
    s->hb = malloc(sizeof(float) * PAIR_BLOCK * d->rI);
    s->ab = malloc(sizeof(float) * PAIR_BLOCK * d->I);
    s->row = malloc(sizeof(float) * widest);
    s->y = malloc(sizeof(float) * (size_t)(s->chunk * per_token));
    s->order = malloc(sizeof(int32_t) * (size_t)(s->chunk * d->k));
    s->start = malloc(sizeof(int64_t) * ((size_t)p->local_experts + 1));
    if (s->xb && s->hb && s->ab && s->row && s->y && s->order && s->start)
        return 0;
    scratch_free(s);
    return -1;
}

int fmoe_ref_experts_unquantized(const fmoe_ref_problem *p)
{
    if (p->m <= 0)
        return 0;
    ref_dims d;
    d.H = p->hidden;
    d.I = p->inter;
    d.rI = p->cfg->gated ? 2 * p->inter : p->inter;
    d.k = p->cfg->top_k;
    d.act = p->cfg->act_dtype;

    ref_scratch s;
    if (scratch_alloc(p, &d, &s) != 0)
        return -1;
    for (int64_t t0 = 0; t0 < p->m; t0 += s.chunk) {
        int64_t t1 = t0 + s.chunk < p->m ? t0 + s.chunk : p->m;
        chunk_group_pairs(p, t0 * d.k, t1 * d.k, &s);
        chunk_run_experts(p, &d, t0 * d.k, &s);
        chunk_combine(p, &d, t0, t1, &s);
    }
    scratch_free(&s);
    return 0;
}
