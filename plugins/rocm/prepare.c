/*
 * plugins/rocm/prepare.c - finalize's host transforms (prepare.h).
 */
#include "plugins/rocm/prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/refq.h"
#include "plugins/rocm/fnuz.h"
#include "plugins/rocm/layout.h"
#include "plugins/rocm/shuffle.h"

void fmro_prepared_free(fmro_prepared *p)
{
    free(p->w13);
    free(p->w2);
    free(p->w13_scale);
    free(p->w2_scale);
    memset(p, 0, sizeof *p);
}

/* Releases out; why = name + what. */
static int fail(fmro_prepared *out, char *why, size_t cap, const char *name, const char *what)
{
    fmro_prepared_free(out);
    snprintf(why, cap, "%s%s", name, what);
    return -1;
}

/* fn -> fnuz in place; -1 when a NaN code is present. */
static int to_fnuz(uint8_t *q, size_t n, size_t *rewritten, size_t *nans)
{
    *rewritten += fmro_fnuz_from_fn_bytes(q, n, nans);
    return *nans ? -1 : 0;
}

/* rows x cols matrices of `experts`, row r of src to row map(r) of a
 * zeroed [rows_pad, cols_pad] matrix, then shuffled. NULL on no memory. */
static void *pad_shuffle(const uint8_t *src, uint32_t experts, uint32_t rows, uint32_t cols, uint32_t half,
                         uint32_t rows_pad, uint32_t cols_pad, size_t eb, size_t *bytes)
{
    size_t plain = (size_t)rows_pad * cols_pad * eb, n = (size_t)experts * plain;
    uint8_t *padded = calloc(n ? n : 1, 1), *shuffled = malloc(n ? n : 1);
    if (!padded || !shuffled) {
        free(padded);
        free(shuffled);
        return NULL;
    }
    for (uint32_t e = 0; e < experts; e++)
        for (uint32_t r = 0; r < rows; r++) {
            /* gated W13: the up half starts at row `half` of the padded matrix */
            uint32_t to = half && r >= rows / 2 ? half + (r - rows / 2) : r;
            memcpy(padded + e * plain + (size_t)to * cols_pad * eb, src + ((size_t)e * rows + r) * cols * eb,
                   (size_t)cols * eb);
        }
    fmro_shuffle(shuffled, padded, experts, rows_pad, cols_pad, eb);
    free(padded);
    *bytes = n;
    return shuffled;
}

static float *copy_floats(const float *s, size_t n)
{
    float *d = malloc((n ? n : 1) * sizeof *d);
    if (d && n)
        memcpy(d, s, n * sizeof *d);
    return d;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

int fmro_prepare(const fmro_prepare_in *in, fmro_prepared *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    uint32_t E = in->experts, H = in->hidden, I = in->inter;
    out->hidden_pad = fmro_pad(H);
    out->inter_pad = fmro_pad(I);
    uint32_t Hp = out->hidden_pad, Ip = out->inter_pad;
    if (fmro_shuffle_check(2u * Ip, Hp, 1, why, cap) != 0 || fmro_shuffle_check(Hp, Ip, 1, why, cap) != 0)
        return -1;
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    if (in->quant == FMRO_Q_BF16) {
        out->w13 = pad_shuffle(in->w13, E, 2 * I, H, Ip, 2 * Ip, Hp, 2, &out->w13_bytes);
        out->w2 = pad_shuffle(in->w2, E, H, I, 0, Hp, Ip, 2, &out->w2_bytes);
        if (!out->w13 || !out->w2)
            return fail(out, why, cap, "", "out of memory");
        return 0;
    }
    uint8_t *q13 = malloc(n13 ? n13 : 1), *q2 = malloc(n2 ? n2 : 1);
    if (!q13 || !q2) {
        free(q13);
        free(q2);
        return fail(out, why, cap, "", "out of memory");
    }
    memcpy(q13, in->w13, n13);
    memcpy(q2, in->w2, n2);
    /* Scales in the checkpoint's layout; per-tensor W13 becomes one per expert. */
    switch (in->quant) {
    case FMRO_Q_TENSOR:
        out->w13_scales = E;
        out->w2_scales = E;
        out->w13_scale = malloc((E ? E : 1) * sizeof(float));
        if (out->w13_scale && refq_fp8_requant_w13(q13, E, I, H, in->w13_scale, out->w13_scale) != 0) {
            free(q13);
            free(q2);
            return fail(out, why, cap, "w13_weight_scale", ": every value must be finite and > 0");
        }
        break;
    case FMRO_Q_CHANNEL:
        out->w13_scales = (size_t)E * 2 * I;
        out->w2_scales = (size_t)E * H;
        out->w13_scale = copy_floats(in->w13_scale, out->w13_scales);
        break;
    default: /* FMRO_Q_BLOCK, 128 x 128 */
        out->w13_scales = (size_t)E * (2 * I / 128) * ceil_div(H, 128);
        out->w2_scales = (size_t)E * ceil_div(H, 128) * ceil_div(I, 128);
        out->w13_scale = copy_floats(in->w13_scale, out->w13_scales);
        break;
    }
    out->w2_scale = copy_floats(in->w2_scale, out->w2_scales);
    if (!out->w13_scale || !out->w2_scale) {
        free(q13);
        free(q2);
        return fail(out, why, cap, "", "out of memory");
    }
    size_t nans = 0, bad = 0;
    const char *nan_tensor = to_fnuz(q13, n13, &out->zeros_rewritten, &nans) != 0 ? "w13_weight"
                             : to_fnuz(q2, n2, &out->zeros_rewritten, &nans) != 0 ? "w2_weight"
                                                                                  : NULL;
    if (nan_tensor) {
        free(q13);
        free(q2);
        fmro_prepared_free(out);
        snprintf(why, cap,
                 "%s: %zu byte(s) 0x7F/0xFF, NaN in e4m3fn, which e4m3fnuz would read as +-240 (spec/formats.md "
                 "§1.3): refused",
                 nan_tensor, nans);
        return -1;
    }
    if (fmro_fnuz_double_scales(out->w13_scale, out->w13_scales, &bad) != 0) {
        free(q13);
        free(q2);
        return fail(out, why, cap, "w13_weight_scale", ": a scale is not finite (or not once doubled for e4m3fnuz)");
    }
    if (fmro_fnuz_double_scales(out->w2_scale, out->w2_scales, &bad) != 0) {
        free(q13);
        free(q2);
        return fail(out, why, cap, "w2_weight_scale", ": a scale is not finite (or not once doubled for e4m3fnuz)");
    }
    if (in->quant == FMRO_Q_TENSOR && !in->a_dynamic) {
        int unequal;
        float s[2];
        if (refq_max_scale(in->w13_input_scale, (size_t)E * 2, &s[0], &unequal) != 0 || !(2.0f * s[0] < 3.4e38f)) {
            free(q13);
            free(q2);
            return fail(out, why, cap, "w13_input_scale", ": every value must be finite and > 0");
        }
        if (refq_max_scale(in->w2_input_scale, E, &s[1], &unequal) != 0 || !(2.0f * s[1] < 3.4e38f)) {
            free(q13);
            free(q2);
            return fail(out, why, cap, "w2_input_scale", ": every value must be finite and > 0");
        }
        out->a13_scale = 2.0f * s[0];
        out->a2_scale = 2.0f * s[1];
    }
    out->w13 = pad_shuffle(q13, E, 2 * I, H, Ip, 2 * Ip, Hp, 1, &out->w13_bytes);
    out->w2 = pad_shuffle(q2, E, H, I, 0, Hp, Ip, 1, &out->w2_bytes);
    free(q13);
    free(q2);
    if (!out->w13 || !out->w2)
        return fail(out, why, cap, "", "out of memory");
    return 0;
}
