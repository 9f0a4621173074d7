/*
 * tests/cuda/test_cuda_tier.c - the GEMM tier a call of m tokens gets
 * (plugins/cuda/tier.c), and FMOE_CUDA_TIER's parsing. No GPU needed.
 */
#include <check.h>
#include <string.h>

#include "plugins/cuda/tier.h"

START_TEST(auto_tier_follows_rows_per_expert)
{
    /* Qwen3-30B-A3B: 128 experts, top-8. 16 rows per expert at m = 256. */
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(256, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(272, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_gemm_tier(272, 8, 128, FMCU_TIER_AUTO, 0), FMCU_TIER_TILED);
    /* Mixtral: 8 experts, top-2: 16 rows per expert at m = 64. */
    ck_assert_int_eq(fmcu_gemm_tier(64, 2, 8, FMCU_TIER_AUTO, 0), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(128, 2, 8, FMCU_TIER_AUTO, 0), FMCU_TIER_TILED);
    /* An EP rank with no local experts still answers. */
    ck_assert_int_eq(fmcu_gemm_tier(4, 2, 0, FMCU_TIER_AUTO, 0), FMCU_TIER_STREAM);
}
END_TEST

START_TEST(forced_tier_wins_unless_it_cannot_run)
{
    ck_assert_int_eq(fmcu_gemm_tier(8192, 8, 128, FMCU_TIER_STREAM, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_TILED, 1), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_PREFILL, 1), FMCU_TIER_PREFILL);
    /* The prefill path does not serve the layer: the tiled kernels do. */
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_PREFILL, 0), FMCU_TIER_TILED);
}
END_TEST

START_TEST(env_values)
{
    int tier = 99;
    char why[128] = "";
    ck_assert_int_eq(fmcu_tier_parse(NULL, &tier, why, sizeof why), 0);
    ck_assert_int_eq(tier, FMCU_TIER_AUTO);
    ck_assert_int_eq(fmcu_tier_parse("", &tier, why, sizeof why), 0);
    ck_assert_int_eq(tier, FMCU_TIER_AUTO);
    const char *names[] = {"auto", "tiled", "stream", "prefill"};
    const int tiers[] = {FMCU_TIER_AUTO, FMCU_TIER_TILED, FMCU_TIER_STREAM, FMCU_TIER_PREFILL};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(fmcu_tier_parse(names[i], &tier, why, sizeof why), 0);
        ck_assert_int_eq(tier, tiers[i]);
        ck_assert_str_eq(fmcu_tier_name(tier), names[i]);
    }
    tier = 7;
    ck_assert_int_eq(fmcu_tier_parse("Stream", &tier, why, sizeof why), -1);
    ck_assert_int_eq(tier, 7);
    ck_assert_str_eq(why, "FMOE_CUDA_TIER='Stream': expected auto, tiled, stream or prefill");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_tier");
    TCase *tc = tcase_create("tier");
    tcase_add_test(tc, auto_tier_follows_rows_per_expert);
    tcase_add_test(tc, forced_tier_wins_unless_it_cannot_run);
    tcase_add_test(tc, env_values);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
