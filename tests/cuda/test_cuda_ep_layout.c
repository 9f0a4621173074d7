/*
 * tests/cuda/test_cuda_ep_layout.c - the symmetric buffer of a CUDA EP
 * group (plugins/cuda/ep_layout.c), without a GPU:
 *   - two layouts worked out by hand (bf16 rows; FP8 rows with 1x128 scales);
 *   - the refusals, each naming its rule;
 *   - seeded random groups: regions aligned, in order, not overlapping, and
 *     each as large as its slots need.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/ep_layout.h"
#include "tests/test_util.h"

START_TEST(bf16_by_hand)
{
    fmcu_ep_layout L;
    char why[256];
    ck_assert_int_eq(fmcu_ep_layout_make(2, 4, 128, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, &L, why,
                                         sizeof why),
                     0);
    /* arrive 2x8 -> 256, arrive -> 512, count 2x4 -> 768, x 8 slots x 256 B,
     * no scales, ids and w 8 x 2 x 4 = 64 each, comb_y 8 x 256 B */
    ck_assert_uint_eq(L.disp_arrive, 0);
    ck_assert_uint_eq(L.comb_arrive, 256);
    ck_assert_uint_eq(L.count, 512);
    ck_assert_uint_eq(L.x, 768);
    ck_assert_uint_eq(L.scale, 2816);
    ck_assert_uint_eq(L.ids, 2816);
    ck_assert_uint_eq(L.w, 3072);
    ck_assert_uint_eq(L.comb_y, 3328);
    ck_assert_uint_eq(L.bytes, 5376);
    ck_assert_uint_eq(L.x_row_bytes, 256);
    ck_assert_uint_eq(L.y_row_bytes, 256);
    ck_assert_uint_eq(L.scales_per_row, 0);
}
END_TEST

START_TEST(fp8_block_by_hand)
{
    fmcu_ep_layout L;
    char why[256];
    ck_assert_int_eq(fmcu_ep_layout_make(2, 4, 256, 2, FMOE_DTYPE_F16, FMOE_EP_DISPATCH_FP8_BLOCK, &L, why, sizeof why),
                     0);
    /* x: 8 slots x 256 codes = 2048 -> 2816; scales 8 x 2 x 4 = 64 -> 3072;
     * ids -> 3328; w -> 3584; comb_y 8 x 512 B -> 7680 */
    ck_assert_uint_eq(L.x, 768);
    ck_assert_uint_eq(L.scale, 2816);
    ck_assert_uint_eq(L.ids, 3072);
    ck_assert_uint_eq(L.w, 3328);
    ck_assert_uint_eq(L.comb_y, 3584);
    ck_assert_uint_eq(L.bytes, 7680);
    ck_assert_uint_eq(L.x_row_bytes, 256);
    ck_assert_uint_eq(L.scales_per_row, 2);
    ck_assert_uint_eq(L.y_row_bytes, 512);
    ck_assert_int_eq(fmcu_ep_layout_make(3, 5, 256, 8, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_FP8_TOKEN, &L, why,
                                         sizeof why),
                     0);
    ck_assert_uint_eq(L.scales_per_row, 1);
    ck_assert_uint_eq(L.x_row_bytes, 256);
}
END_TEST

static void refused(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, int32_t dt, int32_t dispatch,
                    const char *words)
{
    fmcu_ep_layout L;
    char why[256] = "";
    ck_assert_int_eq(fmcu_ep_layout_make(size, max_tokens, hidden, top_k, dt, dispatch, &L, why, sizeof why), -1);
    ck_assert_msg(strstr(why, words) != NULL, "\"%s\" lacks \"%s\"", why, words);
}

START_TEST(refusals)
{
    refused(0, 4, 128, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "1..64 ranks");
    refused(65, 4, 128, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "1..64 ranks");
    refused(2, 0, 128, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "max_tokens_per_rank 0");
    refused(2, 4, 100, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "a multiple of 8");
    refused(2, 4, 128, 0, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "top_k 0");
    refused(2, 4, 128, 2, FMOE_DTYPE_F32, FMOE_EP_DISPATCH_ACTIVATION, "bf16 or f16");
    refused(2, 4, 200, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_FP8_BLOCK, "hidden % 128 == 0, hidden is 200");
    refused(2, 4, 128, 2, FMOE_DTYPE_BF16, 9, "dispatch kind 9");
    refused(2, 4, 128, 2, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_INVALID, "dispatch kind 0");
    refused(64, 1u << 30, 1u << 20, 8, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_ACTIVATION, "more than 2^40 bytes");
}
END_TEST

START_TEST(random_layouts)
{
    const uint64_t seed = fmoe_test_seed();
    fmoe_rng rng = fmoe_rng_for(1);
    for (int i = 0; i < 500; i++) {
        const uint32_t size = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 16),
                       max_tokens = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 300),
                       hidden = 128 * (1 + (uint32_t)(fmoe_rng_u64(&rng) % 60)),
                       top_k = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 10);
        const int32_t dt = fmoe_rng_u64(&rng) % 2 ? FMOE_DTYPE_BF16 : FMOE_DTYPE_F16,
                      dispatch = 1 + (int32_t)(fmoe_rng_u64(&rng) % 3);
        fmcu_ep_layout L;
        char why[256];
        ck_assert_msg(fmcu_ep_layout_make(size, max_tokens, hidden, top_k, dt, dispatch, &L, why, sizeof why) == 0,
                      "seed %llu: %s", (unsigned long long)seed, why);
        const uint64_t slots = (uint64_t)size * max_tokens;
        const uint64_t at[8] = {L.disp_arrive, L.comb_arrive, L.count, L.x, L.scale, L.ids, L.w, L.comb_y};
        const uint64_t need[8] = {8ull * size,
                                  8ull * size,
                                  4ull * size,
                                  slots * hidden * (dispatch == FMOE_EP_DISPATCH_ACTIVATION ? 2 : 1),
                                  slots * 4ull *
                                      (dispatch == 1   ? 0
                                       : dispatch == 2 ? 1
                                                       : hidden / 128),
                                  slots * top_k * 4ull,
                                  slots * top_k * 4ull,
                                  slots * hidden * 2ull};
        for (int r = 0; r < 8; r++) {
            ck_assert_msg(at[r] % FMCU_EP_ALIGN == 0, "seed %llu: region %d at %llu", (unsigned long long)seed, r,
                          (unsigned long long)at[r]);
            const uint64_t end = r < 7 ? at[r + 1] : L.bytes;
            ck_assert_msg(at[r] + need[r] <= end, "seed %llu: region %d overlaps the next", (unsigned long long)seed,
                          r);
        }
        ck_assert_uint_eq(L.bytes % FMCU_EP_ALIGN, 0);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_ep_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, bf16_by_hand);
    tcase_add_test(tc, fp8_block_by_hand);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, random_layouts);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
