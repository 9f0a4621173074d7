/*
 * tests/formats/test_mxfp4.c - MXFP4 quantization (OCP and DeepGEMM recipes)
 * and dequantization (scale bytes 0 and 255 included) against the
 * independent tables, and the place where the two recipes part (amax 7).
 * The worked example E8 is in test_fp4.c with the other UE8M0 examples.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "tests/formats/golden.h"
#include "tests/test_util.h"

static void check_dequant(const golden *g, const char *prefix, int64_t rows, int64_t cols, const uint8_t *packed,
                          const uint8_t *scales)
{
    int64_t n = rows * cols;
    float *want = golden_f32(g, golden_name("%s.deq", prefix), n);
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_int_eq(fmoe_mxfp4_dequantize(rows, cols, packed, scales, x), FMOE_STATUS_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(golden_same_float(x[i], want[i]), "%s deq [%lld]: %a, want %a", prefix, (long long)i, x[i],
                      want[i]);
    free(want);
    free(x);
}

START_TEST(test_quantize_table)
{
    golden *g = golden_load("mxfp4.txt");
    for (int c = 0; c < 2; c++) {
        const uint32_t *p = golden_u32(g, golden_name("mxfp4.%d.params", c), 3, NULL);
        int64_t rows = p[0], cols = p[1], n = rows * cols;
        int32_t recipe = (int32_t)p[2];
        float *x = golden_f32(g, golden_name("mxfp4.%d.x", c), n);
        uint8_t *want_p = golden_bytes(g, golden_name("mxfp4.%d.packed", c), n / 2);
        uint8_t *want_s = golden_bytes(g, golden_name("mxfp4.%d.scales", c), n / 32);
        uint8_t *packed = malloc((size_t)n / 2), *scales = malloc((size_t)n / 32);
        ck_assert_int_eq(fmoe_mxfp4_quantize(rows, cols, recipe, x, packed, scales), FMOE_STATUS_OK);
        for (int64_t b = 0; b < n / 32; b++)
            ck_assert_msg(scales[b] == want_s[b], "recipe %d block %lld: scale %u, want %u", recipe, (long long)b,
                          scales[b], want_s[b]);
        for (int64_t i = 0; i < n / 2; i++)
            ck_assert_msg(packed[i] == want_p[i], "recipe %d byte %lld: 0x%02x, want 0x%02x", recipe, (long long)i,
                          packed[i], want_p[i]);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "mxfp4.%d", c);
        check_dequant(g, prefix, rows, cols, packed, scales);
        free(x);
        free(want_p);
        free(want_s);
        free(packed);
        free(scales);
    }
    golden_free(g);
}
END_TEST

START_TEST(test_dequantize_edge_scales)
{
    golden *g = golden_load("mxfp4.txt");
    const uint32_t *p = golden_u32(g, "mxfp4_deq.0.params", 2, NULL);
    int64_t rows = p[0], cols = p[1], n = rows * cols;
    uint8_t *packed = golden_bytes(g, "mxfp4_deq.0.packed", n / 2);
    uint8_t *scales = golden_bytes(g, "mxfp4_deq.0.scales", n / 32);
    ck_assert(scales[0] == 0 && scales[1] == 255);
    check_dequant(g, "mxfp4_deq.0", rows, cols, packed, scales);
    /* Byte 255 poisons its block, zero codes included; byte 0 scales by 2^-127. */
    float x[64];
    uint8_t zeros[32] = {0}, edge[2] = {255, 0};
    zeros[16] = 0x07; /* element 32 of the second block: 6 */
    ck_assert_int_eq(fmoe_mxfp4_dequantize(1, 64, zeros, edge, x), FMOE_STATUS_OK);
    for (int i = 0; i < 32; i++)
        ck_assert(isnan(x[i]));
    ck_assert_float_eq(x[32], 6.0f * 0x1p-127f);
    free(packed);
    free(scales);
    golden_free(g);
}
END_TEST

/* spec §3.3: amax 7 -> OCP scale 1 (7 saturates to 6), DeepGEMM scale 2 (3.5 -> 3). */
START_TEST(test_recipes_part_at_amax_7)
{
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = 0.5f * (float)(i % 4);
    x[0] = 7.0f;
    uint8_t packed[16], scale;
    ck_assert_int_eq(fmoe_mxfp4_quantize(1, 32, FMOE_MXFP4_RECIPE_OCP, x, packed, &scale), FMOE_STATUS_OK);
    ck_assert_uint_eq(scale, 127);
    ck_assert_uint_eq(packed[0] & 0xF, 0x7); /* 6 */
    ck_assert_int_eq(fmoe_mxfp4_quantize(1, 32, FMOE_MXFP4_RECIPE_DEEPGEMM, x, packed, &scale), FMOE_STATUS_OK);
    ck_assert_uint_eq(scale, 128);
    ck_assert_uint_eq(packed[0] & 0xF, 0x5); /* 3.5 ties toward zero: 3 */
    ck_assert_int_eq(fmoe_mxfp4_quantize(1, 16, FMOE_MXFP4_RECIPE_OCP, x, packed, &scale),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_mxfp4_quantize(1, 32, 0, x, packed, &scale), FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* Seeded random rows: OCP dequantizes within half an e2m1 step of the input
 * (or to +-6*scale where it saturates). */
START_TEST(test_ocp_error_bound)
{
    fmoe_rng rng = fmoe_rng_for(5);
    enum { N = 8 * 32 };
    float x[N], d[N];
    uint8_t packed[N / 2], scales[N / 32];
    for (int i = 0; i < N; i++)
        x[i] = fmoe_rng_normal(&rng) * ldexpf(1.0f, (i / 32) - 4);
    ck_assert_int_eq(fmoe_mxfp4_quantize(1, N, FMOE_MXFP4_RECIPE_OCP, x, packed, scales), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_mxfp4_dequantize(1, N, packed, scales, d), FMOE_STATUS_OK);
    for (int i = 0; i < N; i++) {
        float s = fmoe_ue8m0_decode(scales[i / 32]);
        float v = fabsf(x[i]) / s;
        if (v >= 6.0f) {
            ck_assert_float_eq(fabsf(d[i]), 6.0f * s);
            continue;
        }
        float step = v < 2.0f ? 0.5f : (v < 4.0f ? 1.0f : 2.0f);
        ck_assert_msg(fabsf(d[i] - x[i]) <= step / 2 * s, "[%d] seed %llu", i, (unsigned long long)fmoe_test_seed());
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_mxfp4");
    TCase *tc = tcase_create("mxfp4");
    tcase_add_test(tc, test_quantize_table);
    tcase_add_test(tc, test_dequantize_edge_scales);
    tcase_add_test(tc, test_recipes_part_at_amax_7);
    tcase_add_test(tc, test_ocp_error_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 4);
}
