/*
 * tests/cuda/test_cuda_wq_pack.c - the device layout of the CUDA plugin's
 * 4-bit and int weights (plugins/cuda/wq_pack.h), without a GPU:
 *   - the fragment order (positions <-> columns, one load per lane);
 *   - act-order padding: widths, tables, groups of each k16 step;
 *   - every built projection dequantizes, through the layout the kernels
 *     read, to the reference's weights (refq_matrix_row), bit for bit:
 *     int4/int8, symmetric and asymmetric, channelwise, groups, act-order
 *     with the TP rank's K split (g_idx naming groups of the full K), and
 *     MXFP4/NVFP4 block scales (NVFP4's global applied by the GEMM).
 * Random inputs from a fixed seed, printed on failure.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/kit/refq.h"
#include "plugins/cuda/wq_pack.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static const uint64_t seed0 = 0x9E3779B97F4A7C15ull;

static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

START_TEST(fragment_order)
{
    /* Lane c4's 8 positions: its b0/b1 columns of the first k16 step, then the second. */
    const uint32_t lane1[8] = {2, 3, 10, 11, 18, 19, 26, 27};
    for (uint32_t i = 0; i < 8; i++)
        ck_assert_uint_eq(fmcu_wq_frag_col(8 + i), lane1[i]);
    ck_assert_uint_eq(fmcu_wq_frag_col(0), 0);
    ck_assert_uint_eq(fmcu_wq_frag_col(7), 25);
    uint32_t seen = 0;
    for (uint32_t p = 0; p < 32; p++) {
        ck_assert_uint_eq(fmcu_wq_frag_pos(fmcu_wq_frag_col(p)), p);
        seen |= 1u << fmcu_wq_frag_col(p);
    }
    ck_assert_uint_eq(seen, 0xFFFFFFFFu);
    ck_assert_uint_eq(fmcu_wq_chunk_bytes(FMCU_WQ_INT4), 16);
    ck_assert_uint_eq(fmcu_wq_chunk_bytes(FMCU_WQ_FP4), 16);
    ck_assert_uint_eq(fmcu_wq_chunk_bytes(FMCU_WQ_INT8), 32);
}
END_TEST

START_TEST(pack_nibbles)
{
    /* Row of 40 int4 codes c = k % 16, padded to 64 with 8 (zero). */
    uint8_t codes[40], out[32];
    for (int k = 0; k < 40; k++)
        codes[k] = (uint8_t)(k % 16);
    fmcu_wq_pack(FMCU_WQ_INT4, 1, 40, 64, codes, NULL, 8, out);
    /* Lane 0's word: nibbles 0-3 hold positions 0, 2, 4, 6 (columns 0, 8,
     * 16, 24), nibbles 4-7 positions 1, 3, 5, 7 (columns 1, 9, 17, 25). */
    ck_assert_uint_eq(out[0], 0x80);
    ck_assert_uint_eq(out[1], 0x80);
    ck_assert_uint_eq(out[2], 0x91);
    ck_assert_uint_eq(out[3], 0x91);
    /* Lane 1: columns 2, 10, 18, 26 then 3, 11, 19, 27. */
    ck_assert_uint_eq(out[4], 0xA2);
    ck_assert_uint_eq(out[6], 0xB3);
    /* Second chunk: columns 32..39 real, the rest padding (8). Lane 0:
     * columns 32, 40 | 48, 56 | 33, 41 | 49, 57. */
    ck_assert_uint_eq(out[16], 0x80);
    ck_assert_uint_eq(out[17], 0x88);
    ck_assert_uint_eq(out[18], 0x81);
    ck_assert_uint_eq(out[19], 0x88);
    uint8_t b8[32];
    uint8_t c8[32];
    for (int k = 0; k < 32; k++)
        c8[k] = (uint8_t)(100 + k);
    fmcu_wq_pack(FMCU_WQ_INT8, 1, 32, 32, c8, NULL, 0, b8);
    ck_assert_uint_eq(b8[8], 102);
    ck_assert_uint_eq(b8[10], 110);
    ck_assert_uint_eq(b8[12], 118);
}
END_TEST

/* What the kernels rely on (wq_dev.cuh, nibble_pair): in lane c4's word of
 * a chunk, (w >> 4 j) & 0x000F000F holds the codes of fragment positions
 * 8 c4 + 2 j (low half) and 8 c4 + 2 j + 1 (high half). */
START_TEST(nibble_pairs_of_a_word)
{
    rng = seed0;
    uint8_t codes[2 * 64], out[2 * 32];
    for (int i = 0; i < 2 * 64; i++)
        codes[i] = (uint8_t)(next32() & 0xF);
    fmcu_wq_pack(FMCU_WQ_FP4, 2, 64, 64, codes, NULL, 0, out);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t chunk = 0; chunk < 2; chunk++)
            for (uint32_t c4 = 0; c4 < 4; c4++) {
                const uint8_t *b = out + r * 32 + chunk * 16 + 4 * c4;
                uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                for (uint32_t j = 0; j < 4; j++) {
                    uint32_t pair = (w >> (4 * j)) & 0x000F000Fu;
                    const uint8_t *row = codes + r * 64 + chunk * 32;
                    if ((pair & 0xF) != row[fmcu_wq_frag_col(8 * c4 + 2 * j)] ||
                        pair >> 16 != row[fmcu_wq_frag_col(8 * c4 + 2 * j + 1)])
                        ck_abort_msg("row %u chunk %u lane %u pair %u: %08x (seed %llx)", r, chunk, c4, j, pair,
                                     (unsigned long long)seed0);
                }
            }
}
END_TEST

START_TEST(actorder_tables)
{
    /* Sorted groups: 20 x g0, 5 x g2, 15 x g3 (g1 empty: another rank's). */
    int32_t gidx[40], perm[40], src[64], pp[64];
    uint16_t kgrp[4];
    for (int k = 0; k < 40; k++) {
        gidx[k] = k < 20 ? 0 : k < 25 ? 2 : 3;
        perm[k] = 39 - k;
    }
    ck_assert_uint_eq(fmcu_wq_actorder_width(40, gidx), 64);
    ck_assert_int_eq(fmcu_wq_actorder_tables(40, gidx, perm, 32, src, pp, kgrp), -1);
    ck_assert_int_eq(fmcu_wq_actorder_tables(40, gidx, perm, 64, src, pp, kgrp), 0);
    ck_assert_int_eq(src[19], 19);
    ck_assert_int_eq(src[20], -1);
    ck_assert_int_eq(pp[20], -1);
    ck_assert_int_eq(src[32], 20);
    ck_assert_int_eq(pp[32], 19);
    ck_assert_int_eq(src[37], -1);
    ck_assert_int_eq(src[48], 25);
    ck_assert_int_eq(src[62], 39);
    ck_assert_int_eq(pp[62], 0);
    ck_assert_int_eq(src[63], -1);
    ck_assert_uint_eq(kgrp[0], 0);
    ck_assert_uint_eq(kgrp[1], 0);
    ck_assert_uint_eq(kgrp[2], 2);
    ck_assert_uint_eq(kgrp[3], 3);
    /* Wider common width: the tail is padding in the last group. */
    int32_t src2[96], pp2[96];
    uint16_t kg2[6];
    ck_assert_int_eq(fmcu_wq_actorder_tables(40, gidx, perm, 96, src2, pp2, kg2), 0);
    ck_assert_int_eq(src2[80], -1);
    ck_assert_uint_eq(kg2[5], 3);
}
END_TEST

/* Build one int projection both ways and compare every weight. */
static void check_int(int32_t bits, uint32_t E, uint32_t N, uint32_t K, uint32_t groups, uint32_t group, int asym,
                      int act_order, fmoe_dtype sdt)
{
    uint32_t pf = 32u / (uint32_t)bits;
    size_t nw = (size_t)E * (K / pf) * N, ns = (size_t)E * groups * N, nz = (size_t)E * groups * (N / pf);
    uint32_t *words = malloc(nw * 4), *zw = malloc(nz * 4 + 4);
    uint16_t *s16 = malloc(ns * 2);
    float *s32 = malloc(ns * 4);
    int32_t *gidx = malloc((size_t)E * K * 4);
    for (size_t i = 0; i < nw; i++)
        words[i] = next32() ^ (next32() << 16);
    for (size_t i = 0; i < nz; i++)
        zw[i] = next32() ^ (next32() << 16);
    for (size_t i = 0; i < ns; i++) {
        s32[i] = (float)(next32() % 1000 + 1) * 1e-4f;
        s16[i] = fmoe_f32_to_bf16(s32[i]);
    }
    for (size_t i = 0; i < (size_t)E * K; i++)
        gidx[i] = (int32_t)(next32() % groups);
    const void *scales = sdt == FMOE_DTYPE_F32 ? (const void *)s32 : (const void *)s16;
    char why[200];
    fmcu_wq_host h;
    ck_assert_int_eq(fmcu_wq_build_int(E, N, K, bits, groups, group, words, scales, sdt, asym ? zw : NULL,
                                       act_order ? gidx : NULL, &h, why, sizeof why),
                     0);
    ck_assert_uint_eq(h.kp % 32, 0);
    ck_assert(h.kp >= K);
    refq_matrix m = {.format = REFQ_W_INT, .experts = E, .rows = N, .cols = K, .groups = groups, .group = group};
    ck_assert_int_eq(refq_int_values_kn(&m, bits, words), 0);
    ck_assert_int_eq(refq_int_scales(&m, scales, sdt, 1), 0);
    if (asym)
        ck_assert_int_eq(refq_int_zero_points(&m, bits, zw), 0);
    if (act_order)
        ck_assert_int_eq(refq_int_act_order(&m, gidx), 0);
    float *ref = malloc(K * 4), *mine = malloc(K * 4), *orig = malloc(K * 4);
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t n = 0; n < N; n++) {
            refq_matrix_row(&m, e, n, ref);
            /* The reference's row is in sorted order under act-order. */
            for (uint32_t k = 0; k < K; k++)
                orig[m.perm ? (uint32_t)m.perm[(size_t)e * K + k] : k] = ref[k];
            memset(mine, 0xff, K * 4);
            fmcu_wq_host_row(&h, bits == 4 ? FMCU_WQ_INT4 : FMCU_WQ_INT8, 0, e, n, mine);
            for (uint32_t k = 0; k < K; k++)
                if (memcmp(&mine[k], &orig[k], 4) != 0)
                    ck_abort_msg("bits %d asym %d act_order %d: e %u n %u k %u: %g vs reference %g (seed %llx)", bits,
                                 asym, act_order, e, n, k, (double)mine[k], (double)orig[k], (unsigned long long)seed0);
        }
    free(ref);
    free(mine);
    free(orig);
    refq_matrix_free(&m);
    fmcu_wq_host_free(&h);
    free(words);
    free(zw);
    free(s16);
    free(s32);
    free(gidx);
}

START_TEST(int_matches_reference)
{
    rng = seed0;
    check_int(4, 3, 16, 256, 2, 128, 0, 0, FMOE_DTYPE_BF16); /* group 128 */
    check_int(4, 2, 24, 96, 3, 32, 1, 0, FMOE_DTYPE_F32);    /* group 32, asym, K % 64 != 0 */
    check_int(4, 2, 16, 208, 1, 208, 0, 0, FMOE_DTYPE_F16);  /* channelwise, K padded to 224 */
    check_int(8, 2, 8, 128, 2, 64, 1, 0, FMOE_DTYPE_F32);    /* int8 asym */
    check_int(4, 3, 16, 256, 4, 64, 0, 1, FMOE_DTYPE_F32);   /* act-order, uneven groups */
    check_int(4, 2, 16, 128, 8, 32, 1, 1, FMOE_DTYPE_BF16);  /* act-order asym; a TP rank's K = 128 of 256:
                                                                g_idx names 8 groups, some empty here */
    check_int(8, 2, 8, 64, 2, 32, 0, 1, FMOE_DTYPE_F32);     /* int8 act-order */
}
END_TEST

START_TEST(fp4_matches_reference)
{
    rng = seed0 ^ 0x55;
    for (int mx = 0; mx < 2; mx++) {
        uint32_t E = 2, N = 8, K = mx ? 96 : 208, blk = mx ? 32 : 16;
        size_t np = (size_t)E * N * K / 2, ns = (size_t)E * N * (K / blk);
        uint8_t *packed = malloc(np), *sf = malloc(ns);
        for (size_t i = 0; i < np; i++)
            packed[i] = (uint8_t)next32();
        for (size_t i = 0; i < ns; i++)
            sf[i] = mx ? (uint8_t)(120 + next32() % 12) : (uint8_t)(next32() % 0x7e); /* no NaN */
        char why[200];
        fmcu_wq_host h;
        ck_assert_int_eq(fmcu_wq_build_fp4(E, N, K, blk, mx, packed, sf, &h, why, sizeof why), 0);
        ck_assert_uint_eq(h.kp, mx ? 96 : 224);
        /* The codes the stream kernel reads: the checkpoint's, padding blocks 0. */
        ck_assert_ptr_nonnull(h.sf8);
        for (size_t r = 0; r < (size_t)E * N; r++)
            for (uint32_t b = 0; b < h.groups; b++)
                ck_assert_uint_eq(h.sf8[r * h.groups + b], b < K / blk ? sf[r * (K / blk) + b] : 0);
        float global[2] = {1.0f, 1.0f};
        refq_matrix m = {.format = mx ? REFQ_W_MXFP4 : REFQ_W_NVFP4,
                         .experts = E,
                         .rows = N,
                         .cols = K,
                         .values = packed,
                         .sf = sf,
                         .global = global,
                         .global_convention = FMOE_NVFP4_GLOBAL_QUANT};
        float ref[224], mine[224];
        for (uint32_t e = 0; e < E; e++)
            for (uint32_t n = 0; n < N; n++) {
                refq_matrix_row(&m, e, n, ref);
                fmcu_wq_host_row(&h, FMCU_WQ_FP4, blk, e, n, mine);
                for (uint32_t k = 0; k < K; k++)
                    if (memcmp(&mine[k], &ref[k], 4) != 0)
                        ck_abort_msg("mx %d e %u n %u k %u: %g vs %g", mx, e, n, k, (double)mine[k], (double)ref[k]);
            }
        fmcu_wq_host_free(&h);
        free(packed);
        free(sf);
    }
}
END_TEST

/* fmcu_wq_build_fp4's bytes against the order written out from
 * fmcu_wq_frag_col (fragment_order checks it): nibble q of a chunk is
 * fragment position (q & ~7) + 2 (q & 3) + ((q >> 2) & 1). Whole chunks,
 * rows ending mid-chunk (K 208 -> 224 and 48 -> 64, zeros after) and a
 * row of one chunk. */
START_TEST(fp4_build_packs_in_fragment_order)
{
    static const uint32_t Ks[] = {7168, 208, 96, 32, 48};
    for (size_t t = 0; t < sizeof Ks / sizeof Ks[0]; t++) {
        rng = seed0 ^ (0x77 + t);
        uint32_t E = 3, N = 5, K = Ks[t], blk = 16;
        size_t np = (size_t)E * N * K / 2, ns = (size_t)E * N * (K / blk);
        uint8_t *packed = malloc(np), *sf = malloc(ns);
        for (size_t i = 0; i < np; i++)
            packed[i] = (uint8_t)next32();
        for (size_t i = 0; i < ns; i++)
            sf[i] = (uint8_t)(next32() % 0x7e);
        char why[200];
        fmcu_wq_host h;
        ck_assert_int_eq(fmcu_wq_build_fp4(E, N, K, blk, 0, packed, sf, &h, why, sizeof why), 0);
        size_t rowb = (size_t)h.kp / FMCU_WQ_CHUNK * 16;
        for (size_t r = 0; r < (size_t)E * N; r++)
            for (uint32_t q = 0; q < 2 * rowb; q++) {
                uint32_t chunk = q / FMCU_WQ_CHUNK, in = q % FMCU_WQ_CHUNK;
                uint32_t c = chunk * FMCU_WQ_CHUNK + fmcu_wq_frag_col((in & ~7u) + 2 * (in & 3) + ((in >> 2) & 1));
                uint8_t want = c < K ? (packed[r * (K / 2) + c / 2] >> (4 * (c & 1))) & 0xF : 0;
                uint8_t got = (h.w[r * rowb + q / 2] >> (4 * (q & 1))) & 0xF;
                if (got != want)
                    ck_abort_msg("K %u row %zu nibble %u: %u, expected %u (column %u; seed %llx)", K, r, q, got, want,
                                 c, (unsigned long long)(seed0 ^ (0x77 + t)));
            }
        fmcu_wq_host_free(&h);
        free(packed);
        free(sf);
    }
}
END_TEST

/* mx_fold (the stream kernel's one-product MXFP4 decode, wq_stream.cu
 * SF_MX) only where every ue8m0 code is at most 128: codes up to 128 fold,
 * one code of 129 anywhere (last block of the last row too) does not, nor
 * the NaN code 255, nor NVFP4's e4m3 codes whatever their value. */
START_TEST(fp4_build_marks_foldable_mx_scales)
{
    uint32_t E = 2, N = 3, K = 64;
    size_t np = (size_t)E * N * K / 2;
    uint8_t packed[192], sf[24]; /* codes of block 32 (12) or 16 (24) */
    ck_assert_uint_eq(np, sizeof packed);
    for (size_t i = 0; i < np; i++)
        packed[i] = (uint8_t)(i * 37 + 11);
    static const struct {
        uint8_t last;
        int mx;
        uint32_t fold;
    } cases[] = {{128, 1, 1}, {0, 1, 1}, {129, 1, 0}, {255, 1, 0}, {100, 0, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        uint32_t blk = cases[t].mx ? 32 : 16;
        size_t ns = (size_t)E * N * (K / blk);
        for (size_t i = 0; i < ns; i++)
            sf[i] = (uint8_t)(120 + i % 9); /* 120..128 */
        sf[ns - 1] = cases[t].last;
        char why[200];
        fmcu_wq_host h;
        ck_assert_int_eq(fmcu_wq_build_fp4(E, N, K, blk, cases[t].mx, packed, sf, &h, why, sizeof why), 0);
        if (h.mx_fold != cases[t].fold)
            ck_abort_msg("last code %u (mx %d): mx_fold %u, expected %u", cases[t].last, cases[t].mx, h.mx_fold,
                         cases[t].fold);
        fmcu_wq_host_free(&h);
    }
}
END_TEST

START_TEST(stream_serves_whole_spans)
{
    uint8_t codes = 0;
    uint16_t kgrp = 0;
    fmcu_wq_proj w = {.k = 2048, .kp = 2048, .groups = 16, .group = 128};
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT4, &w), 1); /* g128: one span */
    w.group = 64, w.groups = 32;
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT4, &w), 0); /* two groups in a span */
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT8, &w), 1); /* int8 spans 64 */
    w.group = 32, w.groups = 64;
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT8, &w), 0);
    w.group = 2048, w.groups = 1; /* channelwise */
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT4, &w), 1);
    w.kgrp = &kgrp; /* act-order */
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT4, &w), 0);
    w.kgrp = NULL, w.k = 2044;
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_INT4, &w), 0); /* K % 8 */
    fmcu_wq_proj f = {.k = 2880, .kp = 2880, .groups = 90, .group = 32};
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_FP4, &f), 0); /* no scale codes uploaded */
    f.sf8 = &codes;
    ck_assert_int_eq(fmcu_wq_stream_serves(FMCU_WQ_FP4, &f), 1);
}
END_TEST

START_TEST(wgmma_serves_sm90_stages)
{
    uint8_t codes = 0;
    uint16_t kgrp = 0;
    int32_t perm = 0;
    fmcu_wq_proj w = {.k = 2048, .kp = 2048, .groups = 16, .group = 128};
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 1); /* one group a stage */
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_F16, 9, &w), 1);
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 10, &w), 0); /* sm_90a code only */
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 8, &w), 0);
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT8, FMOE_DTYPE_BF16, 9, &w), 0); /* int8: tiled */
    w.group = 256, w.groups = 8;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 1);
    w.group = 64, w.groups = 32;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 0); /* two groups a stage */
    w.group = 2048, w.groups = 1;                                                    /* channelwise */
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 1);
    w.kgrp = &kgrp; /* act-order */
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 0);
    w.kgrp = NULL, w.perm = &perm;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 0);
    w.perm = NULL, w.k = 2044;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, &w), 0); /* K % 8 */
    w.k = 2048;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_INT4, FMOE_DTYPE_F32, 9, &w), 0);
    fmcu_wq_proj f = {.k = 2880, .kp = 2880, .groups = 90, .group = 32};
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_FP4, FMOE_DTYPE_BF16, 9, &f), 0); /* no scale codes */
    f.sf8 = &codes;
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_FP4, FMOE_DTYPE_BF16, 9, &f), 1);
    ck_assert_int_eq(fmcu_wq_wgmma_serves(FMCU_WQ_FP4, FMOE_DTYPE_F16, 9, &f), 0); /* bf16 dequant only */
}
END_TEST

/* The weight stream serves the wgmma form's layers while every row's
 * first scale has a 32-bit offset. */
START_TEST(ring_serves_32_bit_scale_offsets)
{
    uint8_t codes = 0;
    fmcu_wq_proj w = {.k = 7168, .kp = 7168, .groups = 56, .group = 128};
    /* DeepSeek-V3's W13 (256 experts, 4096 rows), int4 g128 */
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, 256, 4096, &w), 1);
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 10, 256, 4096, &w), 0); /* sm_90a only */
    /* 2^32 / 56 = 76695844.6: the last count of rows x experts that fits */
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, 4, 19173961, &w), 1);
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, 4, 19173962, &w), 0);
    w.group = 64, w.groups = 112; /* two groups a stage: the wgmma form's refusal */
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_INT4, FMOE_DTYPE_BF16, 9, 256, 4096, &w), 0);
    /* gpt-oss-120b MXFP4, every scale code <= 128 */
    fmcu_wq_proj f = {.k = 2880, .kp = 2880, .groups = 90, .group = 32, .sf8 = &codes, .mx_fold = 1};
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_FP4, FMOE_DTYPE_BF16, 9, 128, 5760, &f), 1);
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_FP4, FMOE_DTYPE_F16, 9, 128, 5760, &f), 0);
    f.mx_fold = 0; /* a scale code above 128: the ring has no two-product decode */
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_FP4, FMOE_DTYPE_BF16, 9, 128, 5760, &f), 0);
    fmcu_wq_proj n = {.k = 2880, .kp = 2880, .groups = 180, .group = 16, .sf8 = &codes}; /* NVFP4: always folds */
    ck_assert_int_eq(fmcu_wq_ring_serves(FMCU_WQ_FP4, FMOE_DTYPE_BF16, 9, 128, 5760, &n), 1);
}
END_TEST

START_TEST(dequant_experts_fit_the_budget)
{
    /* Mixtral-8x7B gated: W13 [28672, 4096] bf16 = 224 MiB an expert (W2 half
     * that): 4 in 1024 MiB, 1 in 224, none in 223. */
    ck_assert_uint_eq(fmcu_wq_dequant_expert_bytes(28672, 4096, 14336), 224ull << 20);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(28672, 4096, 14336, 8, 1024), 4);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(28672, 4096, 14336, 8, 224), 1);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(28672, 4096, 14336, 8, 223), 0);
    /* Qwen3-30B-A3B: 6 MiB an expert, all 128 fit 1024 MiB (capped at E). */
    ck_assert_uint_eq(fmcu_wq_dequant_experts(1536, 2048, 768, 128, 1024), 128);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(1536, 2048, 768, 128, 600), 100);
    /* Not gated with I > H: W2 [H, I] is the larger, and sets the size. */
    ck_assert_uint_eq(fmcu_wq_dequant_experts(4096, 1024, 4096, 16, 8), 1);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(4096, 1024, 4096, 16, 7), 0);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(1536, 2048, 768, 128, 0), 0);
    /* A run is one grouped-GEMM launch: at most 1024 experts however many fit. */
    ck_assert_uint_eq(fmcu_wq_dequant_experts(64, 64, 32, 4096, 1024), 1024);
    ck_assert_uint_eq(fmcu_wq_dequant_experts(64, 64, 32, 1000, 1024), 1000);
}
END_TEST

START_TEST(stream_slabs_fill_the_sms)
{
    /* Qwen3-30B-A3B on 132 SMs: M = 1 (8 tiles) splits K, M = 16 (up to
     * 128 tiles) gives each warp a slab. */
    ck_assert_uint_eq(fmcu_wq_stream_slabs(8, 96, 132), 1);
    ck_assert_uint_eq(fmcu_wq_stream_slabs(8, 128, 132), 1);
    ck_assert_uint_eq(fmcu_wq_stream_slabs(128, 96, 132), 4);
    ck_assert_uint_eq(fmcu_wq_stream_slabs(16, 96, 132), 2); /* 768 CTAs of 2 */
    ck_assert_uint_eq(fmcu_wq_stream_slabs(1, 1, 132), 1);
}
END_TEST

START_TEST(bad_gidx_refused)
{
    uint32_t words[2 * 8] = {0}, zero = 0;
    float s[2 * 2] = {1, 1, 1, 1};
    int32_t gidx[16];
    for (int k = 0; k < 16; k++)
        gidx[k] = k == 5 ? 2 : 0; /* groups = 2: 2 is out of range */
    char why[200];
    fmcu_wq_host h;
    ck_assert_int_eq(fmcu_wq_build_int(1, 8, 16, 4, 2, 8, words, s, FMOE_DTYPE_F32, NULL, gidx, &h, why, sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "g_idx"));
    (void)zero;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_wq_pack");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fragment_order);
    tcase_add_test(tc, pack_nibbles);
    tcase_add_test(tc, nibble_pairs_of_a_word);
    tcase_add_test(tc, fp4_build_packs_in_fragment_order);
    tcase_add_test(tc, fp4_build_marks_foldable_mx_scales);
    tcase_add_test(tc, actorder_tables);
    tcase_add_test(tc, int_matches_reference);
    tcase_add_test(tc, fp4_matches_reference);
    tcase_add_test(tc, bad_gidx_refused);
    tcase_add_test(tc, stream_serves_whole_spans);
    tcase_add_test(tc, wgmma_serves_sm90_stages);
    tcase_add_test(tc, ring_serves_32_bit_scale_offsets);
    tcase_add_test(tc, stream_slabs_fill_the_sms);
    tcase_add_test(tc, dequant_experts_fit_the_budget);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
