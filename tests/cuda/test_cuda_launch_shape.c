/*
 * tests/cuda/test_cuda_launch_shape.c - the launch shapes of the plan, of the
 * quant kernels and of the prefill tier's activation stage, the prefill tier's grouped-GEMM tile
 * kinds (plugins/cuda/launch_shape.c), and their environment knobs. The expected shapes are the ones the H100
 * measurements chose (bench/cuda/act2-2026-11-23, bench/cuda/plan-2026-11-23,
 * bench/cuda/own-fp8-2026-11-22, bench/cuda/pingpong-2026-11-22),
 * worked out by hand from the rules in launch_shape.h. No GPU needed.
 */
#include <check.h>
#include <stdint.h>

#include "plugins/cuda/launch_shape.h"

#define CK_SHAPE(l, thr, c, sm, warp)                                                                                  \
    do {                                                                                                               \
        ck_assert_uint_eq((l).threads, (thr));                                                                         \
        ck_assert_int_eq((l).ch, (c));                                                                                 \
        ck_assert_uint_eq((l).smem, (sm));                                                                             \
        ck_assert_int_eq((l).warp_rows, (warp));                                                                       \
    } while (0)

START_TEST(plan_goes_wide_from_8192_pairs)
{
    ck_assert_int_eq(fmcu_plan_wide_pairs(NULL), 8192);
    ck_assert_int_eq(fmcu_plan_wide_pairs(""), 8192);
    ck_assert_int_eq(fmcu_plan_wide_pairs("1"), 1);
    ck_assert_int_eq(fmcu_plan_wide_pairs("65536"), 65536);
    /* 0 or less: never. */
    ck_assert_int_eq(fmcu_plan_wide_pairs("0"), INT64_MAX);
    ck_assert_int_eq(fmcu_plan_wide_pairs("-5"), INT64_MAX);
    /* Not a whole number: the default, not a misread prefix. */
    ck_assert_int_eq(fmcu_plan_wide_pairs("wide"), 8192);
    ck_assert_int_eq(fmcu_plan_wide_pairs("12x"), 8192);
    ck_assert_int_eq(fmcu_plan_wide_pairs("99999999999999999999999"), 8192);
}
END_TEST

/* The register path of quant_row.cuh holds 2 pieces of 8 values a thread:
 * rows of up to 4096 values fit 256 threads, longer ones get 1024. */
START_TEST(quant_blocks_by_row_length)
{
    ck_assert_uint_eq(fmcu_quant_threads(768), 256);   /* Qwen3-30B-A3B I */
    ck_assert_uint_eq(fmcu_quant_threads(2048), 256);  /* Qwen3 H, DeepSeek-V3 I */
    ck_assert_uint_eq(fmcu_quant_threads(2880), 256);  /* gpt-oss-120b */
    ck_assert_uint_eq(fmcu_quant_threads(4096), 256);  /* Mixtral H */
    ck_assert_uint_eq(fmcu_quant_threads(4104), 1024);
    ck_assert_uint_eq(fmcu_quant_threads(7168), 1024); /* DeepSeek-V3 H */
    ck_assert_uint_eq(fmcu_quant_threads(14336), 1024); /* Mixtral I */
}
END_TEST

START_TEST(warp_cap_from_the_environment)
{
    ck_assert_int_eq(fmcu_act_warp_cap(NULL), 4);
    ck_assert_int_eq(fmcu_act_warp_cap(""), 4);
    ck_assert_int_eq(fmcu_act_warp_cap("0"), 0);
    ck_assert_int_eq(fmcu_act_warp_cap("3"), 3);
    ck_assert_int_eq(fmcu_act_warp_cap("8"), 8);
    ck_assert_int_eq(fmcu_act_warp_cap("12"), 8);
    ck_assert_int_eq(fmcu_act_warp_cap("-1"), 0);
    ck_assert_int_eq(fmcu_act_warp_cap("on"), 4);
}
END_TEST

/* Per-token rows of at most 4 chunks of 8 columns a lane are a warp's. */
START_TEST(per_token_rows_up_to_1024_columns_take_a_warp)
{
    /* Qwen3-30B-A3B: 96 chunks, 3 a lane. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 768, 4), 256u, 3, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 256, 4), 256u, 1, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 512, 4), 256u, 2, 0u, 1);
    /* 124 and 128 chunks: 4 a lane, the last lanes' fourth past the row at 992. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 992, 4), 256u, 4, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1024, 4), 256u, 4, 0u, 1);
    /* 5 a lane would be 6: past the default bound, a block (132 chunks, 2 a thread). */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1056, 4), 96u, 2, 0u, 0);
    /* A higher bound (FMCU_PF_ACT_WARP=8) takes DeepSeek-V3's 2048 (8 a lane), 1152 at 6. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2048, 8), 256u, 8, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1152, 8), 256u, 6, 0u, 1);
    /* More than 8 a lane is never a warp's. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2880, 8), 96u, 4, 0u, 0);
    /* Bound 0: a block per row (main before the warp rows). */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 768, 0), 96u, 1, 0u, 0);
}
END_TEST

START_TEST(block_rows_by_chunks)
{
    /* The other forms never take warp rows: Qwen3's I as bf16, tensor. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 768, 8), 96u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TENSOR, 768, 8), 96u, 1, 0u, 0);
    /* DeepSeek-V3 (256 chunks): 2 a thread, 128 threads. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2048, 4), 128u, 2, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 2048, 4), 128u, 2, 0u, 0);
    /* gpt-oss-120b (360 chunks): 4 a thread, 90 threads rounded to 96. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2880, 4), 96u, 4, 0u, 0);
    /* 4096 (512 chunks): still one pass of 4 a thread. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 4096, 4), 128u, 4, 0u, 0);
    /* Mixtral (1792 chunks): 256 threads of 2 a pass; a per-token row waits
     * for its amax in 28 KiB of shared memory, the others need none. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 14336, 4), 256u, 2, 28672u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 14336, 4), 256u, 2, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TENSOR, 4736, 4), 256u, 2, 0u, 0);
}
END_TEST

START_TEST(block_scheme_takes_a_half_warp_per_group)
{
    /* Two 128-column groups a warp, 1 to 8 warps. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 128, 4), 32u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 768, 4), 96u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 1152, 4), 160u, 1, 0u, 0); /* 9 groups: 5 warps */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 2048, 4), 256u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 14336, 4), 256u, 1, 0u, 0);
}
END_TEST

#define CK_KINDS(bf16, rows, H, env, want1, want2)                                                                    \
    do {                                                                                                               \
        int k1_ = -7, k2_ = -7;                                                                                        \
        fmcu_gg_kinds((bf16), (rows), (H), (env), &k1_, &k2_);                                                         \
        ck_assert_int_eq(k1_, (want1));                                                                                \
        ck_assert_int_eq(k2_, (want2));                                                                                \
    } while (0)

START_TEST(grouped_gemm_kinds_of_the_grid_models)
{
    /* Rows per local expert M * k / E, H: GEMM1 promoted 192 columns in
     * fp8, fast 256 in bf16; GEMM2 128 columns below 128 rows, else 256,
     * unless 192 pads H less. */
    CK_KINDS(0, 512, 2048, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST); /* Qwen3-30B-A3B M=8192 */
    CK_KINDS(1, 512, 2048, NULL, FMCU_GG_N256_FAST, FMCU_GG_N256_FAST);
    CK_KINDS(0, 64, 2048, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST);  /* Qwen3-30B-A3B M=1024 */
    CK_KINDS(1, 64, 2048, NULL, FMCU_GG_N256_FAST, FMCU_GG_N128_FAST);
    /* gpt-oss-120b, H = 2880: 15 tiles of 192 against 12 of 256 (3072) or 23 of 128 (2944). */
    CK_KINDS(0, 256, 2880, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N192_FAST); /* M=8192 */
    CK_KINDS(0, 32, 2880, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N192_FAST);  /* M=1024 */
    CK_KINDS(1, 256, 2880, NULL, FMCU_GG_N256_FAST, FMCU_GG_N192_FAST);
    /* Mixtral-8x7B M=1024 (256 rows, H = 4096: 22 tiles of 192 = 4224), DeepSeek-V3 M=1024 (32 rows, 7168). */
    CK_KINDS(0, 256, 4096, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
    CK_KINDS(0, 32, 7168, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST);
    /* The width changes at 128 rows. */
    CK_KINDS(0, 127, 2048, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST);
    CK_KINDS(0, 128, 2048, NULL, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
}
END_TEST

START_TEST(grouped_gemm_kinds_from_fmcu_pf_own)
{
    /* Two characters, GEMM1's then GEMM2's: a kind's digit or c (CUTLASS). */
    CK_KINDS(0, 512, 2048, "cc", -1, -1);
    CK_KINDS(0, 512, 2048, "03", FMCU_GG_N128_PROMOTED, FMCU_GG_N128_FAST);
    CK_KINDS(0, 512, 2048, "c4", -1, FMCU_GG_N192_FAST);
    CK_KINDS(1, 512, 2048, "34", FMCU_GG_N128_FAST, FMCU_GG_N192_FAST);
    /* bf16 takes no promoted kind: that digit leaves the choice as it was. */
    CK_KINDS(1, 512, 2048, "03", FMCU_GG_N256_FAST, FMCU_GG_N128_FAST);
    CK_KINDS(1, 64, 2048, "1c", FMCU_GG_N256_FAST, -1);
    /* Not a kind, or not two characters: the choice as it was. */
    CK_KINDS(0, 512, 2048, "x2", FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
    CK_KINDS(0, 512, 2048, "39", FMCU_GG_N128_FAST, FMCU_GG_N256_FAST);
    CK_KINDS(0, 512, 2048, "3", FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
    CK_KINDS(0, 512, 2048, "333", FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
    CK_KINDS(0, 512, 2048, "", FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
}
END_TEST

START_TEST(promoted_kinds)
{
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N128_PROMOTED), 1);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N192_PROMOTED), 1);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N256_FAST), 0);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N128_FAST), 0);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N192_FAST), 0);
}
END_TEST

START_TEST(grouped_gemm_knobs_from_the_environment)
{
    ck_assert_int_eq(fmcu_gg_order(NULL), FMCU_GG_ORDER_AUTO);
    ck_assert_int_eq(fmcu_gg_order(""), FMCU_GG_ORDER_AUTO);
    ck_assert_int_eq(fmcu_gg_order("fixed"), FMCU_GG_ORDER_FIXED);
    ck_assert_int_eq(fmcu_gg_order("counter"), FMCU_GG_ORDER_COUNTER);
    /* Not a prefix match, and "default" is the kind's order. */
    ck_assert_int_eq(fmcu_gg_order("fixedx"), FMCU_GG_ORDER_AUTO);
    ck_assert_int_eq(fmcu_gg_order("default"), FMCU_GG_ORDER_AUTO);
    ck_assert_int_eq(fmcu_gg_whole_tiles(NULL), 0);
    ck_assert_int_eq(fmcu_gg_whole_tiles("1"), 0);
    ck_assert_int_eq(fmcu_gg_whole_tiles("0"), 1);
    ck_assert_int_eq(fmcu_gg_whole_tiles("00"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_launch_shape");
    TCase *tc = tcase_create("launch_shape");
    tcase_add_test(tc, plan_goes_wide_from_8192_pairs);
    tcase_add_test(tc, quant_blocks_by_row_length);
    tcase_add_test(tc, warp_cap_from_the_environment);
    tcase_add_test(tc, per_token_rows_up_to_1024_columns_take_a_warp);
    tcase_add_test(tc, block_rows_by_chunks);
    tcase_add_test(tc, block_scheme_takes_a_half_warp_per_group);
    tcase_add_test(tc, grouped_gemm_kinds_of_the_grid_models);
    tcase_add_test(tc, grouped_gemm_kinds_from_fmcu_pf_own);
    tcase_add_test(tc, promoted_kinds);
    tcase_add_test(tc, grouped_gemm_knobs_from_the_environment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
