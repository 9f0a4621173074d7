/*
 * tests/formats/test_int.c - int4 / int8 weights in 32-bit words (the
 * compressed-tensors and GPTQ packings, offsets 8 / 128, element j at bits
 * [b*j, b*j+b)), symmetric dequantization with channel, group and act-order
 * scales, and the g_idx sort, against the independent tables; plus the worked
 * examples E10 and E11 of spec/formats.md §10.
 */
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

START_TEST(test_pack_table)
{
    golden *g = golden_load("int.txt");
    for (int c = 0; c < 2; c++) {
        const uint32_t *p = golden_u32(g, golden_name("pack.%d.params", c), 2, NULL);
        int32_t b = (int32_t)p[0];
        int64_t n = p[1], words_n = n / (32 / b);
        int8_t *v = golden_i8(g, golden_name("pack.%d.values", c), n);
        const uint32_t *want = golden_u32(g, golden_name("pack.%d.words", c), words_n, NULL);
        uint32_t *words = malloc((size_t)words_n * sizeof *words);
        int8_t *back = malloc((size_t)n);
        ck_assert_int_eq(fmoe_int_pack_int32(b, n, v, words), FMOE_STATUS_OK);
        for (int64_t i = 0; i < words_n; i++)
            ck_assert_msg(words[i] == want[i], "%d-bit word %lld: 0x%08x, want 0x%08x", b, (long long)i, words[i],
                          want[i]);
        ck_assert_int_eq(fmoe_int_unpack_int32(b, n, words, back), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(back, v, (size_t)n), 0);
        free(v);
        free(words);
        free(back);
    }
    golden_free(g);
}
END_TEST

START_TEST(test_pack_rows_table)
{
    golden *g = golden_load("int.txt");
    for (int c = 0; c < 2; c++) {
        const uint32_t *p = golden_u32(g, golden_name("pack_rows.%d.params", c), 3, NULL);
        int32_t b = (int32_t)p[0];
        int64_t k = p[1], n = p[2], words_n = k / (32 / b) * n;
        int8_t *v = golden_i8(g, golden_name("pack_rows.%d.values", c), k * n);
        const uint32_t *want = golden_u32(g, golden_name("pack_rows.%d.words", c), words_n, NULL);
        uint32_t *words = malloc((size_t)words_n * sizeof *words);
        int8_t *back = malloc((size_t)(k * n));
        ck_assert_int_eq(fmoe_int_pack_int32_rows(b, k, n, v, words), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(words, want, (size_t)words_n * sizeof *words), 0);
        ck_assert_int_eq(fmoe_int_unpack_int32_rows(b, k, n, words, back), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(back, v, (size_t)(k * n)), 0);
        free(v);
        free(words);
        free(back);
    }
    golden_free(g);
}
END_TEST

START_TEST(test_pack_rejects)
{
    int8_t v[8] = {8, 0, 0, 0, 0, 0, 0, 0}; /* 8 does not fit int4 */
    uint32_t w[2];
    ck_assert_int_eq(fmoe_int_pack_int32(4, 8, v, w), FMOE_STATUS_INVALID_ARGUMENT);
    v[0] = -9;
    ck_assert_int_eq(fmoe_int_pack_int32(4, 8, v, w), FMOE_STATUS_INVALID_ARGUMENT);
    v[0] = 0;
    ck_assert_int_eq(fmoe_int_pack_int32(4, 6, v, w), FMOE_STATUS_INVALID_ARGUMENT); /* not whole words */
    ck_assert_int_eq(fmoe_int_pack_int32(2, 8, v, w), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_int_pack_int32(4, 8, v, w), FMOE_STATUS_OK);
    ck_assert_uint_eq(w[0], 0x88888888u); /* zeros are stored as 8 */
}
END_TEST

/* Both scale orientations (compressed-tensors [N, G], GPTQ [G, N]) and the
 * three groupings (group 32, channel, act-order). */
START_TEST(test_dequantize_table)
{
    golden *g = golden_load("int.txt");
    for (int c = 0; c < 3; c++) {
        const uint32_t *p = golden_u32(g, golden_name("deq.%d.params", c), 6, NULL);
        int64_t n = p[1], k = p[2], group = (int32_t)p[3], groups = p[4];
        int act_order = (int)p[5];
        int8_t *v = golden_i8(g, golden_name("deq.%d.values", c), n * k);
        float *scales = golden_f32(g, golden_name("deq.%d.scales", c), n * groups);
        int32_t *g_idx = golden_i32(g, golden_name("deq.%d.g_idx", c), k);
        float *want = golden_f32(g, golden_name("deq.%d.w", c), n * k);
        float *w = malloc((size_t)(n * k) * sizeof *w);
        float *scales_t = malloc((size_t)(n * groups) * sizeof *scales_t);
        for (int64_t r = 0; r < n; r++)
            for (int64_t q = 0; q < groups; q++)
                scales_t[q * n + r] = scales[r * groups + q];

        const int32_t *gi = act_order ? g_idx : NULL;
        ck_assert_int_eq(fmoe_int_dequantize(n, k, v, scales, groups, 1, group, gi, groups, w), FMOE_STATUS_OK);
        for (int64_t i = 0; i < n * k; i++)
            ck_assert_msg(bits(w[i]) == bits(want[i]), "case %d [%lld]", c, (long long)i);
        memset(w, 0, (size_t)(n * k) * sizeof *w);
        ck_assert_int_eq(fmoe_int_dequantize(n, k, v, scales_t, 1, n, group, gi, groups, w), FMOE_STATUS_OK);
        for (int64_t i = 0; i < n * k; i++)
            ck_assert_msg(bits(w[i]) == bits(want[i]), "case %d GPTQ orientation [%lld]", c, (long long)i);
        /* A g_idx of the plain grouping (k / group) gives the same weights. */
        if (!act_order) {
            ck_assert_int_eq(fmoe_int_dequantize(n, k, v, scales, groups, 1, group, g_idx, groups, w), FMOE_STATUS_OK);
            for (int64_t i = 0; i < n * k; i++)
                ck_assert_uint_eq(bits(w[i]), bits(want[i]));
        }
        free(v);
        free(scales);
        free(g_idx);
        free(want);
        free(w);
        free(scales_t);
    }
    golden_free(g);
}
END_TEST

START_TEST(test_gidx_sort_table)
{
    golden *g = golden_load("int.txt");
    for (int c = 0; c < 3; c++) {
        const uint32_t *p = golden_u32(g, golden_name("gidx.%d.params", c), 2, NULL);
        int64_t k = p[0], groups = p[1];
        int32_t *g_idx = golden_i32(g, golden_name("gidx.%d.g_idx", c), k);
        int32_t *want_perm = golden_i32(g, golden_name("gidx.%d.perm", c), k);
        int32_t *want_sorted = golden_i32(g, golden_name("gidx.%d.sorted", c), k);
        int32_t *perm = malloc((size_t)k * sizeof *perm), *sorted = malloc((size_t)k * sizeof *sorted);
        ck_assert_int_eq(fmoe_gidx_sort(k, g_idx, groups, perm, sorted), FMOE_STATUS_OK);
        ck_assert_int_eq(memcmp(perm, want_perm, (size_t)k * sizeof *perm), 0);
        ck_assert_int_eq(memcmp(sorted, want_sorted, (size_t)k * sizeof *sorted), 0);
        ck_assert_int_eq(fmoe_gidx_sort(k, g_idx, groups, perm, NULL), FMOE_STATUS_OK);
        g_idx[k / 2] = (int32_t)groups; /* out of range */
        ck_assert_int_eq(fmoe_gidx_sort(k, g_idx, groups, perm, sorted), FMOE_STATUS_INVALID_ARGUMENT);
        free(g_idx);
        free(want_perm);
        free(want_sorted);
        free(perm);
        free(sorted);
    }
    golden_free(g);
}
END_TEST

/* E10 - GPTQ int4 word and int8 word. */
START_TEST(test_e10_gptq_words)
{
    const int8_t v4[8] = {-8, -1, 0, 1, 2, 3, 7, -3};
    uint32_t w;
    ck_assert_int_eq(fmoe_int_pack_int32(4, 8, v4, &w), FMOE_STATUS_OK);
    ck_assert_uint_eq(w, 0x5FBA9870u);
    ck_assert_int_eq((int32_t)w, 1606064240);
    /* One column of a GPTQ [K=8, N=1] qweight is the same word. */
    uint32_t col;
    ck_assert_int_eq(fmoe_int_pack_int32_rows(4, 8, 1, v4, &col), FMOE_STATUS_OK);
    ck_assert_uint_eq(col, 0x5FBA9870u);
    float scale = 0.5f, deq[8];
    static const float want[8] = {-4, -0.5f, 0, 0.5f, 1, 1.5f, 3.5f, -1.5f};
    ck_assert_int_eq(fmoe_int_dequantize(1, 8, v4, &scale, 1, 0, -1, NULL, 1, deq), FMOE_STATUS_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(deq[i], want[i]);
    const int8_t v8[4] = {-128, -1, 0, 127};
    ck_assert_int_eq(fmoe_int_pack_int32(8, 4, v8, &w), FMOE_STATUS_OK);
    ck_assert_uint_eq(w, 0xFF807F00u);
    ck_assert_int_eq((int32_t)w, -8356096);
}
END_TEST

/* E11 - act-order: K = 8, group 4. */
START_TEST(test_e11_act_order)
{
    const int32_t g_idx[8] = {1, 0, 1, 0, 0, 1, 1, 0};
    int32_t perm[8], sorted[8];
    ck_assert_int_eq(fmoe_gidx_sort(8, g_idx, 2, perm, sorted), FMOE_STATUS_OK);
    static const int32_t want_perm[8] = {1, 3, 4, 7, 0, 2, 5, 6}, want_sorted[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    ck_assert_int_eq(memcmp(perm, want_perm, sizeof perm), 0);
    ck_assert_int_eq(memcmp(sorted, want_sorted, sizeof sorted), 0);
    /* Permuting weight rows and activation columns by perm keeps the product. */
    const float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const int8_t w[8] = {-8, 7, 3, -2, 0, 1, -1, 5};
    const float scales[2] = {0.5f, 0.25f};
    float wd[8], plain = 0, permuted = 0;
    ck_assert_int_eq(fmoe_int_dequantize(1, 8, w, scales, 2, 1, 4, g_idx, 2, wd), FMOE_STATUS_OK);
    for (int k = 0; k < 8; k++) {
        plain += a[k] * wd[k];
        permuted += a[perm[k]] * wd[perm[k]];
    }
    ck_assert_float_eq_tol(plain, permuted, 1e-5f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_int");
    TCase *tc = tcase_create("int");
    tcase_add_test(tc, test_pack_table);
    tcase_add_test(tc, test_pack_rows_table);
    tcase_add_test(tc, test_pack_rejects);
    tcase_add_test(tc, test_dequantize_table);
    tcase_add_test(tc, test_gidx_sort_table);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e10_gptq_words);
    tcase_add_test(ex, test_e11_act_order);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 7);
}
