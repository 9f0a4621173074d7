/*
 * plugins/cuda/wq_pack.c - the device layout of 4-bit and int weights
 * (contracts and the layout in wq_pack.h).
 */
#include "plugins/cuda/wq_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/common.h"
#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"

size_t fmcu_wq_chunk_bytes(int32_t format)
{
    return format == FMCU_WQ_INT8 ? 32 : 16;
}

uint32_t fmcu_wq_frag_col(uint32_t p)
{
    uint32_t c4 = p >> 3, i = p & 7;
    return 16 * (i >> 2) + 8 * ((i >> 1) & 1) + 2 * c4 + (i & 1);
}

uint32_t fmcu_wq_frag_pos(uint32_t col)
{
    uint32_t i = ((col >> 4) << 2) | (((col >> 3) & 1) << 1) | (col & 1);
    return 8 * ((col & 7) >> 1) + i;
}

uint32_t fmcu_wq_nibble(uint32_t p)
{
    uint32_t i = p & 7;
    return (p & ~7u) + 4 * (i & 1) + (i >> 1);
}

void fmcu_wq_pack(int32_t format, uint32_t rows, uint32_t k, uint32_t kp, const uint8_t *codes, const int32_t *src_col,
                  uint8_t pad, uint8_t *out)
{
    /* Where column c of a chunk goes: byte (int8) or nibble (4-bit) at[c]
     * of the chunk, from one table per call rather than the position
     * arithmetic per code: DeepSeek-V3's MXFP4 layer is 11 G codes to place
     * at finalize. */
    const int four = format != FMCU_WQ_INT8;
    uint8_t at[FMCU_WQ_CHUNK];
    for (uint32_t c = 0; c < FMCU_WQ_CHUNK; c++)
        at[c] = (uint8_t)(four ? fmcu_wq_nibble(fmcu_wq_frag_pos(c)) : fmcu_wq_frag_pos(c));
    const size_t cb = fmcu_wq_chunk_bytes(format), row_bytes = (size_t)kp / FMCU_WQ_CHUNK * cb;
    for (uint32_t n = 0; n < rows; n++) {
        const uint8_t *in = codes + (size_t)n * k;
        uint8_t *o = out + (size_t)n * row_bytes;
        for (uint32_t c0 = 0; c0 < kp; c0 += FMCU_WQ_CHUNK, o += cb) {
            uint8_t placed[FMCU_WQ_CHUNK];
            for (uint32_t j = 0; j < FMCU_WQ_CHUNK; j++) {
                const uint32_t c = c0 + j;
                const int64_t from = src_col ? src_col[c] : (c < k ? (int64_t)c : -1);
                placed[at[j]] = from >= 0 ? in[from] : pad;
            }
            if (four)
                for (uint32_t b = 0; b < FMCU_WQ_CHUNK / 2; b++)
                    o[b] = (uint8_t)((placed[2 * b] & 0xF) | (placed[2 * b + 1] & 0xF) << 4);
            else
                memcpy(o, placed, FMCU_WQ_CHUNK);
        }
    }
}

uint32_t fmcu_wq_actorder_width(uint32_t k, const int32_t *sorted_gidx)
{
    uint32_t w = 0, run = 0;
    for (uint32_t c = 0; c < k; c++) {
        run++;
        if (c + 1 == k || sorted_gidx[c + 1] != sorted_gidx[c]) {
            w += (run + 15) / 16 * 16;
            run = 0;
        }
    }
    return w;
}

int fmcu_wq_actorder_tables(uint32_t k, const int32_t *sorted_gidx, const int32_t *perm, uint32_t kp, int32_t *src,
                            int32_t *perm_pad, uint16_t *kgrp)
{
    if (kp % FMCU_WQ_CHUNK || fmcu_wq_actorder_width(k, sorted_gidx) > kp)
        return -1;
    uint32_t at = 0;
    for (uint32_t c = 0; c < k;) {
        uint32_t end = c;
        while (end < k && sorted_gidx[end] == sorted_gidx[c])
            end++;
        uint32_t width = (end - c + 15) / 16 * 16;
        for (uint32_t j = 0; j < width; j++) {
            int32_t s = c + j < end ? (int32_t)(c + j) : -1;
            src[at + j] = s;
            perm_pad[at + j] = s >= 0 ? perm[s] : -1;
        }
        for (uint32_t j = 0; j < width; j += 16)
            kgrp[(at + j) / 16] = (uint16_t)sorted_gidx[c];
        at += width;
        c = end;
    }
    uint16_t last = k ? (uint16_t)sorted_gidx[k - 1] : 0;
    for (; at < kp; at += 16) {
        for (uint32_t j = 0; j < 16; j++) {
            src[at + j] = -1;
            perm_pad[at + j] = -1;
        }
        kgrp[at / 16] = last;
    }
    return 0;
}

void fmcu_wq_host_free(fmcu_wq_host *h)
{
    free(h->w);
    free(h->scale);
    free(h->sf8);
    free(h->zero);
    free(h->kgrp);
    free(h->perm);
    memset(h, 0, sizeof *h);
}

int fmcu_wq_stream_serves(int32_t format, const fmcu_wq_proj *w)
{
    if (w->k % 8 || w->kgrp || w->perm)
        return 0;
    if (format == FMCU_WQ_FP4)
        return w->sf8 != NULL;
    uint32_t span = format == FMCU_WQ_INT8 ? 64 : 128;
    return w->groups == 1 || (w->group && w->group % span == 0);
}

int fmcu_wq_wgmma_serves(int32_t format, int32_t act_dtype, int major, const fmcu_wq_proj *w)
{
    if (major != 9 || w->k % 8 || w->kgrp || w->perm)
        return 0;
    if (format == FMCU_WQ_FP4)
        return w->sf8 != NULL && act_dtype == FMOE_DTYPE_BF16;
    if (format != FMCU_WQ_INT4 || (act_dtype != FMOE_DTYPE_BF16 && act_dtype != FMOE_DTYPE_F16))
        return 0;
    return w->groups == 1 || (w->group && w->group % 128 == 0);
}

int fmcu_wq_ring_serves(int32_t format, int32_t act_dtype, int major, uint32_t experts, uint32_t rows,
                        const fmcu_wq_proj *w)
{
    /* MXFP4: its scales folded into one product (every code <= 128), the
     * only e2m1 decode the ring has; other layers take the other forms */
    if (format == FMCU_WQ_FP4 && w->group == 32 && !w->mx_fold)
        return 0;
    return fmcu_wq_wgmma_serves(format, act_dtype, major, w) &&
           (uint64_t)experts * rows * (w->groups ? w->groups : 1) <= UINT32_MAX;
}

uint32_t fmcu_wq_stream_slabs(int64_t tiles, uint32_t slabs, int sms)
{
    for (uint32_t S = 4; S > 1; S /= 2)
        if (tiles * (int64_t)((slabs + S - 1) / S) >= 4 * (int64_t)sms)
            return S;
    return 1;
}

uint64_t fmcu_wq_dequant_expert_bytes(uint32_t rows13, uint32_t hidden, uint32_t inter)
{
    uint64_t w13 = (uint64_t)rows13 * hidden, w2 = (uint64_t)hidden * inter;
    return 2 * (w13 > w2 ? w13 : w2);
}

uint32_t fmcu_wq_dequant_experts(uint32_t rows13, uint32_t hidden, uint32_t inter, uint32_t experts, uint32_t mib)
{
    uint64_t per_expert = fmcu_wq_dequant_expert_bytes(rows13, hidden, inter);
    if (per_expert == 0)
        return 0;
    uint64_t n = ((uint64_t)mib << 20) / per_expert;
    if (n > FMCU_WQ_DQ_MAX_EXPERTS)
        n = FMCU_WQ_DQ_MAX_EXPERTS;
    return (uint32_t)(n < experts ? n : experts);
}

static int fail(fmcu_wq_host *h, char *why, size_t cap, const char *text)
{
    fmcu_wq_host_free(h);
    snprintf(why, cap, "%s", text);
    return -1;
}

static uint32_t round32(uint32_t v)
{
    return (v + FMCU_WQ_CHUNK - 1) / FMCU_WQ_CHUNK * FMCU_WQ_CHUNK;
}

/* Codes of the refq values (bias removed): int4 value + 8, int8 the byte. */
static void int_codes(const int8_t *v, size_t n, int32_t bits, uint8_t *codes)
{
    for (size_t i = 0; i < n; i++)
        codes[i] = bits == 4 ? (uint8_t)(v[i] + 8) : (uint8_t)v[i];
}

int fmcu_wq_build_int(uint32_t experts, uint32_t rows, uint32_t k, int32_t bits, uint32_t groups, uint32_t group,
                      const uint32_t *words, const void *scales, int32_t sdtype, const uint32_t *zp_words,
                      const int32_t *g_idx, fmcu_wq_host *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    refq_matrix m = {
        .format = REFQ_W_INT, .experts = experts, .rows = rows, .cols = k, .groups = groups, .group = group};
    int rc = refq_int_values_kn(&m, bits, words) == 0 && refq_int_scales(&m, scales, (fmoe_dtype)sdtype, 1) == 0 &&
             (!zp_words || refq_int_zero_points(&m, bits, zp_words) == 0);
    if (!rc) {
        refq_matrix_free(&m);
        return fail(out, why, cap, "cannot unpack the weights (out of memory)");
    }
    if (g_idx && refq_int_act_order(&m, g_idx) != 0) {
        refq_matrix_free(&m);
        snprintf(why, cap, "a g_idx entry is outside [0, %u) (or out of memory)", groups);
        return -1;
    }
    int32_t format = bits == 4 ? FMCU_WQ_INT4 : FMCU_WQ_INT8;
    out->experts = experts;
    out->rows = rows;
    out->k = k;
    out->groups = groups;
    out->group = group;
    out->kp = round32(k);
    if (g_idx) {
        uint32_t kp = 0;
        for (uint32_t e = 0; e < experts; e++) {
            uint32_t w = fmcu_wq_actorder_width(k, m.gidx + (size_t)e * k);
            kp = w > kp ? w : kp;
        }
        out->kp = round32(kp);
    }
    size_t rowb = (size_t)out->kp / FMCU_WQ_CHUNK * fmcu_wq_chunk_bytes(format), en = (size_t)experts * rows;
    out->w_bytes = en * rowb;
    out->w = malloc(out->w_bytes ? out->w_bytes : 1);
    uint8_t *codes = malloc((size_t)rows * k + 1);
    int32_t *src = g_idx ? malloc(sizeof *src * out->kp) : NULL;
    if (g_idx) {
        out->kgrp = malloc(sizeof *out->kgrp * experts * (out->kp / 16) + 1);
        out->perm = malloc(sizeof *out->perm * experts * out->kp + 1);
    }
    out->scale_count = en * groups;
    out->scale = malloc(sizeof *out->scale * out->scale_count + 1);
    out->zero = m.zero ? malloc(en * groups + 1) : NULL;
    if (!out->w || !codes || !out->scale || (m.zero && !out->zero) || (g_idx && (!src || !out->kgrp || !out->perm))) {
        free(codes);
        free(src);
        refq_matrix_free(&m);
        return fail(out, why, cap, "out of memory");
    }
    for (uint32_t e = 0; e < experts; e++) {
        int_codes((const int8_t *)m.values + (size_t)e * rows * k, (size_t)rows * k, bits, codes);
        if (g_idx)
            fmcu_wq_actorder_tables(k, m.gidx + (size_t)e * k, m.perm + (size_t)e * k, out->kp, src,
                                    out->perm + (size_t)e * out->kp, out->kgrp + (size_t)e * (out->kp / 16));
        fmcu_wq_pack(format, rows, k, out->kp, codes, src, bits == 4 ? 8 : 0, out->w + (size_t)e * rows * rowb);
    }
    memcpy(out->scale, m.scales, sizeof *out->scale * out->scale_count);
    if (m.zero)
        memcpy(out->zero, m.zero, en * groups);
    free(codes);
    free(src);
    refq_matrix_free(&m);
    return 0;
}

int fmcu_wq_build_fp4(uint32_t experts, uint32_t rows, uint32_t k, uint32_t block, int mx, const uint8_t *packed,
                      const uint8_t *sf, fmcu_wq_host *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    out->experts = experts;
    out->rows = rows;
    out->k = k;
    out->kp = round32(k);
    out->groups = out->kp / block;
    out->group = block;
    size_t en = (size_t)experts * rows, rowb = (size_t)out->kp / FMCU_WQ_CHUNK * 16, kb = k / block;
    out->w_bytes = en * rowb;
    out->w = malloc(out->w_bytes ? out->w_bytes : 1);
    out->scale_count = en * out->groups;
    out->scale = calloc(out->scale_count + 1, sizeof *out->scale);
    out->sf8 = calloc(out->scale_count + 1, 1);
    uint8_t *codes = malloc((size_t)k + 1);
    if (!out->w || !out->scale || !out->sf8 || !codes) {
        free(codes);
        return fail(out, why, cap, "out of memory");
    }
    uint8_t sf_max = 0;
    for (size_t r = 0; r < en; r++) {
        fmoe_fp4_unpack(packed + r * (k / 2), k, codes);
        fmcu_wq_pack(FMCU_WQ_FP4, 1, k, out->kp, codes, NULL, 0, out->w + r * rowb);
        for (size_t b = 0; b < kb; b++) {
            uint8_t s = sf[r * kb + b];
            out->sf8[r * out->groups + b] = s;
            sf_max = s > sf_max ? s : sf_max;
            out->scale[r * out->groups + b] = mx ? fmoe_ue8m0_decode(s) : fmoe_fp8_e4m3fn_decode(s);
        }
    }
    out->mx_fold = mx && sf_max <= 128;
    free(codes);
    return 0;
}

/* The code at column c of a packed row. */
static uint8_t code_at(const uint8_t *row, int32_t format, uint32_t c)
{
    size_t base = (size_t)(c / FMCU_WQ_CHUNK) * FMCU_WQ_CHUNK, p = fmcu_wq_frag_pos(c % FMCU_WQ_CHUNK);
    if (format == FMCU_WQ_INT8)
        return row[base + p];
    size_t nib = base + fmcu_wq_nibble((uint32_t)p);
    return (uint8_t)((row[nib / 2] >> (4 * (nib & 1))) & 0xF);
}

void fmcu_wq_host_row(const fmcu_wq_host *h, int32_t format, uint32_t fp4_block, uint32_t e, uint32_t n, float *out)
{
    size_t rowb = (size_t)h->kp / FMCU_WQ_CHUNK * fmcu_wq_chunk_bytes(format), r = (size_t)e * h->rows + n;
    const uint8_t *row = h->w + r * rowb;
    for (uint32_t c = 0; c < h->kp; c++) {
        int32_t col = h->perm ? h->perm[(size_t)e * h->kp + c] : (c < h->k ? (int32_t)c : -1);
        if (col < 0)
            continue;
        uint8_t q = code_at(row, format, c);
        if (format == FMCU_WQ_FP4) {
            out[col] = fmoe_fp4_e2m1_decode(q) * h->scale[r * h->groups + c / fp4_block];
            continue;
        }
        uint32_t g = h->kgrp ? h->kgrp[(size_t)e * (h->kp / 16) + c / 16] : c / h->group;
        if (g >= h->groups)
            g = h->groups - 1;
        int32_t v = format == FMCU_WQ_INT4 ? (int32_t)q - 8 : (int32_t)(int8_t)q;
        int32_t z = h->zero ? h->zero[r * h->groups + g] : 0;
        out[col] = (float)(v - z) * h->scale[r * h->groups + g];
    }
}
