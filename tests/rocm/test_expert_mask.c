/*
 * tests/rocm/test_expert_mask.c - mask mode (plugins/rocm/expert_mask.h):
 * the E + S + 1 mask with shared-expert slots and the sentinel against
 * spec/formats.md §6.1 and E15 (vLLM: E = 4, EP = 2, rank 1 ->
 * [0,0,1,1,0]), local ids against vLLM's extended expert_map, the shared
 * columns of each token, and, through moe_sorting, that over all EP ranks
 * every routed and every shared (token, expert) pair runs exactly once.
 */
#include <string.h>

#include "plugins/rocm/expert_mask.h"
#include "plugins/rocm/sorting.h"
#include "tests/test_util.h"

START_TEST(vllm_example_no_shared)
{
    const int32_t map[4] = {-1, -1, 0, 1};
    int32_t mask[5], local[5];
    char why[256];
    ck_assert_uint_eq(fmro_expert_mask_len(4, 0), 5);
    ck_assert_int_eq(fmro_expert_mask_build(map, 4, 0, mask, why, sizeof why), 2);
    const int32_t want[5] = {0, 0, 1, 1, 0};
    ck_assert_mem_eq(mask, want, sizeof want);
    ck_assert_int_eq(fmro_expert_mask_local_ids(mask, 5, local, why, sizeof why), 2);
    const int32_t want_local[5] = {-1, -1, 0, 1, -1};
    ck_assert_mem_eq(local, want_local, sizeof want_local);
}
END_TEST

/* S = 2 shared experts: slots 4 and 5 on, the sentinel 6 off; the local
 * ids of the kept slots are vLLM's expert_map extended by local + i. */
START_TEST(shared_slots_and_sentinel)
{
    const int32_t map[4] = {-1, -1, 0, 1};
    int32_t mask[7], local[7];
    char why[256];
    ck_assert_int_eq(fmro_expert_mask_build(map, 4, 2, mask, why, sizeof why), 4);
    const int32_t want[7] = {0, 0, 1, 1, 1, 1, 0};
    ck_assert_mem_eq(mask, want, sizeof want);
    ck_assert_int_eq(fmro_expert_mask_local_ids(mask, 7, local, why, sizeof why), 4);
    const int32_t extended_map[6] = {-1, -1, 0, 1, 2, 3};
    ck_assert_mem_eq(local, extended_map, sizeof extended_map);
    ck_assert_int_eq(local[6], -1);
    /* round robin, E = 5, EP = 2, rank 0, S = 1 */
    const int32_t rr[5] = {0, -1, 1, -1, 2};
    int32_t mask2[7], local2[7];
    ck_assert_int_eq(fmro_expert_mask_build(rr, 5, 1, mask2, why, sizeof why), 4);
    const int32_t want2[7] = {1, 0, 1, 0, 1, 1, 0};
    ck_assert_mem_eq(mask2, want2, sizeof want2);
    ck_assert_int_eq(fmro_expert_mask_local_ids(mask2, 7, local2, why, sizeof why), 4);
    const int32_t want_local2[7] = {0, -1, 1, -1, 2, 3, -1};
    ck_assert_mem_eq(local2, want_local2, sizeof want_local2);
    /* no map: every routed expert local */
    int32_t all[4];
    ck_assert_int_eq(fmro_expert_mask_build(NULL, 2, 1, all, why, sizeof why), 3);
    const int32_t want_all[4] = {1, 1, 1, 0};
    ck_assert_mem_eq(all, want_all, sizeof want_all);
}
END_TEST

START_TEST(bad_maps_refused)
{
    int32_t mask[8], local[8];
    char why[256];
    const int32_t swapped[3] = {1, 0, -1};
    ck_assert_int_eq(fmro_expert_mask_build(swapped, 3, 0, mask, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "expert_map[0] = 1, expected 0 or -1"));
    const int32_t gap[3] = {0, -1, 2};
    ck_assert_int_eq(fmro_expert_mask_build(gap, 3, 0, mask, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "expert_map[2] = 2, expected 1 or -1"));
    ck_assert_int_eq(fmro_expert_mask_build(NULL, 0, 1, mask, why, sizeof why), -1);
    const int32_t no_sentinel[3] = {1, 1, 1};
    ck_assert_int_eq(fmro_expert_mask_local_ids(no_sentinel, 3, local, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "sentinel"));
    const int32_t two[3] = {1, 2, 0};
    ck_assert_int_eq(fmro_expert_mask_local_ids(two, 3, local, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "slot 1 is 2"));
}
END_TEST

START_TEST(shared_columns_of_a_token)
{
    int32_t ids[4];
    ck_assert_uint_eq(fmro_shared_columns(2, 1), 2);
    ck_assert_uint_eq(fmro_shared_columns(2, 2), 3);
    fmro_shared_slot_ids(4, 2, 1, 0, 7, ids);
    ck_assert_int_eq(ids[0], 4);
    ck_assert_int_eq(ids[1], 5);
    fmro_shared_slot_ids(4, 2, 2, 1, 1, ids); /* token 1 belongs to rank 1 */
    ck_assert_int_eq(ids[0], 4);
    ck_assert_int_eq(ids[1], 5);
    ck_assert_int_eq(ids[2], 6);              /* the sentinel column */
    fmro_shared_slot_ids(4, 2, 2, 1, 2, ids); /* token 2 belongs to rank 0 */
    ck_assert_int_eq(ids[0], 6);
    ck_assert_int_eq(ids[1], 6);
    ck_assert_int_eq(ids[2], 6);
}
END_TEST

/* vLLM's linear placement: rank r holds [r*base + min(r, rem), +local). */
static void linear_map(uint32_t e, uint32_t ep, uint32_t rank, int32_t *map)
{
    uint32_t base = e / ep, rem = e % ep;
    uint32_t first = rank * base + (rank < rem ? rank : rem), n = base + (rank < rem ? 1 : 0);
    for (uint32_t g = 0; g < e; g++)
        map[g] = g >= first && g < first + n ? (int32_t)(g - first) : -1;
}

/* Over all ranks, through moe_sorting: every routed pair once, every
 * (token, shared expert) once, the sentinel column never. */
START_TEST(every_pair_once_across_ranks)
{
    fmoe_rng r = fmoe_rng_for(5);
    for (int iter = 0; iter < 60; iter++) {
        uint32_t e = 2 + (uint32_t)(fmoe_rng_u64(&r) % 14), s = (uint32_t)(fmoe_rng_u64(&r) % 3);
        uint32_t ep = 1 + (uint32_t)(fmoe_rng_u64(&r) % 4), topk = 1 + (uint32_t)(fmoe_rng_u64(&r) % 4);
        uint32_t m = 1 + (uint32_t)(fmoe_rng_u64(&r) % 24), block = 1 + (uint32_t)(fmoe_rng_u64(&r) % 8);
        if (ep > e)
            ep = e;
        uint32_t cols = topk + fmro_shared_columns(s, ep);
        int32_t ids[24 * 8];
        float w[24 * 8];
        static int runs[24 * 8];
        memset(runs, 0, sizeof runs);
        int32_t routed[24 * 4];
        for (uint32_t i = 0; i < m * topk; i++)
            routed[i] = (int32_t)(fmoe_rng_u64(&r) % e);
        for (uint32_t rank = 0; rank < ep; rank++) {
            /* the same routed ids on every rank, then this rank's shared columns */
            for (uint32_t t = 0; t < m; t++) {
                for (uint32_t k = 0; k < topk; k++) {
                    ids[t * cols + k] = routed[t * topk + k];
                    w[t * cols + k] = 0.5f;
                }
                fmro_shared_slot_ids(e, s, ep, rank, t, ids + t * cols + topk);
                for (uint32_t c = topk; c < cols; c++)
                    w[t * cols + c] = 1.0f;
            }
            int32_t map[16], mask[16 + 3];
            linear_map(e, ep, rank, map);
            char why[256];
            ck_assert_int_ge(fmro_expert_mask_build(ep > 1 ? map : NULL, e, s, mask, why, sizeof why), 0);
            uint32_t len = fmro_expert_mask_len(e, s);
            static uint32_t sid[4096];
            static float sw[4096];
            static int32_t seid[1024];
            fmro_sorting_out out = {.sorted_ids = sid,
                                    .sorted_weights = sw,
                                    .sorted_expert_ids = seid,
                                    .capacity = fmro_sorting_capacity(m, cols, len, block),
                                    .blocks = fmro_sorting_blocks(m, cols, len, block)};
            ck_assert_uint_le(out.capacity, 4096);
            ck_assert_int_eq(fmro_moe_sorting(ids, w, m, cols, len, mask, block, &out, why, sizeof why), 0);
            for (uint32_t i = 0; i < out.num_valid[0]; i++)
                if (sid[i] != FMRO_SORT_ID(m, cols))
                    runs[FMRO_SORT_TOKEN(sid[i]) * cols + FMRO_SORT_SLOT(sid[i])]++;
        }
        for (uint32_t t = 0; t < m; t++)
            for (uint32_t c = 0; c < cols; c++) {
                int want = c < topk + s ? 1 : 0; /* routed and shared once; the sentinel column never */
                ck_assert_msg(runs[t * cols + c] == want,
                              "iter %d (E %u, S %u, EP %u): token %u column %u ran %d times, expected %d", iter, e, s,
                              ep, t, c, runs[t * cols + c], want);
            }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_expert_mask");
    TCase *tc = tcase_create("expert_mask");
    tcase_add_test(tc, vllm_example_no_shared);
    tcase_add_test(tc, shared_slots_and_sentinel);
    tcase_add_test(tc, bad_maps_refused);
    tcase_add_test(tc, shared_columns_of_a_token);
    tcase_add_test(tc, every_pair_once_across_ranks);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
