/*
 * core/reference_quant/refq_weights.c - one dequantized weight row of a
 * refq_matrix, through the codecs of include/fusedmoe/formats.h:
 *
 *   FP8    decode(q[n,k]) * scales[n / bn, k / bk]      per bk segment
 *   NVFP4  e2m1(q) * e4m3(sf[n, k/16]) with the expert's global factor
 *   MXFP4  e2m1(q) * 2^(sf[n, k/32] - 127)
 *   INT    (q[n,k] - zp[n, g(k)]) * scales[n, g(k)]    zp = 0 if symmetric
 *
 * Rows are produced on demand (a few hundred per block of token pairs), so
 * the reference keeps the weights in their compact form.
 */
#include <stdlib.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"

static void fp8_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out)
{
    size_t K = m->cols;
    size_t kb = (K + m->bk - 1) / m->bk, nb = (m->rows + m->bn - 1) / m->bn;
    const uint8_t *q = (const uint8_t *)m->values + ((size_t)e * m->rows + n) * K;
    const float *s = m->scales + ((size_t)e * nb + n / m->bn) * kb;
    for (size_t b = 0; b < kb; b++) {
        size_t c0 = b * m->bk, len = K - c0 < m->bk ? K - c0 : m->bk;
        fmoe_fp8_dequantize(m->fp8_dtype, s[b], q + c0, (int64_t)len, out + c0);
    }
}

static void nvfp4_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out)
{
    size_t row = (size_t)e * m->rows + n;
    const uint8_t *q = (const uint8_t *)m->values + row * (m->cols / 2);
    const uint8_t *sf = m->sf + row * (m->cols / 16);
    fmoe_nvfp4_dequantize(1, m->cols, q, sf, m->global[e], m->global_convention, out);
}

static void mxfp4_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out)
{
    size_t row = (size_t)e * m->rows + n;
    const uint8_t *q = (const uint8_t *)m->values + row * (m->cols / 2);
    fmoe_mxfp4_dequantize(1, m->cols, q, m->sf + row * (m->cols / 32), out);
}

static void int_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out)
{
    size_t K = m->cols, row = (size_t)e * m->rows + n;
    const int8_t *q = (const int8_t *)m->values + row * K;
    const float *s = m->scales + row * m->groups;
    const int8_t *zp = m->zero ? m->zero + row * m->groups : NULL;
    const int32_t *gidx = m->gidx ? m->gidx + (size_t)e * K : NULL;
    for (size_t k = 0; k < K; k++) {
        uint32_t g = gidx ? (uint32_t)gidx[k] : (uint32_t)(k / m->group);
        int32_t v = (int32_t)q[k] - (zp ? (int32_t)zp[g] : 0);
        out[k] = (float)v * s[g];
    }
}

void refq_matrix_row(const refq_matrix *m, uint32_t e, uint32_t n, float *out)
{
    switch (m->format) {
    case REFQ_W_FP8:
        fp8_row(m, e, n, out);
        break;
    case REFQ_W_NVFP4:
        nvfp4_row(m, e, n, out);
        break;
    case REFQ_W_MXFP4:
        mxfp4_row(m, e, n, out);
        break;
    case REFQ_W_INT:
        int_row(m, e, n, out);
        break;
    default:
        break;
    }
}

int refq_matrix_own(refq_matrix *m, void *buf)
{
    for (size_t i = 0; i < sizeof m->owned / sizeof m->owned[0]; i++)
        if (!m->owned[i]) {
            m->owned[i] = buf;
            return 0;
        }
    return -1;
}

void refq_matrix_free(refq_matrix *m)
{
    for (size_t i = 0; i < sizeof m->owned / sizeof m->owned[0]; i++) {
        free(m->owned[i]);
        m->owned[i] = NULL;
    }
}
