/*
 * tests/cuda/test_cuda_ep_plan.c - the high-throughput row plan of a CUDA EP
 * group (plugins/cuda/ep_plan.h: the rule the device's plan kernel and the
 * host reference share), without a GPU:
 *   - a plan worked out by hand: two sources, a short one, a token with no
 *     expert here, ids out of range and -1;
 *   - seeded random groups: live rows packed in (source, token) order into
 *     0..R-1, dead rows -1, each verdict checked against its definition, and
 *     every in-range token live on exactly the ranks holding its experts.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/ep_plan.h"
#include "tests/test_util.h"

START_TEST(by_hand)
{
    /* 4 experts: 0, 1 on rank 0; 2, 3 on rank 1. Two sources of at most
     * 3 tokens, k = 2; source 0 passed 3 tokens, source 1 passed 2. */
    const int32_t owner[4] = {0, 0, 1, 1};
    const int32_t count[2] = {3, 2};
    const int32_t ids[2 * 3 * 2] = {
        0,  2, /* s0 t0: both ranks */
        3,  2, /* s0 t1: rank 1 only */
        -1, 1, /* s0 t2: rank 0 (the -1 names nothing) */
        9,  3, /* s1 t0: 9 is out of range; rank 1 */
        1,  0, /* s1 t1: rank 0 */
        0,  2, /* s1 t2: past the count: dead everywhere (stale ids) */
    };
    int32_t pos[6];
    ck_assert_int_eq(fmcu_ep_plan_rows(2, 3, 2, count, ids, owner, 4, 0, pos), 3);
    const int32_t want0[6] = {0, -1, 1, -1, 2, -1};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(pos[i] == want0[i], "rank 0 row %d: %d, expected %d", i, pos[i], want0[i]);
    ck_assert_int_eq(fmcu_ep_plan_rows(2, 3, 2, count, ids, owner, 4, 1, pos), 3);
    const int32_t want1[6] = {0, 1, -1, 2, -1, -1};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(pos[i] == want1[i], "rank 1 row %d: %d, expected %d", i, pos[i], want1[i]);
    /* Nothing passed: no live rows. */
    const int32_t none[2] = {0, 0};
    ck_assert_int_eq(fmcu_ep_plan_rows(2, 3, 2, none, ids, owner, 4, 0, pos), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(pos[i], -1);
}
END_TEST

START_TEST(random_groups)
{
    const uint64_t seed = fmoe_test_seed();
    fmoe_rng rng = fmoe_rng_for(32);
    for (int trial = 0; trial < 200; trial++) {
        const uint32_t size = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 8);
        const uint32_t max_tokens = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 40);
        const uint32_t k = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 8);
        const uint32_t experts = size + (uint32_t)(fmoe_rng_u64(&rng) % 64);
        const uint64_t rows = (uint64_t)size * max_tokens;
        int32_t *owner = malloc(experts * sizeof *owner), *count = malloc(size * sizeof *count);
        int32_t *ids = malloc(rows * k * sizeof *ids), *pos = malloc(rows * sizeof *pos);
        uint32_t *live_on = calloc(rows, sizeof *live_on);
        ck_assert(owner && count && ids && pos && live_on);
        for (uint32_t e = 0; e < experts; e++)
            owner[e] = (int32_t)(fmoe_rng_u64(&rng) % size);
        for (uint32_t s = 0; s < size; s++)
            count[s] = (int32_t)(fmoe_rng_u64(&rng) % (max_tokens + 1));
        for (uint64_t i = 0; i < rows * k; i++) {
            const uint64_t u = fmoe_rng_u64(&rng) % 20;
            /* mostly valid ids, some -1 and some past the last expert */
            ids[i] = u == 0 ? -1 : u == 1 ? (int32_t)(experts + u) : (int32_t)(fmoe_rng_u64(&rng) % experts);
        }
        for (uint32_t me = 0; me < size; me++) {
            const int64_t r = fmcu_ep_plan_rows(size, max_tokens, k, count, ids, owner, experts, me, pos);
            int64_t next = 0;
            for (uint64_t row = 0; row < rows; row++) {
                const uint32_t s = (uint32_t)(row / max_tokens), t = (uint32_t)(row % max_tokens);
                int here = 0;
                for (uint32_t j = 0; j < k; j++) {
                    const int32_t id = ids[row * k + j];
                    here |= id >= 0 && (uint32_t)id < experts && owner[id] == (int32_t)me;
                }
                const int live = (int32_t)t < count[s] && here;
                ck_assert_msg(pos[row] == (live ? next : -1),
                              "seed %llu trial %d rank %u row %llu: pos %d, expected %lld", (unsigned long long)seed,
                              trial, me, (unsigned long long)row, pos[row], (long long)(live ? next : -1));
                next += live;
                live_on[row] += (uint32_t)live;
            }
            ck_assert_msg(r == next, "seed %llu trial %d rank %u: R = %lld, %lld live rows", (unsigned long long)seed,
                          trial, me, (long long)r, (long long)next);
        }
        /* Each passed token is live on as many ranks as its valid ids name. */
        for (uint64_t row = 0; row < rows; row++) {
            const uint32_t s = (uint32_t)(row / max_tokens), t = (uint32_t)(row % max_tokens);
            uint64_t ranks = 0;
            for (uint32_t j = 0; j < k; j++) {
                const int32_t id = ids[row * k + j];
                if (id >= 0 && (uint32_t)id < experts)
                    ranks |= 1ull << owner[id];
            }
            const uint32_t want = (int32_t)t < count[s] ? (uint32_t)__builtin_popcountll(ranks) : 0;
            ck_assert_msg(live_on[row] == want, "seed %llu trial %d row %llu: live on %u ranks, expected %u",
                          (unsigned long long)seed, trial, (unsigned long long)row, live_on[row], want);
        }
        free(owner);
        free(count);
        free(ids);
        free(pos);
        free(live_on);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_ep_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, by_hand);
    tcase_add_test(tc, random_groups);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 2);
}
