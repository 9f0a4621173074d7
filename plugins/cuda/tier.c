/*
 * plugins/cuda/tier.c - the GEMM tier of a call (tier.h).
 */
#include "plugins/cuda/tier.h"

#include "plugins/cuda/options.h"

/* Past about 16 rows per expert the tiled kernels win: on an H200 the
 * stream tier was faster at 1-8 rows per expert (Qwen3-30B-A3B M=1..128,
 * Mixtral M=1..16) and slower at 32 (Mixtral M=128): bench/cuda/RESULTS.md at 5ddad69,
 * "First measurements (H200): the tiled and stream tiers". */
int fmcu_gemm_tier(int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int prefill_ok)
{
    if (forced == FMCU_TIER_PREFILL)
        return prefill_ok ? FMCU_TIER_PREFILL : FMCU_TIER_TILED;
    if (forced == FMCU_TIER_STREAM || forced == FMCU_TIER_TILED)
        return forced;
    int64_t per_expert = m * (int64_t)top_k / (local_experts ? local_experts : 1);
    if (per_expert <= FMCU_STREAM_MAX_ROWS)
        return FMCU_TIER_STREAM;
    return prefill_ok ? FMCU_TIER_PREFILL : FMCU_TIER_TILED;
}

int fmcu_wq_tier(int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int streams, int prefill_ok, int fused)
{
    if (forced == FMCU_TIER_PREFILL)
        return prefill_ok ? FMCU_TIER_PREFILL : FMCU_TIER_TILED;
    if (forced == FMCU_TIER_TILED)
        return FMCU_TIER_TILED;
    if (forced == FMCU_TIER_STREAM)
        return streams ? FMCU_TIER_STREAM : FMCU_TIER_TILED;
    int64_t per_expert = m * (int64_t)top_k / (local_experts ? local_experts : 1);
    if (per_expert <= FMCU_WQ_STREAM_MAX_ROWS)
        return streams ? FMCU_TIER_STREAM : FMCU_TIER_TILED;
    return prefill_ok && (fused || per_expert >= FMCU_WQ_PREFILL_MIN_ROWS) ? FMCU_TIER_PREFILL : FMCU_TIER_TILED;
}

int fmcu_wq_fused_serves(int option, uint32_t local_experts)
{
    return option == FMCU_FUSED_ON ||
           (option == FMCU_FUSED_AUTO && local_experts > 0 && local_experts <= FMCU_WQ_FUSED_MAX_EXPERTS);
}

int fmcu_wq_prefill_fused(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int has_scratch)
{
    if (option == FMCU_FUSED_ON)
        return 1;
    if (!fmcu_wq_fused_serves(option, local_experts))
        return 0;
    return !has_scratch || m * (int64_t)top_k / local_experts <= FMCU_WQ_FUSED_MAX_ROWS;
}

int fmcu_wq_int4_fused(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int64_t min_rows)
{
    if (option == FMCU_FUSED_ON)
        return 1;
    if (!fmcu_wq_fused_serves(option, local_experts))
        return 0;
    return m * (int64_t)top_k / local_experts >= min_rows;
}

int fmcu_wq_ring_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int forced, int64_t max_rows)
{
    if (option == FMCU_FUSED_OFF || forced == FMCU_TIER_PREFILL)
        return 0;
    if (option == FMCU_FUSED_ON)
        return 1;
    if (local_experts == 0 || (forced != FMCU_TIER_AUTO && forced != FMCU_TIER_STREAM))
        return 0;
    const int64_t per_expert = m * (int64_t)top_k / local_experts;
    return per_expert >= FMCU_WQ_RING_MIN_ROWS && per_expert <= max_rows;
}

int64_t fmcu_wq_ring_max_rows(int swapped, int int4, uint32_t fp4_block)
{
    if (!swapped)
        return FMCU_WQ_RING_MAX_ROWS;
    return int4              ? FMCU_WQ_RING_SWAP_INT4_MAX_ROWS
           : fp4_block == 16 ? FMCU_WQ_RING_SWAP_NVFP4_MAX_ROWS
                             : FMCU_WQ_RING_SWAP_E2M1_MAX_ROWS;
}

int fmcu_w4_gemm_swapped(int option, int int4, uint32_t fp4_block, int mx_fold)
{
    if (option != FMCU_W4_GEMM_AUTO)
        return option == FMCU_W4_GEMM_SWAPPED;
    if (int4)
        return 1;
    return fp4_block == 16 || (fp4_block == 32 && mx_fold);
}

int fmcu_stream_wgmma_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int always)
{
    if (option != FMCU_FUSED_AUTO)
        return option == FMCU_FUSED_ON;
    if (always)
        return 1;
    return local_experts > 0 && m * (int64_t)top_k / local_experts >= FMCU_STREAM_WGMMA_MIN_ROWS;
}

int fmcu_stream_wgmma2_wanted(int option, int64_t m, uint32_t top_k, uint32_t local_experts, int block)
{
    if (option != FMCU_FUSED_AUTO)
        return option == FMCU_FUSED_ON;
    return block || m * (int64_t)top_k >= FMCU_STREAM_WGMMA2_MIN_PAIRS ||
           fmcu_stream_wgmma_wanted(option, m, top_k, local_experts, 0);
}

uint32_t fmcu_wq_scratch_min_rows(int option, uint32_t local_experts, int forced)
{
    if (option == FMCU_FUSED_ON)
        return UINT32_MAX;
    if (fmcu_wq_fused_serves(option, local_experts))
        return FMCU_WQ_FUSED_MAX_ROWS + 1;
    return forced == FMCU_TIER_PREFILL ? 0 : FMCU_WQ_PREFILL_MIN_ROWS;
}

int fmcu_tail_plan(int tier, int64_t pairs, uint32_t H, uint32_t I, int fp8, uint32_t kgroups, int sms,
                   fmcu_tail_cfg *cfg)
{
    if (tier != FMCU_TIER_STREAM || pairs <= 0 || pairs > FMCU_TAIL_MAX_PAIRS || H == 0 || I == 0 || kgroups == 0 ||
        sms <= 0)
        return 0;
    cfg->ctas = (H + FMCU_TAIL_ROWS - 1) / FMCU_TAIL_ROWS;
    cfg->layout = fmcu_tail_layout_of((uint32_t)pairs, I, fp8, kgroups);
    if (cfg->layout.total > FMCU_TAIL_SMEM_MAX)
        return 0;
    const size_t per_sm = FMCU_TAIL_SM_SMEM / (cfg->layout.total + FMCU_TAIL_CTA_EXTRA);
    return (size_t)cfg->ctas <= per_sm * (size_t)sms;
}

/* GEMM1's partial sums: 3 of 4 warps x 4 accumulators x 32 lanes per
 * group (they outgrow GEMM2's 2 x 32 per warp). */
static size_t fused_red_bytes(uint32_t groups)
{
    return (size_t)groups * 3 * 4 * 32 * sizeof(float);
}

int fmcu_fused_plan(int tier, int64_t pairs, uint32_t top_k, uint32_t H, uint32_t I, int fp8, uint32_t block_k, int sms,
                    fmcu_fused_cfg *cfg)
{
    if (tier != FMCU_TIER_STREAM || pairs <= 0 || pairs > FMCU_TAIL_MAX_PAIRS || top_k == 0 || pairs % top_k ||
        H == 0 || I == 0 || sms <= 0)
        return 0;
    const uint32_t kg1 = block_k ? (H + block_k - 1) / block_k : 1, kg2 = block_k ? (I + block_k - 1) / block_k : 1;
    const size_t es = fp8 ? 1 : 2;
    cfg->ctas = (uint32_t)sms;
    cfg->groups = block_k ? FMCU_FUSED_GROUPS_BLOCK : FMCU_FUSED_GROUPS;
    cfg->tail_ctas = (H + FMCU_TAIL_ROWS - 1) / FMCU_TAIL_ROWS;
    cfg->tokens = (uint32_t)(pairs / top_k);
    fmcu_fused_layout *l = &cfg->layout;
    l->tail = fmcu_tail_layout_of((uint32_t)pairs, I, fp8, kg2);
    l->x = fmcu_tail_up(l->tail.total, 16);
    l->x_scale = l->x + (size_t)cfg->tokens * ((size_t)H * es + FMCU_FUSED_X_PAD);
    l->x_amax = l->x_scale + (size_t)cfg->tokens * kg1 * sizeof(float);
    l->red = fmcu_tail_up(l->x_amax + (size_t)cfg->tokens * kg1 * sizeof(uint32_t), 16);
    l->total = l->red + fused_red_bytes(cfg->groups);
    l->w13_bar = l->w13 = 0;
    cfg->w13_piece = 0;
    return cfg->tail_ctas <= (uint32_t)sms && l->total <= FMCU_TAIL_SMEM_MAX;
}

int fmcu_fused_bulk_plan(uint32_t H, int fp8, fmcu_fused_cfg *cfg)
{
    fmcu_fused_cfg c = *cfg;
    fmcu_fused_layout *l = &c.layout;
    c.groups = FMCU_FUSED_GROUPS_BULK;
    c.w13_piece = 8u * H * (fp8 ? 1u : 2u);
    l->w13_bar = fmcu_tail_up(l->red + fused_red_bytes(c.groups), 16);
    /* 128-byte slots: a bulk copy needs 16, and whole lines keep a row's
     * fragment loads off each other's banks no worse than H's own stride. */
    l->w13 = fmcu_tail_up(l->w13_bar + (size_t)c.groups * 2 * 8, 128);
    l->total = l->w13 + (size_t)c.groups * 2 * c.w13_piece;
    if (H % 16 || l->total > FMCU_TAIL_SMEM_MAX)
        return 0;
    *cfg = c;
    return 1;
}
