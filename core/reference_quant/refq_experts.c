/*
 * core/reference_quant/refq_experts.c - the expert loop of the quantized
 * reference (contract and formula in refq.h).
 *
 * Same shape as core/reference_experts.c: tokens in chunks, the chunk's
 * (token, slot) pairs grouped by local expert, blocks of PAIR_BLOCK pairs
 * sharing each dequantized weight row. Two things differ:
 *  - GEMM1 runs for every pair of the chunk before any GEMM2, because a
 *    dynamic per-tensor GEMM2 input scale is the amax over all of them
 *    (vLLM quantizes the whole intermediate tensor at once); with that
 *    scheme the chunk is the whole call, as is the GEMM1 input's amax;
 *  - act-order weights (refq_matrix.perm) see their input columns permuted
 *    per expert, as Marlin's permute_cols does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/kit/refq.h"

#define PAIR_BLOCK    16
#define BUDGET_FLOATS ((int64_t)1 << 22) /* per-chunk y + activations: 16 MiB */
#define DOT_LANES     8

typedef struct dims {
    uint32_t H, I, rI, k, wide;
    fmoe_dtype act;
} dims;

typedef struct scratch {
    float *xb;      /* [PAIR_BLOCK][wide] GEMM inputs of a block */
    float *hb;      /* [PAIR_BLOCK][rI]   GEMM1 outputs */
    float *row;     /* [wide]             one dequantized weight row */
    float *tmp;     /* [wide]             permutation buffer */
    float *acts;    /* [chunk*k][I]       activations of the chunk's pairs */
    float *y;       /* [chunk*k][H]       GEMM2 outputs of the chunk's pairs */
    uint8_t *qs;    /* REFQ_ACTQ_SCRATCH(wide) */
    int32_t *order; /* [chunk*k] pair rows grouped by expert */
    int64_t *start; /* [E_local + 1] */
    int64_t chunk;
} scratch;

/* f32 dot product with 8 partial sums (as reference_experts.c). */
static float dot_f32(const float *a, const float *b, uint32_t n)
{
    float part[DOT_LANES] = {0};
    size_t full = n - n % DOT_LANES;
    for (size_t i = 0; i < full; i += DOT_LANES)
        for (size_t j = 0; j < DOT_LANES; j++)
            part[j] += a[i + j] * b[i + j];
    for (size_t i = full; i < n; i++)
        part[i % DOT_LANES] += a[i] * b[i];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

static int64_t local_of(const refq_problem *p, int64_t pair)
{
    int32_t e = p->topk_ids[pair];
    if (e < 0 || (uint32_t)e >= p->global_experts)
        return -1;
    int64_t l = p->expert_map ? p->expert_map[e] : e;
    return l < 0 || l >= (int64_t)p->local_experts ? -1 : l;
}

/* GEMM1 input of token t: x_t, times w[t,0] (rounded) with the router
 * weight on the input. */
static void input_row(const refq_problem *p, const dims *d, int64_t t, float *dst)
{
    int on_input = p->cfg->apply_router_weight_on_input != 0;
    float w = p->topk_w[t * d->k];
    for (uint32_t c = 0; c < d->H; c++) {
        float v = fmoe_load_float(p->x, d->act, t * p->x_ld + c);
        dst[c] = on_input ? fmoe_round_to(d->act, v * w) : v;
    }
}

static float amax_row(const float *v, uint32_t n, float amax)
{
    for (uint32_t i = 0; i < n; i++)
        amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
    return amax;
}

/* Columns of a block's rows in the matrix's act-order for expert l. */
static void permute_rows(const refq_matrix *w, int64_t l, float *rows, int nb, uint32_t n, uint32_t ld, float *tmp)
{
    if (!w->perm)
        return;
    const int32_t *perm = w->perm + l * n;
    for (int b = 0; b < nb; b++) {
        float *r = rows + (size_t)b * ld;
        memcpy(tmp, r, n * sizeof *tmp);
        for (uint32_t i = 0; i < n; i++)
            r[i] = tmp[perm[i]];
    }
}

/* The static scale of expert l, or the dynamic one of this call. */
static float tensor_scale(const refq_actq *q, int64_t l, float dynamic_scale)
{
    if (q->kind != REFQ_A_FP8_TENSOR)
        return 0.0f;
    return q->dynamic ? dynamic_scale : q->scale[l];
}

/* GEMM1 + activation for the nb pairs `rows` (chunk rows) of expert l. */
static int block_gemm1(const refq_problem *p, const dims *d, int64_t l, const int32_t *rows, int nb, int64_t p0,
                       float s1, scratch *s)
{
    for (int b = 0; b < nb; b++) {
        float *x = s->xb + (size_t)b * d->wide;
        input_row(p, d, (p0 + rows[b]) / d->k, x);
        if (refq_actq_row(p->a1, (uint32_t)l, tensor_scale(p->a1, l, s1), x, d->H, s->qs) != 0)
            return -1;
    }
    permute_rows(p->w13, l, s->xb, nb, d->H, d->wide, s->tmp);
    for (uint32_t n = 0; n < d->rI; n++) {
        refq_matrix_row(p->w13, (uint32_t)l, n, s->row);
        float bias = p->b13 ? fmoe_load_float(p->b13, p->bias_dtype, l * d->rI + n) : 0.0f;
        for (int b = 0; b < nb; b++)
            s->hb[(size_t)b * d->rI + n] = fmoe_round_to(d->act,
                                                         dot_f32(s->xb + (size_t)b * d->wide, s->row, d->H) + bias);
    }
    for (int b = 0; b < nb; b++) {
        float *a = s->acts + (size_t)rows[b] * d->I;
        fmoe_activation_row(p->cfg, s->hb + (size_t)b * d->rI, d->I, a);
        for (uint32_t i = 0; i < d->I; i++)
            a[i] = fmoe_round_to(d->act, a[i]);
    }
    return 0;
}

/* Requantize the pairs' activations and run GEMM2 into y. b2 only on TP
 * rank 0, so the sum over TP ranks adds it once. */
static int block_gemm2(const refq_problem *p, const dims *d, int64_t l, const int32_t *rows, int nb, float s2,
                       scratch *s)
{
    for (int b = 0; b < nb; b++) {
        float *x = s->xb + (size_t)b * d->wide;
        memcpy(x, s->acts + (size_t)rows[b] * d->I, d->I * sizeof *x);
        if (refq_actq_row(p->a2, (uint32_t)l, tensor_scale(p->a2, l, s2), x, d->I, s->qs) != 0)
            return -1;
    }
    permute_rows(p->w2, l, s->xb, nb, d->I, d->wide, s->tmp);
    int add_b2 = p->b2 && p->cfg->tp_rank == 0;
    for (uint32_t n = 0; n < d->H; n++) {
        refq_matrix_row(p->w2, (uint32_t)l, n, s->row);
        float bias = add_b2 ? fmoe_load_float(p->b2, p->bias_dtype, l * d->H + n) : 0.0f;
        for (int b = 0; b < nb; b++)
            s->y[(size_t)rows[b] * d->H + n] = fmoe_round_to(d->act,
                                                             dot_f32(s->xb + (size_t)b * d->wide, s->row, d->I) + bias);
    }
    return 0;
}

/* Counting sort of the chunk's local pairs by expert (ascending within). */
static void group_pairs(const refq_problem *p, int64_t p0, int64_t p1, scratch *s)
{
    int64_t n_local = p->local_experts;
    memset(s->start, 0, (size_t)(n_local + 1) * sizeof *s->start);
    for (int64_t q = p0; q < p1; q++)
        if (local_of(p, q) >= 0)
            s->start[local_of(p, q) + 1]++;
    for (int64_t l = 0; l < n_local; l++)
        s->start[l + 1] += s->start[l];
    for (int64_t q = p0; q < p1; q++) {
        int64_t l = local_of(p, q);
        if (l >= 0)
            s->order[s->start[l]++] = (int32_t)(q - p0);
    }
    for (int64_t l = n_local; l > 0; l--)
        s->start[l] = s->start[l - 1];
    s->start[0] = 0;
}

/* Run `gemm` (1 or 2) over every block of every expert of the chunk. */
static int for_blocks(const refq_problem *p, const dims *d, int64_t p0, int gemm, float scale, scratch *s)
{
    for (int64_t l = 0; l < (int64_t)p->local_experts; l++)
        for (int64_t i = s->start[l]; i < s->start[l + 1]; i += PAIR_BLOCK) {
            int nb = (int)(s->start[l + 1] - i < PAIR_BLOCK ? s->start[l + 1] - i : PAIR_BLOCK);
            const int32_t *rows = s->order + i;
            int rc = gemm == 1 ? block_gemm1(p, d, l, rows, nb, p0, scale, s)
                               : block_gemm2(p, d, l, rows, nb, scale, s);
            if (rc != 0)
                return rc;
        }
    return 0;
}

/* Dynamic per-tensor GEMM2 scale: amax over the activations of all local pairs. */
static float acts_scale(const refq_problem *p, const dims *d, scratch *s)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < s->start[p->local_experts]; i++)
        amax = amax_row(s->acts + (size_t)s->order[i] * d->I, d->I, amax);
    return refq_fp8_tensor_scale(amax);
}

/* out_t = round(sum_j y_j * w_j), skipped slots adding nothing. */
static void combine(const refq_problem *p, const dims *d, int64_t t0, int64_t t1, scratch *s)
{
    int on_input = p->cfg->apply_router_weight_on_input != 0;
    for (int64_t t = t0; t < t1; t++)
        for (uint32_t n = 0; n < d->H; n++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < d->k; j++) {
                int64_t q = t * d->k + j;
                if (local_of(p, q) < 0)
                    continue;
                acc += s->y[(size_t)(q - t0 * d->k) * d->H + n] * (on_input ? 1.0f : p->topk_w[q]);
            }
            fmoe_store_float(p->out, d->act, t * p->out_ld + n, acc);
        }
}

static void scratch_free(scratch *s)
{
    free(s->xb);
    free(s->hb);
    free(s->row);
    free(s->tmp);
    free(s->acts);
    free(s->y);
    free(s->qs);
    free(s->order);
    free(s->start);
}

static int scratch_alloc(const refq_problem *p, const dims *d, scratch *s)
{
    memset(s, 0, sizeof *s);
    int whole = p->a2->kind == REFQ_A_FP8_TENSOR && p->a2->dynamic;
    int64_t per_token = (int64_t)d->k * (d->H + d->I);
    s->chunk = whole ? p->m : BUDGET_FLOATS / per_token;
    s->chunk = s->chunk < 1 ? 1 : s->chunk > p->m ? p->m : s->chunk;
    size_t pairs = (size_t)(s->chunk * d->k);
    s->xb = malloc(sizeof(float) * PAIR_BLOCK * d->wide);
    s->hb = malloc(sizeof(float) * PAIR_BLOCK * d->rI);
    s->row = malloc(sizeof(float) * d->wide);
    s->tmp = malloc(sizeof(float) * d->wide);
    s->acts = malloc(sizeof(float) * pairs * d->I);
    s->y = malloc(sizeof(float) * pairs * d->H);
    s->qs = malloc(REFQ_ACTQ_SCRATCH(d->wide));
    s->order = malloc(sizeof(int32_t) * pairs);
    s->start = malloc(sizeof(int64_t) * ((size_t)p->local_experts + 1));
    if (s->xb && s->hb && s->row && s->tmp && s->acts && s->y && s->qs && s->order && s->start)
        return 0;
    scratch_free(s);
    return -1;
}

/* Dynamic per-tensor GEMM1 scale: amax over every token's input. */
static float inputs_scale(const refq_problem *p, const dims *d, float *row)
{
    float amax = 0.0f;
    for (int64_t t = 0; t < p->m; t++) {
        input_row(p, d, t, row);
        amax = amax_row(row, d->H, amax);
    }
    return refq_fp8_tensor_scale(amax);
}

int refq_run(const refq_problem *p)
{
    if (p->m <= 0)
        return 0;
    dims d = {.H = p->hidden, .I = p->inter, .k = p->cfg->top_k, .act = p->cfg->act_dtype};
    d.rI = p->cfg->gated ? 2 * d.I : d.I;
    d.wide = d.H > d.I ? d.H : d.I;
    scratch s;
    if (scratch_alloc(p, &d, &s) != 0)
        return -1;
    int rc = 0;
    float s1 = p->a1->kind == REFQ_A_FP8_TENSOR && p->a1->dynamic ? inputs_scale(p, &d, s.row) : 0.0f;
    for (int64_t t0 = 0; t0 < p->m && rc == 0; t0 += s.chunk) {
        int64_t t1 = t0 + s.chunk < p->m ? t0 + s.chunk : p->m;
        group_pairs(p, t0 * d.k, t1 * d.k, &s);
        rc = for_blocks(p, &d, t0 * d.k, 1, s1, &s);
        float s2 = rc == 0 && p->a2->kind == REFQ_A_FP8_TENSOR && p->a2->dynamic ? acts_scale(p, &d, &s) : 0.0f;
        if (rc == 0)
            rc = for_blocks(p, &d, t0 * d.k, 2, s2, &s);
        if (rc == 0)
            combine(p, &d, t0, t1, &s);
    }
    scratch_free(&s);
    return rc;
}
