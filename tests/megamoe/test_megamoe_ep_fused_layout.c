/*
 * tests/megamoe/test_megamoe_ep_fused_layout.c - the fused EP forward's
 * window region (plugins/megamoe/ep_fused_layout.h) without a GPU: one
 * small group worked out by hand, seeded random groups whose views are in
 * order, aligned, disjoint and as large as their formulas, and the
 * refusals, each naming the rule; the two group checks the fused forward
 * makes (linear placement, windows one stride apart), on hand-made cases.
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/megamoe/ep_fused_layout.h"
#include "tests/test_util.h"

START_TEST(layout_by_hand)
{
    /* 2 ranks, 3 tokens a rank, H 128, top-2: xs rows of 4 floats (one
     * stage of four scales) */
    mm_epf_layout L;
    char why[256];
    ck_assert_int_eq(mm_epf_layout_make(2, 3, 128, 2, &L, why, sizeof why), 0);
    ck_assert_uint_eq(L.xs_pitch, 4);
    /* arrive_send 2*8, arrive_comb 2*8, count 4, x 3*128, xs 3*4*4, ids
     * 3*2*4, w 3*2*4, comb 2*3*128*2, seq 8, done 16, ids_in 2*3*2*4, w_in the same;
     * each from a multiple of 256 */
    const uint64_t want[] = {0, 256, 512, 768, 1280, 1536, 1792, 2048, 3584, 3840, 4096, 4352};
    const uint64_t got[] = {L.arrive_send, L.arrive_comb, L.count, L.x,    L.xs,     L.ids,
                            L.w,           L.comb,        L.seq,   L.done, L.ids_in, L.w_in};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(got[i] == want[i], "view %zu at %llu, expected %llu", i, (unsigned long long)got[i],
                      (unsigned long long)want[i]);
    ck_assert_uint_eq(L.bytes, 4608);
}
END_TEST

START_TEST(random_layouts)
{
    const uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 3636);
    char why[256];
    for (int it = 0; it < 500; it++) {
        const uint32_t R = 1 + (uint32_t)(fmoe_rng_u64(&r) % MM_EPF_MAX_RANKS);
        const uint32_t T = 1 + (uint32_t)(fmoe_rng_u64(&r) % 4096);
        const uint32_t H = 128 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 64));
        const uint32_t k = 1 + (uint32_t)(fmoe_rng_u64(&r) % 32);
        mm_epf_layout L;
        ck_assert_msg(mm_epf_layout_make(R, T, H, k, &L, why, sizeof why) == 0, "seed %llu: %s",
                      (unsigned long long)seed, why);
        const uint64_t pitch = (H / 32 + 3) / 4 * 4;
        ck_assert_uint_eq(L.xs_pitch, pitch);
        const uint64_t off[] = {L.arrive_send, L.arrive_comb, L.count, L.x,    L.xs,     L.ids,
                                L.w,           L.comb,        L.seq,   L.done, L.ids_in, L.w_in};
        const uint64_t len[] = {(uint64_t)R * 8,
                                (uint64_t)R * 8,
                                4,
                                (uint64_t)T * H,
                                (uint64_t)T * pitch * 4,
                                (uint64_t)T * k * 4,
                                (uint64_t)T * k * 4,
                                (uint64_t)k * T * H * 2,
                                8,
                                16,
                                (uint64_t)R * T * k * 4,
                                (uint64_t)R * T * k * 4};
        uint64_t end = 0;
        for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
            ck_assert_msg(off[i] % MM_EPF_ALIGN == 0 && off[i] >= end, "seed %llu: view %zu at %llu",
                          (unsigned long long)seed, i, (unsigned long long)off[i]);
            end = off[i] + len[i];
        }
        ck_assert_uint_ge(L.bytes, end);
        ck_assert_uint_lt(L.bytes - end, MM_EPF_ALIGN);
    }
}
END_TEST

START_TEST(refusals)
{
    mm_epf_layout L;
    char why[256];
    const struct {
        uint32_t R, T, H, k;
    } bad[] = {{0, 4, 128, 2}, {65, 4, 128, 2}, {2, 0, 128, 2}, {2, 4, 96, 2},
               {2, 4, 0, 2},   {2, 4, 128, 0},  {2, 4, 128, 33}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        ck_assert_int_eq(mm_epf_layout_make(bad[i].R, bad[i].T, bad[i].H, bad[i].k, &L, why, sizeof why), -1);
        ck_assert_msg(strstr(why, "a multiple of 128") && strstr(why, "top_k"), "case %zu: %s", i, why);
    }
    /* a region beyond 2^40 bytes: 2^20 tokens of hidden 2^16, top-32 */
    ck_assert_int_eq(mm_epf_layout_make(2, 1u << 20, 1u << 16, 32, &L, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "2^40"), "%s", why);
}
END_TEST

START_TEST(linear_placement)
{
    /* 2 ranks of 3 experts */
    const int32_t linear[] = {0, 0, 0, 1, 1, 1};
    ck_assert_int_eq(mm_epf_linear_placement(linear, 6, 2, 3), 1);
    /* round robin, one expert moved, a count that is not size x local */
    const int32_t rr[] = {0, 1, 0, 1, 0, 1}, moved[] = {0, 0, 1, 1, 1, 1};
    ck_assert_int_eq(mm_epf_linear_placement(rr, 6, 2, 3), 0);
    ck_assert_int_eq(mm_epf_linear_placement(moved, 6, 2, 3), 0);
    ck_assert_int_eq(mm_epf_linear_placement(linear, 5, 2, 3), 0);
    ck_assert_int_eq(mm_epf_linear_placement(linear, 6, 3, 2), 0);
    ck_assert_int_eq(mm_epf_linear_placement(linear, 6, 2, 0), 0);
    ck_assert_int_eq(mm_epf_linear_placement(NULL, 6, 2, 3), 0);
    /* one rank holds everything */
    ck_assert_int_eq(mm_epf_linear_placement((const int32_t[]){0, 0, 0, 0}, 4, 1, 4), 1);
}
END_TEST

START_TEST(one_stride_apart)
{
    static char mem[4096];
    char *even[4] = {mem, mem + 1024, mem + 2048, mem + 3072};
    ck_assert_int_eq(mm_epf_one_stride_apart(even, 4), 1);
    ck_assert_int_eq(mm_epf_one_stride_apart(even, 2), 1); /* any two are */
    ck_assert_int_eq(mm_epf_one_stride_apart(even, 1), 1);
    char *uneven[4] = {mem, mem + 1024, mem + 2048, mem + 3000};
    ck_assert_int_eq(mm_epf_one_stride_apart(uneven, 4), 0);
    ck_assert_int_eq(mm_epf_one_stride_apart(uneven, 3), 1);
    char *down[3] = {mem + 2048, mem + 1024, mem}; /* a negative stride is one stride too */
    ck_assert_int_eq(mm_epf_one_stride_apart(down, 3), 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_ep_fused_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, layout_by_hand);
    tcase_add_test(tc, random_layouts);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, linear_placement);
    tcase_add_test(tc, one_stride_apart);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
