/*
 * tests/reference_quant/quantize.c - the test-side quantizer: float weights
 * -> the tensors a checkpoint stores for each scheme (names of
 * docs/REFERENCE-METHODS.md, unsharded, per expert and shard), built from
 * the public codecs, plus the dequantized weights the oracle must end up
 * multiplying (after the post-load steps: FP8 per-tensor requantization,
 * NVFP4 gate global for both halves), computed here with scalar codec calls.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reference_quant/model.h"

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Independent 16-bit rounding (RNE on the bit pattern). */
static uint16_t to_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tq_bf16(float f)
{
    uint32_t u = (uint32_t)to_bf16_bits(f) << 16;
    float r;
    memcpy(&r, &u, 4);
    return r;
}

void tq_add(tq_layer *L, const char *suffix, int32_t expert, int32_t shard, fmoe_dtype dtype, uint32_t ndim, int64_t d0,
            int64_t d1, void *data)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 64;
        L->cks = realloc(L->cks, (size_t)L->cap * sizeof *L->cks);
        ck_assert_ptr_nonnull(L->cks);
    }
    tq_ck *c = &L->cks[L->n++];
    snprintf(c->name, sizeof c->name, "%s_%s", shard == FMOE_SHARD_W2 ? "w2" : "w13", suffix);
    c->expert = expert;
    c->shard = shard;
    c->dtype = dtype;
    c->ndim = ndim;
    c->shape[0] = d0;
    c->shape[1] = d1;
    c->data = data;
}

static float amax_of(const float *w, size_t n)
{
    float a = 0.0f;
    for (size_t i = 0; i < n; i++)
        a = fabsf(w[i]) > a ? fabsf(w[i]) : a;
    return a;
}

static float *scalar(float v)
{
    float *p = xmalloc(sizeof *p);
    *p = v;
    return p;
}

#define FN FMOE_DTYPE_FP8_E4M3FN

/* ---- FP8 ------------------------------------------------------------------ */

static void fp8_rows(const float *w, size_t n, float s, uint8_t *q, double *deq)
{
    for (size_t i = 0; i < n; i++) {
        float v = w[i] / s;
        v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
        q[i] = fmoe_fp8_encode(FN, v);
        deq[i] = (double)fmoe_fp8_decode(FN, q[i]) * s;
    }
}

static void quant_fp8(tq_layer *L, int e, int shard, const float *w, uint32_t N, uint32_t K, double *deq)
{
    const fmoe_scheme *s = &L->s;
    uint8_t *q = xmalloc((size_t)N * K);
    tq_add(L, "weight", e, shard, FN, 2, N, K, q);
    if (s->w_strategy == FMOE_QSTRATEGY_TENSOR) {
        float sc = amax_of(w, (size_t)N * K) / 448.0f;
        fp8_rows(w, (size_t)N * K, sc, q, deq);
        tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_F32, 0, 0, 0, scalar(sc));
        if (shard != FMOE_SHARD_W2) { /* kept for the W13 requantization model */
            L->wscale[2 * e + (shard == FMOE_SHARD_W3)] = sc;
            L->wq[2 * e + (shard == FMOE_SHARD_W3)] = q;
        }
        return;
    }
    if (s->w_strategy == FMOE_QSTRATEGY_CHANNEL) {
        float *sc = xmalloc(N * sizeof *sc);
        for (uint32_t n = 0; n < N; n++) {
            sc[n] = fmoe_fp8_dynamic_scale(amax_of(w + (size_t)n * K, K), 448.0f, FMOE_FP8_SCALE_F32);
            fp8_rows(w + (size_t)n * K, K, sc[n], q + (size_t)n * K, deq + (size_t)n * K);
        }
        tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_F32, 2, N, 1, sc);
        return;
    }
    /* blocks (FP8 block schemes, and MXFP8 as 1 x 32 blocks) */
    uint32_t bn = s->w_strategy == FMOE_QSTRATEGY_BLOCK ? s->w_block_n : 1;
    uint32_t bk = s->w_strategy == FMOE_QSTRATEGY_BLOCK ? s->w_block_k : 32;
    int ue8m0 = s->w_scale_dtype == FMOE_DTYPE_UE8M0;
    uint32_t rn = (N + bn - 1) / bn, rk = (K + bk - 1) / bk;
    float *sc = xmalloc((size_t)rn * rk * sizeof *sc);
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FN, 448.0f, ue8m0 ? FMOE_FP8_SCALE_UE8M0 : FMOE_FP8_SCALE_F32, N, K, bn,
                                              bk, w, q, sc),
                     FMOE_STATUS_OK);
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t k = 0; k < K; k++)
            deq[(size_t)n * K + k] = (double)fmoe_fp8_decode(FN, q[(size_t)n * K + k]) * sc[(n / bn) * rk + k / bk];
    if (!ue8m0) {
        tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_F32, 2, rn, rk, sc);
        return;
    }
    uint8_t *b = xmalloc((size_t)rn * rk);
    for (size_t i = 0; i < (size_t)rn * rk; i++)
        b[i] = fmoe_ue8m0_encode_floor(sc[i]); /* exact: the scales are powers of two */
    free(sc);
    tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_UE8M0, 2, rn, rk, b);
}

/* The post-load requantization of a gated per-tensor W13 to max(s1, s3),
 * written out element by element (f32 steps as the contract says). */
static void fp8_requant_model(tq_layer *L, int e)
{
    float s1 = L->wscale[2 * e], s3 = L->wscale[2 * e + 1], smax = s1 > s3 ? s1 : s3;
    uint32_t H = L->c->H, I = L->c->I;
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = L->wq[2 * e + h];
        float si = L->wscale[2 * e + h];
        double *deq = L->d13 + ((size_t)e * 2 * I + (size_t)h * I) * H;
        for (size_t i = 0; i < (size_t)I * H; i++) {
            float v = fmoe_fp8_decode(FN, q[i]) * si;
            v = v / smax;
            v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
            deq[i] = (double)fmoe_fp8_decode(FN, fmoe_fp8_encode(FN, v)) * smax;
        }
    }
}

/* ---- FP4 ------------------------------------------------------------------- */

static void quant_mxfp4(tq_layer *L, int e, int shard, const float *w, uint32_t N, uint32_t K, double *deq)
{
    uint8_t *packed = xmalloc((size_t)N * K / 2), *sf = xmalloc((size_t)N * K / 32);
    float *tmp = xmalloc((size_t)N * K * sizeof *tmp);
    ck_assert_int_eq(fmoe_mxfp4_quantize(N, K, FMOE_MXFP4_RECIPE_OCP, w, packed, sf), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_mxfp4_dequantize(N, K, packed, sf, tmp), FMOE_STATUS_OK);
    for (size_t i = 0; i < (size_t)N * K; i++)
        deq[i] = tmp[i];
    free(tmp);
    tq_add(L, "weight_packed", e, shard, FMOE_DTYPE_FP4_E2M1X2, 2, N, K / 2, packed);
    tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_UE8M0, 2, N, K / 32, sf);
}

static void quant_nvfp4(tq_layer *L, int e, int shard, const float *w, uint32_t N, uint32_t K, double *deq)
{
    int dq = L->c->nvfp4_dequant, h = shard == FMOE_SHARD_W3;
    float g = shard == FMOE_SHARD_W2 ? L->gw2[e] : L->gw13[2 * e + h];
    int32_t conv = dq ? FMOE_NVFP4_GLOBAL_DEQUANT : FMOE_NVFP4_GLOBAL_QUANT;
    float stored = dq ? 1.0f / g : g;
    uint8_t *packed = xmalloc((size_t)N * K / 2), *sf = xmalloc((size_t)N * K / 16);
    float *tmp = xmalloc((size_t)N * K * sizeof *tmp);
    ck_assert_int_eq(fmoe_nvfp4_quantize(N, K, w, stored, conv, packed, sf), FMOE_STATUS_OK);
    /* The kernels dequantize both W13 halves with the gate's global. */
    float used = h ? (dq ? 1.0f / L->gw13[2 * e] : L->gw13[2 * e]) : stored;
    ck_assert_int_eq(fmoe_nvfp4_dequantize(N, K, packed, sf, used, conv, tmp), FMOE_STATUS_OK);
    for (size_t i = 0; i < (size_t)N * K; i++)
        deq[i] = tmp[i];
    free(tmp);
    tq_add(L, dq ? "weight" : "weight_packed", e, shard, FMOE_DTYPE_FP4_E2M1X2, 2, N, K / 2, packed);
    tq_add(L, "weight_scale", e, shard, FN, 2, N, K / 16, sf);
    tq_add(L, dq ? "weight_scale_2" : "weight_global_scale", e, shard, FMOE_DTYPE_F32, 0, 0, 0, scalar(stored));
    if (L->s.a_strategy != FMOE_QSTRATEGY_NONE) {
        float ga = shard == FMOE_SHARD_W2 ? L->ga2[e] : L->ga13[2 * e + h];
        tq_add(L, dq ? "input_scale" : "input_global_scale", e, shard, FMOE_DTYPE_F32, 0, 0, 0,
               scalar(dq ? 1.0f / ga : ga));
    }
}

/* ---- integers -------------------------------------------------------------- */

/* Symmetric or asymmetric quantization of one group (the columns `cols`). */
static void int_group(const float *row, const int32_t *cols, uint32_t n, int bits, int asym, fmoe_dtype sd, int8_t *q,
                      float *scale, int8_t *zp, double *deq)
{
    int qmin = -(1 << (bits - 1)), qmax = (1 << (bits - 1)) - 1;
    float lo = 0.0f, hi = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        lo = row[cols[i]] < lo ? row[cols[i]] : lo;
        hi = row[cols[i]] > hi ? row[cols[i]] : hi;
    }
    float s = asym ? (hi - lo) / (float)(qmax - qmin) : fmaxf(-lo, hi) / (float)qmax;
    s = s > 0.0f ? s : 1.0f;
    if (sd == FMOE_DTYPE_BF16)
        s = tq_bf16(s); /* the checkpoint holds this scale exactly */
    int z = asym ? (int)rintf(-lo / s) + qmin : 0;
    z = z < qmin ? qmin : z > qmax ? qmax : z;
    for (uint32_t i = 0; i < n; i++) {
        int v = (int)rintf(row[cols[i]] / s) + z;
        v = v < qmin ? qmin : v > qmax ? qmax : v;
        q[cols[i]] = (int8_t)v;
        deq[cols[i]] = (double)(v - z) * s;
    }
    *scale = s;
    *zp = (int8_t)z;
}

static void *scales_as(const float *s, size_t n, fmoe_dtype sd)
{
    if (sd == FMOE_DTYPE_F32) {
        float *out = xmalloc(n * sizeof *out);
        memcpy(out, s, n * sizeof *out);
        return out;
    }
    uint16_t *out = xmalloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = to_bf16_bits(s[i]);
    return out;
}

static void quant_int(tq_layer *L, int e, int shard, const float *w, uint32_t N, uint32_t K, double *deq)
{
    const fmoe_scheme *s = &L->s;
    int bits = s->w_dtype == FMOE_DTYPE_INT4 ? 4 : 8, asym = !s->w_symmetric;
    int tensor = s->w_strategy == FMOE_QSTRATEGY_TENSOR;
    uint32_t g = s->w_strategy == FMOE_QSTRATEGY_GROUP ? s->w_group_size : K, G = K / g;
    const int32_t *gidx = s->w_actorder ? (shard == FMOE_SHARD_W2 ? L->gidx2 : L->gidx13) + (size_t)e * K : NULL;
    /* Columns of each group, in g_idx order. */
    int32_t *cols = xmalloc((size_t)K * sizeof *cols);
    uint32_t *fill = xmalloc(G * sizeof *fill);
    for (uint32_t k = 0; k < K; k++) {
        uint32_t grp = gidx ? (uint32_t)gidx[k] : k / g;
        cols[grp * g + fill[grp]++] = (int32_t)k;
    }
    int8_t *q = xmalloc((size_t)N * K), *zp = xmalloc((size_t)N * G);
    float *sc = xmalloc((size_t)N * G * sizeof *sc);
    fmoe_dtype sd = s->w_scale_dtype;
    for (uint32_t n = 0; n < N; n++) {
        const float *row = w + (size_t)n * K;
        if (tensor) { /* one scale for the shard: the row's groups all use it */
            float a = amax_of(w, (size_t)N * K) / 127.0f;
            for (uint32_t k = 0; k < K; k++) {
                int v = (int)rintf(row[k] / a);
                v = v < -128 ? -128 : v > 127 ? 127 : v;
                q[(size_t)n * K + k] = (int8_t)v;
                deq[(size_t)n * K + k] = (double)v * a;
            }
            sc[n] = a;
            continue;
        }
        for (uint32_t j = 0; j < G; j++)
            int_group(row, cols + (size_t)j * g, g, bits, asym, sd, q + (size_t)n * K, &sc[(size_t)n * G + j],
                      &zp[(size_t)n * G + j], deq + (size_t)n * K);
    }
    free(fill);
    free(cols);
    int wna16 = L->fam == TQ_WNA16, packed = wna16 || L->fam == TQ_W4A8_FP8;
    if (packed) {
        uint32_t pf = 32u / (uint32_t)bits;
        uint32_t *words = xmalloc((size_t)N * K / pf * 4);
        ck_assert_int_eq(fmoe_int_pack_int32(bits, (int64_t)N * K, q, words), FMOE_STATUS_OK);
        tq_add(L, "weight_packed", e, shard, FMOE_DTYPE_INT32, 2, N, K / pf, words);
        free(q);
    } else {
        tq_add(L, "weight", e, shard, FMOE_DTYPE_INT8, 2, N, K, q);
    }
    if (tensor)
        tq_add(L, "weight_scale", e, shard, FMOE_DTYPE_F32, 0, 0, 0, scalar(sc[0]));
    else
        tq_add(L, "weight_scale", e, shard, sd, 2, N, G, scales_as(sc, (size_t)N * G, sd));
    free(sc);
    if (asym) {
        uint32_t pf = 32u / (uint32_t)bits;
        uint32_t *words = xmalloc((size_t)N / pf * G * 4);
        ck_assert_int_eq(fmoe_int_pack_int32_rows(bits, N, G, zp, words), FMOE_STATUS_OK);
        tq_add(L, "weight_zero_point", e, shard, FMOE_DTYPE_INT32, 2, N / pf, G, words);
    }
    free(zp);
    /* w1 and w3 share w13_weight_g_idx: loaded once, with w1 (loader: see
     * docs/REFERENCE-METHODS.md "Loader notes"). */
    if (gidx && shard != FMOE_SHARD_W3) {
        int32_t *copy = xmalloc((size_t)K * sizeof *copy);
        memcpy(copy, gidx, (size_t)K * sizeof *copy);
        tq_add(L, "weight_g_idx", e, shard, FMOE_DTYPE_INT32, 1, K, 0, copy);
    }
}

/* ---- dispatch --------------------------------------------------------------- */

void tq_quantize_expert(tq_layer *L, int e)
{
    const qcase *c = L->c;
    uint32_t H = c->H, I = c->I, rI = L->r * I;
    for (uint32_t h = 0; h < L->r; h++) {
        int shard = h ? FMOE_SHARD_W3 : FMOE_SHARD_W1;
        const float *w = L->w13 + ((size_t)e * rI + (size_t)h * I) * H;
        double *deq = L->d13 + ((size_t)e * rI + (size_t)h * I) * H;
        L->quant(L, e, shard, w, I, H, deq);
    }
    L->quant(L, e, FMOE_SHARD_W2, L->w2 + (size_t)e * H * I, H, I, L->d2 + (size_t)e * H * I);
    if (L->fam == TQ_FP8 && L->s.w_strategy == FMOE_QSTRATEGY_TENSOR && L->r == 2)
        fp8_requant_model(L, e);
    if (L->fam == TQ_FP8 && L->s.w_strategy == FMOE_QSTRATEGY_TENSOR && !L->s.a_dynamic) {
        for (uint32_t h = 0; h < L->r; h++)
            tq_add(L, "input_scale", e, h ? FMOE_SHARD_W3 : FMOE_SHARD_W1, FMOE_DTYPE_F32, 0, 0, 0,
                   scalar(L->sin13[2 * e + h]));
        tq_add(L, "input_scale", e, FMOE_SHARD_W2, FMOE_DTYPE_F32, 0, 0, 0, scalar(L->sin2[e]));
    }
}

tq_quant_fn tq_quantizer(int fam)
{
    switch (fam) {
    case TQ_FP8:
    case TQ_MXFP8:
        return quant_fp8;
    case TQ_MXFP4:
        return quant_mxfp4;
    case TQ_NVFP4:
        return quant_nvfp4;
    default:
        return quant_int;
    }
}
