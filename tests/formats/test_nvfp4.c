/*
 * tests/formats/test_nvfp4.c - NVFP4 quantization and dequantization of
 * random blocks against the independent tables, in both global-scale
 * conventions (compressed-tensors quant multiplier, ModelOpt dequant value),
 * with saturating and zero block scales and NaN scale bytes; plus the worked
 * example E6 of spec/formats.md §10.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "tests/formats/golden.h"
#include "tests/test_util.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void check_dequant(const golden *g, const char *prefix, int64_t rows, int64_t cols, const uint8_t *packed,
                          const uint8_t *scales, float global, int32_t convention)
{
    int64_t n = rows * cols;
    float *want = golden_f32(g, golden_name("%s.deq", prefix), n);
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_int_eq(fmoe_nvfp4_dequantize(rows, cols, packed, scales, global, convention, x), FMOE_STATUS_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(golden_same_float(x[i], want[i]), "%s deq [%lld]: %a, want %a", prefix, (long long)i, x[i],
                      want[i]);
    free(want);
    free(x);
}

START_TEST(test_quantize_table)
{
    golden *g = golden_load("nvfp4.txt");
    int cases = 0, conventions_seen = 0;
    for (int c = 0; golden_has(g, golden_name("nvfp4.%d.params", c)); c++, cases++) {
        const uint32_t *p = golden_u32(g, golden_name("nvfp4.%d.params", c), 4, NULL);
        int64_t rows = p[0], cols = p[1], n = rows * cols;
        int32_t convention = (int32_t)p[2];
        float global = from_bits(p[3]);
        conventions_seen |= 1 << convention;
        float *x = golden_f32(g, golden_name("nvfp4.%d.x", c), n);
        uint8_t *want_p = golden_bytes(g, golden_name("nvfp4.%d.packed", c), n / 2);
        uint8_t *want_s = golden_bytes(g, golden_name("nvfp4.%d.scales", c), n / 16);
        uint8_t *packed = malloc((size_t)n / 2), *scales = malloc((size_t)n / 16);
        ck_assert_int_eq(fmoe_nvfp4_quantize(rows, cols, x, global, convention, packed, scales), FMOE_STATUS_OK);
        for (int64_t b = 0; b < n / 16; b++)
            ck_assert_msg(scales[b] == want_s[b], "case %d block %lld: sf 0x%02x, want 0x%02x", c, (long long)b,
                          scales[b], want_s[b]);
        for (int64_t i = 0; i < n / 2; i++)
            ck_assert_msg(packed[i] == want_p[i], "case %d byte %lld: 0x%02x, want 0x%02x", c, (long long)i, packed[i],
                          want_p[i]);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "nvfp4.%d", c);
        check_dequant(g, prefix, rows, cols, packed, scales, global, convention);
        free(x);
        free(want_p);
        free(want_s);
        free(packed);
        free(scales);
    }
    ck_assert_int_eq(cases, 6);
    ck_assert_int_eq(conventions_seen, (1 << FMOE_NVFP4_GLOBAL_QUANT) | (1 << FMOE_NVFP4_GLOBAL_DEQUANT));
    golden_free(g);
}
END_TEST

/* Arbitrary bytes, NaN scales (0x7F, 0xFF) included, both conventions. */
START_TEST(test_dequantize_table)
{
    golden *g = golden_load("nvfp4.txt");
    for (int c = 0; c < 2; c++) {
        const uint32_t *p = golden_u32(g, golden_name("nvfp4_deq.%d.params", c), 4, NULL);
        int64_t rows = p[0], cols = p[1], n = rows * cols;
        uint8_t *packed = golden_bytes(g, golden_name("nvfp4_deq.%d.packed", c), n / 2);
        uint8_t *scales = golden_bytes(g, golden_name("nvfp4_deq.%d.scales", c), n / 16);
        ck_assert(scales[0] == 0x7F && scales[1] == 0xFF);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "nvfp4_deq.%d", c);
        check_dequant(g, prefix, rows, cols, packed, scales, from_bits(p[3]), (int32_t)p[2]);
        free(packed);
        free(scales);
    }
    golden_free(g);
}
END_TEST

/* The two conventions describe the same tensor: quantizing with g or with the
 * stored 1/g gives the same codes whenever 1/(1/g) == g in f32. */
START_TEST(test_conventions_agree)
{
    fmoe_rng rng = fmoe_rng_for(3);
    float x[4 * 32];
    for (int i = 0; i < 4 * 32; i++)
        x[i] = fmoe_rng_normal(&rng) * 3.0f;
    float g = 256.0f, stored = 1.0f / g; /* powers of two invert exactly */
    uint8_t p1[64], s1[8], p2[64], s2[8];
    ck_assert_int_eq(fmoe_nvfp4_quantize(4, 32, x, g, FMOE_NVFP4_GLOBAL_QUANT, p1, s1), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_nvfp4_quantize(4, 32, x, stored, FMOE_NVFP4_GLOBAL_DEQUANT, p2, s2), FMOE_STATUS_OK);
    ck_assert_int_eq(memcmp(p1, p2, sizeof p1), 0);
    ck_assert_int_eq(memcmp(s1, s2, sizeof s1), 0);
    float d1[128], d2[128];
    ck_assert_int_eq(fmoe_nvfp4_dequantize(4, 32, p1, s1, g, FMOE_NVFP4_GLOBAL_QUANT, d1), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_nvfp4_dequantize(4, 32, p2, s2, stored, FMOE_NVFP4_GLOBAL_DEQUANT, d2), FMOE_STATUS_OK);
    ck_assert_int_eq(memcmp(d1, d2, sizeof d1), 0);
}
END_TEST

START_TEST(test_rejects)
{
    float x[16] = {1};
    uint8_t p[8], s[1];
    ck_assert_int_eq(fmoe_nvfp4_quantize(1, 8, x, 1.0f, FMOE_NVFP4_GLOBAL_QUANT, p, s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_nvfp4_quantize(1, 16, x, 0.0f, FMOE_NVFP4_GLOBAL_QUANT, p, s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_nvfp4_quantize(1, 16, x, 1.0f, 0, p, s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_nvfp4_dequantize(1, 16, p, s, INFINITY, FMOE_NVFP4_GLOBAL_DEQUANT, x),
                     FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* E6 - NVFP4 block with a compressed-tensors input global scale. */
START_TEST(test_e6_nvfp4_block)
{
    static const float in[16] = {10,        -5,         2.5,       1,        0.2002f,  -0.5,   0,      7.5,
                                 3.296875f, -2.203125f, 0.8984375, 4.40625f, -6.59375, 8.8125, -9.875, 0.050049f};
    float x[16];
    for (int i = 0; i < 16; i++) /* the inputs are bf16 */
        x[i] = fmoe_bf16_to_f32(fmoe_f32_to_bf16(in[i]));
    float g = fmoe_nvfp4_global_from_amax(10.0f);
    ck_assert_uint_eq(bits(g), bits(268.79998779f));
    ck_assert_uint_eq(bits(g * (10.0f * (1.0f / 6.0f))), bits(448.0f));       /* SFValue */
    ck_assert_uint_eq(bits(1.0f / (448.0f * (1.0f / g))), bits(0.59999996f)); /* outScale */
    uint8_t packed[8], sf;
    ck_assert_int_eq(fmoe_nvfp4_quantize(1, 16, x, g, FMOE_NVFP4_GLOBAL_QUANT, packed, &sf), FMOE_STATUS_OK);
    ck_assert_uint_eq(sf, 0x7E);
    static const uint8_t want[8] = {0xD7, 0x13, 0x90, 0x60, 0xB4, 0x51, 0x7E, 0x0F};
    ck_assert_int_eq(memcmp(packed, want, 8), 0);
    static const uint8_t codes[16] = {7, 0xD, 3, 1, 0, 9, 0, 6, 4, 0xB, 1, 5, 0xE, 7, 0xF, 0};
    uint8_t got[16];
    fmoe_fp4_unpack(packed, 16, got);
    ck_assert_int_eq(memcmp(got, codes, 16), 0);
    float d[16];
    static const float deq[16] = {10,         -5,   2.5,        0.8333333f, 0,           -0.8333333f, 0,   6.6666667f,
                                  3.3333333f, -2.5, 0.8333333f, 5,          -6.6666667f, 10,          -10, 0};
    ck_assert_int_eq(fmoe_nvfp4_dequantize(1, 16, packed, &sf, g, FMOE_NVFP4_GLOBAL_QUANT, d), FMOE_STATUS_OK);
    for (int i = 0; i < 16; i++)
        ck_assert_float_eq_tol(d[i], deq[i], 1e-5f);
    /* vLLM internal: a13_scale = 1/268.8, the dequant convention. */
    ck_assert_int_eq(fmoe_nvfp4_quantize(1, 16, x, 1.0f / g, FMOE_NVFP4_GLOBAL_DEQUANT, packed, &sf), FMOE_STATUS_OK);
    ck_assert_uint_eq(sf, 0x7E);
    ck_assert_int_eq(memcmp(packed, want, 8), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_nvfp4");
    TCase *tc = tcase_create("nvfp4");
    tcase_add_test(tc, test_quantize_table);
    tcase_add_test(tc, test_dequantize_table);
    tcase_add_test(tc, test_conventions_agree);
    tcase_add_test(tc, test_rejects);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e6_nvfp4_block);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
