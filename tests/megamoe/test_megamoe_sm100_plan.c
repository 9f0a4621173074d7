/*
 * tests/megamoe/test_megamoe_sm100_plan.c - the SM100 kernel's descriptors
 * and launch shape (plugins/megamoe/sm100_plan.h) without a GPU, and the
 * kernel's indexing (per-expert tables, block owners, ring scale words,
 * pull lists) by hand and on seeded random loads. Expected
 * values are worked out by hand from the field tables (PTX ISA tcgen05
 * instruction and shared-memory descriptors, CUTLASS
 * InstrDescriptorBlockScaled / SmemDescriptor), written as sums of fields.
 */
#include <string.h>

#include "plugins/megamoe/sm100_plan.h"
#include "tests/test_util.h"

START_TEST(instruction_descriptor_by_fields)
{
    /* a format E2M1 (5) << 7 = 0x280; b format E4M3 (0); K-major both; N
     * 128 >> 3 = 16 << 17 = 0x200000; UE8M0 1 << 23 = 0x800000; M 128 >> 4
     * = 8 << 24 = 0x8000000 */
    ck_assert_uint_eq(mm100_idesc(128, 0, 0), 0x08A00280u);
    /* sf ids: a 3 << 29 = 0x60000000, b 3 << 4 = 0x30 */
    ck_assert_uint_eq(mm100_idesc(128, 3, 3), 0x68A002B0u);
    /* a 1 << 29, b 2 << 4; N 32 >> 3 = 4 << 17 = 0x80000 */
    ck_assert_uint_eq(mm100_idesc(32, 1, 2), 0x28880000u | 0x280u | 0x20u);
    /* N 64: 8 << 17 = 0x100000 */
    ck_assert_uint_eq(mm100_idesc(64, 0, 0), 0x08900280u);
    /* M written as M >> 4 in [24, 29) equals PTX's M >> 7 in [27, 29) for
     * M = 128: only bit 27 */
    ck_assert_uint_eq(mm100_idesc(128, 0, 0) & 0x1F000000u, 1u << 27);
}
END_TEST

START_TEST(smem_descriptors_by_fields)
{
    /* 128-byte swizzle at 0x400: start 0x400 >> 4 = 0x40; SBO 1024 >> 4 =
     * 64 at bit 32; version bit 46; layout 2 at bit 61 */
    const uint64_t hi = 64ull | (1ull << 14) | (2ull << 29);
    ck_assert_uint_eq(hi, 0x40004040ull);
    ck_assert_uint_eq(mm100_sw128_desc(0x400), (hi << 32) | 0x40);
    /* only address bits [4, 18) are kept */
    ck_assert_uint_eq(mm100_sw128_desc(0x41400) & 0x3FFF, 0x140);
    /* the scale block: SBO 128 >> 4 = 8, version bit, no swizzle */
    ck_assert_uint_eq(mm100_sf_desc(0x2200), (0x4008ull << 32) | 0x220);
    /* K steps of 32 bytes are +2 in the low word, as the kernel adds them */
    ck_assert_uint_eq(mm100_sw128_desc(0x400 + 64), mm100_sw128_desc(0x400) + 4);
}
END_TEST

START_TEST(swizzled_offsets_are_a_permutation)
{
    ck_assert_uint_eq(mm100_sw128_offset(0, 0), 0);
    ck_assert_uint_eq(mm100_sw128_offset(7, 7), 896);                   /* 7 x 128 + ((7 ^ 7) x 16) */
    ck_assert_uint_eq(mm100_sw128_offset(9, 3), 1024 + 128 + (2 << 4)); /* group 1, row 1, chunk 3 ^ 1 */
    static uint8_t seen[128 * 8];
    memset(seen, 0, sizeof seen);
    for (uint32_t r = 0; r < 128; r++)
        for (uint32_t c = 0; c < 8; c++) {
            uint32_t o = mm100_sw128_offset(r, c);
            ck_assert_uint_eq(o % 16, 0);
            ck_assert_uint_lt(o, 128 * 128);
            ck_assert_msg(!seen[o / 16], "row %u chunk %u lands on a taken chunk", r, c);
            seen[o / 16] = 1;
            /* a row stays within its own 128 bytes */
            ck_assert_uint_eq(o / 128, r);
        }
}
END_TEST

START_TEST(utccp_destination_inverts_the_transform)
{
    /* E17: new row 1 <- old 32, new 4 <- old 1, new 127 <- old 127 */
    ck_assert_uint_eq(mm100_utccp_dst(32), 1);
    ck_assert_uint_eq(mm100_utccp_dst(1), 4);
    ck_assert_uint_eq(mm100_utccp_dst(127), 127);
    ck_assert_uint_eq(mm100_utccp_dst(128 + 33), 128 + 5);
    for (uint32_t n = 0; n < 512; n++)
        ck_assert_uint_eq(mm100_utccp_dst(mm_utccp_src(n)), n);
}
END_TEST

START_TEST(block_m_follows_rows_per_expert)
{
    /* rows per local expert = ceil(tokens x topk x ranks / experts) */
    ck_assert_uint_eq(mm100_pick_block_m(1, 8, 1, 256), 32);    /* 1 */
    ck_assert_uint_eq(mm100_pick_block_m(1024, 8, 1, 256), 32); /* 32 */
    ck_assert_uint_eq(mm100_pick_block_m(1025, 8, 1, 256), 64); /* 33 */
    ck_assert_uint_eq(mm100_pick_block_m(2048, 8, 1, 256), 64); /* 64 */
    ck_assert_uint_eq(mm100_pick_block_m(4096, 8, 1, 256), 128);
    ck_assert_uint_eq(mm100_pick_block_m(8192, 8, 1, 256), 128);
    ck_assert_uint_eq(mm100_pick_block_m(512, 8, 4, 256), 64); /* 4 ranks send 64 rows */
    ck_assert_uint_eq(mm100_pick_block_m(0, 8, 1, 256), 32);
}
END_TEST

START_TEST(shapes_by_hand)
{
    mm100_shape s;
    char why[256];
    /* BM 128, 256 local experts: stage 16384 + 16384 + 1024 = 33792; tables
     * 256 + 512 + 2 x 257 x 4 = 2824, slack 1024: (232448 - 3848) / 33792 =
     * 6 stages; TMEM 2 x 128 + 16 = 272 -> 512 */
    ck_assert_int_eq(mm100_shape_make(128, 256, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.stage_bytes, 33792);
    ck_assert_uint_eq(s.stages, 6);
    ck_assert_uint_eq(s.smem_bytes, 6 * 33792 + 3848);
    ck_assert_uint_eq(s.tmem_cols, 512);
    ck_assert_uint_le(s.smem_bytes, MM100_SMEM_LIMIT);
    /* BM 32, 8 local: stage 21504; (232448 - 1864) / 21504 = 10 -> 8 (cap);
     * TMEM 80 -> 128 */
    ck_assert_int_eq(mm100_shape_make(32, 8, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.stages, 8);
    ck_assert_uint_eq(s.smem_bytes, 8 * 21504 + 1864);
    ck_assert_uint_eq(s.tmem_cols, 128);
    /* BM 64: TMEM 144 -> 256 */
    ck_assert_int_eq(mm100_shape_make(64, 32, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.tmem_cols, 256);
    ck_assert_uint_eq(s.stage_bytes % 1024, 0);
}
END_TEST

START_TEST(shape_refusals)
{
    mm100_shape s;
    char why[256];
    ck_assert_int_eq(mm100_shape_make(48, 8, &s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "BLOCK_M 48"));
    ck_assert_int_eq(mm100_shape_make(32, 0, &s, why, sizeof why), -1);
    ck_assert_int_eq(mm100_shape_make(32, MM100_MAX_LOCAL + 1, &s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "1025 experts per rank"));
    ck_assert_int_eq(mm100_shape_make(128, MM100_MAX_LOCAL, &s, why, sizeof why), 0);
}
END_TEST

START_TEST(tiles_count_padded_blocks)
{
    const uint32_t rows[] = {0, 1, 32, 33};
    /* blocks of 32: 0 + 1 + 1 + 2 = 4, x 256 / 128 = 2 weight blocks */
    ck_assert_uint_eq(mm100_tiles(rows, 4, 32, 256), 8);
    ck_assert_uint_eq(mm100_tiles(rows, 4, 64, 128), 3);
}
END_TEST

START_TEST(tables_by_hand)
{
    /* 4 local experts, 2 ranks: rows 3 + 0, 0 + 0, 30 + 5, 1 + 0 -> blocks
     * of 32: 1, 0, 2, 1 */
    const uint32_t cnt[] = {3, 0, 0, 0, 30, 5, 1, 0};
    uint32_t row0[5], blk0[5];
    ck_assert_uint_eq(mm100_tables(cnt, 4, 2, 32, row0, blk0), 128);
    const uint32_t want_row0[] = {0, 32, 32, 96, 128}, want_blk0[] = {0, 1, 1, 3, 4};
    for (int e = 0; e < 5; e++) {
        ck_assert_uint_eq(row0[e], want_row0[e]);
        ck_assert_uint_eq(blk0[e], want_blk0[e]);
    }
    /* block 1 is expert 2's (expert 1 has none), block 3 expert 3's */
    const uint32_t owner[] = {0, 2, 2, 3};
    for (uint32_t b = 0; b < 4; b++)
        ck_assert_uint_eq(mm100_expert_of_block(blk0, 4, b), owner[b]);
}
END_TEST

START_TEST(tables_random_loads)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed + 7);
    static uint32_t cnt[300 * 4], row0[301], blk0[301];
    for (int trial = 0; trial < 200; trial++) {
        uint32_t L = 1 + (uint32_t)(fmoe_rng_u64(&r) % 300), R = 1 + (uint32_t)(fmoe_rng_u64(&r) % 4);
        uint32_t bm = 32u << (fmoe_rng_u64(&r) % 3);
        uint64_t padded = 0;
        for (uint32_t e = 0; e < L; e++) {
            uint32_t n = 0;
            for (uint32_t s = 0; s < R; s++) {
                /* half the experts get nothing from a rank */
                cnt[e * R + s] = fmoe_rng_u64(&r) % 2 ? 0 : (uint32_t)(fmoe_rng_u64(&r) % 300);
                n += cnt[e * R + s];
            }
            padded += (n + bm - 1) / bm * bm;
        }
        uint32_t rows = mm100_tables(cnt, L, R, bm, row0, blk0);
        ck_assert_msg(rows == padded, "seed %llu trial %d: %u rows, want %llu", (unsigned long long)seed, trial, rows,
                      (unsigned long long)padded);
        for (uint32_t e = 0; e < L; e++)
            ck_assert_uint_eq(row0[e], blk0[e] * bm);
        for (uint32_t b = 0; b < blk0[L]; b++) {
            uint32_t e = mm100_expert_of_block(blk0, L, b);
            ck_assert_msg(e < L && blk0[e] <= b && b < blk0[e + 1], "seed %llu trial %d: block %u -> expert %u",
                          (unsigned long long)seed, trial, b, e);
        }
    }
}
END_TEST

START_TEST(ring_scale_words_fill_the_loaders_blocks)
{
    /* every (ring row, K block) has its own word, inside [0, K/128 x
     * sf_ring), and a block's rows land in the 128 words the loader copies
     * for it: [kb sf_ring + 128 (row0 / bm), + 128) */
    const uint32_t ring = 2 * 384, sf_ring = 16 * ring, kw = 3;
    static uint8_t seen[3 * 16 * 2 * 384];
    for (uint32_t bm = 32; bm <= 128; bm *= 2) {
        memset(seen, 0, sizeof seen);
        for (uint32_t kb = 0; kb < kw; kb++)
            for (uint32_t r = 0; r < ring; r++) {
                uint64_t w = mm100_ring_sf_word(r, kb, bm, sf_ring);
                ck_assert_uint_lt(w, (uint64_t)kw * sf_ring);
                ck_assert_msg(!seen[w], "bm %u: row %u kb %u shares word %llu", bm, r, kb, (unsigned long long)w);
                seen[w] = 1;
                uint64_t lo = mm100_ring_sf_block(kb, sf_ring, r / bm * bm, bm);
                ck_assert_uint_eq(lo, (uint64_t)kb * sf_ring + 128u * (r / bm));
                ck_assert_msg(w >= lo && w < lo + 128, "bm %u: row %u kb %u outside its block's words", bm, r, kb);
            }
    }
    /* row 33 of a 128 block: utccp(33) = 1 x 4 + 1 = 5 */
    ck_assert_uint_eq(mm100_ring_sf_word(33, 2, 128, sf_ring), 2ull * sf_ring + 5);
    /* row 40 with bm 32: block 1, row 8: 128 + utccp(8) = 128 + 32 */
    ck_assert_uint_eq(mm100_ring_sf_word(40, 0, 32, sf_ring), 160);
}
END_TEST

START_TEST(pull_index_by_hand)
{
    /* [local][ranks][ranks x T]: expert 2, source 1, entry 5, 2 ranks, T
     * 384: (2 x 2 + 1) x 768 + 5 */
    ck_assert_uint_eq(mm100_pull_index(2, 1, 5, 2, 384), 3845);
    /* the last entry is the view's last word: L x R x R x T - 1 */
    ck_assert_uint_eq(mm100_pull_index(3, 1, 2 * 384 - 1, 2, 384), 4ull * 2 * 2 * 384 - 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_sm100_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, instruction_descriptor_by_fields);
    tcase_add_test(tc, smem_descriptors_by_fields);
    tcase_add_test(tc, swizzled_offsets_are_a_permutation);
    tcase_add_test(tc, utccp_destination_inverts_the_transform);
    tcase_add_test(tc, block_m_follows_rows_per_expert);
    tcase_add_test(tc, shapes_by_hand);
    tcase_add_test(tc, shape_refusals);
    tcase_add_test(tc, tiles_count_padded_blocks);
    tcase_add_test(tc, tables_by_hand);
    tcase_add_test(tc, tables_random_loads);
    tcase_add_test(tc, ring_scale_words_fill_the_loaders_blocks);
    tcase_add_test(tc, pull_index_by_hand);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 12);
}
