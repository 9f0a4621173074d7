/*
 * plugins/cuda/forward.cu - the forward of one layer on one stream
 * (fmcu_forward, cuda_api.h): which tier and which fused launches serve the
 * call (decided on the host from its size and the layer's options), and
 * the launches in order. The steps around the GEMMs are in routing.cu,
 * plan.cu, quantize.cu and combine.cu (forward_steps.h); the GEMMs in
 * gemm.cu and stream_gemm.cu; the fused decode launches in decode_tail.cu
 * and decode_fused.cu; the prefill tier in prefill_sm90.cu.
 *
 *   route     monolithic only (routing.cu)
 *   plan      pairs by local expert and the row tiles (plan.cu); its blocks
 *             1..M quantize the GEMM1 input (the stream and tiled tiers)
 *   quant     GEMM input rows to fp8 where the plan did not (quantize.cu)
 *   GEMM1     gemm.cu or stream_gemm.cu, activation fused -> act [pairs, I]
 *   GEMM2     gemm.cu or stream_gemm.cu                   -> y [pairs, H]
 *   combine   out[t] = round(sum_j y[t,j] * w[t,j]) (combine.cu)
 *   tail      decode_tail.cu: quant + GEMM2 + combine in one launch for calls of
 *             at most 8 pairs whose CTAs fit at once (fmcu_tail_plan); its W2
 *             copies start before GEMM1 has finished.
 *   fused     decode_fused.cu: everything from the plan to the combine in one
 *             persistent launch, for calls the tail serves whose W2-owning
 *             CTAs fit one an SM (fmcu_fused_plan); taken before the tail.
 *
 * No allocation and no host synchronization, except that host (CPU) tensors
 * are staged through the workspace and the stream is synchronized before the
 * results are read back.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include <atomic>

#include "fusedmoe/common.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/decode_fused.h"
#include "plugins/cuda/decode_tail.h"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mx_w4a8.h"
#include "plugins/cuda/prefill.h"
#include "plugins/cuda/quant_row.cuh"
#include "plugins/cuda/sm100_gemm.h"
#include "plugins/cuda/tier.h"
#include "plugins/cuda/wq_gemm.h"

namespace {

using fmcu_quant::QM_BF16;
using fmcu_quant::QM_GROUP;
using fmcu_quant::QM_TENSOR;
using fmcu_quant::QM_TOKEN;
using fmcu_quant::quant_args;

int fail(char *err, size_t cap, const char *what, cudaError_t e)
{
    snprintf(err, cap, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

#define CK(call, what)                                                                                              \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess)                                                                                      \
            return fail(err, cap, what, e_);                                                                        \
    } while (0)

template <typename T> T *at(const fmcu_layer *L, size_t off)
{
    return (T *)((char *)L->workspace + off);
}

int quant_mode(const fmcu_layer *L)
{
    switch (L->quant) {
    case FMCU_Q_TENSOR: return QM_TENSOR;
    case FMCU_Q_CHANNEL: return QM_TOKEN;
    case FMCU_Q_BLOCK: return QM_GROUP;
    default: return QM_BF16;
    }
}

/* Scale pointers of a GEMM input quantized by `mode` (see gemm.h). */
void input_scales(const fmcu_layer *L, int slot, float *scale_buf, uint32_t cols, fmcu_gemm_args *g)
{
    switch (L->quant) {
    case FMCU_Q_TENSOR:
        g->a_scale = L->a_dynamic ? scale_buf : L->in_scales + slot;
        g->a_scale_ld = 0;
        break;
    case FMCU_Q_CHANNEL:
        g->a_scale = scale_buf;
        g->a_scale_ld = 1;
        break;
    case FMCU_Q_BLOCK:
        g->a_scale = scale_buf;
        g->a_scale_ld = (cols + L->block_k - 1) / L->block_k;
        break;
    default:
        g->a_scale = nullptr;
        g->a_scale_ld = 0;
    }
}

void weight_scales(const fmcu_layer *L, const float *scale, uint32_t n_rows, uint32_t k, fmcu_gemm_args *g)
{
    g->w_scale = L->quant == FMCU_Q_NONE ? nullptr : scale;
    g->w_scale_n = L->quant == FMCU_Q_CHANNEL ? 1 : 0;
    switch (L->quant) {
    case FMCU_Q_TENSOR: g->w_scale_e = 1; break;
    case FMCU_Q_CHANNEL: g->w_scale_e = n_rows; break;
    case FMCU_Q_BLOCK:
        g->w_scale_e = (int64_t)((n_rows + L->block_n - 1) / L->block_n) * ((k + L->block_k - 1) / L->block_k);
        break;
    default: g->w_scale_e = 0;
    }
    g->block_n = L->block_n;
    g->block_k = L->block_k;
}

/* The device's compute capability major, read once per device (0 if unknown). */
int compute_major(int device)
{
    static std::atomic<int> major[64];
    if (device < 0 || device >= 64)
        return 0;
    int n = major[device].load(std::memory_order_relaxed);
    if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess)
        major[device].store(n, std::memory_order_relaxed);
    return n > 0 ? n : 0;
}

/* The device's multiprocessor count, read once per device (0 if unknown). */
int multiprocessors(int device)
{
    static std::atomic<int> sms[64];
    if (device < 0 || device >= 64)
        return 0;
    int n = sms[device].load(std::memory_order_relaxed);
    if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess)
        sms[device].store(n, std::memory_order_relaxed);
    return n > 0 ? n : 0;
}

/* Whether the fused decode tail (decode_tail.h) runs this call, and its
 * shape. The option decode_tail = false turns it off (A/B timing). */
bool tail_wanted(const fmcu_layer *L, int tier, int64_t pairs, fmcu_tail_cfg *cfg)
{
    if (!L->opt.decode_tail || FMCU_Q_IS_WQ(L->quant) || (L->quant == FMCU_Q_BLOCK && (L->block_k == 0 || L->block_k % 128 || L->block_n == 0)))
        return false;
    const uint32_t kgroups = L->quant == FMCU_Q_BLOCK ? (L->inter + L->block_k - 1) / L->block_k : 1;
    return fmcu_tail_plan(tier, pairs, L->hidden, L->inter, L->quant != FMCU_Q_NONE, kgroups, multiprocessors(L->device),
                          cfg) != 0;
}

/* Whether the one-launch decode (decode_fused.h) runs this call, and its
 * shape. It reads x in place, so x's rows must be 16-byte aligned, and it
 * stages x once per token, so the router weight must not be applied to the
 * input. By default it serves the fp8 schemes only: in bf16 (twice the
 * bytes per SM, W2 rows filling shared memory) it was slower than the plan,
 * stream GEMM1 and tail chain (H100, Qwen3-30B-A3B M=1: 50-52 against 42
 * us; bench/cuda/RESULTS.md at 5ddad69, "Decode: the one-launch decode"). The option
 * decode_fused = off turns it off, = on takes it for bf16 too (A/B timing,
 * and tests of the bf16 path). */
bool fused_wanted(const fmcu_layer *L, int tier, int64_t pairs, bool x_aligned, fmcu_fused_cfg *cfg)
{
    const int mode = L->opt.decode_fused;
    const bool block = L->quant == FMCU_Q_BLOCK;
    if (mode == FMCU_FUSED_OFF || FMCU_Q_IS_WQ(L->quant) || (mode == FMCU_FUSED_AUTO && L->quant == FMCU_Q_NONE) || L->on_input || !x_aligned ||
        (block && (L->block_k == 0 || L->block_k % 128 || L->block_n == 0)))
        return false;
    if (!fmcu_fused_plan(tier, pairs, L->top_k, L->hidden, L->inter, L->quant != FMCU_Q_NONE, block ? L->block_k : 0,
                         multiprocessors(L->device), cfg))
        return false;
    /* W13 by bulk copies into shared memory where their slots fit
     * (fmcu_fused_bulk_plan), else by the GEMM1 warps' register loads: the
     * copies go out as soon as the plan is known, 16 KB contiguous each
     * (Qwen3-30B-A3B fp8 M=1: 2.7-5.5 us less; bench/cuda/RESULTS.md at 5ddad69,
     * "Decode: the one-launch decode"). The option decode_fused_w13 =
     * registers keeps the register loads. */
    if (!L->opt.decode_fused_w13_regs)
        fmcu_fused_bulk_plan(L->hidden, L->quant != FMCU_Q_NONE, cfg);
    return true;
}

/* Which kernel runs the GEMMs of the 4-bit and int schemes (wq_gemm.h). */
enum wq_kernel { WQ_TILED, WQ_STREAM, WQ_WGMMA, WQ_RING };

/* The GEMMs and combine of the 4-bit and int schemes (wq_gemm.h): each
 * GEMM input is staged per pair where act-order permutes it or W4A4
 * quantizes it with the pair's expert's global, then the GEMM. */
int wq_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
               const fmcu_fwd::plan_args &pl, uint32_t bm, wq_kernel kernel, void *out, int64_t ldo, cudaStream_t st,
               char *err, size_t cap)
{
    auto gemm = kernel == WQ_STREAM ? fmcu_wq_stream_launch
                : kernel == WQ_WGMMA ? fmcu_wq_wgmma_launch
                : kernel == WQ_RING  ? fmcu_wq_ring_launch
                                     : fmcu_wq_gemm_launch;
    const fmcu_wq *wq = &L->wq;
    const int64_t pairs = m * L->top_k;
    const uint32_t H = L->hidden, I = L->inter;
    const bool a4 = FMCU_Q_IS_A4(L->quant);
    fmcu_wq_gemm_args g = {};
    g.format = wq->format;
    g.fp4_block = wq->fp4_block;
    g.row_tile = bm;
    g.grid_tiles = fmcu_max_tiles(pairs, L->local_experts, bm);
    g.experts = L->local_experts;
    g.sms = multiprocessors(L->device);
    g.sorted = pl.sorted;
    g.tiles = pl.tiles;
    g.n_tiles = pl.n_tiles;
    g.offsets = pl.offsets;
    g.act_dtype = L->act_dtype;
    g.activation = L->activation;
    g.swiglu_alpha = L->swiglu_alpha;
    g.swiglu_limit = L->swiglu_limit;

    /* GEMM1. */
    g.w = wq->w13;
    g.gemm1 = 1;
    g.gated = L->gated;
    g.n_rows = L->rows13;
    g.n_out = I;
    g.bias = L->b13;
    g.out = at<void>(L, L->ws.act);
    g.ldo = I;
    fmcu_wq_stage_args sa = {};
    sa.dtype = L->act_dtype;
    sa.pair_local = pl.pair_local;
    if (wq->w13.perm || a4) {
        sa.src = x;
        sa.ld = x_ld;
        sa.row_div = (int)L->top_k;
        sa.perm = wq->w13.perm;
        sa.in_glob = a4 ? wq->w13.in_glob : nullptr; /* NVFP4's only: NULL for MXFP4 */
        sa.mx_a4 = L->quant == FMCU_Q_MXFP4_A4;
        sa.k = H;
        sa.kp = wq->w13.perm ? wq->w13.kp : H;
        sa.dst = wq->a1;
        CK(fmcu_wq_stage_launch(sa, pairs, st), "GEMM1 input staging");
        g.a = wq->a1;
        g.lda = sa.kp;
        g.a_k = sa.kp;
        g.a_row_div = 1;
    } else {
        g.a = x;
        g.lda = x_ld;
        g.a_k = H;
        g.a_row_div = (int)L->top_k;
    }
    const int sms = multiprocessors(L->device);
    g.slabs_per_cta = fmcu_wq_stream_slabs(g.grid_tiles, L->gated ? (I + 7) / 8 : (L->rows13 + 15) / 16, sms);
    CK(gemm(g, st), "GEMM1 (4-bit/int weights)");

    /* GEMM2. */
    void *act = at<void>(L, L->ws.act);
    g.w = wq->w2;
    g.gemm1 = 0;
    g.gated = 0;
    g.n_rows = H;
    g.n_out = H;
    g.bias = L->add_b2 ? L->b2 : nullptr;
    g.out = at<void>(L, L->ws.y);
    g.ldo = H;
    if (wq->w2.perm || a4) {
        sa.src = act;
        sa.ld = I;
        sa.row_div = 1;
        sa.perm = wq->w2.perm;
        sa.in_glob = a4 ? wq->w2.in_glob : nullptr;
        sa.k = I;
        sa.kp = wq->w2.perm ? wq->w2.kp : I;
        sa.dst = wq->a2;
        CK(fmcu_wq_stage_launch(sa, pairs, st), "GEMM2 input staging");
        g.a = wq->a2;
        g.lda = sa.kp;
        g.a_k = sa.kp;
    } else {
        g.a = act;
        g.lda = I;
        g.a_k = I;
    }
    g.a_row_div = 1;
    g.slabs_per_cta = fmcu_wq_stream_slabs(g.grid_tiles, (H + 15) / 16, sms);
    CK(gemm(g, st), "GEMM2 (4-bit/int weights)");

    fmcu_fwd::combine_args cb = {};
    cb.y = g.out;
    cb.w = topk_w;
    cb.pair_local = pl.pair_local;
    cb.k = L->top_k;
    cb.hidden = H;
    cb.on_input = L->on_input;
    cb.dtype = L->act_dtype;
    cb.out = out;
    cb.ldo = ldo;
    CK(fmcu_fwd::combine_launch(cb, m, st), "combine kernel");
    return 0;
}

} // namespace

/* After the last kernel: a host `out` gets the staged result, and host
 * outputs are waited for. */
static int finish(const fmcu_layer *L, const fmcu_call *c, const void *staged, cudaStream_t st, char *err, size_t cap)
{
    const size_t row = (size_t)L->hidden * 2;
    if (c->out_host)
        CK(cudaMemcpy2DAsync(c->out, (size_t)c->out_ld * 2, staged, row, row, (size_t)c->m, cudaMemcpyDeviceToHost, st),
           "copying out to the host");
    if (c->out_host || (c->logits && c->topk_out_host))
        CK(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    return 0;
}

extern "C" int fmcu_prepare_kernels(int device, char *err, size_t cap)
{
    CK(cudaSetDevice(device), "cudaSetDevice");
    CK(fmcu_gemm_prepare(), "GEMM set-up");
    CK(fmcu_tail_prepare(), "decode tail set-up");
    CK(fmcu_fused_prepare(), "one-launch decode set-up");
    if (compute_major(device) == 9)
        CK(fmcu_wq_wgmma_prepare(), "4-bit wgmma GEMM set-up");
    if (compute_major(device) == 9)
        CK(fmcu_wq_ring_prepare(), "4-bit wgmma weight stream set-up");
    if (compute_major(device) == 9) {
        CK(fmcu_stream_wgmma_prepare(), "FP8 wgmma weight stream set-up");
        CK(fmcu_stream_g1_wgmma_prepare(), "FP8 GEMM1 wgmma weight stream set-up");
        CK(fmcu_stream_bf16_wgmma_prepare(), "BF16 wgmma weight stream set-up");
    }
    return 0;
}

extern "C" int fmcu_forward(const fmcu_layer *L, const fmcu_call *c, char *err, size_t cap)
{
    cudaStream_t st = (cudaStream_t)c->stream;
    const int64_t m = c->m, k = L->top_k, pairs = m * k;
    const uint32_t H = L->hidden, I = L->inter;
    if (m <= 0)
        return 0;
    CK(cudaSetDevice(L->device), "cudaSetDevice");
    const size_t act_size = 2;

    /* Inputs on the host are staged. */
    const void *x = c->x;
    int64_t x_ld = c->x_ld;
    if (c->x_host) {
        void *dst = at<void>(L, L->ws.x_stage);
        CK(cudaMemcpy2DAsync(dst, H * act_size, c->x, (size_t)c->x_ld * act_size, H * act_size, (size_t)m,
                             cudaMemcpyHostToDevice, st),
           "copying x to the device");
        x = dst;
        x_ld = H;
    }

    /* Routing. */
    const float *topk_w = c->topk_w;
    const int32_t *topk_ids = c->topk_ids;
    if (c->logits) {
        const void *logits = c->logits;
        int64_t ld = c->logits_ld, cs = c->logits_cs;
        if (c->logits_host) {
            size_t es = c->logits_dtype == FMOE_DTYPE_BF16 ? 2 : 4;
            void *dst = at<void>(L, L->ws.logits_stage);
            CK(cudaMemcpy2DAsync(dst, L->logical_experts * es, c->logits, (size_t)ld * es, L->logical_experts * es,
                                 (size_t)m, cudaMemcpyHostToDevice, st),
               "copying router logits to the device");
            logits = dst;
            ld = L->logical_experts;
            cs = 1;
        }
        fmcu_fwd::route_args r = {};
        r.logits = logits;
        r.dtype = c->logits_dtype;
        r.ld = ld;
        r.cs = cs;
        r.n = L->logical_experts;
        r.k = L->top_k;
        r.scoring = L->scoring;
        r.renormalize = L->renormalize;
        r.grouped = L->grouped;
        r.n_groups = L->num_expert_group;
        r.topk_group = L->topk_group;
        r.bias = L->has_correction_bias ? L->correction_bias : nullptr;
        r.scaling = L->routed_scaling_factor;
        r.redundant = L->redundant_experts;
        r.w = at<float>(L, L->ws.topk_w);
        r.ids = at<int32_t>(L, L->ws.topk_ids);
        r.ids_logical = at<int32_t>(L, L->ws.topk_ids_logical);
        CK(fmcu_fwd::route_launch(r, m, st), "routing kernel");
        topk_w = r.w;
        topk_ids = r.ids;
        cudaMemcpyKind kind = c->topk_out_host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
        if (c->topk_w_out)
            CK(cudaMemcpyAsync(c->topk_w_out, r.w, (size_t)pairs * 4, kind, st), "copying topk_weights_out");
        if (c->topk_ids_out)
            CK(cudaMemcpyAsync(c->topk_ids_out, r.ids_logical, (size_t)pairs * 4, kind, st), "copying topk_ids_out");
    } else if (c->topk_host) {
        float *w = at<float>(L, L->ws.topk_w);
        int32_t *ids = at<int32_t>(L, L->ws.topk_ids);
        CK(cudaMemcpyAsync(w, c->topk_w, (size_t)pairs * 4, cudaMemcpyHostToDevice, st), "copying topk_weights");
        CK(cudaMemcpyAsync(ids, c->topk_ids, (size_t)pairs * 4, cudaMemcpyHostToDevice, st), "copying topk_ids");
        topk_w = w;
        topk_ids = ids;
    }

    /* Plan: row tiles as the GEMM tier wants them. */
    /* The prefill path serves bf16 and fp8. wgmma's fp8 accumulation keeps
     * fewer bits than f32 (GEMM1 promotes to f32 every 128 K), so across
     * the fp8 requantization of act(h) a GEMM2 input may round to the
     * neighbouring code: a few elements in 100k leave the conformance
     * suite's per-element bound, which the manifest's [[tolerance]]
     * declares (docs/CUDA.md, "FP8 accuracy"). */
    const bool wq = FMCU_Q_IS_WQ(L->quant);
    const bool prefill_ok = !L->sm100 && fmcu_prefill_supported(L);
    /* The 4-bit and int GEMMs: weight streaming (wq_stream.cu, row tiles of
     * 32) where fmcu_wq_tier picks it (up to 16 rows per expert) and it
     * serves both projections; the prefill tier where it serves the layer
     * (e2m1 weights: converted inside the grouped GEMM past the stream
     * tier where fmcu_wq_prefill_fused says so, else through the bf16
     * scratch from 150 rows per expert, tier.h; int4 with 128-column groups:
     * converted inside the grouped GEMM past the stream tier);
     * else wgmma (wq_wgmma.cu, row tiles of 64) where it serves both
     * projections, else tiled (wq_gemm.cu, row tiles of 16 and 64). */
    const int wq_fused = wq && fmcu_prefill_wq_fused(L, m);
    const int wq_tier = wq ? fmcu_wq_tier(m, L->top_k, L->local_experts, L->opt.tier,
                                          fmcu_wq_stream_serves(L->wq.format, &L->wq.w13) &&
                                              fmcu_wq_stream_serves(L->wq.format, &L->wq.w2),
                                          prefill_ok, wq_fused)
                           : FMCU_TIER_TILED;
    const int major = compute_major(L->device);
    /* The wgmma weight stream (wq_ring.cu, row tiles of 64) where it serves,
     * whatever tier the call would take: by default (wq_ring = auto) from 6
     * to 47 rows an expert on average, to 31 (int4), 35 (MXFP4) or 23
     * (NVFP4) where the call would take the fused form on the prefill tier
     * and its GEMMs are the swapped form (fmcu_wq_ring_max_rows, tier.h). */
    const int64_t ring_max = fmcu_wq_ring_max_rows(prefill_ok && wq_fused && fmcu_prefill_w4_swaps(L),
                                                   L->wq.format == FMCU_WQ_INT4, L->wq.fp4_block);
    const bool wq_ring = wq &&
                         fmcu_wq_ring_wanted(L->opt.wq_ring, m, L->top_k, L->local_experts, L->opt.tier, ring_max) &&
                         L->quant != FMCU_Q_MXFP4_A8 &&
                         fmcu_wq_ring_serves(L->wq.format, L->act_dtype, major, L->local_experts, L->rows13,
                                             &L->wq.w13) &&
                         fmcu_wq_ring_serves(L->wq.format, L->act_dtype, major, L->local_experts, H, &L->wq.w2);
    const int tier = wq_ring ? FMCU_TIER_TILED
                     : wq    ? (wq_tier == FMCU_TIER_PREFILL ? FMCU_TIER_PREFILL : FMCU_TIER_TILED)
                             : fmcu_gemm_tier(m, L->top_k, L->local_experts, L->opt.tier, prefill_ok);
    const bool wq_stream = wq && !wq_ring && wq_tier == FMCU_TIER_STREAM;
    const bool wq_wgmma = wq && !wq_ring && wq_tier == FMCU_TIER_TILED && L->opt.wq_wgmma &&
                          fmcu_wq_wgmma_serves(L->wq.format, L->act_dtype, major, &L->wq.w13) &&
                          fmcu_wq_wgmma_serves(L->wq.format, L->act_dtype, major, &L->wq.w2);
    const uint32_t bm = wq_ring                    ? (uint32_t)FMCU_WQ_RING_TILE
                        : wq_stream                ? (uint32_t)FMCU_STREAM_ROW_TILE
                        : wq_wgmma                 ? (uint32_t)FMCU_WQ_WGMMA_TILE
                        : wq && tier != FMCU_TIER_PREFILL ? (fmcu_row_tile(m, L->top_k, L->local_experts) <= 16 ? 16u : 64u)
                        : tier == FMCU_TIER_STREAM ? FMCU_STREAM_ROW_TILE
                                                   : fmcu_row_tile(m, L->top_k, L->local_experts);
    /* The fp8 schemes' stream tier runs GEMM2 on native FP8 wgmma (option
     * stream_wgmma; by default with block scales, else from 128 pairs or 4
     * rows an expert: fmcu_stream_wgmma2_wanted) and GEMM1 on f16 wgmma
     * with f32's sums (option stream_wgmma_gemm1; by default with block
     * scales, else from 4 rows an expert: fmcu_stream_wgmma_wanted). Not GEMM1 on FP8 wgmma:
     * its sums keep fewer bits than f32, and GEMM1's output is quantized
     * again with its row's (or 128-column group's) amax as the scale, so a
     * sum one bf16 step off the reference's re-rolls every code of that
     * row: conformance NMSE up to 9e-4 at M = 16 (gate 5e-4). GEMM2's
     * output is not quantized again. */
    const bool stream_fp8 = tier == FMCU_TIER_STREAM && L->quant != FMCU_Q_NONE && !wq && major == 9;
    const bool stream_wgmma = stream_fp8 && fmcu_stream_wgmma2_wanted(L->opt.stream_wgmma, m, L->top_k,
                                                                      L->local_experts, L->quant == FMCU_Q_BLOCK);
    auto gemm = tier == FMCU_TIER_STREAM ? fmcu_stream_gemm_launch : fmcu_gemm_launch;
    const bool g1_wgmma = stream_fp8 && fmcu_stream_wgmma_wanted(L->opt.stream_wgmma_gemm1, m, L->top_k,
                                                                     L->local_experts, L->quant == FMCU_Q_BLOCK);
    /* BF16 on the stream tier: both GEMMs on bf16 wgmma fed by TMA (option
     * stream_wgmma_bf16, by default from 4 rows an expert; f32 sums as
     * mma.sync's). */
    const bool stream_bf16 = tier == FMCU_TIER_STREAM && L->quant == FMCU_Q_NONE && major == 9 &&
                             fmcu_stream_wgmma_wanted(L->opt.stream_wgmma_bf16, m, L->top_k, L->local_experts, 0);
    auto gemm1 = g1_wgmma ? fmcu_stream_g1_wgmma_launch : stream_bf16 ? fmcu_stream_bf16_wgmma_launch : gemm;
    auto gemm2 = stream_wgmma ? fmcu_stream_wgmma_launch : stream_bf16 ? fmcu_stream_bf16_wgmma_launch : gemm;

    /* GEMM1 input: quantized (or copied to bf16: router weight on the
     * input, or rows not 16-byte aligned, which the GEMMs' 16-byte loads
     * need) into the workspace, by the plan kernel's extra blocks unless a
     * dynamic per-tensor scale needs an amax pass over all rows first. */
    quant_args q = {};
    q.src = x;
    q.ld = x_ld;
    q.dtype = L->act_dtype;
    q.cols = H;
    q.row_weight = L->on_input ? topk_w : nullptr;
    q.mode = quant_mode(L);
    q.group = L->block_k;
    q.ue8m0 = L->ue8m0;
    q.static_scale = L->quant == FMCU_Q_TENSOR && !L->a_dynamic ? L->in_scales : nullptr;
    q.dst = at<void>(L, L->ws.a1);
    q.scale = at<float>(L, L->ws.a1_scale);
    const bool x_aligned = ((uintptr_t)x % 16 == 0) && ((size_t)x_ld * act_size) % 16 == 0;
    const bool stage_x = tier != FMCU_TIER_PREFILL && ((L->quant != FMCU_Q_NONE && !wq) || L->on_input || !x_aligned);
    const bool quant_in_plan = stage_x && !(q.mode == QM_TENSOR && !q.static_scale);

    fmcu_fused_cfg fcfg;
    if (fused_wanted(L, tier, pairs, x_aligned, &fcfg)) {
        /* Plan, GEMM1 input quantization, GEMM1, GEMM2 input quantization,
         * GEMM2 and combine in one launch. */
        fmcu_fused_args fa = {};
        fa.topk_ids = topk_ids;
        fa.topk_w = topk_w;
        fa.pairs = (uint32_t)pairs;
        fa.top_k = (uint32_t)k;
        fa.global_experts = L->global_experts;
        fa.local_experts = L->local_experts;
        fa.expert_map = L->expert_map;
        fa.x = x;
        fa.ldx = x_ld;
        fa.act_dtype = L->act_dtype;
        fa.quant = L->quant;
        fa.a_dynamic = L->a_dynamic;
        fa.ue8m0 = L->ue8m0;
        fa.in_scales = L->quant == FMCU_Q_TENSOR && !L->a_dynamic ? L->in_scales : nullptr;
        weight_scales(L, L->w13_scale, L->rows13, H, &fa.g1);
        fa.g1.w = L->w13;
        fa.g1.n_rows = L->rows13;
        fa.g1.n_out = I;
        fa.g1.k = H;
        fa.g1.gated = L->gated;
        fa.g1.bias = L->b13;
        fa.g1.act_dtype = L->act_dtype;
        fa.g1.activation = L->activation;
        fa.g1.swiglu_alpha = L->swiglu_alpha;
        fa.g1.swiglu_limit = L->swiglu_limit;
        weight_scales(L, L->w2_scale, H, I, &fa.g2);
        fa.g2.w = L->w2;
        fa.g2.n_rows = H;
        fa.g2.n_out = H;
        fa.g2.k = I;
        fa.g2.bias = L->add_b2 ? L->b2 : nullptr;
        fa.g2.act_dtype = L->act_dtype;
        fa.act = at<void>(L, L->ws.act);
        fa.sync = at<uint32_t>(L, L->ws.grid_sync);
        fa.out = c->out_host ? at<void>(L, L->ws.out_stage) : c->out;
        fa.ldo = c->out_host ? H : c->out_ld;
        fa.cfg = fcfg;
        CK(fmcu_fused_launch(fa, st), "one-launch decode");
        return finish(L, c, fa.out, st, err, cap);
    }

    fmcu_fwd::plan_args pl = {};
    pl.ids = topk_ids;
    pl.pairs = pairs;
    pl.global_experts = L->global_experts;
    pl.local_experts = L->local_experts;
    pl.expert_map = L->expert_map;
    pl.row_tile = bm;
    pl.pair_local = at<int32_t>(L, L->ws.pair_local);
    pl.offsets = at<int32_t>(L, L->ws.offsets);
    pl.sorted = at<int32_t>(L, L->ws.sorted);
    pl.n_tiles = at<int32_t>(L, L->ws.n_tiles);
    pl.tiles = at<int2>(L, L->ws.tiles);
    pl.q = q;
    if (pairs >= L->opt.plan_wide_pairs && !quant_in_plan) {
        fmcu_fwd::plan_wide w;
        w.counts = at<int32_t>(L, L->ws.plan_sync);
        w.done = at<uint32_t>(L, L->ws.plan_sync + (size_t)L->local_experts * sizeof(int32_t));
        w.cursor = at<int32_t>(L, L->ws.plan_cursor);
        CK(fmcu_fwd::plan_wide_launch(pl, w, st), "plan count and scatter kernels");
    } else {
        CK(fmcu_fwd::plan_launch(pl, quant_in_plan ? (unsigned)m : 0u, st), "plan kernel");
    }

    if (tier == FMCU_TIER_PREFILL) {
        /* wgmma grouped GEMMs (prefill.h), combine included. */
        void *out = c->out_host ? at<void>(L, L->ws.out_stage) : c->out;
        const int64_t ldo = c->out_host ? H : c->out_ld;
        CK(fmcu_prefill_forward(L, m, x, x_ld, topk_w, pl.pair_local, pl.offsets, pl.sorted, out, ldo, st),
           "prefill path");
        return finish(L, c, out, st, err, cap);
    }

    if (wq) {
        if (stage_x && !quant_in_plan && fmcu_fwd::quantize(q, m, at<uint32_t>(L, L->ws.amax), st, err, cap) != 0)
            return -1;
        void *out = c->out_host ? at<void>(L, L->ws.out_stage) : c->out;
        const int64_t ldo = c->out_host ? H : c->out_ld;
        if (L->sm100) { /* native SM100 block-scaled path (sm100_gemm.h) */
            if (fmcu_sm100_forward(L, m, stage_x ? q.dst : x, stage_x ? (int64_t)H : x_ld, topk_w, pl.pair_local,
                                   pl.offsets, pl.sorted, out, ldo, st, err, cap) != 0)
                return -1;
            return finish(L, c, out, st, err, cap);
        }
        if (L->quant == FMCU_Q_MXFP4_A8) { /* MXFP4 x FP8, MegaMoE arithmetic (mx_w4a8.h) */
            if (fmcu_mx_a8_forward(L, m, stage_x ? q.dst : x, stage_x ? (int64_t)H : x_ld, topk_w, pl, bm,
                                   wq_stream  ? fmcu_wq_stream_launch
                                   : wq_wgmma ? fmcu_wq_wgmma_launch
                                              : fmcu_wq_gemm_launch,
                                   multiprocessors(L->device), out, ldo, st, err, cap) != 0)
                return -1;
            return finish(L, c, out, st, err, cap);
        }
        if (wq_forward(L, m, stage_x ? q.dst : x, stage_x ? (int64_t)H : x_ld, topk_w, pl, bm,
                       wq_ring ? WQ_RING : wq_stream ? WQ_STREAM : wq_wgmma ? WQ_WGMMA : WQ_TILED, out, ldo, st, err,
                       cap) != 0)
            return -1;
        return finish(L, c, out, st, err, cap);
    }

    fmcu_gemm_args g = {};
    g.fp8 = L->quant != FMCU_Q_NONE;
    g.block_scaled = L->quant == FMCU_Q_BLOCK;
    g.row_tile = bm;
    g.split_k = pairs <= (int64_t)FMCU_STREAM_SPLITK_ROWS * L->local_experts;
    g.grid_tiles = fmcu_max_tiles(pairs, L->local_experts, bm);
    g.sorted = pl.sorted;
    g.tiles = pl.tiles;
    g.n_tiles = pl.n_tiles;
    g.offsets = pl.offsets;
    g.act_dtype = L->act_dtype;
    g.activation = L->activation;
    g.swiglu_alpha = L->swiglu_alpha;
    g.swiglu_limit = L->swiglu_limit;
    g.gated = L->gated;
    g.experts = L->local_experts;
    g.sms = multiprocessors(L->device);
    if (stage_x) {
        if (!quant_in_plan && fmcu_fwd::quantize(q, m, at<uint32_t>(L, L->ws.amax), st, err, cap) != 0)
            return -1;
        g.a = q.dst;
        g.lda = H;
    } else {
        g.a = x;
        g.lda = x_ld;
    }
    input_scales(L, 0, q.scale, H, &g);
    weight_scales(L, L->w13_scale, L->rows13, H, &g);
    g.gemm1 = 1;
    g.a_row_div = (int)k;
    g.w = L->w13;
    g.n_rows = L->rows13;
    g.n_out = I;
    g.k = H;
    g.bias = L->b13;
    void *act = at<void>(L, L->ws.act);
    g.out = act;
    g.ldo = I;
    fmcu_tail_args ta = {};
    const bool tail = g.grid_tiles > 0 && tail_wanted(L, tier, pairs, &ta.cfg);
    g.wait_first = tail;
    CK(gemm1(g, st), "GEMM1");

    void *out = c->out_host ? at<void>(L, L->ws.out_stage) : c->out;
    const int64_t ldo = c->out_host ? H : c->out_ld;
    if (tail) { /* GEMM2-input quantization, GEMM2 and combine in one launch */
        ta.quant = L->quant;
        ta.a_dynamic = L->a_dynamic;
        ta.ue8m0 = L->ue8m0;
        ta.a_static = L->quant == FMCU_Q_TENSOR && !L->a_dynamic ? L->in_scales + 1 : nullptr;
        ta.act = act;
        ta.act_dtype = L->act_dtype;
        ta.I = I;
        ta.H = H;
        ta.pairs = (uint32_t)pairs;
        ta.top_k = (uint32_t)k;
        ta.pair_local = pl.pair_local;
        ta.topk_w = topk_w;
        ta.on_input = L->on_input;
        weight_scales(L, L->w2_scale, H, I, &g);
        ta.w2 = (const uint8_t *)L->w2;
        ta.w_scale = g.w_scale;
        ta.w_scale_e = g.w_scale_e;
        ta.w_scale_n = g.w_scale_n;
        ta.block_n = L->block_n;
        ta.block_k = L->block_k;
        ta.bias = L->add_b2 ? L->b2 : nullptr;
        ta.out = out;
        ta.ldo = ldo;
        CK(fmcu_tail_launch(ta, st), "decode tail");
        return finish(L, c, out, st, err, cap);
    }

    /* GEMM2 input. */
    if (L->quant != FMCU_Q_NONE) {
        quant_args q2 = q;
        q2.src = act;
        q2.ld = I;
        q2.cols = I;
        q2.row_weight = nullptr;
        q2.row_valid = pl.pair_local;
        q2.static_scale = q.static_scale ? L->in_scales + 1 : nullptr;
        q2.dst = at<void>(L, L->ws.a2);
        q2.scale = at<float>(L, L->ws.a2_scale);
        if (fmcu_fwd::quantize(q2, pairs, at<uint32_t>(L, L->ws.amax) + 1, st, err, cap) != 0)
            return -1;
        g.a = q2.dst;
        input_scales(L, 1, q2.scale, I, &g);
    } else {
        g.a = act;
        input_scales(L, 1, nullptr, I, &g);
    }
    g.lda = I;
    weight_scales(L, L->w2_scale, H, I, &g);
    g.gemm1 = 0;
    g.a_row_div = 1;
    g.w = L->w2;
    g.n_rows = H;
    g.n_out = H;
    g.k = I;
    g.gated = 0;
    g.bias = L->add_b2 ? L->b2 : nullptr;
    void *y = at<void>(L, L->ws.y);
    g.out = y;
    g.ldo = H;
    CK(gemm2(g, st), "GEMM2");

    /* Combine. */
    fmcu_fwd::combine_args cb = {};
    cb.y = y;
    cb.w = topk_w;
    cb.pair_local = pl.pair_local;
    cb.k = L->top_k;
    cb.hidden = H;
    cb.on_input = L->on_input;
    cb.dtype = L->act_dtype;
    cb.out = out;
    cb.ldo = ldo;
    CK(fmcu_fwd::combine_launch(cb, m, st), "combine kernel");
    return finish(L, c, cb.out, st, err, cap);
}
