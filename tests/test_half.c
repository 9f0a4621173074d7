/*
 * tests/test_half.c - fusedmoe/kit/half.h, the f32 <-> bf16/f16 conversions shared
 * by the reference math, the plugins and the CLI: round-to-nearest-even at
 * the ties, subnormals, overflow to inf, NaN kept, and every one of the
 * 65536 16-bit patterns round-tripping.
 */
#include <math.h>
#include <string.h>

#include "fusedmoe/kit/half.h"
#include "tests/test_util.h"

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

START_TEST(test_bf16_rounding)
{
    ck_assert_uint_eq(fmoe_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(fmoe_f32_to_bf16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one. */
    ck_assert_uint_eq(fmoe_f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);
    ck_assert_uint_eq(fmoe_f32_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);
    ck_assert_uint_eq(fmoe_f32_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3f81);
    ck_assert_uint_eq(fmoe_f32_to_bf16(INFINITY), 0x7f80);
    ck_assert(isnan(fmoe_bf16_to_f32(fmoe_f32_to_bf16(NAN))));
    /* Every bf16 value survives a round trip through f32. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = fmoe_bf16_to_f32((uint16_t)h);
        if (isnan(f))
            ck_assert(isnan(fmoe_bf16_to_f32(fmoe_f32_to_bf16(f))));
        else
            ck_assert_uint_eq(fmoe_f32_to_bf16(f), h);
    }
}
END_TEST

START_TEST(test_f16_rounding)
{
    ck_assert_uint_eq(fmoe_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(fmoe_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(fmoe_f32_to_f16(65504.0f), 0x7bff); /* largest finite */
    ck_assert_uint_eq(fmoe_f32_to_f16(65519.99f), 0x7bff);
    ck_assert_uint_eq(fmoe_f32_to_f16(65520.0f), 0x7c00);       /* rounds to inf */
    ck_assert_uint_eq(fmoe_f32_to_f16(0x1.0p-14f), 0x0400);     /* smallest normal */
    ck_assert_uint_eq(fmoe_f32_to_f16(0x1.0p-24f), 0x0001);     /* smallest subnormal */
    ck_assert_uint_eq(fmoe_f32_to_f16(0x1.0p-25f), 0x0000);     /* tie to even: zero */
    ck_assert_uint_eq(fmoe_f32_to_f16(3 * 0x1.0p-25f), 0x0002); /* tie to even: 2 */
    ck_assert_uint_eq(fmoe_f32_to_f16(-0x1.0p-26f), 0x8000);
    ck_assert_uint_eq(fmoe_f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00); /* tie to even */
    ck_assert_uint_eq(fmoe_f32_to_f16(1.0f + 3 * 0x1.0p-11f), 0x3c02);
    ck_assert(isnan(fmoe_f16_to_f32(fmoe_f32_to_f16(NAN))));
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = fmoe_f16_to_f32((uint16_t)h);
        if (isnan(f))
            ck_assert(isnan(fmoe_f16_to_f32(fmoe_f32_to_f16(f))));
        else
            ck_assert_uint_eq(fmoe_f32_to_f16(f), h);
    }
    ck_assert_uint_eq(bits(fmoe_f16_to_f32(0x0001)), bits(0x1.0p-24f));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("half");
    tcase_add_test(tc, test_bf16_rounding);
    tcase_add_test(tc, test_f16_rounding);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 2);
}
