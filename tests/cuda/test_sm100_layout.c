/*
 * tests/cuda/test_sm100_layout.c - the host logic of the CUDA plugin's
 * native SM100 block-scaled path (plugins/cuda/sm100_layout.h), without a
 * GPU (no SM100 GPU runs this project's CI or its device checks):
 *   - the 128x4 swizzled scale layout: spec/formats.md E7 and the core
 *     library's fmoe_blockscale_swizzle, offset by offset;
 *   - the per-expert activation scale groups never overlap and fit the
 *     buffer, for random expert sizes; each expert's problem and operand
 *     offsets;
 *   - activation quantization as the staging kernel computes it, bit for bit
 *     against the core's fmoe_nvfp4_quantize (QUANT global) and
 *     fmoe_mxfp4_quantize (OCP), and its e4m3 encoder against
 *     fmoe_fp8_e4m3fn_encode;
 *   - the selection: compute capability 10.x only, W4A4 NVFP4 only, K
 *     alignment;
 *   - the workspace: aligned, disjoint buffers of the sizes the kernels use.
 * Random inputs from a fixed seed, printed on failure.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/sm100_layout.h"

static const uint64_t seed0 = 0x2545F4914F6CDD1Dull;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* A float of random sign, mantissa and exponent in 2^lo .. 2^hi. */
static float rand_float(int lo, int hi)
{
    float m = 1.0f + (float)(next32() & 0xFFFFFF) / 16777216.0f;
    int e = lo + (int)(next32() % (uint32_t)(hi - lo + 1));
    float v = ldexpf(m, e);
    return (next32() & 1) ? -v : v;
}

START_TEST(swizzle_worked_examples)
{
    /* spec/formats.md E7. */
    ck_assert_int_eq(fmcu_sm100_sf_offset(1, 1, 4), 17);
    ck_assert_int_eq(fmcu_sm100_sf_offset(33, 2, 4), 22);
    ck_assert_int_eq(fmcu_sm100_sf_offset(130, 5, 8), 1569);
    ck_assert_int_eq(fmcu_sm100_sf_offset(0, 4, 8), 512);
    ck_assert_int_eq(fmcu_sm100_sf_bytes(1, 1), 512);
    ck_assert_int_eq(fmcu_sm100_sf_bytes(129, 5), 256 * 8);
}
END_TEST

START_TEST(swizzle_matches_core)
{
    rng = seed0;
    for (int t = 0; t < 200; t++) {
        int64_t rows = 1 + next32() % 300, sf_cols = 1 + next32() % 40;
        ck_assert_int_eq(fmcu_sm100_sf_bytes(rows, sf_cols), fmoe_blockscale_swizzled_bytes(rows, sf_cols));
        for (int i = 0; i < 50; i++) {
            int64_t m = next32() % rows, kb = next32() % sf_cols;
            if (fmcu_sm100_sf_offset(m, kb, sf_cols) != fmoe_blockscale_swizzle_offset(m, kb, sf_cols))
                ck_abort_msg("offset (%lld, %lld) of [%lld, %lld] differs from the core's (seed %llx)", (long long)m,
                             (long long)kb, (long long)rows, (long long)sf_cols, (unsigned long long)seed0);
        }
    }
    /* Weight scales of 3 experts, each swizzled as the core swizzles one matrix. */
    const uint32_t E = 3, rows = 200, sf_cols = 6;
    uint8_t *lin = malloc((size_t)E * rows * sf_cols);
    const size_t per = (size_t)fmcu_sm100_sf_bytes(rows, sf_cols);
    uint8_t *got = malloc(per * E), *want = malloc(per);
    for (size_t i = 0; i < (size_t)E * rows * sf_cols; i++)
        lin[i] = (uint8_t)(1 + next32() % 255);
    fmcu_sm100_swizzle_weight_sf(E, rows, sf_cols, lin, got);
    for (uint32_t e = 0; e < E; e++) {
        ck_assert_int_eq(fmoe_blockscale_swizzle(rows, sf_cols, lin + (size_t)e * rows * sf_cols, want),
                         FMOE_STATUS_OK);
        ck_assert_msg(memcmp(got + e * per, want, per) == 0, "expert %u's swizzled scales differ (seed %llx)", e,
                      (unsigned long long)seed0);
    }
    free(lin);
    free(got);
    free(want);
}
END_TEST

START_TEST(groups_disjoint)
{
    rng = seed0;
    for (int t = 0; t < 2000; t++) {
        uint32_t E = 1 + next32() % 64;
        int64_t off = 0, prev_end = 0;
        const int64_t bound_rows = 20000;
        int64_t sizes[64], starts[64];
        for (uint32_t e = 0; e < E; e++) {
            uint32_t r = next32() % 8;
            sizes[e] = r == 0 ? 0 : r < 4 ? next32() % 4 : r < 7 ? next32() % 300 : next32() % 1000;
        }
        for (uint32_t e = 0; e < E; e++) {
            starts[e] = fmcu_sm100_group_sf_row(off, e);
            ck_assert_int_eq(starts[e] % 128, 0);
            if (starts[e] < prev_end)
                ck_abort_msg("expert %u's scales start at row %lld, inside expert %u's (ending %lld); seed %llx", e,
                             (long long)starts[e], e - 1, (long long)prev_end, (unsigned long long)seed0);
            prev_end = starts[e] + (sizes[e] + 127) / 128 * 128;
            off += sizes[e];
        }
        ck_assert_int_le(prev_end, fmcu_sm100_a_sf_rows(off, E));
        ck_assert_int_le(off, bound_rows);
    }
}
END_TEST

START_TEST(group_problem)
{
    /* Expert 2 of W13 (n = 2I = 1536, k = H = 2048, NVFP4), rows 300..340. */
    fmcu_sm100_group g = fmcu_sm100_group_at(1536, 2048, 16, 2, 300, 40);
    ck_assert_int_eq(g.m, 40);
    ck_assert_int_eq(g.n, 1536);
    ck_assert_int_eq(g.k, 2048);
    ck_assert_int_eq(g.a_off, 300 * 1024);
    ck_assert_int_eq(g.sfa_off, 128 * (2 + 2) * 128); /* row 512; 128 scale columns */
    ck_assert_int_eq(g.b_off, 2ll * 1536 * 1024);
    ck_assert_int_eq(g.sfb_off, 2ll * 1536 * 128);
    ck_assert_int_eq(g.d_off, 300ll * 1536);
    /* MXFP4, K = 96: 3 scale columns padded to 4; 200 weight rows padded to 256. */
    g = fmcu_sm100_group_at(200, 96, 32, 1, 0, 0);
    ck_assert_int_eq(g.m, 0);
    ck_assert_int_eq(g.sfa_off, 128 * 4);
    ck_assert_int_eq(g.sfb_off, 256 * 4);
}
END_TEST

START_TEST(e4m3_encoder)
{
    rng = seed0;
    const float special[] = {0.0f,      -0.0f,         448.0f,  449.0f,       463.99f,       464.0f,      1e30f,
                             INFINITY,  -INFINITY,     NAN,     0.001953125f, 0.0009765625f, 0.00097656f, 0.0029296875f,
                             0.015625f, 0.0146484375f, 1.0625f, 1.1875f,      240.0f,        1e-45f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        ck_assert_uint_eq(fmcu_sm100_e4m3_encode(special[i]), fmoe_fp8_e4m3fn_encode(special[i]));
    /* Every code's value, the midpoints to its neighbours and one ulp around them. */
    for (uint32_t b = 0; b < 0x7E; b++) {
        float v = fmoe_fp8_e4m3fn_decode((uint8_t)b), w = fmoe_fp8_e4m3fn_decode((uint8_t)(b + 1));
        float mid = (v + w) / 2;
        const float probe[] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, 1e9f), -mid, -v};
        for (int j = 0; j < 6; j++)
            if (fmcu_sm100_e4m3_encode(probe[j]) != fmoe_fp8_e4m3fn_encode(probe[j]))
                ck_abort_msg("e4m3(%a): 0x%02x, the core 0x%02x", (double)probe[j], fmcu_sm100_e4m3_encode(probe[j]),
                             fmoe_fp8_e4m3fn_encode(probe[j]));
        ck_assert_float_eq(fmcu_sm100_e4m3_decode(b), v);
    }
    for (int i = 0; i < 1000000; i++) {
        float x = rand_float(-24, 12);
        if (fmcu_sm100_e4m3_encode(x) != fmoe_fp8_e4m3fn_encode(x))
            ck_abort_msg("e4m3(%a): 0x%02x, the core 0x%02x (seed %llx)", (double)x, fmcu_sm100_e4m3_encode(x),
                         fmoe_fp8_e4m3fn_encode(x), (unsigned long long)seed0);
    }
    ck_assert(isnan(fmcu_sm100_e4m3_decode(0x7F)));
}
END_TEST

/* A row of 4 blocks of `block` values: each block of one magnitude class
 * (normal, tiny, huge, with a zero block now and then). */
static void fill_row(float *x, int n, int block)
{
    for (int b = 0; b < n / block; b++) {
        uint32_t kind = next32() % 6;
        for (int i = 0; i < block; i++) {
            float *v = &x[b * block + i];
            *v = kind == 0   ? 0.0f
                 : kind == 1 ? rand_float(-140, -120)
                 : kind == 2 ? rand_float(20, 40)
                             : rand_float(-8, 4);
            if (kind == 3 && i % 7 == 3)
                *v = 0.0f;
        }
    }
}

START_TEST(nvfp4_matches_core)
{
    rng = seed0;
    float x[64];
    uint8_t want_p[32], want_s[4], got_p[32];
    for (int t = 0; t < 20000; t++) {
        fill_row(x, 64, 16);
        float g = t % 3 == 0 ? fmoe_nvfp4_global_from_amax(1.0f + (float)(next32() % 1000)) : rand_float(-4, 12);
        g = fabsf(g);
        ck_assert_int_eq(fmoe_nvfp4_quantize(1, 64, x, g, FMOE_NVFP4_GLOBAL_QUANT, want_p, want_s), FMOE_STATUS_OK);
        for (int b = 0; b < 4; b++) {
            uint32_t sf = fmcu_sm100_nvfp4_block(x + 16 * b, g, got_p + 8 * b);
            if (sf != want_s[b] || memcmp(got_p + 8 * b, want_p + 8 * b, 8) != 0)
                ck_abort_msg("case %d block %d (g %a): scale 0x%02x, the core 0x%02x, or codes differ (seed %llx)", t,
                             b, (double)g, sf, want_s[b], (unsigned long long)seed0);
        }
    }
}
END_TEST

START_TEST(mxfp4_matches_core)
{
    rng = seed0;
    float x[128];
    uint8_t want_p[64], want_s[4], got_p[64];
    for (int t = 0; t < 20000; t++) {
        fill_row(x, 128, 32);
        if (t == 0)
            x[5] = INFINITY;
        ck_assert_int_eq(fmoe_mxfp4_quantize(1, 128, FMOE_MXFP4_RECIPE_OCP, x, want_p, want_s), FMOE_STATUS_OK);
        for (int b = 0; b < 4; b++) {
            uint32_t sf = fmcu_sm100_mxfp4_block(x + 32 * b, got_p + 16 * b);
            if (sf != want_s[b] || memcmp(got_p + 16 * b, want_p + 16 * b, 16) != 0)
                ck_abort_msg("case %d block %d: scale %u, the core %u, or codes differ (seed %llx)", t, b, sf,
                             want_s[b], (unsigned long long)seed0);
        }
    }
}
END_TEST

START_TEST(selection)
{
    /* Compute capability 10.x only: the Hopper path is kept on 9.0, and 12.x
     * (sm_120) cannot run sm_100a code. */
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 10, 0, 2048, 768), FMCU_SM100_NVFP4);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 10, 3, 7168, 256), FMCU_SM100_NVFP4);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 9, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 12, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 11, 0, 2048, 768), 0);
    /* W4A16 schemes keep their dequant methods; K must be 32-aligned. */
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4, 10, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_MXFP4, 10, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_MXFP4_A4, 10, 0, 2048, 768), FMCU_SM100_MXFP4);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_MXFP4_A4, 9, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_MXFP4_A4, 10, 0, 2048, 784), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_BLOCK, 10, 0, 2048, 768), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 10, 0, 2048, 784), 0);
    ck_assert_int_eq(fmcu_sm100_native(FMCU_Q_NVFP4_A4, 10, 0, 2064, 768), 0);
}
END_TEST

START_TEST(workspace)
{
    /* Qwen3-30B-A3B-like: 128 experts, H 2048, I 768 gated, 8192 x 8 rows. */
    fmcu_sm100_ws ws;
    const uint64_t rows = 8192ull * 8;
    fmcu_sm100_workspace_layout(rows, 128, 2048, 768, 1, 16, 1000, 5000, 7, &ws);
    const size_t off[] = {ws.a_codes, ws.a_sf, ws.d, ws.args13, ws.args2, ws.gemm13, ws.gemm2, ws.total};
    const size_t len[] = {rows * 1024, ws.a_sf_bytes, rows * 2048 * 4, 1000, 1000, 5000, 7};
    for (int i = 0; i < 8; i++)
        ck_assert_uint_eq(off[i] % 256, 0);
    for (int i = 0; i < 7; i++)
        ck_assert_uint_ge(off[i + 1], off[i] + len[i]);
    ck_assert_uint_eq(ws.a_sf_bytes, (size_t)fmcu_sm100_a_sf_rows((int64_t)rows, 128) * 128);
    /* Not gated, H < I: codes of K = I, D of N = H... or I. */
    fmcu_sm100_workspace_layout(100, 4, 256, 512, 0, 32, 0, 0, 0, &ws);
    ck_assert_uint_ge(ws.a_sf - ws.a_codes, 100 * 256);
    ck_assert_uint_eq(ws.a_sf_bytes, 128 * (4 + 0) * 16);
    ck_assert_uint_ge(ws.args13 - ws.d, 100 * 512 * 4);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cuda_sm100_layout");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, swizzle_worked_examples);
    tcase_add_test(t, swizzle_matches_core);
    tcase_add_test(t, groups_disjoint);
    tcase_add_test(t, group_problem);
    tcase_add_test(t, e4m3_encoder);
    tcase_add_test(t, nvfp4_matches_core);
    tcase_add_test(t, mxfp4_matches_core);
    tcase_add_test(t, selection);
    tcase_add_test(t, workspace);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
