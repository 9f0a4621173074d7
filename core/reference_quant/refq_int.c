/*
 * core/reference_quant/refq_int.c - integer weights (WNA16, INT8 W8A8,
 * W4A8) brought into refq_matrix's one form: values int8 [E, N, K] with the
 * type bias removed, f32 scales and int8 zero points [E, N, G], and for
 * act-order the Marlin sort (spec/formats.md §4.2-4.3).
 *
 * Unpacking goes through the int32 codecs (fmoe_int_unpack_int32*); the
 * matrix's m->experts, rows, cols, groups and group are set by the caller.
 */
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/kit/refq.h"

static size_t numel(const refq_matrix *m)
{
    return (size_t)m->experts * m->rows * m->cols;
}

static int owned(const refq_matrix *m, const void *p)
{
    for (size_t i = 0; i < sizeof m->owned / sizeof m->owned[0]; i++)
        if (p && m->owned[i] == p)
            return 1;
    return 0;
}

/* malloc that the matrix frees; NULL on failure (then nothing is kept). */
static void *own_alloc(refq_matrix *m, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p && refq_matrix_own(m, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

int refq_int_values_kn(refq_matrix *m, int32_t bits, const uint32_t *words)
{
    size_t N = m->rows, K = m->cols, pf = 32u / (uint32_t)bits;
    int8_t *out = own_alloc(m, numel(m));
    int8_t *kn = malloc(N * K + 1);
    if (!out || !kn) {
        free(kn);
        return -1;
    }
    int rc = 0;
    for (size_t e = 0; e < m->experts && rc == 0; e++) {
        if (fmoe_int_unpack_int32_rows(bits, (int64_t)K, (int64_t)N, words + e * (K / pf) * N, kn) != FMOE_STATUS_OK)
            rc = -1;
        for (size_t n = 0; n < N && rc == 0; n++)
            for (size_t k = 0; k < K; k++)
                out[(e * N + n) * K + k] = kn[k * N + n];
    }
    free(kn);
    m->values = out;
    return rc;
}

int refq_int_values_nk(refq_matrix *m, int32_t bits, const uint32_t *words)
{
    int8_t *out = own_alloc(m, numel(m));
    if (!out)
        return -1;
    m->values = out;
    return fmoe_int_unpack_int32(bits, (int64_t)numel(m), words, out) == FMOE_STATUS_OK ? 0 : -1;
}

int refq_int_values_int8(refq_matrix *m, const int8_t *values, int32_t bits)
{
    int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
    for (size_t i = 0; i < numel(m); i++)
        if (values[i] < lo || values[i] > hi)
            return -1;
    m->values = values;
    return 0;
}

int refq_int_scales(refq_matrix *m, const void *src, fmoe_dtype dtype, int transposed)
{
    size_t N = m->rows, G = m->groups;
    float *out = own_alloc(m, (size_t)m->experts * N * G * sizeof *out);
    if (!out)
        return -1;
    for (size_t e = 0; e < m->experts; e++)
        for (size_t n = 0; n < N; n++)
            for (size_t g = 0; g < G; g++) {
                size_t from = transposed ? (e * G + g) * N + n : (e * N + n) * G + g;
                out[(e * N + n) * G + g] = fmoe_load_float(src, dtype, (int64_t)from);
            }
    m->scales = out;
    return 0;
}

int refq_int_zero_points(refq_matrix *m, int32_t bits, const uint32_t *words)
{
    size_t N = m->rows, G = m->groups, count = (size_t)m->experts * G * N;
    int8_t *out = own_alloc(m, count);
    int8_t *gn = malloc(count ? count : 1);
    if (!out || !gn) {
        free(gn);
        return -1;
    }
    int rc = fmoe_int_unpack_int32(bits, (int64_t)count, words, gn) == FMOE_STATUS_OK ? 0 : -1;
    for (size_t e = 0; e < m->experts && rc == 0; e++)
        for (size_t g = 0; g < G; g++)
            for (size_t n = 0; n < N; n++)
                out[(e * N + n) * G + g] = gn[(e * G + g) * N + n];
    free(gn);
    m->zero = out;
    return rc;
}

int refq_int_act_order(refq_matrix *m, const int32_t *g_idx)
{
    size_t N = m->rows, K = m->cols;
    int8_t *values = (int8_t *)m->values;
    if (!owned(m, values))
        return -1; /* the rows are reordered in place */
    int32_t *perm = own_alloc(m, (size_t)m->experts * K * sizeof *perm);
    int32_t *sorted = own_alloc(m, (size_t)m->experts * K * sizeof *sorted);
    int8_t *row = malloc(K ? K : 1);
    if (!perm || !sorted || !row) {
        free(row);
        return -1;
    }
    int rc = 0;
    for (size_t e = 0; e < m->experts && rc == 0; e++) {
        int32_t *pe = perm + e * K;
        if (fmoe_gidx_sort((int64_t)K, g_idx + e * K, m->groups, pe, sorted + e * K) != FMOE_STATUS_OK) {
            rc = -1;
            break;
        }
        for (size_t n = 0; n < N; n++) {
            int8_t *v = values + (e * N + n) * K;
            memcpy(row, v, K);
            for (size_t k = 0; k < K; k++)
                v[k] = row[pe[k]];
        }
    }
    free(row);
    m->perm = perm;
    m->gidx = sorted;
    return rc;
}
