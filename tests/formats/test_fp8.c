/*
 * tests/formats/test_fp8.c - FP8 e4m3fn / e4m3fnuz / e5m2 scalars against
 * the independent tables (every code point decoded; thousands of f32 inputs
 * encoded: ties, subnormals, saturation, NaN, inf), static-scale
 * quantization, the e4m3fn -> e4m3fnuz normalization, and the worked
 * examples E1 and E2 of spec/formats.md §10.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "tests/formats/golden.h"
#include "tests/test_util.h"

static const struct {
    const char *name;
    fmoe_dtype dtype;
} FORMATS[] = {
    {"e4m3fn", FMOE_DTYPE_FP8_E4M3FN},
    {"e4m3fnuz", FMOE_DTYPE_FP8_E4M3FNUZ},
    {"e5m2", FMOE_DTYPE_FP8_E5M2},
};

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(test_decode_every_code)
{
    golden *g = golden_load("fp8.txt");
    for (size_t f = 0; f < 3; f++) {
        float *want = golden_f32(g, golden_name("%s.decode", FORMATS[f].name), 256);
        for (int b = 0; b < 256; b++) {
            float got = fmoe_fp8_decode(FORMATS[f].dtype, (uint8_t)b);
            ck_assert_msg(golden_same_float(got, want[b]), "%s decode 0x%02x: got %a (0x%08x), want %a (0x%08x)",
                          FORMATS[f].name, b, got, bits(got), want[b], bits(want[b]));
        }
        free(want);
    }
    golden_free(g);
}
END_TEST

START_TEST(test_encode_table)
{
    golden *g = golden_load("fp8.txt");
    int64_t n;
    golden_u32(g, "encode.x", -1, &n);
    float *x = golden_f32(g, "encode.x", n);
    ck_assert_int_gt(n, 1000);
    for (size_t f = 0; f < 3; f++) {
        uint8_t *want = golden_bytes(g, golden_name("%s.encode", FORMATS[f].name), n);
        for (int64_t i = 0; i < n; i++) {
            uint8_t got = fmoe_fp8_encode(FORMATS[f].dtype, x[i]);
            ck_assert_msg(got == want[i], "%s encode(%a = 0x%08x): got 0x%02x, want 0x%02x", FORMATS[f].name, x[i],
                          bits(x[i]), got, want[i]);
        }
        free(want);
    }
    free(x);
    golden_free(g);
}
END_TEST

/* decode then encode gives the code back for every finite code. */
START_TEST(test_round_trip_every_code)
{
    for (size_t f = 0; f < 3; f++)
        for (int b = 0; b < 256; b++) {
            float v = fmoe_fp8_decode(FORMATS[f].dtype, (uint8_t)b);
            if (!isfinite(v))
                continue;
            ck_assert_msg(fmoe_fp8_encode(FORMATS[f].dtype, v) == b, "%s 0x%02x", FORMATS[f].name, b);
        }
}
END_TEST

START_TEST(test_special_rules)
{
    /* NaN per format, sign kept where the format has one. */
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(NAN), 0x7F);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(-NAN), 0xFF);
    ck_assert_uint_eq(fmoe_fp8_e4m3fnuz_encode(NAN), 0x80);
    ck_assert_uint_eq(fmoe_fp8_e4m3fnuz_encode(-NAN), 0x80);
    ck_assert_uint_eq(fmoe_fp8_e5m2_encode(NAN), 0x7E);
    ck_assert_uint_eq(fmoe_fp8_e5m2_encode(-NAN), 0xFE);
    /* Saturation, inf included; e5m2 never stores inf. */
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(INFINITY), 0x7E);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(-1e30f), 0xFE);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(464.0f), 0x7E); /* the tie above 448 would be NaN */
    ck_assert_uint_eq(fmoe_fp8_e4m3fnuz_encode(-INFINITY), 0xFF);
    ck_assert_uint_eq(fmoe_fp8_e5m2_encode(INFINITY), 0x7B);
    ck_assert_uint_eq(fmoe_fp8_e5m2_encode(-65536.0f), 0xFB);
    /* Zeros: FNUZ has no -0; tiny negatives round to +0 there. */
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(-0.0f), 0x80);
    ck_assert_uint_eq(fmoe_fp8_e4m3fnuz_encode(-0.0f), 0x00);
    ck_assert_uint_eq(fmoe_fp8_e4m3fnuz_encode(-1e-9f), 0x00);
    ck_assert_uint_eq(fmoe_fp8_e5m2_encode(-1e-9f), 0x80);
    /* Ties to even at the subnormal boundary: 2^-10 is half of e4m3fn's 2^-9. */
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(0x1p-10f), 0x00);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(3 * 0x1p-10f), 0x02);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(1.0625f), 0x38);            /* tie between 1 and 1.125 */
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(1.0625f + 0x1p-20f), 0x39); /* no double rounding */
    ck_assert(isinf(fmoe_fp8_e5m2_decode(0xFC)) && fmoe_fp8_e5m2_decode(0xFC) < 0);
    ck_assert(signbit(fmoe_fp8_e4m3fn_decode(0xFF)) && isnan(fmoe_fp8_e4m3fn_decode(0xFF)));
}
END_TEST

START_TEST(test_dtype_dispatch)
{
    ck_assert_float_eq(fmoe_fp8_max(FMOE_DTYPE_FP8_E4M3FN), 448.0f);
    ck_assert_float_eq(fmoe_fp8_max(FMOE_DTYPE_FP8_E4M3FNUZ), 240.0f);
    ck_assert_float_eq(fmoe_fp8_max(FMOE_DTYPE_FP8_E5M2), 57344.0f);
    ck_assert_float_eq(fmoe_fp8_max(FMOE_DTYPE_BF16), 0.0f);
    ck_assert_uint_eq(fmoe_fp8_encode(FMOE_DTYPE_INT8, 1.0f), 0);
    ck_assert(isnan(fmoe_fp8_decode(FMOE_DTYPE_INT8, 0x38)));
}
END_TEST

START_TEST(test_static_quantize_table)
{
    golden *g = golden_load("fp8.txt");
    int cases = 0;
    for (int c = 0; golden_has(g, golden_name("static.%d.params", c)); c++, cases++) {
        const uint32_t *p = golden_u32(g, golden_name("static.%d.params", c), 3, NULL);
        fmoe_dtype dtype = (fmoe_dtype)p[0];
        float fp8_max, scale;
        memcpy(&fp8_max, &p[1], sizeof fp8_max);
        memcpy(&scale, &p[2], sizeof scale);
        int64_t n;
        golden_u32(g, golden_name("static.%d.x", c), -1, &n);
        float *x = golden_f32(g, golden_name("static.%d.x", c), n);
        uint8_t *want = golden_bytes(g, golden_name("static.%d.q", c), n);
        uint8_t *q = malloc((size_t)n);
        float *back = malloc((size_t)n * sizeof *back);
        ck_assert_int_eq(fmoe_fp8_quantize(dtype, fp8_max, scale, x, n, q), FMOE_STATUS_OK);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(q[i] == want[i], "case %d [%lld]: %a -> 0x%02x, want 0x%02x", c, (long long)i, x[i], q[i],
                          want[i]);
        ck_assert_int_eq(fmoe_fp8_dequantize(dtype, scale, q, n, back), FMOE_STATUS_OK);
        for (int64_t i = 0; i < n; i++)
            ck_assert(golden_same_float(back[i], fmoe_fp8_decode(dtype, q[i]) * scale));
        free(x);
        free(want);
        free(q);
        free(back);
    }
    ck_assert_int_eq(cases, 3);
    golden_free(g);
}
END_TEST

START_TEST(test_fn_to_fnuz_table)
{
    golden *g = golden_load("fp8.txt");
    int64_t n;
    golden_u32(g, "normalize.q", -1, &n);
    uint8_t *q = golden_bytes(g, "normalize.q", n);
    uint8_t *want_q = golden_bytes(g, "normalize.q_out", n);
    float *scales = golden_f32(g, "normalize.scales", 8);
    float *want_s = golden_f32(g, "normalize.scales_out", 8);
    float *before = malloc((size_t)n * sizeof *before);
    for (int64_t i = 0; i < n; i++)
        before[i] = fmoe_fp8_e4m3fn_decode(q[i]) * scales[i % 8];
    fmoe_fp8_e4m3fn_to_fnuz(q, n, scales, 8);
    ck_assert_int_eq(memcmp(q, want_q, (size_t)n), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(bits(scales[i]), bits(want_s[i]));
    /* Dequantized values are identical, -0 becoming +0 being the only change. */
    for (int64_t i = 0; i < n; i++) {
        float after = fmoe_fp8_e4m3fnuz_decode(q[i]) * scales[i % 8];
        ck_assert_msg(after == before[i], "[%lld] %a != %a", (long long)i, after, before[i]);
        if (before[i] != 0.0f)
            ck_assert_uint_eq(bits(after), bits(before[i]));
    }
    free(q);
    free(want_q);
    free(scales);
    free(want_s);
    free(before);
    golden_free(g);
}
END_TEST

START_TEST(test_quantize_rejects)
{
    float x[2] = {1.0f, 2.0f};
    uint8_t q[2];
    ck_assert_int_eq(fmoe_fp8_quantize(FMOE_DTYPE_BF16, 448.0f, 1.0f, x, 2, q), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize(FMOE_DTYPE_FP8_E4M3FNUZ, 448.0f, 1.0f, x, 2, q), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize(FMOE_DTYPE_FP8_E4M3FN, 448.0f, 0.0f, x, 2, q), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize(FMOE_DTYPE_FP8_E4M3FN, NAN, 1.0f, x, 2, q), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize(FMOE_DTYPE_FP8_E4M3FN, 448.0f, INFINITY, x, 2, q), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_dequantize(FMOE_DTYPE_F32, 1.0f, q, 2, x), FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* E1 - FP8 decode table. */
START_TEST(test_e1_fp8_decode_table)
{
    static const struct {
        uint8_t b;
        float v;
    } fn[] = {{0x00, 0.0f},   {0x01, 0.001953125f}, {0x07, 0.013671875f}, {0x08, 0.015625f},
              {0x38, 1.0f},   {0x3C, 1.5f},         {0x40, 2.0f},         {0x70, 128.0f},
              {0x7E, 448.0f}, {0xC0, -2.0f},        {0xC8, -4.0f},        {0xFE, -448.0f}},
      fnuz[] = {{0x01, 0.0009765625f}, {0x08, 0.0078125f}, {0x38, 0.5f},  {0x40, 1.0f},
                {0x7E, 224.0f},        {0x7F, 240.0f},     {0xC8, -2.0f}, {0xFF, -240.0f}},
      e5m2[] = {{0x01, 0x1p-16f}, {0x04, 0x1p-14f}, {0x3C, 1.0f}, {0x7B, 57344.0f}, {0xFB, -57344.0f}};
    for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++)
        ck_assert_uint_eq(bits(fmoe_fp8_e4m3fn_decode(fn[i].b)), bits(fn[i].v));
    ck_assert(isnan(fmoe_fp8_e4m3fn_decode(0x7F)));
    ck_assert_uint_eq(bits(fmoe_fp8_e4m3fn_decode(0x80)), bits(-0.0f));
    for (size_t i = 0; i < sizeof fnuz / sizeof fnuz[0]; i++)
        ck_assert_uint_eq(bits(fmoe_fp8_e4m3fnuz_decode(fnuz[i].b)), bits(fnuz[i].v));
    ck_assert(isnan(fmoe_fp8_e4m3fnuz_decode(0x80)));
    for (size_t i = 0; i < sizeof e5m2 / sizeof e5m2[0]; i++)
        ck_assert_uint_eq(bits(fmoe_fp8_e5m2_decode(e5m2[i].b)), bits(e5m2[i].v));
    ck_assert(isinf(fmoe_fp8_e5m2_decode(0x7C)) && fmoe_fp8_e5m2_decode(0x7C) > 0);
    ck_assert(isnan(fmoe_fp8_e5m2_decode(0x7D)));
}
END_TEST

/* E2 - normalize FN -> FNUZ. */
START_TEST(test_e2_normalize_fn_to_fnuz)
{
    uint8_t q[4] = {0x40, 0x80, 0xC8, 0x7E};
    float scale = 0.01f;
    float before[4];
    for (int i = 0; i < 4; i++)
        before[i] = fmoe_fp8_e4m3fn_decode(q[i]) * scale;
    ck_assert(before[1] == 0.0f && signbit(before[1]));
    fmoe_fp8_e4m3fn_to_fnuz(q, 4, &scale, 1);
    ck_assert_uint_eq(q[0], 0x40);
    ck_assert_uint_eq(q[1], 0x00);
    ck_assert_uint_eq(q[2], 0xC8);
    ck_assert_uint_eq(q[3], 0x7E);
    ck_assert_uint_eq(bits(scale), bits(0.02f));
    for (int i = 0; i < 4; i++)
        ck_assert(fmoe_fp8_e4m3fnuz_decode(q[i]) * scale == before[i]);
    ck_assert_uint_eq(bits(fmoe_fp8_e4m3fnuz_decode(q[1]) * scale), bits(0.0f));
    /* Static input scales double too (q = NULL). */
    float input_scale = 0.5f;
    fmoe_fp8_e4m3fn_to_fnuz(NULL, 0, &input_scale, 1);
    ck_assert_float_eq(input_scale, 1.0f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_fp8");
    TCase *tc = tcase_create("fp8");
    tcase_add_test(tc, test_decode_every_code);
    tcase_add_test(tc, test_encode_table);
    tcase_add_test(tc, test_round_trip_every_code);
    tcase_add_test(tc, test_special_rules);
    tcase_add_test(tc, test_dtype_dispatch);
    tcase_add_test(tc, test_static_quantize_table);
    tcase_add_test(tc, test_fn_to_fnuz_table);
    tcase_add_test(tc, test_quantize_rejects);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e1_fp8_decode_table);
    tcase_add_test(ex, test_e2_normalize_fn_to_fnuz);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 10);
}
