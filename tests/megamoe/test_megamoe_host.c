/*
 * tests/megamoe/test_megamoe_host.c - the MegaMoE plugin's host logic
 * (plugins/megamoe/host.h) without a GPU: spec/formats.md E17 (interleave
 * and UTCCP orders), E9 (UE8M0 packing), the §7.3 buffer byte layout worked
 * out by hand for one small shape, seeded random round trips of the weight
 * transforms against the spec's forward formulas, EPLB placement
 * (p % logical, as the kit's fmoe_eplb_logical_of) and every refusal.
 */
#include <string.h>

#include "fusedmoe/kit/eplb.h"
#include "plugins/megamoe/host.h"
#include "tests/test_util.h"

START_TEST(e17_orders)
{
    /* I = 16: new rows = g0..g7, u0..u7, g8..g15, u8..u15 (u_i = old 16 + i) */
    for (uint32_t n = 0; n < 32; n++) {
        uint32_t want = n < 8 ? n : n < 16 ? 16 + (n - 8) : n < 24 ? n - 8 : 16 + (n - 16);
        ck_assert_uint_eq(mm_interleave_src(n, 32), want);
    }
    ck_assert_uint_eq(mm_utccp_src(1), 32);
    ck_assert_uint_eq(mm_utccp_src(4), 1);
    ck_assert_uint_eq(mm_utccp_src(127), 127);
    ck_assert_uint_eq(mm_utccp_src(0), 0);
    ck_assert_uint_eq(mm_utccp_src(128 + 1), 128 + 32);
    ck_assert_uint_eq(mm_utccp_src(256 + 7), 256 + 96 + 1); /* m = 7: b = 1, a = 3 */
}
END_TEST

START_TEST(e9_packing_in_the_sf_transform)
{
    /* L2 scales of one expert, mn = 128, K = 256 (8 bytes, 2 words a row);
     * row 0 holds E9's exponents. Row 0 stays at 0 under UTCCP. */
    uint8_t sf[128 * 8];
    for (int i = 0; i < 128 * 8; i++)
        sf[i] = (uint8_t)(i * 7 + 3);
    const uint8_t e9[8] = {127, 128, 126, 127, 120, 121, 122, 123};
    memcpy(sf, e9, 8);
    uint32_t out[2 * 128];
    char why[256];
    ck_assert_int_eq(mm_sf_words(1, 128, 256), 256);
    ck_assert_int_eq(mm_transform_sf(sf, out, 1, 128, 256, 0, why, sizeof why), 0);
    ck_assert_uint_eq(out[0], 0x7F7E807Fu);       /* word 0 of row 0 */
    ck_assert_uint_eq(out[128 + 0], 0x7B7A7978u); /* word 1 of row 0: MN-major, 128 words on */
    /* new row 1 <- old row 32 */
    const uint8_t *r32 = sf + 32 * 8;
    ck_assert_uint_eq(out[1],
                      (uint32_t)r32[0] | (uint32_t)r32[1] << 8 | (uint32_t)r32[2] << 16 | (uint32_t)r32[3] << 24);
}
END_TEST

static uint32_t word_of(const uint8_t *row, uint32_t w)
{
    return (uint32_t)row[4 * w] | (uint32_t)row[4 * w + 1] << 8 | (uint32_t)row[4 * w + 2] << 16 |
           (uint32_t)row[4 * w + 3] << 24;
}

/* The spec's forward maps: where old row o goes. */
static uint32_t interleave_dst(uint32_t o, uint32_t rows)
{
    uint32_t half = rows / 2, up = o >= half, i = up ? o - half : o;
    return 16 * (i / 8) + (up ? 8 : 0) + i % 8;
}

static uint32_t utccp_dst(uint32_t o)
{
    uint32_t c = o / 128, m = o % 128, a = m / 32, b = m % 32;
    return 128 * c + 4 * b + a;
}

START_TEST(random_round_trips)
{
    fmoe_rng r = fmoe_rng_for(3601);
    char why[256];
    for (int it = 0; it < 12; it++) {
        uint32_t E = 1 + (uint32_t)(fmoe_rng_u64(&r) % 3), I = 64 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 4));
        uint32_t H = 128 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 4)), rows = 2 * I;
        size_t wbytes = (size_t)E * rows * H / 2, sbytes = (size_t)E * rows * (H / 32);
        uint8_t *w = malloc(wbytes), *wt = malloc(wbytes), *sf = malloc(sbytes);
        uint32_t *st = malloc(mm_sf_words(E, rows, H) * 4);
        ck_assert(w && wt && sf && st);
        for (size_t i = 0; i < wbytes; i++)
            w[i] = (uint8_t)fmoe_rng_u64(&r);
        for (size_t i = 0; i < sbytes; i++)
            sf[i] = (uint8_t)fmoe_rng_u64(&r);
        ck_assert_int_eq(mm_transform_l1_weight(w, wt, E, I, H, why, sizeof why), 0);
        ck_assert_int_eq(mm_transform_sf(sf, st, E, rows, H, 1, why, sizeof why), 0);
        /* the SM90 path's scale bytes: rows of H/32 bytes, interleaved alone */
        uint8_t *si = malloc(sbytes);
        ck_assert_ptr_nonnull(si);
        ck_assert_int_eq(mm_interleave_rows(sf, si, E, I, H / 32, why, sizeof why), 0);
        for (uint32_t e = 0; e < E; e++)
            for (uint32_t o = 0; o < rows; o++)
                ck_assert_msg(memcmp(si + ((size_t)e * rows + interleave_dst(o, rows)) * (H / 32),
                                     sf + ((size_t)e * rows + o) * (H / 32), H / 32) == 0,
                              "scale row %u of expert %u (seed %llu)", o, e, (unsigned long long)fmoe_test_seed());
        free(si);
        uint32_t words = H / 128;
        for (uint32_t e = 0; e < E; e++)
            for (uint32_t o = 0; o < rows; o++) {
                uint32_t d = interleave_dst(o, rows);
                ck_assert_msg(memcmp(wt + ((size_t)e * rows + d) * (H / 2), w + ((size_t)e * rows + o) * (H / 2),
                                     H / 2) == 0,
                              "weight row %u of expert %u (seed %llu)", o, e, (unsigned long long)fmoe_test_seed());
                uint32_t ds = utccp_dst(d);
                const uint8_t *row = sf + ((size_t)e * rows + o) * (H / 32);
                for (uint32_t k = 0; k < words; k++)
                    ck_assert_uint_eq(st[(size_t)e * words * rows + (size_t)k * rows + ds], word_of(row, k));
            }
        /* L2: UTCCP alone, mn = H, K = I */
        size_t s2 = (size_t)E * H * (I / 32);
        uint8_t *sf2 = malloc(s2);
        uint32_t *st2 = malloc(mm_sf_words(E, H, I) * 4);
        ck_assert(sf2 && st2);
        for (size_t i = 0; i < s2; i++)
            sf2[i] = (uint8_t)fmoe_rng_u64(&r);
        if (I % 128 == 0) {
            ck_assert_int_eq(mm_transform_sf(sf2, st2, E, H, I, 0, why, sizeof why), 0);
            for (uint32_t e = 0; e < E; e++)
                for (uint32_t o = 0; o < H; o++)
                    for (uint32_t k = 0; k < I / 128; k++)
                        ck_assert_uint_eq(st2[(size_t)e * (I / 128) * H + (size_t)k * H + utccp_dst(o)],
                                          word_of(sf2 + ((size_t)e * H + o) * (I / 32), k));
        } else {
            ck_assert_int_eq(mm_transform_sf(sf2, st2, E, H, I, 0, why, sizeof why), -1);
            ck_assert_ptr_nonnull(strstr(why, "multiple of 128"));
        }
        free(w);
        free(wt);
        free(sf);
        free(st);
        free(sf2);
        free(st2);
    }
}
END_TEST

/* R = 1, E = 2, max tokens 1, topk 2, H = I = 512, by hand from §7.3:
 * T = 384; ring bounds [384, min(768, align(768 + 766, 384) = 1536)] ->
 * ring 768; sf_ring = 768/8 * 128 = 12288; pool = align(384*2 + 2*191, 384)
 * = 1152. */
START_TEST(byte_layout_by_hand)
{
    mm_dims d = {.ranks = 1, .experts = 2, .max_tokens = 1, .topk = 2, .hidden = 512, .inter = 512};
    mm_layout l;
    char why[256];
    ck_assert_msg(mm_layout_plan(&d, 0, &l, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(l.tokens, 384);
    ck_assert_uint_eq(l.ring_min, 384);
    ck_assert_uint_eq(l.ring_max, 768);
    ck_assert_uint_eq(l.ring, 768);
    ck_assert_uint_eq(l.sf_ring, 12288);
    ck_assert_uint_eq(l.pool_tokens, 1152);
    static const uint64_t want[MM_VIEW_COUNT][2] = {
        {0, 32},           /* barrier */
        {32, 32},          /* send + recv counts: 2 E x 8 */
        {64, 16},          /* recv sums: E_local x 8 */
        {80, 1536},        /* 4 x (768 / 8) x 4 */
        {1616, 3072},      /* E_local x R x (R x T) x 4 */
        {4688, 13824},     /* 1152 x 12, ends at 18512 = 16 x 1157 */
        {18512, 196608},   /* x: T x H */
        {215120, 6144},    /* x_sf: T x H/32 */
        {221264, 6144},    /* topk_idx: T x 2 x 8 */
        {227408, 3072},    /* topk_weights: T x 2 x 4 */
        {230480, 393216},  /* l1_acts: ring x H */
        {623696, 196608},  /* l1_acts_sf: sf_ring x H/32 */
        {820304, 3072},    /* l1 weights: ring x 4 */
        {823376, 393216},  /* l2_acts: ring x I */
        {1216592, 196608}, /* l2_acts_sf */
        {1413200, 786432}, /* combine: topk x T x H x 2 */
    };
    for (int v = 0; v < MM_VIEW_COUNT; v++) {
        ck_assert_msg(l.view[v].offset == want[v][0] && l.view[v].bytes == want[v][1], "%s: offset %llu bytes %llu",
                      mm_view_name(v), (unsigned long long)l.view[v].offset, (unsigned long long)l.view[v].bytes);
    }
    ck_assert_uint_eq(l.workspace, 18512);
    ck_assert_uint_eq(l.total, 2199632);
    /* the ring option: a multiple of 384 within the bounds */
    ck_assert_int_eq(mm_layout_plan(&d, 384, &l, why, sizeof why), 0);
    ck_assert_uint_eq(l.view[MM_L1_ACTS].bytes, 384 * 512);
}
END_TEST

START_TEST(random_layouts_are_aligned_and_packed)
{
    fmoe_rng r = fmoe_rng_for(3602);
    char why[256];
    for (int it = 0; it < 200; it++) {
        uint32_t R = 1u << (fmoe_rng_u64(&r) % 4);
        mm_dims d = {.ranks = R,
                     .experts = R * (1 + (uint32_t)(fmoe_rng_u64(&r) % 64)),
                     .max_tokens = 1 + (uint32_t)(fmoe_rng_u64(&r) % 5000),
                     .topk = 1 + (uint32_t)(fmoe_rng_u64(&r) % 12),
                     .hidden = 512 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 14)),
                     .inter = 512 * (1 + (uint32_t)(fmoe_rng_u64(&r) % 6))};
        mm_layout l;
        ck_assert_msg(mm_layout_plan(&d, 0, &l, why, sizeof why) == 0, "%s", why);
        ck_assert_uint_eq(l.tokens % 384, 0);
        ck_assert(l.tokens >= d.max_tokens && l.tokens < d.max_tokens + 384);
        ck_assert(l.ring % 384 == 0 && l.ring >= l.ring_min && l.ring <= l.ring_max);
        ck_assert_uint_eq(l.sf_ring, l.ring / 8 * 128);
        uint64_t at = 0;
        for (int v = 0; v < MM_VIEW_COUNT; v++) {
            ck_assert_uint_eq(l.view[v].offset, at);
            if (v >= MM_X)
                ck_assert_msg(l.view[v].offset % 16 == 0, "%s at %llu", mm_view_name(v),
                              (unsigned long long)l.view[v].offset);
            at += l.view[v].bytes;
        }
        ck_assert_uint_eq(at, l.total);
        ck_assert_uint_eq(l.view[MM_COMBINE].bytes, (uint64_t)d.topk * l.tokens * d.hidden * 2);
    }
}
END_TEST

START_TEST(refusals)
{
    static const struct {
        mm_dims d;
        uint32_t ring;
        const char *needle;
    } cases[] = {
        {{1, 8, 16, 2, 1000, 512}, 0, "hidden_size 1000 is not a multiple of 128"},
        {{1, 8, 16, 2, 2304, 512}, 0, "hidden_size 2304 is not a multiple of 512"},
        {{1, 8, 16, 2, 512, 640}, 0, "intermediate_size_per_partition 640 is not a multiple of 512"},
        {{4, 6, 16, 2, 512, 512}, 0, "6 experts do not divide over 4 EP ranks"},
        {{1, 8, 16, 33, 512, 512}, 0, "top_k 33"},
        {{1, 8, 16, 0, 512, 512}, 0, "top_k 0"},
        {{1, 8, 16, 2, 512, 512}, 500, "ring of 500 tokens"},
        {{1, 8, 16, 2, 512, 512}, 384 * 100, "ring of 38400 tokens"},
        {{0, 8, 16, 2, 512, 512}, 0, "must be > 0"},
        {{1, 70000, 16, 2, 512, 512}, 0, "at most 65536 experts"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mm_layout l;
        char why[256] = "";
        ck_assert_int_eq(mm_layout_plan(&cases[i].d, cases[i].ring, &l, why, sizeof why), -1);
        ck_assert_msg(strstr(why, cases[i].needle), "case %zu: %s", i, why);
    }
    char why[256];
    uint8_t b[64];
    uint32_t w[64];
    ck_assert_int_eq(mm_transform_l1_weight(b, b, 1, 12, 4, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "multiple of 8"));
    ck_assert_int_eq(mm_transform_sf(b, w, 1, 64, 128, 0, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "64 scale rows"));
}
END_TEST

START_TEST(placement_and_tokens)
{
    uint32_t out[8];
    char why[256];
    /* 4 logical + 2 redundant over 2 ranks */
    ck_assert_int_eq(mm_local_logical(6, 4, 2, 0, out, why, sizeof why), 0);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 2);
    ck_assert_int_eq(mm_local_logical(6, 4, 2, 1, out, why, sizeof why), 0);
    ck_assert_uint_eq(out[0], 3);
    ck_assert_uint_eq(out[1], 0);
    ck_assert_uint_eq(out[2], 1);
    for (uint32_t p = 0; p < 40; p++)
        ck_assert_uint_eq(mm_logical_of(p, 7), fmoe_eplb_logical_of(7, p));
    ck_assert_int_eq(mm_local_logical(7, 4, 2, 0, out, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "7 physical experts"));
    ck_assert_int_eq(mm_local_logical(6, 4, 2, 2, out, why, sizeof why), -1);

    mm_dims d = {.ranks = 2, .experts = 8, .max_tokens = 100, .topk = 2, .hidden = 512, .inter = 512};
    mm_layout l;
    ck_assert_int_eq(mm_layout_plan(&d, 0, &l, why, sizeof why), 0);
    ck_assert_int_eq(mm_check_tokens(0, &l, why, sizeof why), 0);
    ck_assert_int_eq(mm_check_tokens(100, &l, why, sizeof why), 0);
    ck_assert_int_eq(mm_check_tokens(101, &l, why, sizeof why), -1);
    ck_assert_str_eq(why, "MegaMoE got 101 tokens, but the symmetric buffer was sized for 100 (max_num_tokens; 384 "
                          "rows after rounding to 384): refused, not truncated");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_host");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, e17_orders);
    tcase_add_test(tc, e9_packing_in_the_sf_transform);
    tcase_add_test(tc, random_round_trips);
    tcase_add_test(tc, byte_layout_by_hand);
    tcase_add_test(tc, random_layouts_are_aligned_and_packed);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, placement_and_tokens);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 7);
}
