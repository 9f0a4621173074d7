/*
 * tests/formats/test_fp8_blocks.c - FP8 dynamic quantization with one scale
 * per block (per tensor, per token, 1x128 groups, 128x128 weight blocks,
 * DeepGEMM's 1x32), the two scale rules, and the per-tensor W13
 * requantization, against the independent tables; plus the worked examples
 * E3, E4, E5 and E18 of spec/formats.md §10.
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

START_TEST(test_blocks_table)
{
    golden *g = golden_load("fp8_blocks.txt");
    int cases = 0;
    for (int c = 0; golden_has(g, golden_name("blocks.%d.params", c)); c++, cases++) {
        const uint32_t *p = golden_u32(g, golden_name("blocks.%d.params", c), 7, NULL);
        fmoe_dtype dtype = (fmoe_dtype)p[0];
        float fp8_max = from_bits(p[1]);
        int32_t rule = (int32_t)p[2];
        int64_t rows = p[3], cols = p[4], br = p[5], bc = p[6];
        int64_t n = rows * cols, ns = ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
        uint16_t *xb = golden_u16(g, golden_name("blocks.%d.x_bf16", c), n);
        uint8_t *want_q = golden_bytes(g, golden_name("blocks.%d.q", c), n);
        float *want_s = golden_f32(g, golden_name("blocks.%d.scales", c), ns);
        float *x = malloc((size_t)n * sizeof *x);
        uint8_t *q = malloc((size_t)n);
        float *s = malloc((size_t)ns * sizeof *s);
        for (int64_t i = 0; i < n; i++)
            x[i] = fmoe_bf16_to_f32(xb[i]);

        ck_assert_int_eq(fmoe_fp8_quantize_blocks(dtype, fp8_max, rule, rows, cols, br, bc, x, q, s), FMOE_STATUS_OK);
        for (int64_t i = 0; i < ns; i++)
            ck_assert_msg(bits(s[i]) == bits(want_s[i]), "case %d scale %lld: %a, want %a", c, (long long)i, s[i],
                          want_s[i]);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(q[i] == want_q[i], "case %d [%lld]: %a -> 0x%02x, want 0x%02x", c, (long long)i, x[i], q[i],
                          want_q[i]);
        if (golden_has(g, golden_name("blocks.%d.deq", c))) {
            float *want_d = golden_f32(g, golden_name("blocks.%d.deq", c), n);
            float *d = malloc((size_t)n * sizeof *d);
            ck_assert_int_eq(fmoe_fp8_dequantize_blocks(dtype, rows, cols, br, bc, q, s, d), FMOE_STATUS_OK);
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(golden_same_float(d[i], want_d[i]), "case %d deq [%lld]", c, (long long)i);
            free(want_d);
            free(d);
        }
        free(xb);
        free(want_q);
        free(want_s);
        free(x);
        free(q);
        free(s);
    }
    ck_assert_int_eq(cases, 8);
    golden_free(g);
}
END_TEST

START_TEST(test_dynamic_scale_rules)
{
    /* F32: amax/max, floored at 1/(max*512) so zero rows do not divide by 0. */
    ck_assert_uint_eq(bits(fmoe_fp8_dynamic_scale(3.5f, 448.0f, FMOE_FP8_SCALE_F32)), bits(0.0078125f));
    ck_assert_uint_eq(bits(fmoe_fp8_dynamic_scale(0.0f, 448.0f, FMOE_FP8_SCALE_F32)), bits(1.0f / 229376.0f));
    /* UE8M0: power of two at or above max(amax, 1e-4)/max. */
    ck_assert_float_eq(fmoe_fp8_dynamic_scale(448.0f, 448.0f, FMOE_FP8_SCALE_UE8M0), 1.0f);
    ck_assert_float_eq(fmoe_fp8_dynamic_scale(449.0f, 448.0f, FMOE_FP8_SCALE_UE8M0), 2.0f);
    ck_assert_float_eq(fmoe_fp8_dynamic_scale(0.0f, 448.0f, FMOE_FP8_SCALE_UE8M0), 0x1p-22f); /* 1e-4/448 ~ 2^-22.1 */
    ck_assert(isnan(fmoe_fp8_dynamic_scale(1.0f, 448.0f, 0)));
}
END_TEST

/* Seeded random matrices: every element dequantizes within half a step of
 * the fp8 grid at its block's scale (never saturating: the scale is amax/max). */
START_TEST(test_blocks_error_bound)
{
    fmoe_rng rng = fmoe_rng_for(11);
    enum { ROWS = 130, COLS = 260 };
    float *x = malloc(ROWS * COLS * sizeof *x), *d = malloc(ROWS * COLS * sizeof *d);
    uint8_t *q = malloc(ROWS * COLS);
    float s[2 * 3];
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = fmoe_rng_normal(&rng) * (1 + (float)(i % 7));
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, ROWS, COLS, 128, 128,
                                              x, q, s),
                     FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_fp8_dequantize_blocks(FMOE_DTYPE_FP8_E4M3FN, ROWS, COLS, 128, 128, q, s, d), FMOE_STATUS_OK);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            float sc = s[(r / 128) * 3 + c / 128];
            float v = x[r * COLS + c] / sc;
            /* e4m3: 3 mantissa bits, so half a step is |v| * 2^-4 (or 2^-10 in the subnormals). */
            float tol = fmaxf(fabsf(v) * 0x1p-4f, 0x1p-10f) * sc * 1.0001f;
            ck_assert_msg(fabsf(d[r * COLS + c] - x[r * COLS + c]) <= tol, "(%d,%d) seed %llu", r, c,
                          (unsigned long long)fmoe_test_seed());
        }
    free(x);
    free(d);
    free(q);
}
END_TEST

START_TEST(test_blocks_rejects)
{
    float x[4] = {1, 2, 3, 4}, s[4];
    uint8_t q[4];
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, 3, 2, 2, 1, 2, x, q, s),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 500.0f, FMOE_FP8_SCALE_F32, 2, 2, 1, 2, x, q, s),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, 2, 2, 0, 2, x, q, s),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_fp8_dequantize_blocks(FMOE_DTYPE_F16, 2, 2, 1, 2, q, s, x), FMOE_STATUS_INVALID_ARGUMENT);
    float bad[2] = {1.0f, 0.0f}, out;
    ck_assert_int_eq(fmoe_fp8_requantize_w13(FMOE_DTYPE_FP8_E4M3FN, 448.0f, 2, q, bad, &out),
                     FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_w13_table)
{
    golden *g = golden_load("fp8_blocks.txt");
    int cases = 0;
    for (int c = 0; golden_has(g, golden_name("w13.%d.params", c)); c++, cases++) {
        const uint32_t *p = golden_u32(g, golden_name("w13.%d.params", c), 3, NULL);
        int64_t shard = p[2];
        uint8_t *q = golden_bytes(g, golden_name("w13.%d.q", c), 2 * shard);
        uint8_t *want = golden_bytes(g, golden_name("w13.%d.q_out", c), 2 * shard);
        float *scales = golden_f32(g, golden_name("w13.%d.scales", c), 2);
        float *want_s = golden_f32(g, golden_name("w13.%d.scale_out", c), 1);
        float s;
        ck_assert_int_eq(fmoe_fp8_requantize_w13((fmoe_dtype)p[0], from_bits(p[1]), shard, q, scales, &s),
                         FMOE_STATUS_OK);
        ck_assert_uint_eq(bits(s), bits(want_s[0]));
        for (int64_t i = 0; i < 2 * shard; i++)
            ck_assert_msg(q[i] == want[i], "case %d [%lld]: 0x%02x, want 0x%02x", c, (long long)i, q[i], want[i]);
        free(q);
        free(want);
        free(scales);
        free(want_s);
    }
    ck_assert_int_eq(cases, 2);
    golden_free(g);
}
END_TEST

/* E3 - per-tensor w13 requant. vLLM rounds fp16(w) * scale to fp16
 * (0.449951171875); we keep the f32 product (0.45000002). Both encode to
 * 0x2E (0.4375). */
START_TEST(test_e3_w13_requant)
{
    uint8_t q[4] = {0x3C, 0x40, 0x3C, 0x40}; /* gate: 1.5, 2.0; up: 1.5, 2.0 */
    float scales[2] = {0.3f, 1.0f}, s;
    ck_assert_int_eq(fmoe_fp8_requantize_w13(FMOE_DTYPE_FP8_E4M3FN, 448.0f, 2, q, scales, &s), FMOE_STATUS_OK);
    ck_assert_float_eq(s, 1.0f);
    ck_assert_uint_eq(q[0], 0x2E);
    ck_assert_float_eq(fmoe_fp8_e4m3fn_decode(q[0]), 0.4375f);
    ck_assert_uint_eq(q[2], 0x3C); /* up bytes unchanged */
    ck_assert_uint_eq(q[3], 0x40);
    ck_assert_float_eq(fmoe_round_to(FMOE_DTYPE_F16, 1.5f * 0.3f), 0.449951171875f);
    ck_assert_uint_eq(fmoe_fp8_e4m3fn_encode(fmoe_round_to(FMOE_DTYPE_F16, 1.5f * 0.3f)), 0x2E);
}
END_TEST

/* E4 - dynamic FP8 activation quant: per tensor (CUDA and ROCm) and per token. */
START_TEST(test_e4_dynamic_activation_quant)
{
    float x[3] = {1.0f, -3.5f, 0.25f}, s;
    uint8_t q[3];
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, 1, 3, 1, 3, x, q, &s),
                     FMOE_STATUS_OK);
    ck_assert_uint_eq(bits(s), bits(0.0078125f));
    ck_assert(q[0] == 0x70 && q[1] == 0xFE && q[2] == 0x60);
    /* ROCm FNUZ with max 224: identical bytes, doubled scale. */
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FNUZ, 224.0f, FMOE_FP8_SCALE_F32, 1, 3, 1, 3, x, q,
                                              &s),
                     FMOE_STATUS_OK);
    ck_assert_uint_eq(bits(s), bits(0.015625f));
    ck_assert(q[0] == 0x70 && q[1] == 0xFE && q[2] == 0x60);
    ck_assert_float_eq(fmoe_fp8_e4m3fnuz_decode(q[0]), 64.0f);
    ck_assert_float_eq(fmoe_fp8_e4m3fnuz_decode(q[1]), -224.0f);
    ck_assert_float_eq(fmoe_fp8_e4m3fnuz_decode(q[2]), 16.0f);
    /* Per token: rows [[1, -3.5], [0.5, 0.25]]. */
    float rows[4] = {1.0f, -3.5f, 0.5f, 0.25f}, s2[2];
    uint8_t q2[4];
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, 2, 2, 1, 2, rows, q2,
                                              s2),
                     FMOE_STATUS_OK);
    ck_assert_uint_eq(bits(s2[0]), bits(3.5f / 448.0f));
    ck_assert_uint_eq(bits(s2[1]), bits(0.5f / 448.0f));
    ck_assert_uint_eq(q2[2], 0x7E); /* 448 */
    ck_assert_uint_eq(q2[3], 0x76); /* 224 */
}
END_TEST

/* E5 - 1x128 group quant with f32 and UE8M0 scales. */
START_TEST(test_e5_group_quant)
{
    float x[128], s;
    uint8_t q[128];
    for (int i = 0; i < 128; i++)
        x[i] = 0.01f * (float)(i % 5);
    x[0] = 1.0f;
    x[1] = -0.3f;
    x[2] = 3.5f; /* group amax */
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, 1, 128, 1, 128, x, q,
                                              &s),
                     FMOE_STATUS_OK);
    ck_assert_float_eq(s, 0x1p-7f);
    ck_assert_uint_eq(q[0], 0x70);
    ck_assert_uint_eq(q[1], 0xE2); /* -38.4 -> -40 */
    ck_assert_float_eq(fmoe_fp8_e4m3fn_decode(q[1]) * s, -0.3125f);
    /* UE8M0 with amax 3.0: 3/448 = 0.006696 -> 2^-7, exponent byte 120. */
    x[2] = 3.0f;
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_UE8M0, 1, 128, 1, 128, x, q,
                                              &s),
                     FMOE_STATUS_OK);
    ck_assert_float_eq(s, 0x1p-7f);
    ck_assert_uint_eq(fmoe_ue8m0_encode_floor(s), 120);
}
END_TEST

/* E18 - MegaMoE requant of the SwiGLU output (the value is the example's):
 * amax 14.999319 in its 32-group -> sf 2^-4 (byte 123), q = -240 (0xF7). */
START_TEST(test_e18_megamoe_requant)
{
    float act[32];
    uint8_t q[32];
    float s;
    for (int i = 0; i < 32; i++)
        act[i] = 0.25f * (float)(i % 9) - 1.0f;
    act[5] = -14.999319f;
    ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_UE8M0, 1, 32, 1, 32, act, q,
                                              &s),
                     FMOE_STATUS_OK);
    ck_assert_float_eq(s, 0x1p-4f);
    ck_assert_uint_eq(fmoe_ue8m0_encode_floor(s), 123);
    ck_assert_uint_eq(q[5], 0xF7);
    ck_assert_float_eq(fmoe_fp8_e4m3fn_decode(q[5]) * s, -15.0f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_fp8_blocks");
    TCase *tc = tcase_create("fp8_blocks");
    tcase_add_test(tc, test_blocks_table);
    tcase_add_test(tc, test_dynamic_scale_rules);
    tcase_add_test(tc, test_blocks_error_bound);
    tcase_add_test(tc, test_blocks_rejects);
    tcase_add_test(tc, test_w13_table);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e3_w13_requant);
    tcase_add_test(ex, test_e4_dynamic_activation_quant);
    tcase_add_test(ex, test_e5_group_quant);
    tcase_add_test(ex, test_e18_megamoe_requant);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 9);
}
