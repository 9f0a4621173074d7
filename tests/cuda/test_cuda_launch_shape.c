/*
 * tests/cuda/test_cuda_launch_shape.c - the launch shapes of the quant
 * kernels and of the prefill tier's activation stage (with and without the
 * option prefill_warp_rows), and the prefill tier's grouped-GEMM tile kinds
 * (plugins/cuda/launch_shape.c). The expected shapes are the ones the H100
 * measurements chose (bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and
 * plan kernels", "Prefill: our grouped GEMM" and "Prefill: ping-pong and
 * overlapped GEMM kinds"),
 * worked out by hand from the rules in launch_shape.h. No GPU needed.
 */
#include <check.h>
#include <stdint.h>

#include "plugins/cuda/launch_shape.h"

#define CK_SHAPE(l, thr, c, sm, warp) \
    do { \
        ck_assert_uint_eq((l).threads, (thr)); \
        ck_assert_int_eq((l).ch, (c)); \
        ck_assert_uint_eq((l).smem, (sm)); \
        ck_assert_int_eq((l).warp_rows, (warp)); \
    } while (0)

/* The register path of quant_row.cuh holds 2 pieces of 8 values a thread:
 * rows of up to 4096 values fit 256 threads, longer ones get 1024. */
START_TEST(quant_blocks_by_row_length)
{
    ck_assert_uint_eq(fmcu_quant_threads(768), 256);  /* Qwen3-30B-A3B I */
    ck_assert_uint_eq(fmcu_quant_threads(2048), 256); /* Qwen3 H, DeepSeek-V3 I */
    ck_assert_uint_eq(fmcu_quant_threads(2880), 256); /* gpt-oss-120b */
    ck_assert_uint_eq(fmcu_quant_threads(4096), 256); /* Mixtral H */
    ck_assert_uint_eq(fmcu_quant_threads(4104), 1024);
    ck_assert_uint_eq(fmcu_quant_threads(7168), 1024);  /* DeepSeek-V3 H */
    ck_assert_uint_eq(fmcu_quant_threads(14336), 1024); /* Mixtral I */
}
END_TEST

/* Per-token rows of at most 4 chunks of 8 columns a lane are a warp's. */
START_TEST(per_token_rows_up_to_1024_columns_take_a_warp)
{
    /* Qwen3-30B-A3B: 96 chunks, 3 a lane. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 768, 1), 256u, 3, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 256, 1), 256u, 1, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 512, 1), 256u, 2, 0u, 1);
    /* 124 and 128 chunks: 4 a lane, the last lanes' fourth past the row at 992. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 992, 1), 256u, 4, 0u, 1);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1024, 1), 256u, 4, 0u, 1);
    /* 5 a lane: past the bound, a block (132 chunks, 2 a thread). */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1056, 1), 96u, 2, 0u, 0);
    /* DeepSeek-V3's 2048 (8 a lane: 1.75x slower as a warp's) keeps a block. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2048, 1), 128u, 2, 0u, 0);
    /* prefill_warp_rows = false: a block per row (main before the warp rows). */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 768, 0), 96u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 1024, 0), 128u, 1, 0u, 0);
}
END_TEST

START_TEST(block_rows_by_chunks)
{
    /* The other forms never take warp rows: Qwen3's I as bf16, tensor. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 768, 1), 96u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TENSOR, 768, 1), 96u, 1, 0u, 0);
    /* DeepSeek-V3 (256 chunks): 2 a thread, 128 threads. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2048, 1), 128u, 2, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 2048, 1), 128u, 2, 0u, 0);
    /* gpt-oss-120b (360 chunks): 4 a thread, 90 threads rounded to 96. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 2880, 1), 96u, 4, 0u, 0);
    /* 4096 (512 chunks): still one pass of 4 a thread. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 4096, 1), 128u, 4, 0u, 0);
    /* Mixtral (1792 chunks): 256 threads of 2 a pass; a per-token row waits
     * for its amax in 28 KiB of shared memory, the others need none. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TOKEN, 14336, 1), 256u, 2, 28672u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_BF16, 14336, 1), 256u, 2, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_TENSOR, 4736, 1), 256u, 2, 0u, 0);
}
END_TEST

START_TEST(block_scheme_takes_a_half_warp_per_group)
{
    /* Two 128-column groups a warp, 1 to 8 warps. */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 128, 1), 32u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 768, 1), 96u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 1152, 1), 160u, 1, 0u, 0); /* 9 groups: 5 warps */
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 2048, 1), 256u, 1, 0u, 0);
    CK_SHAPE(fmcu_act_shape(FMCU_ACT_GROUP, 14336, 1), 256u, 1, 0u, 0);
}
END_TEST

#define CK_KINDS(bf16, rows, H, want1, want2) \
    do { \
        int k1_ = -7, k2_ = -7; \
        fmcu_gg_kinds((bf16), (rows), (H), &k1_, &k2_); \
        ck_assert_int_eq(k1_, (want1)); \
        ck_assert_int_eq(k2_, (want2)); \
    } while (0)

START_TEST(grouped_gemm_kinds_of_the_grid_models)
{
    /* Rows per local expert M * k / E, H: GEMM1 promoted 192 columns in
     * fp8, fast 256 in bf16; GEMM2 128 columns below 128 rows, else 256,
     * unless 192 pads H less. */
    CK_KINDS(0, 512, 2048, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST); /* Qwen3-30B-A3B M=8192 */
    CK_KINDS(1, 512, 2048, FMCU_GG_N256_FAST, FMCU_GG_N256_FAST);
    CK_KINDS(0, 64, 2048, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST); /* Qwen3-30B-A3B M=1024 */
    CK_KINDS(1, 64, 2048, FMCU_GG_N256_FAST, FMCU_GG_N128_FAST);
    /* gpt-oss-120b, H = 2880: 15 tiles of 192 against 12 of 256 (3072) or 23 of 128 (2944). */
    CK_KINDS(0, 256, 2880, FMCU_GG_N192_PROMOTED, FMCU_GG_N192_FAST); /* M=8192 */
    CK_KINDS(0, 32, 2880, FMCU_GG_N192_PROMOTED, FMCU_GG_N192_FAST);  /* M=1024 */
    CK_KINDS(1, 256, 2880, FMCU_GG_N256_FAST, FMCU_GG_N192_FAST);
    /* Mixtral-8x7B M=1024 (256 rows, H = 4096: 22 tiles of 192 = 4224), DeepSeek-V3 M=1024 (32 rows, 7168). */
    CK_KINDS(0, 256, 4096, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
    CK_KINDS(0, 32, 7168, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST);
    /* The width changes at 128 rows. */
    CK_KINDS(0, 127, 2048, FMCU_GG_N192_PROMOTED, FMCU_GG_N128_FAST);
    CK_KINDS(0, 128, 2048, FMCU_GG_N192_PROMOTED, FMCU_GG_N256_FAST);
}
END_TEST

START_TEST(promoted_kinds)
{
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N192_PROMOTED), 1);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N256_FAST), 0);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N128_FAST), 0);
    ck_assert_int_eq(fmcu_gg_promoted(FMCU_GG_N192_FAST), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_launch_shape");
    TCase *tc = tcase_create("launch_shape");
    tcase_add_test(tc, quant_blocks_by_row_length);
    tcase_add_test(tc, per_token_rows_up_to_1024_columns_take_a_warp);
    tcase_add_test(tc, block_rows_by_chunks);
    tcase_add_test(tc, block_scheme_takes_a_half_warp_per_group);
    tcase_add_test(tc, grouped_gemm_kinds_of_the_grid_models);
    tcase_add_test(tc, promoted_kinds);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
