/*
 * tests/rocm/test_fnuz.c - e4m3fn -> e4m3fnuz (plugins/rocm/fnuz.h)
 * against spec/formats.md §1.3 and E2, and, for every byte, against the
 * core library's decoders: value_fn(b) * s == value_fnuz(b') * 2s.
 */
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/rocm/fnuz.h"
#include "tests/test_util.h"

/* E2: bytes [0x40, 0x80, 0xC8, 0x7E], scale 0.01 -> [0x40, 0x00, 0xC8, 0x7E], 0.02. */
START_TEST(worked_example_e2)
{
    uint8_t q[4] = {0x40, 0x80, 0xC8, 0x7E};
    float s = 0.01f;
    size_t nans = 99;
    ck_assert_uint_eq(fmro_fnuz_from_fn_bytes(q, 4, &nans), 1);
    ck_assert_uint_eq(nans, 0);
    ck_assert_int_eq(fmro_fnuz_double_scales(&s, 1, NULL), 0);
    const uint8_t want[4] = {0x40, 0x00, 0xC8, 0x7E};
    ck_assert_mem_eq(q, want, 4);
    ck_assert_float_eq(s, 0.02f);
    /* dequantized values are the example's [0.02, 0, -0.04, 4.48] */
    const float vals[4] = {0.02f, 0.0f, -0.04f, 4.48f};
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq_tol(fmoe_fp8_e4m3fnuz_decode(q[i]) * s, vals[i], 1e-6f);
}
END_TEST

/* Every one of the 256 codes: same bits but 0x80, same value with the
 * doubled scale, and 0x7F / 0xFF counted as NaN codes. */
START_TEST(every_code_keeps_its_value)
{
    uint8_t q[256];
    for (int b = 0; b < 256; b++)
        q[b] = (uint8_t)b;
    size_t nans = 0;
    ck_assert_uint_eq(fmro_fnuz_from_fn_bytes(q, 256, &nans), 1);
    ck_assert_uint_eq(nans, 2);
    float s = 0.375f, s2 = s;
    ck_assert_int_eq(fmro_fnuz_double_scales(&s2, 1, NULL), 0);
    ck_assert_float_eq(s2, 0.75f);
    for (int b = 0; b < 256; b++) {
        if (b == 0x7F || b == 0xFF) {
            ck_assert_uint_eq(q[b], b); /* left alone: the caller refuses */
            continue;
        }
        ck_assert_msg(q[b] == (b == 0x80 ? 0 : b), "byte 0x%02X became 0x%02X", b, q[b]);
        float fn = fmoe_fp8_e4m3fn_decode((uint8_t)b) * s;
        float fnuz = fmoe_fp8_e4m3fnuz_decode(q[b]) * s2;
        ck_assert_msg(fn == fnuz, "byte 0x%02X: fn %g, fnuz %g", b, (double)fn, (double)fnuz);
    }
}
END_TEST

/* E1 spot values: the same byte is half the value in fnuz. */
START_TEST(same_bits_half_value)
{
    const uint8_t bytes[] = {0x01, 0x08, 0x38, 0x40, 0x7E, 0xC8};
    const float fnuz[] = {0.0009765625f, 0.0078125f, 0.5f, 1.0f, 224.0f, -2.0f};
    for (size_t i = 0; i < sizeof bytes; i++) {
        ck_assert_float_eq(fmoe_fp8_e4m3fnuz_decode(bytes[i]), fnuz[i]);
        ck_assert_float_eq(fmoe_fp8_e4m3fn_decode(bytes[i]), 2.0f * fnuz[i]);
    }
}
END_TEST

/* Random tensors: only 0x80 changes, and the count says how many did. */
START_TEST(random_tensor_counts)
{
    fmoe_rng r = fmoe_rng_for(31);
    enum { N = 4099 };
    static uint8_t q[N], orig[N];
    size_t want_changed = 0, want_nans = 0;
    for (int i = 0; i < N; i++) {
        orig[i] = q[i] = (uint8_t)(fmoe_rng_u64(&r) & 0xFF);
        want_changed += orig[i] == 0x80;
        want_nans += orig[i] == 0x7F || orig[i] == 0xFF;
    }
    size_t nans = 0;
    ck_assert_uint_eq(fmro_fnuz_from_fn_bytes(q, N, &nans), want_changed);
    ck_assert_uint_eq(nans, want_nans);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(q[i], orig[i] == 0x80 ? 0 : orig[i]);
    /* converting twice changes nothing more */
    ck_assert_uint_eq(fmro_fnuz_from_fn_bytes(q, N, NULL), 0);
}
END_TEST

START_TEST(scales_refused_whole)
{
    float s[4] = {0.5f, 1.0f, 3.0e38f, 0.25f}; /* 2 * 3e38 overflows */
    size_t bad = 99;
    ck_assert_int_eq(fmro_fnuz_double_scales(s, 4, &bad), -1);
    ck_assert_uint_eq(bad, 2);
    ck_assert_float_eq(s[0], 0.5f); /* untouched */
    ck_assert_float_eq(s[1], 1.0f);
    float n[2] = {1.0f, NAN};
    ck_assert_int_eq(fmro_fnuz_double_scales(n, 2, &bad), -1);
    ck_assert_uint_eq(bad, 1);
    float ok[3] = {0x1p-149f, 0.0f, 1.5f}; /* subnormal and zero double exactly */
    ck_assert_int_eq(fmro_fnuz_double_scales(ok, 3, NULL), 0);
    ck_assert_float_eq(ok[0], 0x1p-148f);
    ck_assert_float_eq(ok[1], 0.0f);
    ck_assert_float_eq(ok[2], 3.0f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_fnuz");
    TCase *tc = tcase_create("fnuz");
    tcase_add_test(tc, worked_example_e2);
    tcase_add_test(tc, every_code_keeps_its_value);
    tcase_add_test(tc, same_bits_half_value);
    tcase_add_test(tc, random_tensor_counts);
    tcase_add_test(tc, scales_refused_whole);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
