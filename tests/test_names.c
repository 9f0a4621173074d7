/*
 * tests/test_names.c - the stable names of every public enumeration: each
 * value round-trips through name/from_name, unknown values and names give
 * "unknown" / the INVALID value, and dtype sizes match hand-written sizes.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

typedef struct named {
    int32_t value;
    const char *name;
} named;

START_TEST(test_version)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FUSEDMOE_VERSION_MAJOR, FUSEDMOE_VERSION_MINOR, FUSEDMOE_VERSION_PATCH);
    ck_assert_str_eq(fmoe_version(), want);
}
END_TEST

START_TEST(test_status_names)
{
    static const named want[] = {
        {FMOE_STATUS_OK, "ok"},
        {FMOE_STATUS_UNSUPPORTED, "unsupported"},
        {FMOE_STATUS_INVALID_ARGUMENT, "invalid-argument"},
        {FMOE_STATUS_OUT_OF_MEMORY, "out-of-memory"},
        {FMOE_STATUS_NOT_FOUND, "not-found"},
        {FMOE_STATUS_IO_ERROR, "io-error"},
        {FMOE_STATUS_PARSE_ERROR, "parse-error"},
        {FMOE_STATUS_ABI_MISMATCH, "abi-mismatch"},
        {FMOE_STATUS_PLUGIN_ERROR, "plugin-error"},
        {FMOE_STATUS_DEVICE_ERROR, "device-error"},
        {FMOE_STATUS_BAD_STATE, "bad-state"},
        {FMOE_STATUS_INTERNAL, "internal"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_str_eq(fmoe_status_name(want[i].value), want[i].name);
    ck_assert_str_eq(fmoe_status_name(-1), "unknown");
    ck_assert_str_eq(fmoe_status_name(12), "unknown");
    ck_assert_str_eq(fmoe_status_name(INT32_MAX), "unknown");
}
END_TEST

START_TEST(test_dtype_names_and_sizes)
{
    static const struct {
        fmoe_dtype dtype;
        const char *name;
        size_t size;
    } want[] = {
        {FMOE_DTYPE_F32, "f32", 4},
        {FMOE_DTYPE_BF16, "bf16", 2},
        {FMOE_DTYPE_F16, "f16", 2},
        {FMOE_DTYPE_F64, "f64", 8},
        {FMOE_DTYPE_FP8_E4M3FN, "fp8_e4m3fn", 1},
        {FMOE_DTYPE_FP8_E4M3FNUZ, "fp8_e4m3fnuz", 1},
        {FMOE_DTYPE_FP8_E5M2, "fp8_e5m2", 1},
        {FMOE_DTYPE_INT8, "int8", 1},
        {FMOE_DTYPE_UINT8, "uint8", 1},
        {FMOE_DTYPE_INT32, "int32", 4},
        {FMOE_DTYPE_INT64, "int64", 8},
        {FMOE_DTYPE_FP4_E2M1X2, "fp4_e2m1x2", 1},
        {FMOE_DTYPE_UE8M0, "ue8m0", 1},
        {FMOE_DTYPE_INT4, "int4", 0},
    };
    size_t n = sizeof want / sizeof want[0];
    /* Every value between INVALID and COUNT_ is covered: a dtype appended to
     * common.h without a name here fails this test. */
    ck_assert_uint_eq(n, FMOE_DTYPE_COUNT_ - 1);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(want[i].dtype, (int32_t)i + 1);
        ck_assert_str_eq(fmoe_dtype_name(want[i].dtype), want[i].name);
        ck_assert_int_eq(fmoe_dtype_from_name(want[i].name), want[i].dtype);
        ck_assert_uint_eq(fmoe_dtype_size(want[i].dtype), want[i].size);
    }
    ck_assert_str_eq(fmoe_dtype_name(FMOE_DTYPE_INVALID), "unknown");
    ck_assert_str_eq(fmoe_dtype_name(FMOE_DTYPE_COUNT_), "unknown");
    ck_assert_str_eq(fmoe_dtype_name(-1), "unknown");
    ck_assert_uint_eq(fmoe_dtype_size(FMOE_DTYPE_INVALID), 0);
    ck_assert_uint_eq(fmoe_dtype_size(FMOE_DTYPE_COUNT_), 0);
    ck_assert_uint_eq(fmoe_dtype_size(-7), 0);
}
END_TEST

START_TEST(test_dtype_aliases_and_unknowns)
{
    static const named aliases[] = {
        {FMOE_DTYPE_F32, "float32"},
        {FMOE_DTYPE_F32, "float"},
        {FMOE_DTYPE_BF16, "bfloat16"},
        {FMOE_DTYPE_F16, "float16"},
        {FMOE_DTYPE_F16, "half"},
        {FMOE_DTYPE_F64, "float64"},
        {FMOE_DTYPE_F64, "double"},
        {FMOE_DTYPE_FP8_E4M3FN, "float8_e4m3fn"},
        {FMOE_DTYPE_FP8_E4M3FNUZ, "float8_e4m3fnuz"},
        {FMOE_DTYPE_FP8_E5M2, "float8_e5m2"},
        {FMOE_DTYPE_FP4_E2M1X2, "float4_e2m1fn_x2"},
        {FMOE_DTYPE_UE8M0, "float8_e8m0fnu"},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        ck_assert_int_eq(fmoe_dtype_from_name(aliases[i].name), aliases[i].value);
    /* Names are exact: no case folding, no prefixes, no whitespace. */
    static const char *const unknown[] = {"", "F32", "BF16", "torch.float32", "f32 ", "fp8", "int", "unknown"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ck_assert_int_eq(fmoe_dtype_from_name(unknown[i]), FMOE_DTYPE_INVALID);
    ck_assert_int_eq(fmoe_dtype_from_name(NULL), FMOE_DTYPE_INVALID);
}
END_TEST

START_TEST(test_activation_names)
{
    static const named want[] = {
        {FMOE_ACT_SILU, "silu"},   {FMOE_ACT_GELU, "gelu"},           {FMOE_ACT_GELU_TANH, "gelu_tanh"},
        {FMOE_ACT_RELU2, "relu2"}, {FMOE_ACT_SWIGLUOAI, "swigluoai"}, {FMOE_ACT_SWIGLUSTEP, "swiglustep"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_str_eq(fmoe_activation_name(want[i].value), want[i].name);
        ck_assert_int_eq(fmoe_activation_from_name(want[i].name), want[i].value);
    }
    ck_assert_int_eq(fmoe_activation_from_name("gelu_pytorch_tanh"), FMOE_ACT_GELU_TANH);
    ck_assert_str_eq(fmoe_activation_name(FMOE_ACT_INVALID), "unknown");
    ck_assert_str_eq(fmoe_activation_name(7), "unknown");
    ck_assert_int_eq(fmoe_activation_from_name("swiglu"), FMOE_ACT_INVALID);
    ck_assert_int_eq(fmoe_activation_from_name("SILU"), FMOE_ACT_INVALID);
    ck_assert_int_eq(fmoe_activation_from_name(""), FMOE_ACT_INVALID);
    ck_assert_int_eq(fmoe_activation_from_name(NULL), FMOE_ACT_INVALID);
}
END_TEST

START_TEST(test_scoring_names)
{
    static const named want[] = {
        {FMOE_SCORING_SOFTMAX, "softmax"},
        {FMOE_SCORING_SIGMOID, "sigmoid"},
        {FMOE_SCORING_SQRTSOFTPLUS, "sqrtsoftplus"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_str_eq(fmoe_scoring_name(want[i].value), want[i].name);
        ck_assert_int_eq(fmoe_scoring_from_name(want[i].name), want[i].value);
    }
    ck_assert_str_eq(fmoe_scoring_name(FMOE_SCORING_INVALID), "unknown");
    ck_assert_str_eq(fmoe_scoring_name(4), "unknown");
    ck_assert_int_eq(fmoe_scoring_from_name("softplus"), FMOE_SCORING_INVALID);
    ck_assert_int_eq(fmoe_scoring_from_name(""), FMOE_SCORING_INVALID);
    ck_assert_int_eq(fmoe_scoring_from_name(NULL), FMOE_SCORING_INVALID);
}
END_TEST

START_TEST(test_device_kind_names)
{
    ck_assert_str_eq(fmoe_device_kind_name(FMOE_DEVICE_ANY), "any");
    ck_assert_str_eq(fmoe_device_kind_name(FMOE_DEVICE_CPU), "cpu");
    ck_assert_str_eq(fmoe_device_kind_name(FMOE_DEVICE_CUDA), "cuda");
    ck_assert_str_eq(fmoe_device_kind_name(FMOE_DEVICE_ROCM), "rocm");
    ck_assert_str_eq(fmoe_device_kind_name(3), "unknown");
    ck_assert_str_eq(fmoe_device_kind_name(-2), "unknown");
}
END_TEST

/* Name lookups cannot fail, so they keep the error text: an application may
 * print fmoe_status_name(st) and fmoe_last_error() in one printf. */
START_TEST(test_names_keep_error_text)
{
    fmoe_error_set(FMOE_STATUS_NOT_FOUND, "plugin \"x\" not found");
    ck_assert_str_eq(fmoe_status_name(FMOE_STATUS_NOT_FOUND), "not-found");
    fmoe_dtype_name(FMOE_DTYPE_BF16);
    fmoe_dtype_from_name("bf16");
    fmoe_dtype_size(FMOE_DTYPE_BF16);
    fmoe_activation_name(FMOE_ACT_SILU);
    fmoe_activation_from_name("silu");
    fmoe_scoring_name(FMOE_SCORING_SOFTMAX);
    fmoe_scoring_from_name("softmax");
    fmoe_device_kind_name(FMOE_DEVICE_CPU);
    fmoe_version();
    ck_assert_str_eq(fmoe_last_error(), "plugin \"x\" not found");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_status_names);
    tcase_add_test(tc, test_dtype_names_and_sizes);
    tcase_add_test(tc, test_dtype_aliases_and_unknowns);
    tcase_add_test(tc, test_activation_names);
    tcase_add_test(tc, test_scoring_names);
    tcase_add_test(tc, test_device_kind_names);
    tcase_add_test(tc, test_names_keep_error_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 8);
}
