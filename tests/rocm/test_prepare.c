/*
 * tests/rocm/test_prepare.c - finalize's host transforms (prepare.h): every
 * element of the prepared (padded, pre-shuffled, e4m3fnuz) weights,
 * unshuffled again, dequantizes to exactly the checkpoint's value, the
 * padding is zero, the up half sits at row Ip; scales are doubled (per
 * channel, per block, per tensor after the W13 requantization), static
 * input scales reduced to the max and doubled; 0x80 is rewritten and a NaN
 * code or a bad scale refused naming the tensor. Seeded random tensors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"
#include "plugins/rocm/layout.h"
#include "plugins/rocm/prepare.h"
#include "plugins/rocm/shuffle.h"
#include "tests/test_util.h"

/* Random e4m3fn codes with no NaN code; every 7th one 0x80 (-0). */
static void random_codes(fmoe_rng *r, uint8_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)(fmoe_rng_u64(r) & 0xFF);
        if ((b & 0x7F) == 0x7F)
            b ^= 1;
        q[i] = i % 7 == 3 ? 0x80 : b;
    }
}

static void random_scales(fmoe_rng *r, float *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i] = fmoe_rng_uniform(r, 0.01f, 0.2f);
}

/* Expert e's padded [rows_pad, cols_pad] matrix back from the shuffle. */
static uint8_t *unshuffled(const fmro_prepared *p, int w13, uint32_t E, size_t eb)
{
    uint32_t rows = w13 ? 2 * p->inter_pad : p->hidden_pad, cols = w13 ? p->hidden_pad : p->inter_pad;
    size_t n = (size_t)E * rows * cols * eb;
    uint8_t *u = malloc(n);
    ck_assert_ptr_nonnull(u);
    fmro_unshuffle(u, w13 ? p->w13 : p->w2, E, rows, cols, eb);
    return u;
}

/* Per-channel x per-token, H and I not multiples of 32: every element. */
START_TEST(fp8_channel_elements)
{
    fmoe_rng r = fmoe_rng_for(1);
    const uint32_t E = 3, H = 40, I = 24;
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    uint8_t *w13 = malloc(n13), *w2 = malloc(n2);
    float *s13 = malloc(sizeof(float) * E * 2 * I), *s2 = malloc(sizeof(float) * E * H);
    random_codes(&r, w13, n13);
    random_codes(&r, w2, n2);
    random_scales(&r, s13, (size_t)E * 2 * I);
    random_scales(&r, s2, (size_t)E * H);
    fmro_prepare_in in = {.quant = FMRO_Q_CHANNEL,
                          .experts = E,
                          .hidden = H,
                          .inter = I,
                          .w13 = w13,
                          .w2 = w2,
                          .w13_scale = s13,
                          .w2_scale = s2};
    fmro_prepared p;
    char why[256];
    ck_assert_msg(fmro_prepare(&in, &p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(p.hidden_pad, 64);
    ck_assert_uint_eq(p.inter_pad, 32);
    ck_assert_uint_eq(p.w13_scales, (size_t)E * 2 * I);
    ck_assert_uint_eq(p.w2_scales, (size_t)E * H);
    ck_assert_uint_gt(p.zeros_rewritten, 0);
    uint32_t Hp = p.hidden_pad, Ip = p.inter_pad;
    uint8_t *u13 = unshuffled(&p, 1, E, 1), *u2 = unshuffled(&p, 0, E, 1);
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t row = 0; row < 2 * Ip; row++)
            for (uint32_t c = 0; c < Hp; c++) {
                uint8_t got = u13[((size_t)e * 2 * Ip + row) * Hp + c];
                int half = row >= Ip, in_row = (int)(row - (half ? Ip : 0));
                if (in_row >= (int)I || c >= H) {
                    ck_assert_uint_eq(got, 0);
                    continue;
                }
                uint32_t src = (uint32_t)in_row + (half ? I : 0);
                float want = fmoe_fp8_e4m3fn_decode(w13[((size_t)e * 2 * I + src) * H + c]) * s13[e * 2 * I + src];
                float have = fmoe_fp8_e4m3fnuz_decode(got) * p.w13_scale[e * 2 * I + src];
                ck_assert_msg(want == have || (want == 0.0f && have == 0.0f), "w13 e%u row %u col %u: %g vs %g", e, row,
                              c, (double)want, (double)have);
            }
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t row = 0; row < Hp; row++)
            for (uint32_t c = 0; c < Ip; c++) {
                uint8_t got = u2[((size_t)e * Hp + row) * Ip + c];
                if (row >= H || c >= I) {
                    ck_assert_uint_eq(got, 0);
                    continue;
                }
                float want = fmoe_fp8_e4m3fn_decode(w2[((size_t)e * H + row) * I + c]) * s2[e * H + row];
                float have = fmoe_fp8_e4m3fnuz_decode(got) * p.w2_scale[e * H + row];
                ck_assert(want == have);
            }
    for (size_t i = 0; i < p.w13_scales; i++)
        ck_assert_float_eq(p.w13_scale[i], 2.0f * s13[i]);
    free(u13);
    free(u2);
    fmro_prepared_free(&p);
    free(w13);
    free(w2);
    free(s13);
    free(s2);
}
END_TEST

/* Per-tensor gated with static input scales: W13 requantized to one scale
 * per expert exactly as the reference (refq_fp8_requant_w13), then fnuz. */
START_TEST(fp8_tensor_requant_and_input_scales)
{
    fmoe_rng r = fmoe_rng_for(2);
    const uint32_t E = 2, H = 32, I = 32;
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    uint8_t *w13 = malloc(n13), *w2 = malloc(n2), *ref = malloc(n13);
    float s13[4] = {0.05f, 0.08f, 0.11f, 0.02f}, s2[2] = {0.3f, 0.4f}, one[2];
    float in13[4] = {0.5f, 0.7f, 0.6f, 0.2f}, in2[2] = {1.5f, 1.25f};
    random_codes(&r, w13, n13);
    random_codes(&r, w2, n2);
    memcpy(ref, w13, n13);
    ck_assert_int_eq(refq_fp8_requant_w13(ref, E, I, H, s13, one), 0);
    fmro_prepare_in in = {.quant = FMRO_Q_TENSOR,
                          .experts = E,
                          .hidden = H,
                          .inter = I,
                          .w13 = w13,
                          .w2 = w2,
                          .w13_scale = s13,
                          .w2_scale = s2,
                          .w13_input_scale = in13,
                          .w2_input_scale = in2};
    fmro_prepared p;
    char why[256];
    ck_assert_msg(fmro_prepare(&in, &p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(p.w13_scales, E);
    for (uint32_t e = 0; e < E; e++) {
        ck_assert_float_eq(p.w13_scale[e], 2.0f * one[e]);
        ck_assert_float_eq(p.w2_scale[e], 2.0f * s2[e]);
    }
    ck_assert_float_eq(p.a13_scale, 1.4f);
    ck_assert_float_eq(p.a2_scale, 3.0f);
    uint8_t *u13 = unshuffled(&p, 1, E, 1);
    for (size_t i = 0; i < n13; i++) {
        float want = fmoe_fp8_e4m3fn_decode(ref[i]) * one[i / (2 * I * H)];
        float have = fmoe_fp8_e4m3fnuz_decode(u13[i]) * p.w13_scale[i / (2 * I * H)];
        ck_assert(want == have); /* H = I = 32: no padding, rows in place */
    }
    free(u13);
    fmro_prepared_free(&p);
    /* a bad static scale is refused by name */
    in13[1] = NAN;
    ck_assert_int_eq(fmro_prepare(&in, &p, why, sizeof why), -1);
    ck_assert_str_eq(why, "w13_input_scale: every value must be finite and > 0");
    free(w13);
    free(w2);
    free(ref);
}
END_TEST

/* 128x128 blocks: the scales keep their layout and are doubled. */
START_TEST(fp8_block_scales)
{
    fmoe_rng r = fmoe_rng_for(3);
    const uint32_t E = 2, H = 130, I = 128;
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I, c13 = (size_t)E * 2 * 2, c2 = (size_t)E * 2 * 1;
    uint8_t *w13 = malloc(n13), *w2 = malloc(n2);
    float s13[8], s2[4];
    random_codes(&r, w13, n13);
    random_codes(&r, w2, n2);
    random_scales(&r, s13, c13);
    random_scales(&r, s2, c2);
    fmro_prepare_in in = {.quant = FMRO_Q_BLOCK,
                          .experts = E,
                          .hidden = H,
                          .inter = I,
                          .w13 = w13,
                          .w2 = w2,
                          .w13_scale = s13,
                          .w2_scale = s2};
    fmro_prepared p;
    char why[256];
    ck_assert_msg(fmro_prepare(&in, &p, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(p.w13_scales, c13);
    ck_assert_uint_eq(p.w2_scales, c2);
    ck_assert_uint_eq(p.hidden_pad, 160);
    for (size_t i = 0; i < c13; i++)
        ck_assert_float_eq(p.w13_scale[i], 2.0f * s13[i]);
    for (size_t i = 0; i < c2; i++)
        ck_assert_float_eq(p.w2_scale[i], 2.0f * s2[i]);
    fmro_prepared_free(&p);
    free(w13);
    free(w2);
}
END_TEST

START_TEST(nan_code_refused)
{
    uint8_t w13[2 * 32 * 32] = {0}, w2[32 * 32] = {0};
    float s13[2 * 32], s2[32];
    for (int i = 0; i < 64; i++)
        s13[i] = 0.5f;
    for (int i = 0; i < 32; i++)
        s2[i] = 0.5f;
    w2[17] = 0xFF;
    fmro_prepare_in in = {.quant = FMRO_Q_CHANNEL,
                          .experts = 1,
                          .hidden = 32,
                          .inter = 32,
                          .w13 = w13,
                          .w2 = w2,
                          .w13_scale = s13,
                          .w2_scale = s2};
    fmro_prepared p;
    char why[256];
    ck_assert_int_eq(fmro_prepare(&in, &p, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "w2_weight: 1 byte(s) 0x7F/0xFF"));
    w2[17] = 0;
    w13[5] = 0x7F;
    ck_assert_int_eq(fmro_prepare(&in, &p, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "w13_weight: 1 byte(s)"));
    w13[5] = 0;
    s2[3] = INFINITY;
    ck_assert_int_eq(fmro_prepare(&in, &p, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "w2_weight_scale"));
}
END_TEST

/* bf16: two-byte elements padded and shuffled, values untouched. */
START_TEST(bf16_layout)
{
    fmoe_rng r = fmoe_rng_for(5);
    const uint32_t E = 2, H = 33, I = 20;
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    uint16_t *w13 = malloc(2 * n13), *w2 = malloc(2 * n2);
    for (size_t i = 0; i < n13; i++)
        w13[i] = (uint16_t)(1 + (fmoe_rng_u64(&r) & 0x3FFF));
    for (size_t i = 0; i < n2; i++)
        w2[i] = (uint16_t)(1 + (fmoe_rng_u64(&r) & 0x3FFF));
    fmro_prepare_in in = {.quant = FMRO_Q_BF16, .experts = E, .hidden = H, .inter = I, .w13 = w13, .w2 = w2};
    fmro_prepared p;
    char why[256];
    ck_assert_msg(fmro_prepare(&in, &p, why, sizeof why) == 0, "%s", why);
    uint32_t Hp = p.hidden_pad, Ip = p.inter_pad;
    ck_assert_uint_eq(p.w13_bytes, (size_t)E * 2 * Ip * Hp * 2);
    uint16_t *u13 = (uint16_t *)unshuffled(&p, 1, E, 2), *u2 = (uint16_t *)unshuffled(&p, 0, E, 2);
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t row = 0; row < 2 * I; row++)
            for (uint32_t c = 0; c < H; c++) {
                uint32_t to = row < I ? row : Ip + row - I;
                ck_assert_uint_eq(u13[((size_t)e * 2 * Ip + to) * Hp + c], w13[((size_t)e * 2 * I + row) * H + c]);
            }
    size_t zeros = 0;
    for (size_t i = 0; i < (size_t)E * Hp * Ip; i++)
        zeros += u2[i] == 0;
    ck_assert_uint_eq(zeros, (size_t)E * (Hp * Ip - H * I)); /* the padding, and no value (all are nonzero) */
    free(u13);
    free(u2);
    fmro_prepared_free(&p);
    free(w13);
    free(w2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_prepare");
    TCase *tc = tcase_create("prepare");
    tcase_add_test(tc, fp8_channel_elements);
    tcase_add_test(tc, fp8_tensor_requant_and_input_scales);
    tcase_add_test(tc, fp8_block_scales);
    tcase_add_test(tc, nan_code_refused);
    tcase_add_test(tc, bf16_layout);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
