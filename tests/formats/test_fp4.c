/*
 * tests/formats/test_fp4.c - FP4 e2m1 (all 16 codes, both encoders, nibble
 * order), UE8M0 (all 256 bytes, both encoders, int32 packings) and the
 * swizzled block-scale layout, against the independent tables; plus the
 * worked examples E7, E8, E9 and E16 of spec/formats.md §10.
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

START_TEST(test_e2m1_every_code)
{
    golden *g = golden_load("fp4.txt");
    float *want = golden_f32(g, "e2m1.decode", 16);
    for (int c = 0; c < 16; c++) {
        float v = fmoe_fp4_e2m1_decode((uint8_t)c);
        ck_assert_msg(bits(v) == bits(want[c]), "code %d: %a, want %a", c, v, want[c]);
        ck_assert_uint_eq(fmoe_fp4_e2m1_encode(v), c);                               /* -0 (0x8) included */
        ck_assert_uint_eq(bits(fmoe_fp4_e2m1_decode((uint8_t)(0xF0 | c))), bits(v)); /* high bits ignored */
    }
    free(want);
    golden_free(g);
}
END_TEST

START_TEST(test_e2m1_encode_table)
{
    golden *g = golden_load("fp4.txt");
    int64_t n;
    golden_u32(g, "e2m1.x", -1, &n);
    float *x = golden_f32(g, "e2m1.x", n);
    uint8_t *rne = golden_bytes(g, "e2m1.rne", n);
    uint8_t *rtz = golden_bytes(g, "e2m1.ties_to_zero", n);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(fmoe_fp4_e2m1_encode(x[i]) == rne[i], "rne(%a) = 0x%x, want 0x%x", x[i],
                      fmoe_fp4_e2m1_encode(x[i]), rne[i]);
        ck_assert_msg(fmoe_fp4_e2m1_encode_ties_to_zero(x[i]) == rtz[i], "ties_to_zero(%a) = 0x%x, want 0x%x", x[i],
                      fmoe_fp4_e2m1_encode_ties_to_zero(x[i]), rtz[i]);
    }
    free(x);
    free(rne);
    free(rtz);
    golden_free(g);
}
END_TEST

START_TEST(test_e2m1_rules)
{
    /* The tie table of spec §2.1, both rules. */
    static const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const uint8_t rne[7] = {0, 2, 2, 4, 4, 6, 6}, rtz[7] = {0, 1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 7; i++) {
        ck_assert_uint_eq(fmoe_fp4_e2m1_encode(ties[i]), rne[i]);
        ck_assert_uint_eq(fmoe_fp4_e2m1_encode(-ties[i]), 0x8 | rne[i]);
        ck_assert_uint_eq(fmoe_fp4_e2m1_encode_ties_to_zero(ties[i]), rtz[i]);
        ck_assert_uint_eq(fmoe_fp4_e2m1_encode_ties_to_zero(-ties[i]), rtz[i] ? (0x8 | rtz[i]) : 0);
    }
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode(-0.1f), 0x8); /* sign of zero kept */
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode_ties_to_zero(-0.1f), 0x0);
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode(7.0f), 0x7);
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode(-INFINITY), 0xF);
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode(NAN), 0x7);
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode_ties_to_zero(NAN), 0x0);
    ck_assert_uint_eq(fmoe_fp4_e2m1_encode_ties_to_zero(-100.0f), 0xF);
}
END_TEST

START_TEST(test_fp4_packing_order)
{
    golden *g = golden_load("fp4.txt");
    uint8_t *codes = golden_bytes(g, "e2m1.codes", 64);
    uint8_t *want = golden_bytes(g, "e2m1.packed", 32);
    uint8_t packed[32], back[64];
    fmoe_fp4_pack(codes, 64, packed);
    ck_assert_int_eq(memcmp(packed, want, 32), 0);
    fmoe_fp4_unpack(packed, 64, back);
    ck_assert_int_eq(memcmp(back, codes, 64), 0);
    /* Element 0 is the low nibble; an odd count leaves the last high nibble 0. */
    uint8_t three[3] = {0x1, 0x2, 0x3}, out[2] = {0xAA, 0xAA};
    fmoe_fp4_pack(three, 3, out);
    ck_assert_uint_eq(out[0], 0x21);
    ck_assert_uint_eq(out[1], 0x03);
    free(codes);
    free(want);
    golden_free(g);
}
END_TEST

START_TEST(test_ue8m0_every_byte)
{
    golden *g = golden_load("fp4.txt");
    float *want = golden_f32(g, "ue8m0.decode", 256);
    for (int b = 0; b < 256; b++) {
        float v = fmoe_ue8m0_decode((uint8_t)b);
        ck_assert_msg(golden_same_float(v, want[b]), "byte %d: %a, want %a", b, v, want[b]);
        /* Round trip: floor gives every byte back (0 and 255 included), ceil
         * every byte of [1, 254]. */
        ck_assert_uint_eq(fmoe_ue8m0_encode_floor(v), b);
        if (b >= 1 && b <= 254)
            ck_assert_uint_eq(fmoe_ue8m0_encode_ceil(v), b);
    }
    ck_assert_uint_eq(bits(fmoe_ue8m0_decode(0)), 0x00400000u); /* 2^-127, not 0.0 */
    ck_assert(isnan(fmoe_ue8m0_decode(255)));                   /* NaN, not inf */
    free(want);
    golden_free(g);
}
END_TEST

START_TEST(test_ue8m0_encode_table)
{
    golden *g = golden_load("fp4.txt");
    int64_t n;
    golden_u32(g, "ue8m0.x", -1, &n);
    float *x = golden_f32(g, "ue8m0.x", n);
    uint8_t *ceil_b = golden_bytes(g, "ue8m0.ceil", n);
    uint8_t *floor_b = golden_bytes(g, "ue8m0.floor", n);
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(fmoe_ue8m0_encode_ceil(x[i]) == ceil_b[i], "ceil(%a) = %u, want %u", x[i],
                      fmoe_ue8m0_encode_ceil(x[i]), ceil_b[i]);
        ck_assert_msg(fmoe_ue8m0_encode_floor(x[i]) == floor_b[i], "floor(%a) = %u, want %u", x[i],
                      fmoe_ue8m0_encode_floor(x[i]), floor_b[i]);
    }
    free(x);
    free(ceil_b);
    free(floor_b);
    golden_free(g);
}
END_TEST

START_TEST(test_ue8m0_pack_table)
{
    golden *g = golden_load("fp4.txt");
    uint8_t *exps = golden_bytes(g, "ue8m0.exps", 62);
    const uint32_t *want = golden_u32(g, "ue8m0.words", 16, NULL);
    uint32_t words[16];
    uint8_t back[62];
    fmoe_ue8m0_pack_int32(exps, 62, words);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(words[i], want[i]);
    fmoe_ue8m0_unpack_int32(words, 62, back);
    ck_assert_int_eq(memcmp(back, exps, 62), 0);
    free(exps);
    golden_free(g);
}
END_TEST

/* Every scale of a random matrix lands at a distinct in-range offset, and the
 * padding stays zero. */
START_TEST(test_swizzle_is_a_permutation)
{
    fmoe_rng rng = fmoe_rng_for(7);
    enum { ROWS = 200, SF_COLS = 10 };
    uint8_t linear[ROWS * SF_COLS];
    for (int i = 0; i < ROWS * SF_COLS; i++)
        linear[i] = (uint8_t)(1 + fmoe_rng_u64(&rng) % 255);
    int64_t bytes = fmoe_blockscale_swizzled_bytes(ROWS, SF_COLS);
    ck_assert_int_eq(bytes, 256 * 12);
    uint8_t *sw = malloc((size_t)bytes);
    ck_assert_int_eq(fmoe_blockscale_swizzle(ROWS, SF_COLS, linear, sw), FMOE_STATUS_OK);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < bytes; i++)
        nonzero += sw[i] != 0;
    ck_assert_int_eq(nonzero, ROWS * SF_COLS);
    for (int m = 0; m < ROWS; m++)
        for (int kb = 0; kb < SF_COLS; kb++) {
            int64_t off = fmoe_blockscale_swizzle_offset(m, kb, SF_COLS);
            ck_assert(off >= 0 && off < bytes);
            ck_assert_uint_eq(sw[off], linear[m * SF_COLS + kb]);
        }
    free(sw);
    ck_assert_int_eq(fmoe_blockscale_swizzle(0, 4, linear, NULL), FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* E7 - swizzled SF offsets. */
START_TEST(test_e7_swizzled_sf_offsets)
{
    ck_assert_int_eq(fmoe_blockscale_swizzle_offset(1, 1, 4), 17);
    ck_assert_int_eq(fmoe_blockscale_swizzle_offset(33, 2, 4), 22);
    ck_assert_int_eq(fmoe_blockscale_swizzle_offset(130, 5, 8), 1569);
    ck_assert_int_eq(fmoe_blockscale_swizzle_offset(0, 4, 8), 512);
}
END_TEST

/* E8 - MXFP4 / UE8M0 element and scale decoding. */
START_TEST(test_e8_mxfp4_ue8m0)
{
    uint8_t codes[2];
    fmoe_fp4_unpack((const uint8_t[]){0x5A}, 2, codes);
    ck_assert_float_eq(fmoe_fp4_e2m1_decode(codes[0]) * fmoe_ue8m0_decode(0x7F), -1.0f);
    ck_assert_float_eq(fmoe_fp4_e2m1_decode(codes[1]) * fmoe_ue8m0_decode(0x7F), 3.0f);
    ck_assert_float_eq(fmoe_fp4_e2m1_decode(codes[0]) * fmoe_ue8m0_decode(0x81), -4.0f);
    ck_assert_float_eq(fmoe_fp4_e2m1_decode(codes[1]) * fmoe_ue8m0_decode(0x81), 12.0f);
    ck_assert_float_eq(fmoe_ue8m0_decode(0x7F), 1.0f);
    ck_assert_float_eq(fmoe_ue8m0_decode(0x80), 2.0f);
    ck_assert_float_eq(fmoe_ue8m0_decode(0x81), 4.0f);
    ck_assert_float_eq(fmoe_ue8m0_decode(0xFE), 0x1p127f);
    /* The spec's values at the edges (the shift would give 0.0 and +inf). */
    ck_assert_float_eq(fmoe_ue8m0_decode(0x00), 0x1p-127f);
    ck_assert(isnan(fmoe_ue8m0_decode(0xFF)));
    /* DeepGEMM weight block amax 10: sf = ceil_pow2(10/6) = 2.0, byte 128. */
    ck_assert_uint_eq(fmoe_ue8m0_encode_ceil(10.0f / 6.0f), 128);
}
END_TEST

/* E9 - packed UE8M0 int32. */
START_TEST(test_e9_packed_ue8m0_int32)
{
    const uint8_t exps[8] = {127, 128, 126, 127, 120, 121, 122, 123};
    uint32_t words[2];
    fmoe_ue8m0_pack_int32(exps, 8, words);
    ck_assert_uint_eq(words[0], 0x7F7E807Fu);
    ck_assert_uint_eq(words[1], 0x7B7A7978u);
}
END_TEST

/* E16 - DeepGEMM SF layout: fp32 sf [1, 5, 8] (k = 256, gran 32) -> int32
 * [1, 5, 2] with strides (16, 1, 8): word (m, w) at offset 8w + m. */
START_TEST(test_e16_deepgemm_sf_layout)
{
    enum { MN = 5, SF_K = 8 };
    uint8_t exps[MN * SF_K];
    for (int m = 0; m < MN; m++)
        for (int k = 0; k < SF_K; k++) /* power-of-two f32 scales, as DeepGEMM requires */
            exps[m * SF_K + k] = fmoe_ue8m0_encode_floor(ldexpf(1.0f, m - k));
    ck_assert_int_eq(fmoe_ue8m0_mn_major_words(MN, SF_K), 16);
    uint32_t words[16];
    memset(words, 0xFF, sizeof words);
    ck_assert_int_eq(fmoe_ue8m0_pack_mn_major(MN, SF_K, exps, words), FMOE_STATUS_OK);
    for (int w = 0; w < 2; w++) {
        for (int m = 0; m < MN; m++) {
            uint32_t expect;
            fmoe_ue8m0_pack_int32(&exps[m * SF_K + 4 * w], 4, &expect);
            ck_assert_uint_eq(words[8 * w + m], expect);
        }
        for (int m = MN; m < 8; m++) /* TMA padding rows */
            ck_assert_uint_eq(words[8 * w + m], 0);
    }
    ck_assert_uint_eq(words[8 * 1 + 2] & 0xFF, 127 + 2 - 4); /* (m=2, group 4): 2^(2-4) */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("formats_fp4");
    TCase *tc = tcase_create("fp4_ue8m0");
    tcase_add_test(tc, test_e2m1_every_code);
    tcase_add_test(tc, test_e2m1_encode_table);
    tcase_add_test(tc, test_e2m1_rules);
    tcase_add_test(tc, test_fp4_packing_order);
    tcase_add_test(tc, test_ue8m0_every_byte);
    tcase_add_test(tc, test_ue8m0_encode_table);
    tcase_add_test(tc, test_ue8m0_pack_table);
    tcase_add_test(tc, test_swizzle_is_a_permutation);
    suite_add_tcase(s, tc);
    TCase *ex = tcase_create("worked_examples");
    tcase_add_test(ex, test_e7_swizzled_sf_offsets);
    tcase_add_test(ex, test_e8_mxfp4_ue8m0);
    tcase_add_test(ex, test_e9_packed_ue8m0_int32);
    tcase_add_test(ex, test_e16_deepgemm_sf_layout);
    suite_add_tcase(s, ex);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 12);
}
