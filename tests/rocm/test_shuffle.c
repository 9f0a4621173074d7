/*
 * tests/rocm/test_shuffle.c - the 16x16 pre-shuffle (plugins/rocm/shuffle.h)
 * against hand-computed positions (spec/formats.md §6.3: for fp8
 * out[tile*512 + kk*256 + n*16 + j] = W[16nb + n][32kb + 16kk + j]),
 * against a literal transcription of AITER's view/permute
 * ([E, N/16, 16, K/32, 32/vec, vec] -> axes (0, 1, 3, 4, 2, 5)), and
 * round trips on random data for 1-, 2- and 4-byte elements.
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/rocm/shuffle.h"
#include "tests/test_util.h"

START_TEST(hand_positions_fp8)
{
    /* N = 32, K = 64: 2 x 2 tiles of 512 bytes */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 0, 0), 0);
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 1, 0), 16); /* next row: next 16-byte vector */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 0, 5), 5);
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 0, 16), 256);   /* second K vector of the tile */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 15, 31), 511);  /* last byte of tile 0 */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 0, 32), 512);   /* tile (0, 1) */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 16, 0), 1024);  /* tile (1, 0) */
    ck_assert_uint_eq(fmro_shuffle_index(64, 1, 17, 40), 1560); /* tile 3 + row 1 + byte 8 */
}
END_TEST

START_TEST(hand_positions_bf16)
{
    /* 8 elements a vector, 4 vectors a tile row */
    ck_assert_uint_eq(fmro_shuffle_index(32, 2, 0, 8), 128);
    ck_assert_uint_eq(fmro_shuffle_index(32, 2, 3, 13), 157);
    ck_assert_uint_eq(fmro_shuffle_index(32, 2, 15, 31), 511);
    ck_assert_uint_eq(fmro_shuffle_index(64, 2, 1, 33), 512 + 8 + 1);
}
END_TEST

/* AITER's permute, written as the loops over the permuted axes in order:
 * the output is filled sequentially. */
static void aiter_permute(uint8_t *out, const uint8_t *in, uint64_t e, uint64_t n, uint64_t k, size_t eb)
{
    uint64_t vec = 16 / eb;
    size_t o = 0;
    for (uint64_t x = 0; x < e; x++)
        for (uint64_t nb = 0; nb < n / 16; nb++)
            for (uint64_t kb = 0; kb < k / 32; kb++)
                for (uint64_t kk = 0; kk < 32 / vec; kk++)
                    for (uint64_t r = 0; r < 16; r++)
                        for (uint64_t j = 0; j < vec; j++) {
                            size_t src = (size_t)((x * n + nb * 16 + r) * k + kb * 32 + kk * vec + j);
                            memcpy(out + o * eb, in + src * eb, eb);
                            o++;
                        }
}

START_TEST(matches_aiter_permute_and_round_trips)
{
    static const struct {
        uint64_t e, n, k;
        size_t eb;
    } shapes[] = {{1, 16, 32, 1}, {3, 32, 96, 1}, {2, 48, 64, 2}, {1, 16, 32, 2}, {2, 32, 64, 4}};
    fmoe_rng r = fmoe_rng_for(7);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        char why[200];
        ck_assert_int_eq(fmro_shuffle_check(shapes[s].n, shapes[s].k, shapes[s].eb, why, sizeof why), 0);
        size_t bytes = (size_t)(shapes[s].e * shapes[s].n * shapes[s].k) * shapes[s].eb;
        uint8_t *w = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes), *back = malloc(bytes);
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_nonnull(back);
        for (size_t i = 0; i < bytes; i++)
            w[i] = (uint8_t)(fmoe_rng_u64(&r) & 0xFF);
        aiter_permute(a, w, shapes[s].e, shapes[s].n, shapes[s].k, shapes[s].eb);
        fmro_shuffle(b, w, shapes[s].e, shapes[s].n, shapes[s].k, shapes[s].eb);
        ck_assert_msg(memcmp(a, b, bytes) == 0, "shape %zu: not AITER's permutation", s);
        fmro_unshuffle(back, b, shapes[s].e, shapes[s].n, shapes[s].k, shapes[s].eb);
        ck_assert_msg(memcmp(back, w, bytes) == 0, "shape %zu: unshuffle(shuffle(w)) != w", s);
        if (shapes[s].n * shapes[s].k > 512)
            ck_assert_msg(memcmp(b, w, bytes) != 0, "shape %zu: the shuffle moved nothing", s);
        free(w);
        free(a);
        free(b);
        free(back);
    }
}
END_TEST

/* The index is a bijection onto [0, n*k). */
START_TEST(index_is_a_permutation)
{
    const uint64_t n = 48, k = 96;
    for (size_t eb = 1; eb <= 4; eb *= 2) {
        static uint8_t seen[48 * 96];
        memset(seen, 0, sizeof seen);
        for (uint64_t row = 0; row < n; row++)
            for (uint64_t col = 0; col < k; col++) {
                size_t i = fmro_shuffle_index(k, eb, row, col);
                ck_assert_uint_lt(i, n * k);
                ck_assert_msg(!seen[i], "eb %zu: (%llu, %llu) lands on a used slot %zu", eb, (unsigned long long)row,
                              (unsigned long long)col, i);
                seen[i] = 1;
            }
    }
}
END_TEST

START_TEST(shapes_refused)
{
    char why[200];
    ck_assert_int_eq(fmro_shuffle_check(24, 32, 1, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "24 rows"));
    ck_assert_int_eq(fmro_shuffle_check(16, 48, 1, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "48 columns"));
    ck_assert_int_eq(fmro_shuffle_check(16, 32, 3, why, sizeof why), -1);
    ck_assert_int_eq(fmro_shuffle_check(0, 32, 1, why, sizeof why), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_shuffle");
    TCase *tc = tcase_create("shuffle");
    tcase_add_test(tc, hand_positions_fp8);
    tcase_add_test(tc, hand_positions_bf16);
    tcase_add_test(tc, matches_aiter_permute_and_round_trips);
    tcase_add_test(tc, index_is_a_permutation);
    tcase_add_test(tc, shapes_refused);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
