/*
 * tests/test_refq_actq.c - the quantized reference's activation
 * fake-quantization of one row (core/reference_quant/refq_act.c,
 * fusedmoe/kit/refq.h): each kind's size rule, the per-tensor FP8 path with
 * a scale that is not finite (the oracle's NaN, not a failed forward), the
 * int8 per-row rule on hand values, and the refusals. The schemes' whole
 * layers are tested through the reference plugin in tests/reference_quant.
 *
 * Expected values are worked by hand below each case.
 */
#include <math.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/refq.h"
#include "test_util.h"

static float scratch_f[64];
#define SCRATCH ((uint8_t *)scratch_f) /* REFQ_ACTQ_SCRATCH(4) = 96 bytes, 8-aligned */

START_TEST(each_kind_states_its_column_multiple)
{
    /* NVFP4's scale blocks are 16 columns, MXFP4's 32; the others quantize any row. */
    const struct {
        int32_t kind;
        uint32_t multiple;
    } want[] = {
        {REFQ_A_NONE, 1},   {REFQ_A_FP8_TENSOR, 1}, {REFQ_A_FP8_TOKEN, 1},  {REFQ_A_FP8_GROUP, 1},
        {REFQ_A_NVFP4, 16}, {REFQ_A_MXFP4, 32},     {REFQ_A_INT8_TOKEN, 1}, {REFQ_A_INT8_ASYM, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        refq_actq q = {.kind = want[i].kind, .group = 128};
        ck_assert_msg(refq_actq_multiple(&q) == want[i].multiple, "kind %d: %u, expected %u", want[i].kind,
                      refq_actq_multiple(&q), want[i].multiple);
    }
}
END_TEST

/* Per-tensor FP8 with scale 0.5: 1 and 3 are the e4m3 codes 2 and 6, exact;
 * 0.65 / 0.5 = 1.3 lies between the codes 1.25 and 1.375 and rounds to the
 * nearer, 1.25 (0.625 back); 1000 / 0.5 clamps to 448 (224 back). */
START_TEST(fp8_tensor_rounds_and_clamps)
{
    float x[4] = {1.0f, 3.0f, 0.65f, -1000.0f};
    refq_actq q = {.kind = REFQ_A_FP8_TENSOR, .dynamic = 1};
    ck_assert_int_eq(refq_actq_row(&q, 0, 0.5f, x, 4, SCRATCH), 0);
    ck_assert_float_eq(x[0], 1.0f);
    ck_assert_float_eq(x[1], 3.0f);
    ck_assert_float_eq(x[2], 0.625f);
    ck_assert_float_eq(x[3], -224.0f);
}
END_TEST

/* An inf or NaN in a dynamic per-tensor input makes the one scale not
 * finite: every value a kernel computes from it is NaN, and so is the
 * oracle's row, without failing; likewise a scale of 0. */
START_TEST(fp8_tensor_scale_not_finite_gives_nan)
{
    const float scales[3] = {INFINITY, NAN, 0.0f};
    for (int s = 0; s < 3; s++) {
        float x[4] = {1.0f, -2.0f, 0.5f, 7.0f};
        refq_actq q = {.kind = REFQ_A_FP8_TENSOR, .dynamic = 1};
        ck_assert_int_eq(refq_actq_row(&q, 0, scales[s], x, 4, SCRATCH), 0);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(isnan(x[i]), "scale %g: x[%d] = %g, expected NaN", (double)scales[s], i, (double)x[i]);
    }
}
END_TEST

/* int8 per row, s = amax / 127, q = rint(x / s) (ties to even):
 *   {1, -0.5, 0.25, 127}: s = 1, q = {1, -0, 0, 127}, back the same values;
 *   {2, 1, -0.01}: s = 2/127, x/s = {127, 63.5, -0.635}, q = {127, 64, -1},
 *   back {2, 128/127 = 1.0078740157, -2/127 = -0.0157480315}. */
START_TEST(int8_token_hand_values)
{
    float a[4] = {1.0f, -0.5f, 0.25f, 127.0f};
    refq_actq q = {.kind = REFQ_A_INT8_TOKEN};
    ck_assert_int_eq(refq_actq_row(&q, 0, 0.0f, a, 4, SCRATCH), 0);
    ck_assert_float_eq(a[0], 1.0f);
    ck_assert_float_eq(a[1], 0.0f);
    ck_assert_float_eq(a[2], 0.0f);
    ck_assert_float_eq(a[3], 127.0f);
    float b[3] = {2.0f, 1.0f, -0.01f};
    ck_assert_int_eq(refq_actq_row(&q, 0, 0.0f, b, 3, SCRATCH), 0);
    ck_assert_float_eq_tol(b[0], 2.0f, 1e-6f);
    ck_assert_float_eq_tol(b[1], 1.0078740157f, 1e-6f);
    ck_assert_float_eq_tol(b[2], -0.0157480315f, 1e-8f);
}
END_TEST

/* What refq_actq_row refuses (-1): rows that are not whole scale blocks,
 * FP8 groups of 0 columns, an unknown kind. An empty row is done (0)
 * without touching anything. */
START_TEST(refusals_and_the_empty_row)
{
    float x[40];
    for (int i = 0; i < 40; i++)
        x[i] = 0.25f * (float)(i + 1);
    const float nv_global = 1.0f;
    refq_actq nv = {.kind = REFQ_A_NVFP4, .scale = &nv_global, .convention = FMOE_NVFP4_GLOBAL_DEQUANT};
    ck_assert_int_eq(refq_actq_row(&nv, 0, 0.0f, x, 8, SCRATCH), -1);
    refq_actq mx = {.kind = REFQ_A_MXFP4};
    ck_assert_int_eq(refq_actq_row(&mx, 0, 0.0f, x, 16, SCRATCH), -1);
    refq_actq grp = {.kind = REFQ_A_FP8_GROUP, .group = 0};
    ck_assert_int_eq(refq_actq_row(&grp, 0, 0.0f, x, 4, SCRATCH), -1);
    refq_actq bad = {.kind = 99};
    ck_assert_int_eq(refq_actq_row(&bad, 0, 0.0f, x, 4, SCRATCH), -1);
    ck_assert_int_eq(refq_actq_row(&bad, 0, 0.0f, x, 0, SCRATCH), 0);
    for (int i = 0; i < 40; i++)
        ck_assert_float_eq(x[i], 0.25f * (float)(i + 1)); /* the refusals wrote nothing */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("refq_actq");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, each_kind_states_its_column_multiple);
    tcase_add_test(tc, fp8_tensor_rounds_and_clamps);
    tcase_add_test(tc, fp8_tensor_scale_not_finite_gives_nan);
    tcase_add_test(tc, int8_token_hand_values);
    tcase_add_test(tc, refusals_and_the_empty_row);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
