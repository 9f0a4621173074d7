/*
 * tests/formats/test_w4a8.c - W4A8 (Arm KleidiAI style): dynamic per-row
 * asymmetric int8 activations, int4 weight nibbles, and the reference matmul
 * with channelwise f32 and group-32 bf16 scales, against the independent
 * tables; plus the worked example E13 of spec/formats.md §10.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "tests/formats/golden.h"
#include "tests/test_util.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(test_table)
{
    golden *g = golden_load("w4a8.txt");
    int groupwise_seen = 0;
    for (int c = 0; c < 2; c++) {
        const uint32_t *p = golden_u32(g, golden_name("w4a8.%d.params", c), 4, NULL);
        int64_t m = p[0], k = p[1], n = p[2], group = p[3];
        float *x = golden_f32(g, golden_name("w4a8.%d.x", c), m * k);
        int8_t *want_q = golden_i8(g, golden_name("w4a8.%d.q", c), m * k);
        int32_t *want_off = golden_i32(g, golden_name("w4a8.%d.offsets", c), m);
        float *want_sc = golden_f32(g, golden_name("w4a8.%d.scales", c), m);
        float *want_deq = golden_f32(g, golden_name("w4a8.%d.deq", c), m * k);
        int8_t *w = golden_i8(g, golden_name("w4a8.%d.w", c), n * k);
        uint8_t *want_packed = golden_bytes(g, golden_name("w4a8.%d.w_packed", c), n * k / 2);
        float *want_out = golden_f32(g, golden_name("w4a8.%d.out", c), m * n);

        int8_t *q = malloc((size_t)(m * k));
        int32_t *off = malloc((size_t)m * sizeof *off);
        float *sc = malloc((size_t)m * sizeof *sc), *deq = malloc((size_t)(m * k) * sizeof *deq);
        ck_assert_int_eq(fmoe_w4a8_quantize_activations(m, k, x, q, off, sc), FMOE_STATUS_OK);
        for (int64_t r = 0; r < m; r++) {
            ck_assert_int_eq(off[r], want_off[r]);
            ck_assert_uint_eq(bits(sc[r]), bits(want_sc[r]));
        }
        for (int64_t i = 0; i < m * k; i++)
            ck_assert_msg(q[i] == want_q[i], "case %d q[%lld] = %d, want %d (x = %a)", c, (long long)i, q[i], want_q[i],
                          x[i]);
        ck_assert_int_eq(fmoe_w4a8_dequantize_activations(m, k, q, off, sc, deq), FMOE_STATUS_OK);
        for (int64_t i = 0; i < m * k; i++)
            ck_assert_uint_eq(bits(deq[i]), bits(want_deq[i]));

        uint8_t *packed = malloc((size_t)(n * k / 2));
        int8_t *w_back = malloc((size_t)(n * k));
        ck_assert_int_eq(fmoe_w4a8_pack_weights(n, k, w, packed), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(packed, want_packed, (size_t)(n * k / 2)), 0);
        ck_assert_int_eq(fmoe_w4a8_unpack_weights(n, k, packed, w_back), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(w_back, w, (size_t)(n * k)), 0);

        float *out = malloc((size_t)(m * n) * sizeof *out);
        void *ws;
        fmoe_dtype ws_dtype;
        if (group == k) {
            ws = golden_f32(g, golden_name("w4a8.%d.w_scales", c), n);
            ws_dtype = FMOE_DTYPE_F32;
        } else {
            ws = golden_u16(g, golden_name("w4a8.%d.w_scales", c), n * (k / group));
            ws_dtype = FMOE_DTYPE_BF16;
            groupwise_seen = 1;
        }
        ck_assert_int_eq(fmoe_w4a8_matmul(m, n, k, q, off, sc, packed, group, ws, ws_dtype, out), FMOE_STATUS_OK);
        for (int64_t i = 0; i < m * n; i++)
            ck_assert_msg(bits(out[i]) == bits(want_out[i]), "case %d out[%lld] = %a, want %a", c, (long long)i, out[i],
                          want_out[i]);
        /* The scale dtype must match the granularity (pitfall 7 of spec §9). */
        fmoe_dtype wrong = ws_dtype == FMOE_DTYPE_F32 ? FMOE_DTYPE_BF16 : FMOE_DTYPE_F32;
        ck_assert_int_eq(fmoe_w4a8_matmul(m, n, k, q, off, sc, packed, group, ws, wrong, out),
                         FMOE_STATUS_INVALID_ARGUMENT);

        free(x);
        free(want_q);
        free(want_off);
        free(want_sc);
        free(want_deq);
        free(w);
        free(want_packed);
        free(want_out);
        free(q);
        free(off);
        free(sc);
        free(deq);
        free(packed);
        free(w_back);
        free(out);
        free(ws);
    }
    ck_assert(groupwise_seen);
    golden_free(g);
}
END_TEST

/* Seeded random rows: the dequantized row is within half a step of x, and 0
 * stays exactly 0. */
START_TEST(test_activation_error_bound)
{
    fmoe_rng rng = fmoe_rng_for(13);
    enum { M = 16, K = 96 };
    float x[M * K], d[M * K], sc[M];
    int8_t q[M * K];
    int32_t off[M];
    for (int i = 0; i < M * K; i++)
        x[i] = (i % 11 == 0) ? 0.0f : fmoe_rng_normal(&rng) * (float)(1 + i / K);
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(M, K, x, q, off, sc), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_w4a8_dequantize_activations(M, K, q, off, sc, d), FMOE_STATUS_OK);
    for (int i = 0; i < M * K; i++) {
        if (x[i] == 0.0f)
            ck_assert_float_eq(d[i], 0.0f);
        ck_assert_msg(fabsf(d[i] - x[i]) <= sc[i / K] * 0.5001f + 1e-6f, "[%d] seed %llu", i,
                      (unsigned long long)fmoe_test_seed());
    }
}
END_TEST

START_TEST(test_rejects)
{
    float x[4] = {1, 2, 3, 4}, sc[1];
    int8_t q[4], w[4] = {8, 0, 0, 0};
    int32_t off[1];
    uint8_t packed[2];
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(1, 0, x, q, off, sc), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_w4a8_pack_weights(1, 4, w, packed), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_w4a8_pack_weights(1, 3, w, packed), FMOE_STATUS_INVALID_ARGUMENT);
    uint16_t bf[2] = {0x3f80, 0x3f80};
    float out[1];
    ck_assert_int_eq(fmoe_w4a8_matmul(1, 1, 64, q, off, sc, packed, 16, bf, FMOE_DTYPE_BF16, out),
                     FMOE_STATUS_INVALID_ARGUMENT); /* group not a multiple of 32 */
}
END_TEST

/* E13 - KleidiAI qai8dxp row, int4 weight row, integer accumulation. */
/* A NaN or inf poisons its own row only: codes 0, offset 0, scale NaN. */
START_TEST(test_nonfinite_row_stays_in_its_row)
{
    const float x[3][4] = {{0.5f, NAN, -1.0f, 2.0f}, {1.5f, -0.25f, 3.0f, -2.0f}, {INFINITY, 1.0f, 1.0f, 1.0f}};
    int8_t q[3][4], q1[4];
    int32_t off[3], off1;
    float sc[3], sc1;
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(3, 4, &x[0][0], &q[0][0], off, sc), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(1, 4, x[1], q1, &off1, &sc1), FMOE_STATUS_OK);
    for (int r = 0; r < 3; r += 2) {
        ck_assert(isnan(sc[r]));
        ck_assert_int_eq(off[r], 0);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(q[r][i], 0);
    }
    /* The finite row is quantized exactly as alone. */
    ck_assert_int_eq(off[1], off1);
    ck_assert_uint_eq(bits(sc[1]), bits(sc1));
    ck_assert_mem_eq(q[1], q1, 4);
    float y[3][4];
    ck_assert_int_eq(fmoe_w4a8_dequantize_activations(3, 4, &q[0][0], off, sc, &y[0][0]), FMOE_STATUS_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert(isnan(y[0][i]) && isnan(y[2][i]));
        ck_assert(isfinite(y[1][i]));
    }
}
END_TEST

START_TEST(test_e13_kleidiai_qai8dxp)
{
    const float x[4] = {-1.0f, 0.5f, 2.0f, 0.0f};
    int8_t q[4];
    int32_t off;
    float sc;
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(1, 4, x, q, &off, &sc), FMOE_STATUS_OK);
    ck_assert_uint_eq(bits(1.0f / sc), bits(85.0f)); /* scale0 */
    ck_assert_float_eq_tol(sc, 0.0117647f, 1e-7f);
    ck_assert_int_eq(off, 43); /* zp = -43, stored offset 43 */
    ck_assert(q[0] == -128 && q[1] == 0 && q[2] == 127 && q[3] == -43);
    float d[4];
    ck_assert_int_eq(fmoe_w4a8_dequantize_activations(1, 4, q, &off, &sc, d), FMOE_STATUS_OK);
    ck_assert_float_eq_tol(d[0], -1.0f, 1e-6f);
    ck_assert_float_eq_tol(d[1], 0.50588f, 1e-5f);
    ck_assert_float_eq_tol(d[2], 2.0f, 1e-6f);
    ck_assert_float_eq(d[3], 0.0f);
    const int8_t w[4] = {1, -2, 3, 0};
    uint8_t packed[2];
    ck_assert_int_eq(fmoe_w4a8_pack_weights(1, 4, w, packed), FMOE_STATUS_OK);
    ck_assert_uint_eq(packed[0], 0x69); /* nibbles 9, 6 */
    ck_assert_uint_eq(packed[1], 0x8B); /* nibbles 11, 8 */
    const float ws = 0.5f;
    float out;
    ck_assert_int_eq(fmoe_w4a8_matmul(1, 1, 4, q, &off, &sc, packed, 4, &ws, FMOE_DTYPE_F32, &out), FMOE_STATUS_OK);
    ck_assert_uint_eq(bits(out), bits((339.0f * 0.5f) * sc)); /* integer acc 339 */
    ck_assert_float_eq_tol(out, 1.994118f, 1e-6f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_w4a8");
    TCase *tc = tcase_create("w4a8");
    tcase_add_test(tc, test_table);
    tcase_add_test(tc, test_activation_error_bound);
    tcase_add_test(tc, test_rejects);
    tcase_add_test(tc, test_nonfinite_row_stays_in_its_row);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e13_kleidiai_qai8dxp);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
