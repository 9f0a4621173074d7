/*
 * tests/cuda/test_cuda_tier.c - the GEMM tier a call of m tokens gets
 * (plugins/cuda/tier.c), forced or not (option tier, test_cuda_options.c),
 * and the shapes of the decode tail and the one-launch decode. No GPU
 * needed.
 */
#include <check.h>
#include <string.h>

#include "plugins/cuda/options.h"
#include "plugins/cuda/tier.h"

/* The bounds auto used before the swapped form: the ring to 47 rows an
 * expert, the int4 fused form from 48. */
static int ring47(int option, int64_t m, uint32_t top_k, uint32_t experts, int forced)
{
    return fmcu_wq_ring_wanted(option, m, top_k, experts, forced, FMCU_WQ_RING_MAX_ROWS);
}

static int int4_48(int option, int64_t m, uint32_t top_k, uint32_t experts)
{
    return fmcu_wq_int4_fused(option, m, top_k, experts, FMCU_WQ_INT4_FUSED_MIN_ROWS);
}

START_TEST(auto_tier_follows_rows_per_expert)
{
    /* Qwen3-30B-A3B: 128 experts, top-8. 16 rows per expert at m = 256. */
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(256, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(272, 8, 128, FMCU_TIER_AUTO, 1), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_gemm_tier(272, 8, 128, FMCU_TIER_AUTO, 0), FMCU_TIER_TILED);
    /* Mixtral: 8 experts, top-2: 16 rows per expert at m = 64. */
    ck_assert_int_eq(fmcu_gemm_tier(64, 2, 8, FMCU_TIER_AUTO, 0), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(128, 2, 8, FMCU_TIER_AUTO, 0), FMCU_TIER_TILED);
    /* An EP rank with no local experts still answers. */
    ck_assert_int_eq(fmcu_gemm_tier(4, 2, 0, FMCU_TIER_AUTO, 0), FMCU_TIER_STREAM);
}
END_TEST

START_TEST(wq_tier_streams_up_to_16_rows)
{
    /* Mixtral (8 experts, k 2): M = 64 is 16 rows an expert, M = 68 17,
     * M = 128 32 (the wgmma kernel's). */
    ck_assert_int_eq(fmcu_wq_tier(64, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_wq_tier(68, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(128, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(1, 8, 128, FMCU_TIER_AUTO, 0, 1, 0), FMCU_TIER_TILED); /* not served */
    ck_assert_int_eq(fmcu_wq_tier(1, 8, 128, FMCU_TIER_TILED, 1, 1, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(8192, 8, 128, FMCU_TIER_STREAM, 1, 1, 0), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_wq_tier(8192, 8, 128, FMCU_TIER_STREAM, 0, 1, 0), FMCU_TIER_TILED); /* cannot stream */
}
END_TEST

START_TEST(wq_tier_prefill_from_150_rows_where_served)
{
    /* Mixtral: M = 596 is 149 rows an expert, M = 600 150; M = 512 (128
     * rows) measured slower on this tier, M = 1024 (256) faster. */
    ck_assert_int_eq(FMCU_WQ_PREFILL_MIN_ROWS, 150);
    ck_assert_int_eq(fmcu_wq_tier(512, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(596, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(600, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_wq_tier(1024, 2, 8, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_wq_tier(8192, 8, 128, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_PREFILL);
    /* Not served (int weights, e2m1 with neither a scratch nor the fused
     * form, another device): the 4-bit kernels. */
    ck_assert_int_eq(fmcu_wq_tier(8192, 8, 128, FMCU_TIER_AUTO, 1, 0, 0), FMCU_TIER_TILED);
    /* Forced: at any size where served, else tiled. */
    ck_assert_int_eq(fmcu_wq_tier(1, 8, 128, FMCU_TIER_PREFILL, 1, 1, 0), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_wq_tier(1, 8, 128, FMCU_TIER_PREFILL, 1, 0, 0), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(8192, 8, 128, FMCU_TIER_TILED, 1, 1, 0), FMCU_TIER_TILED);
}
END_TEST

START_TEST(wq_tier_prefill_past_the_stream_tier_when_fused)
{
    /* The fused form serves the call: from the first row an expert past
     * the stream tier (Mixtral M = 68, 17 rows; Qwen3-30B-A3B M = 1024, 64). */
    ck_assert_int_eq(fmcu_wq_tier(64, 2, 8, FMCU_TIER_AUTO, 1, 1, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_wq_tier(68, 2, 8, FMCU_TIER_AUTO, 1, 1, 1), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_wq_tier(1024, 8, 128, FMCU_TIER_AUTO, 1, 1, 1), FMCU_TIER_PREFILL);
    ck_assert_int_eq(fmcu_wq_tier(1024, 8, 128, FMCU_TIER_AUTO, 1, 1, 0), FMCU_TIER_TILED);
    /* Not where the prefill path refuses the layer, nor against a forced tier. */
    ck_assert_int_eq(fmcu_wq_tier(1024, 8, 128, FMCU_TIER_AUTO, 1, 0, 1), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(1024, 8, 128, FMCU_TIER_TILED, 1, 1, 1), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_wq_tier(1024, 8, 128, FMCU_TIER_STREAM, 1, 1, 1), FMCU_TIER_STREAM);
    /* Without streaming kernels the small calls stay off the prefill tier. */
    ck_assert_int_eq(fmcu_wq_tier(1, 8, 128, FMCU_TIER_AUTO, 0, 1, 1), FMCU_TIER_TILED);
}
END_TEST

/* prefill_dequant_fused: auto converts e2m1 inside the GEMM up to 320 rows
 * an expert (the measured DeepSeek-V3 and gpt-oss points at M = 8192, 256
 * rows, fused; Qwen3-30B-A3B, 512 rows, and Mixtral, 2048, the scratch)
 * and at every size without a scratch, for at most 1024 local experts; on
 * and off decide alone. */
START_TEST(e2m1_fused_form_up_to_320_rows_an_expert)
{
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 256, 1), 1);  /* 256 rows */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 4, 128, 1), 1);  /* 256 */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 5120, 8, 128, 1), 1);  /* 320 */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 5136, 8, 128, 1), 0);  /* 321 */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 128, 1), 0);  /* 512 */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 2, 8, 1), 0);    /* 2048 */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 256, 0), 1);  /* no scratch */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 2, 8, 0), 1);    /* 2048, no scratch */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 1025, 0), 0); /* > 1024, no scratch */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 1025, 1), 0); /* > 1024 experts */
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 1024, 1), 1);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, 8192, 8, 0, 1), 0);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_ON, 8192, 2, 8, 0), 1);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_OFF, 8192, 8, 256, 1), 0);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_OFF, 1024, 8, 128, 0), 0);
}
END_TEST

/* The fp8 stream tier's GEMM1 on f16 wgmma: auto with block scales at
 * every size, with other scales from 4 rows an expert on average; on and
 * off whatever the size. */
START_TEST(stream_wgmma_from_4_rows_or_always)
{
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 16, 8, 128, 0), 0);  /* 1 (Qwen3 M=16) */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 63, 8, 128, 0), 0);  /* 3 */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 64, 8, 128, 0), 1);  /* 4 */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 16, 2, 8, 0), 1);    /* 4 (Mixtral M=16) */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 15, 2, 8, 0), 0);    /* 3 */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 128, 8, 256, 0), 1); /* 4 (DeepSeek M=128) */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 1, 8, 128, 1), 1);   /* block scales */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_AUTO, 128, 8, 0, 0), 0);   /* no experts */
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_ON, 1, 8, 256, 0), 1);
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_OFF, 128, 8, 128, 0), 0);
    ck_assert_int_eq(fmcu_stream_wgmma_wanted(FMCU_FUSED_OFF, 16, 8, 128, 1), 0);
}
END_TEST

/* The fp8 GEMM2 on FP8 wgmma: auto with block scales always, else from
 * 128 pairs or 4 rows an expert; on always, off never. */
START_TEST(stream_wgmma2_from_128_pairs_or_4_rows_or_block)
{
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 1, 2, 8, 0), 0);    /* Mixtral M=1 */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 8, 2, 8, 0), 0);    /* 16 pairs, 2 rows */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 16, 2, 8, 0), 1);   /* 4 rows (Mixtral M=16) */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 16, 4, 128, 0), 0); /* 64 pairs (gpt-oss M=16) */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 31, 4, 128, 0), 0); /* 124 pairs */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 32, 4, 128, 0), 1); /* 128 pairs */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 15, 8, 256, 0), 0); /* 120 pairs */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 16, 8, 256, 0), 1); /* DeepSeek M=16 */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 1, 8, 256, 1), 1);  /* block scales */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_AUTO, 1, 8, 0, 0), 0);    /* no experts */
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_ON, 1, 2, 8, 0), 1);
    ck_assert_int_eq(fmcu_stream_wgmma2_wanted(FMCU_FUSED_OFF, 16, 8, 256, 1), 0);
}
END_TEST

/* The wgmma weight stream: auto from 6 to 47 rows an expert on average
 * (unless a tier other than the stream tier is forced), on everywhere but
 * a forced prefill tier, off never. */
START_TEST(wq_ring_from_6_to_47_rows_an_expert)
{
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 1, 8, 128, FMCU_TIER_AUTO), 0);    /* Qwen3 M=1 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 256, FMCU_TIER_AUTO), 0);  /* 4 (DeepSeek M=128) */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 95, 8, 128, FMCU_TIER_AUTO), 0);   /* 5 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 96, 8, 128, FMCU_TIER_AUTO), 1);   /* 6 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 128, FMCU_TIER_AUTO), 1);  /* 8 (Qwen3 M=128) */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 2, 8, FMCU_TIER_AUTO), 1);    /* 32 (Mixtral M=128) */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 188, 2, 8, FMCU_TIER_AUTO), 1);    /* 47 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 192, 2, 8, FMCU_TIER_AUTO), 0);    /* 48 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 1024, 8, 128, FMCU_TIER_AUTO), 0); /* 64 (Qwen3 M=1024) */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 8192, 8, 128, FMCU_TIER_AUTO), 0); /* 512 */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 0, FMCU_TIER_AUTO), 0);    /* no experts */
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 128, FMCU_TIER_STREAM), 1);
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 128, FMCU_TIER_TILED), 0);
    ck_assert_int_eq(ring47(FMCU_FUSED_AUTO, 128, 8, 128, FMCU_TIER_PREFILL), 0);
    ck_assert_int_eq(ring47(FMCU_FUSED_ON, 1, 8, 128, FMCU_TIER_AUTO), 1);
    ck_assert_int_eq(ring47(FMCU_FUSED_ON, 8192, 8, 128, FMCU_TIER_TILED), 1);
    ck_assert_int_eq(ring47(FMCU_FUSED_ON, 8192, 8, 128, FMCU_TIER_PREFILL), 0);
    ck_assert_int_eq(ring47(FMCU_FUSED_OFF, 128, 8, 128, FMCU_TIER_AUTO), 0);
}
END_TEST

/* Where the prefill tier's GEMMs are the swapped form, auto's ring ends
 * at 31 rows an expert for int4, 35 for MXFP4 and 23 for NVFP4; from 6 as
 * before. */
START_TEST(wq_ring_to_31_35_or_23_rows_before_the_swapped_form)
{
    ck_assert_int_eq(FMCU_WQ_RING_SWAP_INT4_MAX_ROWS, 31);
    ck_assert_int_eq(FMCU_WQ_RING_SWAP_E2M1_MAX_ROWS, 35);
    ck_assert_int_eq(FMCU_WQ_RING_SWAP_NVFP4_MAX_ROWS, 23);
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 736, 4, 128, FMCU_TIER_AUTO, 23), 1); /* 23 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 768, 4, 128, FMCU_TIER_AUTO, 23), 0); /* 24 (gpt-oss M=768) */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 95, 8, 128, FMCU_TIER_AUTO, 31), 0);  /* 5 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 96, 8, 128, FMCU_TIER_AUTO, 31), 1);  /* 6 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 124, 2, 8, FMCU_TIER_AUTO, 31), 1);   /* 31 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 128, 2, 8, FMCU_TIER_AUTO, 31), 0);   /* 32 (Mixtral M=128) */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 1024, 8, 256, FMCU_TIER_AUTO, 31), 0); /* 32 (DeepSeek) */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 128, 2, 8, FMCU_TIER_AUTO, 35), 1);    /* 32 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 140, 2, 8, FMCU_TIER_AUTO, 35), 1);    /* 35 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_AUTO, 144, 2, 8, FMCU_TIER_AUTO, 35), 0);    /* 36 */
    ck_assert_int_eq(fmcu_wq_ring_wanted(FMCU_FUSED_ON, 144, 2, 8, FMCU_TIER_AUTO, 35), 1);
}
END_TEST

/* Which of those bounds a layer gets: 47 unless its calls there would take
 * the swapped GEMMs, then its format's. */
START_TEST(wq_ring_bound_by_format_where_the_gemms_are_swapped)
{
    ck_assert_int_eq(fmcu_wq_ring_max_rows(0, 1, 0), 47);
    ck_assert_int_eq(fmcu_wq_ring_max_rows(0, 0, 16), 47);
    ck_assert_int_eq(fmcu_wq_ring_max_rows(0, 0, 32), 47);
    ck_assert_int_eq(fmcu_wq_ring_max_rows(1, 1, 0), 31);  /* int4 */
    ck_assert_int_eq(fmcu_wq_ring_max_rows(1, 0, 16), 23); /* NVFP4 */
    ck_assert_int_eq(fmcu_wq_ring_max_rows(1, 0, 32), 35); /* MXFP4 */
}
END_TEST

/* int4 with 128-column groups: auto converts inside the grouped GEMM from
 * 48 rows an expert (the wgmma kernel below: measured crossover between 32
 * and 64), at 1 to 1024 local experts; on from any size; off never. */
START_TEST(int4_fused_form_from_48_rows_an_expert)
{
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 128, 2, 8), 0);     /* 32 rows (Mixtral M=128) */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 188, 2, 8), 0);     /* 47 */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 192, 2, 8), 1);     /* 48 */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 1024, 8, 256), 0);  /* 32 (DeepSeek-V3) */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 1024, 8, 128), 1);  /* 64 (Qwen3) */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 8192, 2, 8), 1);    /* 2048 */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 8192, 8, 1025), 0); /* > 1024 experts */
    ck_assert_int_eq(int4_48(FMCU_FUSED_AUTO, 8192, 8, 0), 0);
    ck_assert_int_eq(int4_48(FMCU_FUSED_ON, 40, 8, 128), 1);
    ck_assert_int_eq(int4_48(FMCU_FUSED_OFF, 8192, 2, 8), 0);
}
END_TEST

/* The swapped form's int4 GEMMs take calls from 32 rows an expert. */
START_TEST(int4_swapped_form_from_32_rows_an_expert)
{
    ck_assert_int_eq(FMCU_WQ_INT4_SWAP_MIN_ROWS, 32);
    ck_assert_int_eq(fmcu_wq_int4_fused(FMCU_FUSED_AUTO, 124, 2, 8, FMCU_WQ_INT4_SWAP_MIN_ROWS), 0);    /* 31 */
    ck_assert_int_eq(fmcu_wq_int4_fused(FMCU_FUSED_AUTO, 128, 2, 8, FMCU_WQ_INT4_SWAP_MIN_ROWS), 1);    /* 32 */
    ck_assert_int_eq(fmcu_wq_int4_fused(FMCU_FUSED_AUTO, 1024, 8, 256, FMCU_WQ_INT4_SWAP_MIN_ROWS), 1); /* 32 */
    ck_assert_int_eq(fmcu_wq_int4_fused(FMCU_FUSED_AUTO, 8192, 8, 1025, FMCU_WQ_INT4_SWAP_MIN_ROWS), 0);
    ck_assert_int_eq(fmcu_wq_int4_fused(FMCU_FUSED_OFF, 8192, 2, 8, FMCU_WQ_INT4_SWAP_MIN_ROWS), 0);
}
END_TEST

/* The fused form can serve a layer: on always, auto for 1 to 1024 local
 * experts, off never. */
START_TEST(e2m1_fused_form_serves_by_option_and_experts)
{
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_ON, 2048), 1);
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_AUTO, 1024), 1);
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_AUTO, 1), 1);
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_AUTO, 1025), 0);
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_AUTO, 0), 0);
    ck_assert_int_eq(fmcu_wq_fused_serves(FMCU_FUSED_OFF, 128), 0);
}
END_TEST

/* Finalize allocates the scratch only when max_num_tokens reaches the rows
 * an expert from which a call would run on it. */
START_TEST(e2m1_scratch_only_where_a_call_uses_it)
{
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 128, FMCU_TIER_AUTO), 321);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 1024, FMCU_TIER_PREFILL), 321);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 1025, FMCU_TIER_AUTO), 150);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 1025, FMCU_TIER_PREFILL), 0);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 0, FMCU_TIER_AUTO), 150);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_OFF, 128, FMCU_TIER_AUTO), 150);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_OFF, 128, FMCU_TIER_PREFILL), 0);
    ck_assert_uint_eq(fmcu_wq_scratch_min_rows(FMCU_FUSED_ON, 128, FMCU_TIER_PREFILL), UINT32_MAX);
    /* The scratch serves exactly the calls auto does not fuse: 16 tokens
     * an expert row at top-8 of 128 experts. */
    const uint32_t from = fmcu_wq_scratch_min_rows(FMCU_FUSED_AUTO, 128, FMCU_TIER_AUTO);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, (int64_t)from * 16, 8, 128, 1), 0);
    ck_assert_int_eq(fmcu_wq_prefill_fused(FMCU_FUSED_AUTO, (int64_t)(from - 1) * 16, 8, 128, 1), 1);
}
END_TEST

/* prefill_w4_gemm: the option decides alone where set; auto swaps int4,
 * NVFP4 at every K and MXFP4 only where its scales fold. */
START_TEST(w4_gemm_swapped_by_scheme_and_fold)
{
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_AUTO, 1, 0, 0), 1);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_AUTO, 0, 16, 0), 1);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_AUTO, 0, 32, 1), 1);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_AUTO, 0, 32, 0), 0);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_AUTO, 0, 0, 1), 0); /* neither 4-bit format */
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_SWAPPED, 0, 32, 0), 1);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_CONVERTING, 1, 0, 0), 0);
    ck_assert_int_eq(fmcu_w4_gemm_swapped(FMCU_W4_GEMM_CONVERTING, 0, 16, 1), 0);
}
END_TEST

START_TEST(forced_tier_wins_unless_it_cannot_run)
{
    ck_assert_int_eq(fmcu_gemm_tier(8192, 8, 128, FMCU_TIER_STREAM, 1), FMCU_TIER_STREAM);
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_TILED, 1), FMCU_TIER_TILED);
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_PREFILL, 1), FMCU_TIER_PREFILL);
    /* The prefill path does not serve the layer: the tiled kernels do. */
    ck_assert_int_eq(fmcu_gemm_tier(1, 8, 128, FMCU_TIER_PREFILL, 0), FMCU_TIER_TILED);
}
END_TEST

START_TEST(decode_tail_takes_calls_that_fit_in_one_wave)
{
    fmcu_tail_cfg c;
    /* Qwen3-30B-A3B fp8, M = 1: 8 pairs, H 2048, I 768. Shared memory:
     * 8 x 16 rows of 768 + 16 bytes = 100352, the 8 x 768 input codes to
     * 106496, 8 scales to 106528, 8 x 16 outputs to 107040, the barrier
     * (16 bytes) to 107056, 8 amaxes: 107088. Two CTAs an SM: 128 CTAs fit
     * on 64 SMs or more. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 1, 1, 132, &c), 1);
    ck_assert_uint_eq(c.ctas, 128);
    ck_assert_uint_eq(c.layout.weights, 0);
    ck_assert_uint_eq(c.layout.act, 100352);
    ck_assert_uint_eq(c.layout.a_scale, 106496);
    ck_assert_uint_eq(c.layout.y, 106528);
    ck_assert_uint_eq(c.layout.bar, 107040);
    ck_assert_uint_eq(c.layout.amax, 107056);
    ck_assert_uint_eq(c.layout.total, 107088);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 1, 1, 64, &c), 1);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 1, 1, 63, &c), 0);
    /* The same in bf16: rows of 1536 + 16 bytes (198656), inputs to 210944,
     * scales, outputs, barrier at 211488, amaxes 211504..211536; one CTA an
     * SM: needs 128 SMs. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 0, 1, 132, &c), 1);
    ck_assert_uint_eq(c.layout.total, 211536);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 0, 1, 127, &c), 0);
    /* Block scales: 8 pairs x 6 groups of scales (192 bytes) move the outputs. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 1, 6, 132, &c), 1);
    ck_assert_uint_eq(c.layout.y, 106496 + 192);
}
END_TEST

START_TEST(decode_tail_refuses_what_does_not_fit)
{
    fmcu_tail_cfg c;
    /* gpt-oss-120b fp8 (top-4, H = I = 2880): 4 x 16 rows of 2896 bytes
     * (185344), inputs to 196864, scales, outputs, barrier at 197136, amaxes
     * to 197168 fit one CTA, but 180 CTAs of one an SM are two waves on 132
     * SMs. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 4, 2880, 2880, 1, 1, 132, &c), 0);
    ck_assert_uint_eq(c.ctas, 180);
    ck_assert_uint_eq(c.layout.total, 197168);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 4, 2880, 2880, 1, 1, 180, &c), 1);
    /* Mixtral (I = 14336) and DeepSeek-V3 (8 pairs of I = 2048) rows do not fit. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 2, 4096, 14336, 1, 1, 132, &c), 0);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 7168, 2048, 1, 1, 132, &c), 0);
    /* One pair of them does (35 KB: six CTAs an SM, 448 CTAs in one wave). */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 1, 7168, 2048, 1, 1, 132, &c), 1);
    ck_assert_uint_eq(c.ctas, 448);
    /* More pairs than a CTA combines, another tier, nothing to do, no device. */
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 9, 2048, 768, 1, 1, 132, &c), 0);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_TILED, 8, 2048, 768, 1, 1, 132, &c), 0);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_PREFILL, 8, 2048, 768, 1, 1, 132, &c), 0);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 0, 2048, 768, 1, 1, 132, &c), 0);
    ck_assert_int_eq(fmcu_tail_plan(FMCU_TIER_STREAM, 8, 2048, 768, 1, 1, 0, &c), 0);
}
END_TEST

START_TEST(one_launch_decode_takes_calls_the_tail_takes_on_one_sm_each)
{
    fmcu_fused_cfg c;
    /* Qwen3-30B-A3B fp8 channel, M = 1 (8 pairs of top-8, 1 token): the
     * tail's 107088 bytes, then x (2048 + 16 bytes) to 109152, its scale and
     * amax to 109160, the partial sums at 109168: 6 groups x 3 warps x 4 x 32
     * floats (9216 bytes) to 118384. 132 CTAs, 128 of them own W2 rows. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 0, 132, &c), 1);
    ck_assert_uint_eq(c.ctas, 132);
    ck_assert_uint_eq(c.groups, 6);
    ck_assert_uint_eq(c.tail_ctas, 128);
    ck_assert_uint_eq(c.tokens, 1);
    ck_assert_uint_eq(c.layout.tail.total, 107088);
    ck_assert_uint_eq(c.layout.x, 107088);
    ck_assert_uint_eq(c.layout.x_scale, 109152);
    ck_assert_uint_eq(c.layout.x_amax, 109156);
    ck_assert_uint_eq(c.layout.red, 109168);
    ck_assert_uint_eq(c.layout.total, 118384);
    /* bf16: 211536 + 4112 of x, 8 of scale and amax, 9216: 224880 bytes,
     * just inside the 225280 a CTA may have. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 0, 0, 132, &c), 1);
    ck_assert_uint_eq(c.layout.total, 224880);
    /* Block scales (128 x 128): 6 groups of I, 16 of H, 5 GEMM1 groups:
     * tail 107408, x to 109472, 16 scales and 16 amaxes to 109600, then
     * 5 x 1536: 117280. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 128, 132, &c), 1);
    ck_assert_uint_eq(c.groups, 5);
    ck_assert_uint_eq(c.layout.tail.total, 107408);
    ck_assert_uint_eq(c.layout.x_scale, 109472);
    ck_assert_uint_eq(c.layout.red, 109600);
    ck_assert_uint_eq(c.layout.total, 117280);
    /* Two tokens of top-4 stage two x rows: 8 pairs still fit in fp8. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 4, 2048, 768, 1, 0, 132, &c), 1);
    ck_assert_uint_eq(c.tokens, 2);
    ck_assert_uint_eq(c.layout.x_scale, 107088 + 2 * 2064);
}
END_TEST

START_TEST(one_launch_decode_takes_w13_by_bulk_copies_where_its_slots_fit)
{
    fmcu_fused_cfg c;
    /* Qwen3-30B-A3B fp8 channel, M = 1: the partial sums of 3 groups (4608
     * bytes; GEMM2's 13 warps x 2 x 32 floats, 3328, fit in them) from
     * 109168, the 6 mbarriers at 113776, the slots at the next 128 bytes,
     * 113920: 3 groups x 2 pieces of 8 rows x 2048 codes, to 212224. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 0, 132, &c), 1);
    ck_assert_uint_eq(c.w13_piece, 0);
    ck_assert_uint_eq(c.layout.w13, 0);
    ck_assert_int_eq(fmcu_fused_bulk_plan(2048, 1, &c), 1);
    ck_assert_uint_eq(c.groups, 3);
    ck_assert_uint_eq(c.w13_piece, 16384);
    ck_assert_uint_eq(c.layout.red, 109168);
    ck_assert_uint_eq(c.layout.w13_bar, 113776);
    ck_assert_uint_eq(c.layout.w13, 113920);
    ck_assert_uint_eq(c.layout.total, 212224);
    ck_assert_uint_le(c.layout.total, FMCU_TAIL_SMEM_MAX);
    /* The rest of the plan stays. */
    ck_assert_uint_eq(c.ctas, 132);
    ck_assert_uint_eq(c.tail_ctas, 128);
    ck_assert_uint_eq(c.layout.x_scale, 109152);
    /* Block scales: partial sums from 109600, mbarriers at 114208, slots at
     * 114304, to 212608. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 128, 132, &c), 1);
    ck_assert_int_eq(fmcu_fused_bulk_plan(2048, 1, &c), 1);
    ck_assert_uint_eq(c.layout.w13_bar, 114208);
    ck_assert_uint_eq(c.layout.w13, 114304);
    ck_assert_uint_eq(c.layout.total, 212608);
    /* bf16: 32 KB pieces do not fit beside the W2 rows; the register-load
     * plan is left as it was. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 0, 0, 132, &c), 1);
    ck_assert_int_eq(fmcu_fused_bulk_plan(2048, 0, &c), 0);
    ck_assert_uint_eq(c.groups, 6);
    ck_assert_uint_eq(c.w13_piece, 0);
    ck_assert_uint_eq(c.layout.total, 224880);
    /* One pair of bf16 at H = 1024: 16 KB pieces fit. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 1, 1, 1024, 768, 0, 0, 132, &c), 1);
    ck_assert_int_eq(fmcu_fused_bulk_plan(1024, 0, &c), 1);
    ck_assert_uint_eq(c.w13_piece, 16384);
    /* A row that is not whole 16-byte pieces cannot be bulk-copied. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2056, 768, 1, 0, 132, &c), 1);
    ck_assert_int_eq(fmcu_fused_bulk_plan(2056, 1, &c), 0);
    ck_assert_uint_eq(c.w13_piece, 0);
}
END_TEST

START_TEST(one_launch_decode_refuses_what_it_cannot_hold)
{
    fmcu_fused_cfg c;
    /* 128 W2-owning CTAs need 128 SMs. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 0, 127, &c), 0);
    /* bf16 with two x rows: 211536 + 2 x 4112 + 16 + 9216 = 228992 bytes. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 4, 2048, 768, 0, 0, 132, &c), 0);
    ck_assert_uint_eq(c.layout.total, 228992);
    /* gpt-oss-120b (H = 2880): 180 W2-owning CTAs; fits where there are 180 SMs. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 4, 4, 2880, 2880, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 4, 4, 2880, 2880, 1, 0, 180, &c), 1);
    ck_assert_uint_eq(c.tail_ctas, 180);
    /* Pairs that are not whole tokens, more than 8, another tier, nothing. */
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 3, 2048, 768, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 9, 1, 2048, 768, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_TILED, 8, 8, 2048, 768, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 0, 8, 2048, 768, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 0, 2048, 768, 1, 0, 132, &c), 0);
    ck_assert_int_eq(fmcu_fused_plan(FMCU_TIER_STREAM, 8, 8, 2048, 768, 1, 0, 0, &c), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_tier");
    TCase *tc = tcase_create("tier");
    tcase_add_test(tc, auto_tier_follows_rows_per_expert);
    tcase_add_test(tc, forced_tier_wins_unless_it_cannot_run);
    tcase_add_test(tc, wq_tier_streams_up_to_16_rows);
    tcase_add_test(tc, wq_tier_prefill_from_150_rows_where_served);
    tcase_add_test(tc, wq_tier_prefill_past_the_stream_tier_when_fused);
    tcase_add_test(tc, int4_fused_form_from_48_rows_an_expert);
    tcase_add_test(tc, wq_ring_from_6_to_47_rows_an_expert);
    tcase_add_test(tc, wq_ring_to_31_35_or_23_rows_before_the_swapped_form);
    tcase_add_test(tc, wq_ring_bound_by_format_where_the_gemms_are_swapped);
    tcase_add_test(tc, int4_swapped_form_from_32_rows_an_expert);
    tcase_add_test(tc, stream_wgmma_from_4_rows_or_always);
    tcase_add_test(tc, stream_wgmma2_from_128_pairs_or_4_rows_or_block);
    tcase_add_test(tc, e2m1_fused_form_up_to_320_rows_an_expert);
    tcase_add_test(tc, e2m1_fused_form_serves_by_option_and_experts);
    tcase_add_test(tc, e2m1_scratch_only_where_a_call_uses_it);
    tcase_add_test(tc, w4_gemm_swapped_by_scheme_and_fold);
    tcase_add_test(tc, decode_tail_takes_calls_that_fit_in_one_wave);
    tcase_add_test(tc, decode_tail_refuses_what_does_not_fit);
    tcase_add_test(tc, one_launch_decode_takes_calls_the_tail_takes_on_one_sm_each);
    tcase_add_test(tc, one_launch_decode_takes_w13_by_bulk_copies_where_its_slots_fit);
    tcase_add_test(tc, one_launch_decode_refuses_what_it_cannot_hold);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
