/*
 * cli/synth/wna16.c - weight-only int4 / int8 checkpoints (W4A16, W8A16),
 * compressed-tensors `pack-quantized` as GPTQ / AWQ producers write them:
 *   weight_packed      int32 [n, k/pf]  values packed along K (pf = 32/bits,
 *                      fmoe_int_pack_int32: stored = value + 8 / + 128)
 *   weight_scale       [n, G] in the scheme's scale dtype (G = k/g; 1 per
 *                      channel); the scale is rounded to that dtype first,
 *                      and the values quantized with the rounded scale
 *   weight_zero_point  asym: int32 [n/pf, G], packed along N
 *                      (fmoe_int_pack_int32_rows)
 *   weight_g_idx       act-order: int32 [k], a real GPTQ desc_act
 *                      permutation (every group exactly g scattered
 *                      columns); gate and up share one (w13_weight_g_idx is
 *                      one tensor, loaded with w1), w2 has its own
 * The shared integer quantizer synth_int_quantize is here too.
 */
#include "cli/synth/family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

fmoe_status synth_int_quantize(uint32_t n, uint32_t k, uint32_t g, const int32_t *gidx, int bits, int asym,
                               fmoe_dtype sd, const float *w, int8_t *q, float *scales, int8_t *zp)
{
    uint32_t G = k / g;
    int qmin = -(1 << (bits - 1)), qmax = (1 << (bits - 1)) - 1;
    float *lo = malloc(2 * (size_t)G * sizeof *lo);
    int *z = malloc((size_t)G * sizeof *z);
    if (!lo || !z) {
        free(lo);
        free(z);
        return FMOE_STATUS_OUT_OF_MEMORY;
    }
    float *hi = lo + G;
    for (uint32_t r = 0; r < n; r++) {
        const float *row = w + (size_t)r * k;
        for (uint32_t j = 0; j < G; j++)
            lo[j] = hi[j] = 0.0f; /* the range always holds 0 */
        if (gidx) {
            for (uint32_t c = 0; c < k; c++) {
                uint32_t j = (uint32_t)gidx[c];
                lo[j] = row[c] < lo[j] ? row[c] : lo[j];
                hi[j] = row[c] > hi[j] ? row[c] : hi[j];
            }
        } else {
            for (uint32_t j = 0; j < G; j++) /* contiguous groups: no division per column */
                for (uint32_t c = j * g; c < (j + 1) * g; c++) {
                    lo[j] = row[c] < lo[j] ? row[c] : lo[j];
                    hi[j] = row[c] > hi[j] ? row[c] : hi[j];
                }
        }
        for (uint32_t j = 0; j < G; j++) {
            float s = asym ? (hi[j] - lo[j]) / (float)(qmax - qmin) : fmaxf(-lo[j], hi[j]) / (float)qmax;
            s = synth_round_to(sd, s);
            s = s > 0.0f ? s : 1.0f;
            int zj = 0;
            if (asym) {
                zj = (int)rintf(-lo[j] / s) + qmin;
                zj = zj < qmin ? qmin : zj > qmax ? qmax : zj;
            }
            scales[(size_t)r * G + j] = s;
            z[j] = zj;
            if (zp)
                zp[(size_t)r * G + j] = (int8_t)zj;
        }
        for (uint32_t c0 = 0, j0 = 0; c0 < k; c0 += gidx ? k : g, j0++) {
            /* One contiguous group at a time, or every column by its g_idx. */
            uint32_t c1 = gidx ? k : c0 + g;
            for (uint32_t c = c0; c < c1; c++) {
                uint32_t j = gidx ? (uint32_t)gidx[c] : j0;
                int v = (int)rintf(row[c] / scales[(size_t)r * G + j]) + z[j];
                q[(size_t)r * k + c] = (int8_t)(v < qmin ? qmin : v > qmax ? qmax : v);
            }
        }
    }
    free(lo);
    free(z);
    return FMOE_STATUS_OK;
}

static int float_scales(fmoe_dtype d)
{
    return d == FMOE_DTYPE_F32 || d == FMOE_DTYPE_BF16 || d == FMOE_DTYPE_F16;
}

static int wna16_serves(const fmoe_scheme *s)
{
    int grouped = s->w_strategy == FMOE_QSTRATEGY_GROUP;
    return (s->w_dtype == FMOE_DTYPE_INT4 || s->w_dtype == FMOE_DTYPE_INT8) &&
           (grouped || s->w_strategy == FMOE_QSTRATEGY_CHANNEL) && float_scales(s->w_scale_dtype) &&
           (s->w_actorder == FMOE_ACTORDER_NONE || (s->w_actorder == FMOE_ACTORDER_GROUP && grouped)) &&
           s->a_strategy == FMOE_QSTRATEGY_NONE;
}

static fmoe_status wna16_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                  uint32_t k)
{
    const fmoe_scheme *s = synth_scheme(ck);
    int bits = s->w_dtype == FMOE_DTYPE_INT4 ? 4 : 8, asym = !s->w_symmetric;
    uint32_t pf = 32u / (uint32_t)bits, g = s->w_strategy == FMOE_QSTRATEGY_GROUP ? s->w_group_size : k, G = k / g;
    if (k % g || k % pf || (asym && n % pf))
        return synth_why(ck, FMOE_STATUS_INVALID_ARGUMENT,
                         "WNA16: a [%u, %u] weight does not split into groups of %u and int32 words of %u", n, k, g,
                         pf);
    int act_order = s->w_actorder == FMOE_ACTORDER_GROUP;
    int32_t *gidx = act_order ? malloc((size_t)k * sizeof *gidx) : NULL;
    int8_t *q = malloc((size_t)n * k), *zp = malloc((size_t)n * G);
    float *sc = malloc((size_t)n * G * sizeof *sc);
    fmoe_status st = q && zp && sc && (gidx || !act_order) ? FMOE_STATUS_OK : FMOE_STATUS_OUT_OF_MEMORY;
    if (st == FMOE_STATUS_OK && gidx)
        synth_gidx(synth_seed(ck), shard == FMOE_SHARD_W2 ? "w2_g_idx" : "w13_g_idx", x->e, gidx, k, g);
    if (st == FMOE_STATUS_OK)
        st = synth_int_quantize(n, k, g, gidx, bits, asym, s->w_scale_dtype, w, q, sc, zp);
    uint32_t *words = NULL;
    if (st == FMOE_STATUS_OK)
        words = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_INT32, 2, n, k / pf);
    void *scales = words ? synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, s->w_scale_dtype, 2, n, G) : NULL;
    if (st == FMOE_STATUS_OK && !scales)
        st = FMOE_STATUS_OUT_OF_MEMORY;
    if (st == FMOE_STATUS_OK) {
        synth_store_scales(s->w_scale_dtype, scales, sc, (size_t)n * G);
        st = fmoe_int_pack_int32(bits, (int64_t)n * k, q, words);
    }
    if (st == FMOE_STATUS_OK && asym) {
        uint32_t *zw = synth_add(ck, x->e, shard, FMOE_ROLE_ZERO_POINT, FMOE_DTYPE_INT32, 2, n / pf, G);
        st = zw ? fmoe_int_pack_int32_rows(bits, n, G, zp, zw) : FMOE_STATUS_OUT_OF_MEMORY;
    }
    /* One w13_weight_g_idx serves gate and up: it goes with w1 only. */
    if (st == FMOE_STATUS_OK && gidx && shard != FMOE_SHARD_W3) {
        int32_t *t = synth_add(ck, x->e, shard, FMOE_ROLE_G_IDX, FMOE_DTYPE_INT32, 1, k, 0);
        if (t)
            memcpy(t, gidx, (size_t)k * sizeof *t);
        else
            st = FMOE_STATUS_OUT_OF_MEMORY;
    }
    free(gidx);
    free(q);
    free(zp);
    free(sc);
    return st;
}

const synth_family synth_family_wna16 = {"wna16", wna16_serves, NULL, wna16_quantize};
