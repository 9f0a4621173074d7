/*
 * tests/megamoe/test_megamoe_sm90_plan.c - the SM90 path's device memory
 * plan (plugins/megamoe/sm90_plan.h) without a GPU: one small shape worked
 * out by hand, seeded random shapes whose views are in order, aligned,
 * disjoint and as large as their formulas, the refusals, and the GEMM tile
 * bound the forward sizes its grid by against random expert loads; the
 * GEMM's weight order and nibble decoders against the e2m1 values, and
 * the fast weight-scale test.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/megamoe/sm90_plan.h"
#include "tests/test_util.h"

START_TEST(byte_layout_by_hand)
{
    /* E 2, H 64, I 32, top-2, 3 tokens: P = 6 pairs. */
    mm90_plan p;
    char why[256];
    ck_assert_int_eq(mm90_plan_make(2, 64, 32, 2, 3, &p, why, sizeof why), 0);
    ck_assert_uint_eq(p.pairs, 6);
    /* tile-major, per expert one block of 256 rows x one stage of 128 K:
     * w13 and w2 2 * 256 * 64 = 32768 each, their scale words 2 * 256 * 4 */
    const uint64_t w_off[] = {0, 32768, 34816, 67584}, w_len[] = {32768, 2048, 32768, 2048};
    for (int i = 0; i < MM90_WEIGHT_VIEWS; i++) {
        ck_assert_uint_eq(p.weight[i].offset, w_off[i]);
        ck_assert_uint_eq(p.weight[i].bytes, w_len[i]);
    }
    ck_assert_uint_eq(p.weight_bytes, 69632);
    /* xq 3*64 (e4m3), xs 3*4*4 (a stage's four scales a row), loc 6*4,
     * order 6*4, count 2*4, seg 3*4, tiles 3*4, cursor 2*4, y 6*64*2, aq
     * 6*32 (e4m3), as 6*4*4 */
    const uint64_t off[] = {0, 256, 512, 768, 1024, 1280, 1536, 1792, 2048, 2816, 3072};
    const uint64_t len[] = {192, 48, 24, 24, 8, 12, 12, 8, 768, 192, 96};
    for (int i = 0; i < MM90_WORK_VIEWS; i++) {
        ck_assert_uint_eq(p.work[i].offset, off[i]);
        ck_assert_uint_eq(p.work[i].bytes, len[i]);
    }
    ck_assert_uint_eq(p.work_bytes, 3328);
}
END_TEST

static void check_views(const mm_view *v, int n, uint64_t total, uint64_t seed)
{
    uint64_t end = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(v[i].offset % MM90_ALIGN == 0 && v[i].offset >= end, "seed %llu: view %d at %llu",
                      (unsigned long long)seed, i, (unsigned long long)v[i].offset);
        end = v[i].offset + v[i].bytes;
    }
    ck_assert_uint_ge(total, end);
    ck_assert_uint_lt(total - end, MM90_ALIGN);
}

START_TEST(random_plans)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 9090);
    char why[256];
    for (int it = 0; it < 500; it++) {
        uint32_t E = 1 + (uint32_t)(fmoe_rng_u64(&r) % 1100), H = 32 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 256));
        uint32_t I = 32 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 128)), k = 1 + (uint32_t)(fmoe_rng_u64(&r) % 16);
        uint32_t T = 1 + (uint32_t)(fmoe_rng_u64(&r) % 9000);
        mm90_plan p;
        ck_assert_msg(mm90_plan_make(E, H, I, k, T, &p, why, sizeof why) == 0, "seed %llu: %s",
                      (unsigned long long)seed, why);
        uint64_t P = (uint64_t)T * k;
        ck_assert_uint_eq(p.pairs, P);
        /* whole blocks of 256 rows x stages of 128 K */
        const uint64_t tiles13 = (uint64_t)E * ((2 * I + 255) / 256) * ((H + 127) / 128);
        const uint64_t tiles2 = (uint64_t)E * ((H + 255) / 256) * ((I + 127) / 128);
        ck_assert_uint_eq(p.weight[MM90_W13].bytes, tiles13 * 256 * 64);
        ck_assert_uint_eq(p.weight[MM90_W13_SF].bytes, tiles13 * 256 * 4);
        ck_assert_uint_eq(p.weight[MM90_W2].bytes, tiles2 * 256 * 64);
        ck_assert_uint_eq(p.weight[MM90_W2_SF].bytes, tiles2 * 256 * 4);
        ck_assert_uint_eq(p.work[MM90_XQ].bytes, (uint64_t)T * H);
        ck_assert_uint_eq(p.work[MM90_XS].bytes, (uint64_t)T * ((H + 127) / 128) * 4 * 4);
        ck_assert_uint_eq(p.work[MM90_AQ].bytes, P * I);
        ck_assert_uint_eq(p.work[MM90_SEG].bytes, (uint64_t)(E + 1) * 4);
        ck_assert_uint_eq(p.work[MM90_HY].bytes, P * H * 2); /* GEMM2's bf16 out (GEMM1's is not stored) */
        ck_assert_uint_eq(p.work[MM90_AS].bytes, P * ((I + 127) / 128) * 4 * 4);
        check_views(p.weight, MM90_WEIGHT_VIEWS, p.weight_bytes, seed);
        check_views(p.work, MM90_WORK_VIEWS, p.work_bytes, seed);
    }
}
END_TEST

START_TEST(refusals)
{
    mm90_plan p;
    char why[256];
    ck_assert_int_eq(mm90_plan_make(0, 64, 64, 2, 8, &p, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "must be > 0") != NULL, "%s", why);
    ck_assert_int_eq(mm90_plan_make(8, 64, 64, 2, 0, &p, why, sizeof why), -1);
    ck_assert_int_eq(mm90_plan_make(8, 80, 64, 2, 8, &p, why, sizeof why), -1);
    ck_assert_str_eq(why, "MegaMoE SM90: hidden_size 80 and intermediate_size_per_partition 64 must be multiples of "
                          "32 (one UE8M0 scale per 32 along K)");
    ck_assert_int_eq(mm90_plan_make(8, 64, 48, 2, 8, &p, why, sizeof why), -1);
    ck_assert_int_eq(mm90_plan_make(1u << 31, 1u << 20, 1u << 20, 8, 1u << 30, &p, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "does not fit") != NULL, "%s", why);
    ck_assert_int_eq(mm90_plan_make(8, 64, 64, 1u << 10, 1u << 30, &p, why, sizeof why), -1); /* 2^40 pairs */
}
END_TEST

START_TEST(tile_bound)
{
    ck_assert_uint_eq(mm90_max_tiles(6, 2), 3);
    ck_assert_uint_eq(mm90_max_tiles(130, 1), 6); /* ceil(130 / 32) + 1 */
    ck_assert_uint_eq(mm90_max_tiles(1, 1025), 2);
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 9091);
    static uint32_t count[300];
    for (int it = 0; it < 2000; it++) {
        uint32_t E = 1 + (uint32_t)(fmoe_rng_u64(&r) % 300), pairs = (uint32_t)(fmoe_rng_u64(&r) % 5000);
        memset(count, 0, sizeof count);
        /* skewed loads: half the pairs on expert 0 half the time */
        for (uint32_t q = 0; q < pairs; q++)
            count[(it & 1) && q % 2 ? 0 : fmoe_rng_u64(&r) % E]++;
        uint64_t tiles = 0;
        for (uint32_t e = 0; e < E; e++)
            tiles += (count[e] + MM90_BLOCK_M - 1) / MM90_BLOCK_M;
        ck_assert_msg(tiles <= mm90_max_tiles(pairs, E), "seed %llu: %llu tiles > bound", (unsigned long long)seed,
                      (unsigned long long)tiles);
    }
}
END_TEST

START_TEST(scale_pitch)
{
    /* K/32 activation scales per row, rounded up to a stage's 4 */
    ck_assert_uint_eq(mm90_xs_pitch(32), 4);
    ck_assert_uint_eq(mm90_xs_pitch(128), 4);
    ck_assert_uint_eq(mm90_xs_pitch(160), 8);
    ck_assert_uint_eq(mm90_xs_pitch(768), 24);   /* Qwen3-30B-A3B's I: no padding */
    ck_assert_uint_eq(mm90_xs_pitch(7168), 224); /* DeepSeek-V3's H */
    ck_assert_uint_eq(mm90_xs_pitch(7200), 228);
}
END_TEST

/* Where row r's stage s lands in a tile-major tensor of `ks` stages
 * (written from sm90_plan.h's description, not from the code). */
static uint64_t tile_row(uint64_t r, uint64_t s, uint64_t ks)
{
    return ((r / 256) * ks + s) * 256 + r % 256;
}

START_TEST(tiles_by_hand)
{
    /* 3 rows, k 160: one block, two stages (4 groups, then 1) */
    uint8_t packed[3 * 80], sf[3 * 5];
    for (int i = 0; i < 3 * 80; i++)
        packed[i] = (uint8_t)(1 + i % 251);
    for (int i = 0; i < 3 * 5; i++)
        sf[i] = (uint8_t)(100 + i);
    ck_assert_uint_eq(mm90_tile_bytes(3, 160), 2 * 256 * 64);
    ck_assert_uint_eq(mm90_tile_sf_bytes(3, 160), 2 * 256 * 4);
    static uint8_t w[2 * 256 * 64], wsf[2 * 256 * 4];
    memset(w, 0xEE, sizeof w);
    memset(wsf, 0xEE, sizeof wsf);
    mm90_tile_expert(packed, sf, 3, 160, w, wsf);
    /* row 1, stage 0: its bytes 0..63 at tile row 1 */
    ck_assert_int_eq(memcmp(w + 1 * 64, packed + 80, 64), 0);
    /* row 2, stage 1: its bytes 64..79 at tile row 256 + 2, then 48 zeros */
    ck_assert_int_eq(memcmp(w + (256 + 2) * 64, packed + 2 * 80 + 64, 16), 0);
    for (int j = 16; j < 64; j++)
        ck_assert_uint_eq(w[(256 + 2) * 64 + j], 0);
    /* row 3 (past the rows) is zero in both stages */
    for (int j = 0; j < 64; j++)
        ck_assert_uint_eq(w[3 * 64 + j] | w[(256 + 3) * 64 + j], 0);
    /* scale words: row 0's groups 0..3, then group 4 and three zeros */
    ck_assert_uint_eq(wsf[0], 100);
    ck_assert_uint_eq(wsf[3], 103);
    ck_assert_uint_eq(wsf[256 * 4 + 0], 104);
    ck_assert_uint_eq(wsf[256 * 4 + 1], 0);
    ck_assert_uint_eq(wsf[(256 + 2) * 4], 114);
}
END_TEST

START_TEST(tiles_random)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 9093);
    for (int it = 0; it < 40; it++) {
        const uint64_t rows = 1 + fmoe_rng_u64(&r) % 700;
        const uint32_t k = 32 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 24)), groups = k / 32;
        const uint64_t ks = (k + 127) / 128;
        uint8_t *packed = malloc(rows * k / 2), *sf = malloc(rows * groups);
        uint8_t *w = malloc(mm90_tile_bytes(rows, k)), *wsf = malloc(mm90_tile_sf_bytes(rows, k));
        uint8_t *want = calloc(mm90_tile_bytes(rows, k), 1), *want_sf = calloc(mm90_tile_sf_bytes(rows, k), 1);
        ck_assert(packed && sf && w && wsf && want && want_sf);
        for (uint64_t i = 0; i < rows * k / 2; i++)
            packed[i] = (uint8_t)(1 + fmoe_rng_u64(&r) % 255);
        for (uint64_t i = 0; i < rows * groups; i++)
            sf[i] = (uint8_t)(1 + fmoe_rng_u64(&r) % 254);
        /* the expected tensors, value by value */
        for (uint64_t row = 0; row < rows; row++)
            for (uint32_t g = 0; g < groups; g++) {
                const uint64_t at = tile_row(row, g / 4, ks);
                for (uint32_t j = 0; j < 16; j++)
                    want[at * 64 + (g % 4) * 16 + j] = packed[row * (k / 2) + g * 16 + j];
                want_sf[at * 4 + g % 4] = sf[row * groups + g];
            }
        mm90_tile_expert(packed, sf, rows, k, w, wsf);
        ck_assert_msg(memcmp(w, want, mm90_tile_bytes(rows, k)) == 0, "seed %llu: rows %llu k %u",
                      (unsigned long long)seed, (unsigned long long)rows, k);
        ck_assert_msg(memcmp(wsf, want_sf, mm90_tile_sf_bytes(rows, k)) == 0, "seed %llu: rows %llu k %u (scales)",
                      (unsigned long long)seed, (unsigned long long)rows, k);
        free(packed);
        free(sf);
        free(w);
        free(wsf);
        free(want);
        free(want_sf);
    }
}
END_TEST

START_TEST(gemm_grid)
{
    /* DeepSeek-V3, one token, top-8: GEMM1 4096 rows, GEMM2 7168 rows; 8 pairs
     * give at most 1 + 8 tiles */
    mm90_grid g = mm90_gemm_grid(4096, 8, 256);
    ck_assert_uint_eq(g.x, 16);
    ck_assert_uint_eq(g.y, 9);
    g = mm90_gemm_grid(7168, 8, 256);
    ck_assert_uint_eq(g.x, 28);
    /* rows not a multiple of the block: the last block is partial */
    g = mm90_gemm_grid(288, 4096, 128);
    ck_assert_uint_eq(g.x, 2);
    ck_assert_uint_eq(g.y, 128 + 128);
    /* more tiles than grid.y allows: capped, the kernel loops */
    g = mm90_gemm_grid(64, (uint64_t)1 << 31, 1024);
    ck_assert_uint_eq(g.x, 1);
    ck_assert_uint_eq(g.y, MM90_MAX_GRID_Y);
    /* the grid covers every weight row and, below the cap, every tile */
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 9092);
    for (int it = 0; it < 1000; it++) {
        uint32_t n = 32 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 512)), E = 1 + (uint32_t)(fmoe_rng_u64(&r) % 512);
        uint64_t pairs = 1 + fmoe_rng_u64(&r) % 100000;
        g = mm90_gemm_grid(n, pairs, E);
        ck_assert_msg((uint64_t)g.x * MM90_BLOCK_N >= n && (uint64_t)(g.x - 1) * MM90_BLOCK_N < n,
                      "seed %llu: n %u, %u blocks", (unsigned long long)seed, n, g.x);
        uint64_t tiles = mm90_max_tiles(pairs, E);
        ck_assert_msg(g.y >= 1 && g.y == (tiles < MM90_MAX_GRID_Y ? tiles : MM90_MAX_GRID_Y),
                      "seed %llu: %llu tiles, grid.y %u", (unsigned long long)seed, (unsigned long long)tiles, g.y);
    }
}
END_TEST

/* The oracles: the library's own codecs (include/fusedmoe/formats.h). */
static double e4m3_value(uint8_t b)
{
    return fmoe_fp8_e4m3fn_decode(b);
}

static double e2m1_value(uint32_t code)
{
    return fmoe_fp4_e2m1_decode((uint8_t)code);
}

static uint32_t code_of(const uint8_t *row, uint32_t e)
{
    return (uint32_t)(row[e / 2] >> (4 * (e % 2))) & 15u;
}

/* Every code through the packer and the decoders, at each of a word's four
 * places beside other codes (the high values' m bits sit one byte apart):
 * byte j of the low (high) decode is e4m3(c x 2^-6) for code c of low
 * (high) value j. */
START_TEST(decode_every_code)
{
    for (uint32_t lo = 0; lo < 16; lo++)
        for (uint32_t hi = 0; hi < 16; hi++)
            for (int j = 0; j < 4; j++) {
                uint8_t l[4], h[4];
                for (int i = 0; i < 4; i++) {
                    l[i] = (uint8_t)((lo + 5 * (uint32_t)i + 3) % 16);
                    h[i] = (uint8_t)((hi + 7 * (uint32_t)i + 11) % 16);
                }
                l[j] = (uint8_t)lo;
                h[j] = (uint8_t)hi;
                const uint32_t w = mm90_pack_word(l, h);
                for (int i = 0; i < 4; i++) {
                    const uint8_t dl = (uint8_t)(mm90_e2m1_lo_e4m3(w) >> (8 * i));
                    const uint8_t dh = (uint8_t)(mm90_e2m1_hi_e4m3(w) >> (8 * i));
                    ck_assert_msg(e4m3_value(dl) == ldexp(e2m1_value(l[i]), -6), "lo %u byte %d: 0x%02x", l[i], i, dl);
                    ck_assert_msg(e4m3_value(dh) == ldexp(e2m1_value(h[i]), -6), "hi %u byte %d: 0x%02x", h[i], i, dh);
                }
            }
    /* worked by hand from the layout (sm90_plan.h): -6 (code 15) as low and
     * high value 0 is 0x9C (s 0 0 1 1 1 0 0) each way; its high m bit lands
     * at bit 6 of byte 3 */
    const uint8_t six[4] = {15, 0, 0, 0}, zero[4] = {0, 0, 0, 0}, half[4] = {1, 0, 0, 0};
    ck_assert_uint_eq(mm90_pack_word(six, six), 0x400000BFu);
    ck_assert_uint_eq(mm90_e2m1_lo_e4m3(0x400000BFu), 0x9Cu);
    ck_assert_uint_eq(mm90_e2m1_hi_e4m3(0x400000BFu), 0x9Cu);
    /* 0.5 as high value 0: its m alone, e4m3 subnormal 4 x 2^-9 */
    ck_assert_uint_eq(mm90_pack_word(zero, half), 0x40000000u);
    ck_assert_uint_eq(mm90_e2m1_hi_e4m3(0x40000000u), 0x04u);
    /* signs kept on zero: -0 is 0x80 */
    const uint8_t negz[4] = {8, 0, 0, 0};
    ck_assert_uint_eq(mm90_e2m1_lo_e4m3(mm90_pack_word(negz, zero)), 0x80u);
    ck_assert_uint_eq(mm90_e2m1_hi_e4m3(mm90_pack_word(zero, negz)), 0x80u);
}
END_TEST

/* mm90_pack_stage_rows read the way the GEMM reads it: thread tg's word of
 * group c in a stage of ng groups is at bytes (tg * ng + c) * 4 of the
 * stage, and decodes to the values at K offsets 4tg + j (low values) and
 * 16 + 4tg + j (high) of the group. K = 32, 96 (a stage of three
 * groups), 160 (a full stage and a one-group tail), 416 (three full
 * stages and a one-group tail) and 7168. */
START_TEST(stage_order_decodes_to_the_fragments)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed ^ 9093);
    const uint32_t ks[] = {32, 96, 160, 416, 7168};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        const uint32_t k = ks[t], rows = 3;
        uint8_t *src = malloc((size_t)rows * k / 2), *dst = malloc((size_t)rows * k / 2);
        ck_assert(src && dst);
        for (size_t i = 0; i < (size_t)rows * k / 2; i++)
            src[i] = (uint8_t)fmoe_rng_u64(&r);
        mm90_pack_stage_rows(src, dst, rows, k);
        for (uint32_t row = 0; row < rows; row++)
            for (uint32_t g0 = 0; g0 < k / 32; g0 += 4) {
                const uint32_t ng = k / 32 - g0 < 4 ? k / 32 - g0 : 4;
                const uint8_t *st = dst + (size_t)row * k / 2 + g0 * 16;
                for (uint32_t tg = 0; tg < 4; tg++)
                    for (uint32_t c = 0; c < ng; c++) {
                        const uint8_t *p = st + (tg * ng + c) * 4;
                        const uint32_t w = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                        for (int j = 0; j < 4; j++) {
                            const uint32_t e = (g0 + c) * 32 + 4 * tg + (uint32_t)j;
                            const double want_lo = ldexp(e2m1_value(code_of(src + (size_t)row * k / 2, e)), -6);
                            const double want_hi = ldexp(e2m1_value(code_of(src + (size_t)row * k / 2, e + 16)), -6);
                            ck_assert_msg(e4m3_value((uint8_t)(mm90_e2m1_lo_e4m3(w) >> (8 * j))) == want_lo &&
                                              e4m3_value((uint8_t)(mm90_e2m1_hi_e4m3(w) >> (8 * j))) == want_hi,
                                          "seed %llu: K %u row %u group %u tg %u j %d", (unsigned long long)seed, k,
                                          row, g0 + c, tg, j);
                        }
                    }
            }
        free(src);
        free(dst);
    }
}
END_TEST

START_TEST(fast_scales)
{
    uint8_t sf[254];
    for (int i = 0; i < 254; i++)
        sf[i] = (uint8_t)(i + 1);
    ck_assert_int_eq(mm90_fast_scales(sf, 254), 1);
    ck_assert_int_eq(mm90_fast_scales(sf, 0), 1);
    const uint8_t bad[] = {0, 255};
    for (size_t b = 0; b < sizeof bad; b++) {
        sf[100] = bad[b];
        ck_assert_msg(mm90_fast_scales(sf, 254) == 0, "byte %u", bad[b]);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_sm90_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, byte_layout_by_hand);
    tcase_add_test(tc, random_plans);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, tiles_by_hand);
    tcase_add_test(tc, tiles_random);
    tcase_add_test(tc, tile_bound);
    tcase_add_test(tc, scale_pitch);
    tcase_add_test(tc, gemm_grid);
    tcase_add_test(tc, decode_every_code);
    tcase_add_test(tc, stage_order_decodes_to_the_fragments);
    tcase_add_test(tc, fast_scales);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 4);
}
