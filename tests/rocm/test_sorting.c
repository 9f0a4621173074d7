/*
 * tests/rocm/test_sorting.c - moe_sorting on the host
 * (plugins/rocm/sorting.h) against spec/formats.md E15 written out by hand,
 * and on seeded random routings against the properties every consumer
 * relies on: each kept (token, slot) pair exactly once, in a block of its
 * (local) expert, ascending (token, slot) inside a run, padding
 * FMRO_SORT_ID(M, topk) with weight 0, num_valid a multiple of the block.
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/rocm/sorting.h"
#include "tests/test_util.h"

typedef struct sort_buf {
    fmro_sorting_out out;
    uint32_t ids[4096];
    float w[4096];
    int32_t eids[1024];
} sort_buf;

static void buf_init(sort_buf *b, uint32_t capacity, uint32_t blocks)
{
    ck_assert_uint_le(capacity, 4096);
    ck_assert_uint_le(blocks, 1024);
    memset(b, 0xA5, sizeof *b); /* stale values must be overwritten */
    b->out = (fmro_sorting_out){.sorted_ids = b->ids,
                                .sorted_weights = b->w,
                                .sorted_expert_ids = b->eids,
                                .capacity = capacity,
                                .blocks = blocks};
}

/* E15: topk_ids = [[0,2],[2,3],[0,2]], E = 4, block 2. */
static const int32_t e15_ids[6] = {0, 2, 2, 3, 0, 2};
static const float e15_w[6] = {0.5f, 1.5f, 10.5f, 11.5f, 20.5f, 21.5f}; /* w[t][k] = 10t + k + 0.5 */
#define PAD 0x02000003u                                                 /* FMRO_SORT_ID(M = 3, topk = 2) */

START_TEST(worked_example_e15)
{
    ck_assert_uint_eq(FMRO_SORT_ID(3, 2), PAD);
    /* AITER's bound 2*3 + 4*2 - 2 = 12 holds the true worst case 6 + 4 */
    ck_assert_uint_eq(fmro_sorting_capacity(3, 2, 4, 2), 12);
    ck_assert_uint_eq(fmro_sorting_blocks(3, 2, 4, 2), 6);
    sort_buf b;
    buf_init(&b, 12, 6);
    char why[256];
    ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 3, 2, 4, NULL, 2, &b.out, why, sizeof why), 0);
    const uint32_t ids[12] = {0x00000000, 0x00000002, 0x01000000, 0x00000001, 0x01000002, PAD,
                              0x01000001, PAD,        PAD,        PAD,        PAD,        PAD};
    const float w[12] = {0.5f, 20.5f, 1.5f, 10.5f, 21.5f, 0.0f, 11.5f, 0.0f, 0, 0, 0, 0};
    const int32_t eids[6] = {0, 2, 2, 3, -1, -1};
    for (int i = 0; i < 12; i++) {
        ck_assert_msg(b.ids[i] == ids[i], "sorted_ids[%d] = 0x%08X, expected 0x%08X", i, b.ids[i], ids[i]);
        ck_assert_msg(b.w[i] == w[i], "sorted_weights[%d] = %g, expected %g", i, (double)b.w[i], (double)w[i]);
    }
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(b.eids[i], eids[i]);
    ck_assert_uint_eq(b.out.num_valid[0], 8);
    ck_assert_uint_eq(b.out.num_valid[1], 3);
}
END_TEST

/* E15 with expert_mask = [0,0,1,1]: experts 0 and 1 dropped, ids local. And
 * the same with vLLM's EP=2 rank-1 mask [0,0,1,1,0]: the sentinel slot
 * changes nothing for ids below it. */
START_TEST(worked_example_e15_masked)
{
    const int32_t mask4[4] = {0, 0, 1, 1}, mask5[5] = {0, 0, 1, 1, 0};
    const int32_t *masks[2] = {mask4, mask5};
    for (int m = 0; m < 2; m++) {
        uint32_t e = m == 0 ? 4 : 5;
        sort_buf b;
        buf_init(&b, fmro_sorting_capacity(3, 2, e, 2), fmro_sorting_blocks(3, 2, e, 2));
        char why[256];
        ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 3, 2, e, masks[m], 2, &b.out, why, sizeof why), 0);
        const uint32_t ids[6] = {0x01000000, 0x00000001, 0x01000002, PAD, 0x01000001, PAD};
        const float w[6] = {1.5f, 10.5f, 21.5f, 0.0f, 11.5f, 0.0f};
        for (int i = 0; i < 6; i++) {
            ck_assert_msg(b.ids[i] == ids[i], "mask %d: sorted_ids[%d] = 0x%08X, expected 0x%08X", m, i, b.ids[i],
                          ids[i]);
            ck_assert_float_eq(b.w[i], w[i]);
        }
        for (uint32_t i = 6; i < b.out.capacity; i++)
            ck_assert_uint_eq(b.ids[i], PAD);
        ck_assert_int_eq(b.eids[0], 0);
        ck_assert_int_eq(b.eids[1], 0);
        ck_assert_int_eq(b.eids[2], 1);
        ck_assert_int_eq(b.eids[3], -1);
        ck_assert_uint_eq(b.out.num_valid[0], 6);
        ck_assert_uint_eq(b.out.num_valid[1], 3);
    }
}
END_TEST

START_TEST(id_packing)
{
    ck_assert_uint_eq(FMRO_SORT_ID(0xFFFFFE, 200), 0xC8FFFFFEu);
    ck_assert_uint_eq(FMRO_SORT_TOKEN(0xC8FFFFFEu), 0xFFFFFE);
    ck_assert_uint_eq(FMRO_SORT_SLOT(0xC8FFFFFEu), 200);
    ck_assert_uint_eq(FMRO_SORT_ID(5, 254), 0xFE000005u);
}
END_TEST

START_TEST(limits_refused)
{
    sort_buf b;
    buf_init(&b, 16, 4);
    char why[256];
    /* 2^24 tokens: the padding id FMRO_SORT_ID(M, topk) would alias token 0 */
    ck_assert_int_eq(fmro_moe_sorting(NULL, NULL, 0x1000000u, 1, 4, NULL, 2, &b.out, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "24 bits"));
    ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 1, 256, 4, NULL, 2, &b.out, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "8 bits"));
    ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 3, 2, 4, NULL, 0, &b.out, why, sizeof why), -1);
    const int32_t bad_mask[4] = {0, 2, 1, 0};
    ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 3, 2, 4, bad_mask, 2, &b.out, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "expert_mask[1] = 2"));
    /* E15 needs 8 entries in 4 blocks */
    buf_init(&b, 7, 6);
    ck_assert_int_eq(fmro_moe_sorting(e15_ids, e15_w, 3, 2, 4, NULL, 2, &b.out, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "needs 8 entries in 4 blocks"));
}
END_TEST

/* Seeded random routings: ids in [-2, E + 2) (some out of range), masks
 * with about a third of the experts dropped. */
START_TEST(random_properties)
{
    fmoe_rng r = fmoe_rng_for(12);
    for (int iter = 0; iter < 300; iter++) {
        uint32_t m = (uint32_t)(fmoe_rng_u64(&r) % 40), topk = 1 + (uint32_t)(fmoe_rng_u64(&r) % 8);
        uint32_t e = 1 + (uint32_t)(fmoe_rng_u64(&r) % 20), block = 1 + (uint32_t)(fmoe_rng_u64(&r) % 32);
        int masked = (int)(fmoe_rng_u64(&r) % 2);
        int32_t ids[40 * 8], mask[20], local[20];
        float w[40 * 8];
        int32_t next = 0;
        for (uint32_t x = 0; x < e; x++) {
            mask[x] = masked ? fmoe_rng_u64(&r) % 3 != 0 : 1;
            local[x] = mask[x] ? next++ : -1;
        }
        for (uint32_t i = 0; i < m * topk; i++) {
            ids[i] = (int32_t)(fmoe_rng_u64(&r) % (e + 4)) - 2;
            w[i] = fmoe_rng_uniform(&r, 0.01f, 1.0f);
        }
        uint32_t cap = fmro_sorting_capacity(m, topk, e, block), nb = fmro_sorting_blocks(m, topk, e, block);
        static sort_buf b;
        buf_init(&b, cap, nb);
        char why[256];
        ck_assert_msg(fmro_moe_sorting(ids, w, m, topk, e, masked ? mask : NULL, block, &b.out, why, sizeof why) == 0,
                      "iter %d: %s", iter, why);
        const uint32_t pad = FMRO_SORT_ID(m, topk);
        uint32_t valid = b.out.num_valid[0];
        ck_assert_uint_eq(b.out.num_valid[1], m);
        ck_assert_uint_eq(valid % block, 0);
        ck_assert_uint_le(valid, cap);
        /* the padded total from the counts */
        uint32_t want = 0;
        for (uint32_t x = 0; x < e; x++) {
            uint32_t c = 0;
            for (uint32_t i = 0; i < m * topk; i++)
                c += ids[i] == (int32_t)x && mask[x];
            want += (c + block - 1) / block * block;
        }
        ck_assert_uint_eq(valid, want);
        static uint8_t seen[40 * 8];
        memset(seen, 0, sizeof seen);
        uint32_t prev = 0;
        int32_t prev_expert = -1;
        for (uint32_t i = 0; i < cap; i++) {
            int32_t be = i < nb * block ? b.eids[i / block] : -1;
            if (i >= valid) {
                ck_assert_uint_eq(b.ids[i], pad);
                ck_assert_float_eq(b.w[i], 0.0f);
                continue;
            }
            ck_assert_int_ge(be, 0);
            if (i % block == 0 && i > 0)
                ck_assert_int_ge(be, prev_expert); /* runs in ascending expert order */
            if (be != prev_expert)
                prev = 0;
            prev_expert = be;
            if (b.ids[i] == pad) {
                ck_assert_float_eq(b.w[i], 0.0f);
                continue;
            }
            uint32_t t = FMRO_SORT_TOKEN(b.ids[i]), k = FMRO_SORT_SLOT(b.ids[i]);
            ck_assert_uint_lt(t, m);
            ck_assert_uint_lt(k, topk);
            uint32_t f = t * topk + k;
            ck_assert_msg(!seen[f], "iter %d: pair (%u, %u) twice", iter, t, k);
            seen[f] = 1;
            ck_assert_int_ge(ids[f], 0);
            ck_assert_int_eq(local[ids[f]], be);
            ck_assert_float_eq(b.w[i], w[f]);
            ck_assert_uint_ge(f, prev); /* strictly ascending (token, slot) in a run */
            prev = f + 1;
        }
        for (uint32_t i = valid / block; i < nb; i++)
            ck_assert_int_eq(b.eids[i], -1);
        for (uint32_t f = 0; f < m * topk; f++) {
            int kept = ids[f] >= 0 && ids[f] < (int32_t)e && mask[ids[f]];
            ck_assert_msg(seen[f] == kept, "iter %d: pair %u (expert %d) %s", iter, f, ids[f],
                          kept ? "missing" : "kept though dropped");
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_sorting");
    TCase *tc = tcase_create("sorting");
    tcase_add_test(tc, worked_example_e15);
    tcase_add_test(tc, worked_example_e15_masked);
    tcase_add_test(tc, id_packing);
    tcase_add_test(tc, limits_refused);
    tcase_add_test(tc, random_properties);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
