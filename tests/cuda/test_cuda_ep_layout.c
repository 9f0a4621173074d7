/*
 * tests/cuda/test_cuda_ep_layout.c - the chunks, receive buffer and send
 * staging of a CUDA EP group (plugins/cuda/ep_layout.c), without a GPU:
 *   - layouts worked out by hand (bf16 rows; FP8 rows with 1x128 and
 *     per-token scales; DeepSeek-V3's decode shape, whose bytes docs/EP.md
 *     quotes);
 *   - the refusals, each naming its rule;
 *   - seeded random groups: parts and regions aligned, in order, not
 *     overlapping, each as large as its slots need, and the collective
 *     transport's bytes per forward.
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
    /* dispatch chunk: count 4 B -> 16; x 4 rows x 256 B -> 1040; no scales;
     * ids 4 x 2 x 4 = 32 -> 1072; w 32 -> 1104, the chunk aligned to 1280 */
    ck_assert_uint_eq(L.c_count, 0);
    ck_assert_uint_eq(L.c_x, 16);
    ck_assert_uint_eq(L.c_scale, 1040);
    ck_assert_uint_eq(L.c_ids, 1040);
    ck_assert_uint_eq(L.c_w, 1072);
    ck_assert_uint_eq(L.disp_chunk, 1280);
    ck_assert_uint_eq(L.comb_chunk, 1024); /* 4 rows x 256 B */
    /* receive: arrive 2x8 -> 256, arrive -> 512, 2 dispatch chunks -> 3072,
     * 2 combine chunks -> 5120 */
    ck_assert_uint_eq(L.disp_arrive, 0);
    ck_assert_uint_eq(L.comb_arrive, 256);
    ck_assert_uint_eq(L.disp, 512);
    ck_assert_uint_eq(L.comb, 3072);
    ck_assert_uint_eq(L.bytes, 5120);
    /* staging: 2 dispatch chunks, then 2 combine chunks */
    ck_assert_uint_eq(L.send_disp, 0);
    ck_assert_uint_eq(L.send_comb, 2560);
    ck_assert_uint_eq(L.staging_bytes, 4608);
    ck_assert_uint_eq(L.x_row_bytes, 256);
    ck_assert_uint_eq(L.y_row_bytes, 256);
    ck_assert_uint_eq(L.scales_per_row, 0);
    /* one chunk of each phase to the one other rank */
    ck_assert_uint_eq(fmcu_ep_collective_bytes(&L), 2304);
}
END_TEST

START_TEST(fp8_block_by_hand)
{
    fmcu_ep_layout L;
    char why[256];
    ck_assert_int_eq(fmcu_ep_layout_make(2, 4, 256, 2, FMOE_DTYPE_F16, FMOE_EP_DISPATCH_FP8_BLOCK, &L, why, sizeof why),
                     0);
    /* chunk: x 4 rows x 256 codes = 1024 -> 1040; scales 4 x 2 x 4 = 32 ->
     * 1072; ids -> 1104; w -> 1136, aligned to 1280; combine 4 x 512 B */
    ck_assert_uint_eq(L.c_x, 16);
    ck_assert_uint_eq(L.c_scale, 1040);
    ck_assert_uint_eq(L.c_ids, 1072);
    ck_assert_uint_eq(L.c_w, 1104);
    ck_assert_uint_eq(L.disp_chunk, 1280);
    ck_assert_uint_eq(L.comb_chunk, 2048);
    ck_assert_uint_eq(L.disp, 512);
    ck_assert_uint_eq(L.comb, 3072);
    ck_assert_uint_eq(L.bytes, 7168);
    ck_assert_uint_eq(L.send_comb, 2560);
    ck_assert_uint_eq(L.staging_bytes, 6656);
    ck_assert_uint_eq(L.x_row_bytes, 256);
    ck_assert_uint_eq(L.scales_per_row, 2);
    ck_assert_uint_eq(L.y_row_bytes, 512);
    ck_assert_int_eq(fmcu_ep_layout_make(3, 5, 256, 8, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_FP8_TOKEN, &L, why,
                                         sizeof why),
                     0);
    ck_assert_uint_eq(L.scales_per_row, 1);
    ck_assert_uint_eq(L.x_row_bytes, 256);
    /* x 5 x 256 = 1280 -> 1296; scales 20 -> 1316 -> 1328; ids 160 -> 1488;
     * w 160 -> 1648 -> 1792; two other ranks */
    ck_assert_uint_eq(L.c_scale, 1296);
    ck_assert_uint_eq(L.c_ids, 1328);
    ck_assert_uint_eq(L.c_w, 1488);
    ck_assert_uint_eq(L.disp_chunk, 1792);
    ck_assert_uint_eq(L.comb_chunk, 2560);
    ck_assert_uint_eq(fmcu_ep_collective_bytes(&L), 2 * (1792 + 2560));
}
END_TEST

/* The figure docs/EP.md gives: DeepSeek-V3's decode shape, 128 tokens per
 * rank x 7168 x top-8, FP8 per-token dispatch, BF16 combine. */
START_TEST(deepseek_decode_chunks)
{
    fmcu_ep_layout L;
    char why[256];
    ck_assert_int_eq(fmcu_ep_layout_make(4, 128, 7168, 8, FMOE_DTYPE_BF16, FMOE_EP_DISPATCH_FP8_TOKEN, &L, why,
                                         sizeof why),
                     0);
    /* 16 + 128 x 7168 + 128 x 4 + 2 x 128 x 8 x 4 = 926224 -> 926464 */
    ck_assert_uint_eq(L.disp_chunk, 926464);
    ck_assert_uint_eq(L.comb_chunk, 128ull * 7168 * 2);
    ck_assert_uint_eq(fmcu_ep_collective_bytes(&L), 3ull * (926464 + 1835008));
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

/* Parts [at[i], at[i] + need[i]) in order, each aligned to `align` and
 * ending before the next one (the last before `end`). */
static void in_order(uint64_t seed, const char *what, const uint64_t *at, const uint64_t *need, int n, uint64_t end,
                     uint64_t align)
{
    for (int r = 0; r < n; r++) {
        ck_assert_msg(at[r] % align == 0, "seed %llu: %s part %d at %llu", (unsigned long long)seed, what, r,
                      (unsigned long long)at[r]);
        const uint64_t next = r + 1 < n ? at[r + 1] : end;
        ck_assert_msg(at[r] + need[r] <= next, "seed %llu: %s part %d overlaps the next", (unsigned long long)seed,
                      what, r);
    }
}

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
        const uint64_t T = max_tokens;
        const uint64_t scales = dispatch == 1 ? 0 : dispatch == 2 ? 1 : hidden / 128;
        /* one dispatch chunk */
        const uint64_t c_at[5] = {L.c_count, L.c_x, L.c_scale, L.c_ids, L.c_w};
        const uint64_t c_need[5] = {4, T * hidden * (dispatch == FMOE_EP_DISPATCH_ACTIVATION ? 2 : 1), T * scales * 4,
                                    T * top_k * 4, T * top_k * 4};
        ck_assert_uint_eq(L.c_count, 0);
        in_order(seed, "chunk", c_at, c_need, 5, L.disp_chunk, FMCU_EP_PART_ALIGN);
        ck_assert_uint_eq(L.disp_chunk % FMCU_EP_ALIGN, 0);
        ck_assert_uint_ge(L.comb_chunk, T * hidden * 2);
        ck_assert_uint_eq(L.comb_chunk % FMCU_EP_ALIGN, 0);
        /* the receive buffer */
        const uint64_t r_at[4] = {L.disp_arrive, L.comb_arrive, L.disp, L.comb};
        const uint64_t r_need[4] = {8ull * size, 8ull * size, size * L.disp_chunk, size * L.comb_chunk};
        in_order(seed, "receive buffer", r_at, r_need, 4, L.bytes, FMCU_EP_ALIGN);
        ck_assert_uint_eq(L.bytes % FMCU_EP_ALIGN, 0);
        /* the staging */
        const uint64_t s_at[2] = {L.send_disp, L.send_comb};
        const uint64_t s_need[2] = {size * L.disp_chunk, size * L.comb_chunk};
        in_order(seed, "staging", s_at, s_need, 2, L.staging_bytes, FMCU_EP_ALIGN);
        ck_assert_uint_eq(fmcu_ep_collective_bytes(&L), (size - 1) * (L.disp_chunk + L.comb_chunk));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_ep_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, bf16_by_hand);
    tcase_add_test(tc, fp8_block_by_hand);
    tcase_add_test(tc, deepseek_decode_chunks);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, random_layouts);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
