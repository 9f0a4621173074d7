/*
 * tests/megamoe/test_megamoe_sm100_plan.c - the SM100 kernel's descriptors
 * and launch shape (plugins/megamoe/sm100_plan.h) without a GPU. Expected
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 8);
}
