/*
 * plugins/cuda/wq_ring.cu - the grouped GEMM over 4-bit weights (contract
 * in wq_gemm.h) as a weight stream on wgmma: swap-AB, warp specialized,
 * for calls where each expert sees from a few to a few dozen rows (small
 * to mid-size batches). sm_90a only.
 *
 * Why. The stream form (wq_stream.cu) feeds mma.sync from 16-byte global
 * loads and is bound by instruction issue; the wgmma form (wq_wgmma.cu)
 * puts 64 token rows on wgmma's N side whatever the expert holds, and its
 * threads both copy and compute (bench/cuda/RESULTS.md, "4-bit weights:
 * against issue 31's targets"). The MegaMoE SM90 GEMM
 * (plugins/megamoe/sm90_forward.cu) streams MXFP4 weights at 1.2x the
 * memory floor with the shape used here, which this kernel takes for the
 * cuda plugin's W4A16 schemes:
 *
 *   - Swap-AB: a block's 256 weight rows are wgmma's M side (64 a consumer
 *     warp group, 16 a warp), a plan tile's up to 64 pairs its N side in
 *     n8 slices, N rounded up to 16, 32, 48 or 64 (fewer shapes: each is
 *     a copy of the K loop, and ptxas takes minutes over eight).
 *   - A producer warp fills a ring of STAGES stages of 128 K: the block's
 *     weight rows by two TMA boxes (128 rows x 64 bytes each, 64-byte
 *     swizzle) straight from wq_pack.h's row-major chunks, and the pairs'
 *     activation rows by cp.async (16 bytes at a time, zero past K) into
 *     the B operand's K-major layout without swizzle (a lane copies pairs
 *     lane and lane + 32, one after the other: unrolled, their addresses
 *     spilled the producer's 32 registers). Its copies arrive on
 *     the stage's full barrier; consumers release a stage on its empty
 *     barrier once the wgmmas that read it are complete.
 *   - Consumers read their A fragments from the stage (a lane's 4 bytes of
 *     each 32-column chunk are its m16n8k16 A fragment: wq_pack.h) and
 *     dequantize them in registers: int4 as the other kernels do
 *     (wq_dev.cuh: nibbles OR-ed into a constant's mantissa, one packed
 *     subtraction); e2m1 with its block scale folded in (exact in bf16) by
 *     one multiply of the codes' bits moved into place (dq_e2m1_fused):
 *     MXFP4 layers whose codes all allow it (fmcu_wq_proj.mx_fold; the
 *     others are not served), NVFP4 with 2^118.
 *   - Persistent: one block an SM walks the items (tile, row block) b, b +
 *     grid, ..., the ring running on across them.
 *
 * Scales. int4 with 128-column groups (or multiples): each stage's eight
 * wgmmas start from zero into partial sums, which are added to the f32
 * accumulator times the row's group scale once they are done, as the
 * other kernels scale each group's sum once; channelwise int4 accumulates
 * all of K and scales at the end; e2m1 accumulates all of K (its scales
 * are in the operand), NVFP4's global multiplies the end (out_mul).
 * Served: fmcu_wq_ring_serves (the wgmma form's layers, scale offsets in
 * 32 bits); the forward takes it by the option wq_ring (forward.cu).
 *
 * Measured (H200, bench/cuda/RESULTS.md at 7426a60, "4-bit weights: the wgmma weight
 * stream" and "... the weight stream's 64-pair tiles"): against the
 * stream form 17-22 % faster at 8 rows an expert (Qwen3-30B-A3B M = 128),
 * slower at 4 and below (at M = 1 its 256-row items leave most SMs idle,
 * and at a pair or two an expert the stream form's mma.sync does less per
 * weight byte); against the grouped GEMMs 13-31 % faster at 32 rows
 * (MXFP4 DeepSeek-V3 and gpt-oss-120b M = 1024, Mixtral-8x7B M = 128),
 * 12-18 % slower at 64 (Qwen3-30B-A3B M = 1024: half its experts need a
 * second, nearly empty tile). At 64 pairs it runs the MMAs at 35 % of
 * the BF16 peak. ncu at 32 rows (MXFP4 Mixtral-8x7B M = 128) has it
 * latency-bound: 1.06 eligible warps of 4.26 a scheduler, DRAM at 24 %
 * of its peak, a third of its instructions mbarrier wait loops, 10 % of
 * the stall samples instruction-cache misses.
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/pair_ring.cuh"
#include "plugins/cuda/tensor_map.h"
#include "plugins/cuda/wgmma_rs_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/cuda/wq_dev.cuh"
#include "plugins/cuda/wq_gemm.h"

namespace {

constexpr int WARP = 32;
constexpr int BM = FMCU_WQ_RING_TILE;   /* 64 pairs per tile (the plan's row tile): the MMA's N side */
constexpr int BN = 256;                 /* weight rows per item: the MMA's M side */
constexpr int HALF = BN / 2;            /* rows per TMA box */
constexpr int KS = 128;                 /* K per stage */
constexpr int WROW = KS / 2;            /* a weight row's bytes per stage */
constexpr int STAGES = 6;
constexpr int CONSUMER_WARPS = BN / 16; /* 16: four warp groups of 64 rows */
/* + a producer warp group, one warp of which works; setmaxnreg moves the
 * other registers to the consumers (the totals fit the launch's
 * allocation, as in plugins/megamoe/sm90_forward.cu). */
constexpr int THREADS = (CONSUMER_WARPS + 4) * WARP;
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
constexpr int CONSUMER_REGS = 112, PRODUCER_REGS = 32;
static_assert(CONSUMER_WARPS * CONSUMER_REGS + 4 * PRODUCER_REGS <= (CONSUMER_WARPS + 4) * LAUNCH_REGS,
              "setmaxnreg's totals within the block's launch allocation");
constexpr int W_BYTES = BN * WROW;   /* 16384 */
constexpr int X_BYTES = BM * KS * 2; /* 16384: the pairs' rows, bf16 or f16 */
constexpr int W_AT = 0, X_AT = W_BYTES, STAGE_BYTES = W_BYTES + X_BYTES;
constexpr int BAR_AT = STAGES * STAGE_BYTES; /* full[STAGES], empty[STAGES] */
constexpr int SMEM = BAR_AT + 2 * STAGES * 8 + 1024; /* + aligning the base for the swizzle */
constexpr int FULL_ARRIVALS = 1 + WARP;              /* the weights' expect_tx, and each producer lane's copies */
static_assert(STAGE_BYTES % 1024 == 0, "stages keep the 64-byte swizzle's alignment");
static_assert(SMEM <= 227 * 1024, "one block an SM");

/* The kernels' weight formats: int4, and e2m1 with NVFP4's block-16 e4m3
 * scales (FMCU_WQ_FP4) or MXFP4's block-32 UE8M0 ones. */
constexpr int FP4_MX = 3;
static_assert(FP4_MX != FMCU_WQ_INT4 && FP4_MX != FMCU_WQ_INT8 && FP4_MX != FMCU_WQ_FP4, "a format of its own");

using fmcu_async::lds32;
using fmcu_ring::item_t;
using ring = fmcu_ring::ring<STAGES>;
using fmcu_wq_dev::bits_of;
using fmcu_wq_dev::dq_e2m1_fused;
using fmcu_wq_dev::dq_int4;
using fmcu_wq_dev::mx_fold_s2;
using fmcu_wq_dev::nv_fold_s2;

/* TMA's 64-byte swizzle moves 16-byte chunk c of stage row s (64 bytes)
 * to c ^ ((s >> 1) & 3), which also spreads a warp's reads of 8 rows x 4
 * lanes over the 32 banks. */

template <int SL, bool F16>
__device__ __forceinline__ void mma(float (&d)[SL * 4], const uint32_t (&a)[4], uint64_t desc, int acc)
{
    using namespace fmcu_wgmma;
    static_assert(SL % 2 == 0 && SL >= 2 && SL <= BM / 8, "N of 16, 32, 48 or 64 (the consumers' switch)");
    if constexpr (SL == 2)
        F16 ? wgmma_m64n16k16_f16_rs(d, a, desc, acc) : wgmma_m64n16k16_bf16_rs(d, a, desc, acc);
    else if constexpr (SL == 4)
        F16 ? wgmma_m64n32k16_f16_rs(d, a, desc, acc) : wgmma_m64n32k16_bf16_rs(d, a, desc, acc);
    else if constexpr (SL == 6)
        F16 ? wgmma_m64n48k16_f16_rs(d, a, desc, acc) : wgmma_m64n48k16_bf16_rs(d, a, desc, acc);
    else
        F16 ? wgmma_m64n64k16_f16_rs(d, a, desc, acc) : wgmma_m64n64k16_bf16_rs(d, a, desc, acc);
}

/* The producer warp: for every item and stage, in the consumers' order,
 * lane 0 waits for the slot's release and loads the weight rows (two TMA
 * boxes, counted in bytes on the full barrier); lane r < rows copies pair
 * r's activations with cp.async, and every lane arrives on the full
 * barrier when its copies have completed, without waiting for them. */
__device__ __forceinline__ void produce(const fmcu_wq_gemm_args &p, const CUtensorMap *map, uint32_t smem,
                                        uint32_t nb_count, int n_tiles, uint32_t nk, int lane)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    const bool gated1 = p.gemm1 && p.gated;
    const uint8_t *A = (const uint8_t *)p.a;
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        const int srow = it.e * (int)p.n_rows;
        const int row_a = gated1 ? srow + (int)(it.nb * HALF) : srow + (int)(it.nb * BN);
        const int row_b = gated1 ? row_a + (int)p.n_out : row_a + HALF;
        /* lane's pair rows: lane and lane + 32 */
        const int pair0 = lane < it.rows ? p.sorted[it.pos0 + lane] : 0;
        const int pair1 = lane + WARP < it.rows ? p.sorted[it.pos0 + lane + WARP] : 0;
        const uint8_t *xrow0 = A + (int64_t)(pair0 / p.a_row_div) * p.lda * 2;
        const uint8_t *xrow1 = A + (int64_t)(pair1 / p.a_row_div) * p.lda * 2;
        for (uint32_t kt = 0; kt < nk; kt++) {
            const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
            if (lane == 0) {
                mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u); /* a fresh slot passes */
                mbar_expect_tx(full, W_BYTES);
                tma_load(st + W_AT, map, (int)(kt * WROW), row_a, full);
                tma_load(st + W_AT + HALF * WROW, map, (int)(kt * WROW), row_b, full);
            }
            __syncwarp();
#pragma unroll 1
            for (int h = 0; h < BM / WARP; h++) {
                if (lane + h * WARP >= it.rows)
                    break;
                const uint8_t *xrow = h ? xrow1 : xrow0;
#pragma unroll
                for (int q = 0; q < KS / 8; q++) {
                    const uint32_t col = kt * KS + q * 8;
                    const bool in = col < p.a_k;
                    cp_async16_zfill(st + X_AT + fmcu_ring::x_chunk<BM>(lane + h * WARP, q), xrow + (in ? col : 0) * 2,
                                     in);
                }
            }
            mbar_arrive_on_cp_async(full);
            rg.next();
        }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* A consumer thread's weight rows in the stage and their scales. Thread
 * (gid, tg) of warp w holds fragment rows gid (lo) and gid + 8 (hi): stage
 * rows 8 w + gid and 128 + 8 w + gid of a gated GEMM1 (a gate row and its
 * up row), else 16 w + gid and 16 w + gid + 8. */
template <int FMT> struct rows_t {
    uint32_t at_lo, at_hi; /* byte offsets in a stage of the rows' word tg */
    uint32_t swz;          /* the rows' 64-byte swizzle, (s >> 1) & 3 (the same for both) */
    uint32_t off[2];       /* the rows' first scale (int4: and zero point; e2m1: scale code) */
};

/* The projection's rows of a thread's fragment rows in row block nb
 * (gated: r_lo is the output column and gate row, r_hi its up row), and
 * whether they exist. */
__device__ __forceinline__ void proj_rows(const fmcu_wq_gemm_args &p, uint32_t nb, int warp, int gid, int &r_lo,
                                          int &r_hi, bool &ok_lo, bool &ok_hi)
{
    if (p.gemm1 && p.gated) {
        r_lo = (int)(nb * HALF) + 8 * warp + gid;
        r_hi = (int)p.n_out + r_lo;
        ok_lo = ok_hi = r_lo < (int)p.n_out;
    } else {
        r_lo = (int)(nb * BN) + 16 * warp + gid;
        r_hi = r_lo + 8;
        ok_lo = r_lo < (int)p.n_rows;
        ok_hi = r_hi < (int)p.n_rows;
    }
}

/* A stage's scale data of a thread's two rows, loaded a stage ahead. int4:
 * the group scale and the packed subtrahend (128 + 8 + zp or its f16
 * form); e2m1: the stage's block scale codes (4 for MXFP4, 8 for NVFP4). */
struct stage_sc {
    float sc[2];
    uint32_t sub[2];
    uint32_t code[2][2];
};

template <int FMT, bool F16>
__device__ __forceinline__ void load_scales(const fmcu_wq_gemm_args &p, const rows_t<FMT> &r, uint32_t kt,
                                            stage_sc &s)
{
    if constexpr (FMT == FMCU_WQ_INT4) {
        const uint32_t groups = p.w.groups;
        const uint32_t grp = groups == 1 ? 0u : min(kt * KS / p.w.group, groups - 1);
        const float sub0 = F16 ? 1032.0f : 136.0f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            s.sc[h] = __ldg(p.w.scale + r.off[h] + grp);
            const float c = sub0 + (p.w.zero ? (float)p.w.zero[r.off[h] + grp] : 0.0f);
            s.sub[h] = F16 ? bits_of(__floats2half2_rn(c, c)) : bits_of(__floats2bfloat162_rn(c, c));
        }
    } else {
        s.sc[0] = s.sc[1] = 1.0f;
        s.sub[0] = s.sub[1] = 0;
        /* blocks of this stage: 4 (MXFP4) or 8 (NVFP4) codes a row, 0 past the row's last block */
        const uint32_t per = FMT == FP4_MX ? 4u : 8u, b0 = kt * per, groups = p.w.groups;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (b0 + per <= groups && (groups % per) == 0) {
                if constexpr (FMT == FP4_MX) {
                    s.code[h][0] = __ldg(reinterpret_cast<const uint32_t *>(p.w.sf8 + r.off[h] + b0));
                    s.code[h][1] = 0;
                } else {
                    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p.w.sf8 + r.off[h] + b0));
                    s.code[h][0] = v.x;
                    s.code[h][1] = v.y;
                }
            } else {
                uint32_t w[2] = {0, 0};
                for (uint32_t b = 0; b < per; b++)
                    if (b0 + b < groups)
                        w[b >> 2] |= (uint32_t)p.w.sf8[r.off[h] + b0 + b] << (8 * (b & 3));
                s.code[h][0] = w[0];
                s.code[h][1] = w[1];
            }
        }
    }
}

/* acc += p * (row scale), the int4 group's promotion. */
template <int SL>
__device__ __forceinline__ void promote(float (&acc)[SL * 4], const float (&part)[SL * 4], const float (&sc)[2])
{
#pragma unroll
    for (int j = 0; j < SL; j++) {
        acc[4 * j] = fmaf(part[4 * j], sc[0], acc[4 * j]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], sc[0], acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], sc[1], acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], sc[1], acc[4 * j + 3]);
    }
}

/* One stage of a consumer warp: its 16 rows x SL n8 slices of pairs over
 * the stage's 128 K in eight k16 wgmmas, in groups of GS whose A
 * fragments are dequantized from the stage just before the group is
 * issued. PROMOTE: into part (from zero), else into acc (from zero at the
 * item's first stage: first). The groups' A fragments alternate between
 * two register sets, each group waited for when the next has been issued
 * (its set is then rewritten), so one group's dequantization overlaps the
 * other's MMAs; the stage's last group is left in flight. (One wgmma a
 * group, waited for one step later, made each warp wait out a wgmma's
 * latency eight times a stage: DeepSeek-V3 MXFP4 M = 16 ran at 41 % of
 * the memory floor.) */
template <int FMT, bool F16, bool PROMOTE, int SL>
__device__ __forceinline__ void stage_mma(float (&acc)[SL * 4], float (&part)[SL * 4], uint32_t st,
                                          const rows_t<FMT> &r, const stage_sc &s, bool first, int tg)
{
    using namespace fmcu_wgmma;
    const uint64_t desc = fmcu_ring::x_desc<BM>(st + X_AT);
    /* k16 steps a wgmma group: two up to four slices (up to 32 pairs, the
     * ring's calls of 6-32 rows an expert) with PROMOTE or MXFP4's codes,
     * else one (eight slices' partial sums, or accumulators in flight
     * across stages beside a second step's fragments, spilled 28 bytes;
     * two steps spill NVFP4's and channelwise int4's kernels, 20 and 36
     * bytes). Each group waits for the one before it: with one step a
     * group a warp waited out a wgmma's latency eight times a stage, and
     * ncu at 32 rows (MXFP4 Mixtral-8x7B M = 128) had the ring
     * latency-bound, 1.06 eligible warps of 4.26. */
    constexpr int GS = (PROMOTE && SL <= 4) || (FMT == FP4_MX && SL <= 2) ? 2 : 1;
    uint32_t a[2][GS][4];
    uint32_t lo = 0, hi = 0, s2lo = 0, s2hi = 0; /* a chunk's words and scales, for its two k16 steps */
#pragma unroll
    for (int g = 0; g < KS / 16 / GS; g++) {
        uint32_t(&ag)[GS][4] = a[g & 1];
#pragma unroll
        for (int i = 0; i < GS; i++) {
            const int k = g * GS + i, c = k >> 1, j = 2 * (k & 1);
            if ((k & 1) == 0) { /* a chunk's words */
                const uint32_t cw = W_AT + ((c ^ r.swz) << 4);
                lo = lds32(st + r.at_lo + cw);
                hi = lds32(st + r.at_hi + cw);
            }
            if constexpr (FMT == FMCU_WQ_INT4) {
                ag[i][0] = dq_int4<F16>(lo, j, s.sub[0]);
                ag[i][1] = dq_int4<F16>(hi, j, s.sub[1]);
                ag[i][2] = dq_int4<F16>(lo, j + 1, s.sub[0]);
                ag[i][3] = dq_int4<F16>(hi, j + 1, s.sub[1]);
            } else {
                /* the block scale of this k16 step (MXFP4: the chunk's; NVFP4: its half's) as a bf16 pair,
                 * times the fused decode's 2^126 (NVFP4: 2^118, the epilogue's 2^8 restoring it) */
                constexpr bool MX = FMT == FP4_MX;
                if constexpr (MX) { /* every code <= 128: fmcu_wq_ring_serves asks mx_fold */
                    if ((k & 1) == 0) {
                        const uint32_t sel = 0x4440u + (uint32_t)c; /* the chunk's code byte, zeros above */
                        s2lo = mx_fold_s2(__byte_perm(s.code[0][0], 0, sel));
                        s2hi = mx_fold_s2(__byte_perm(s.code[1][0], 0, sel));
                    }
                } else {
                    s2lo = nv_fold_s2((s.code[0][k >> 2] >> (8 * (k & 3))) & 0xFFu);
                    s2hi = nv_fold_s2((s.code[1][k >> 2] >> (8 * (k & 3))) & 0xFFu);
                }
                ag[i][0] = dq_e2m1_fused(lo, j, s2lo);
                ag[i][1] = dq_e2m1_fused(hi, j, s2hi);
                ag[i][2] = dq_e2m1_fused(lo, j + 1, s2lo);
                ag[i][3] = dq_e2m1_fused(hi, j + 1, s2hi);
            }
        }
        wgmma_fence();
#pragma unroll
        for (int i = 0; i < GS; i++) {
            const int k = g * GS + i;
            if constexpr (PROMOTE)
                mma<SL, F16>(part, ag[i], desc + (uint64_t)(k * 2 * BM), k > 0);
            else
                mma<SL, F16>(acc, ag[i], desc + (uint64_t)(k * 2 * BM), !(first && k == 0));
        }
        wgmma_commit();
        /* the group before this one (at g = 0 the previous stage's last,
         * without PROMOTE) is done: its A set may be rewritten */
        wgmma_wait<1>();
#pragma unroll
        for (int i = 0; i < GS; i++)
            fence_regs(a[(g + 1) & 1][i]);
    }
}

/* A consumer warp's K loop over one item for SL live slices. PROMOTE:
 * each stage's wgmmas are waited for at its end (ptxas serializes every
 * wgmma when an accumulator is read while any is in flight), then the
 * slot is released (one arrival a warp on its empty barrier) and the
 * partial sums promoted. Else the stage's last wgmma stays in flight and
 * its slot is released once the next stage's second wgmma has been waited
 * for, which completes every earlier one. On return every wgmma is
 * complete and every slot released; sc holds the last stage's int4 scales
 * (channelwise: the rows' scales). */
template <int FMT, bool F16, bool PROMOTE, int SL>
__device__ __forceinline__ void k_loop(const fmcu_wq_gemm_args &p, float (&acc)[SL * 4], ring &rg, uint32_t smem,
                                       const rows_t<FMT> &r, uint32_t nk, int lane, int tg, float (&sc)[2])
{
    using namespace fmcu_async;
    using namespace fmcu_wgmma;
    float part[SL * 4];
    stage_sc cur;
    load_scales<FMT, F16>(p, r, 0, cur);
    uint32_t prev_slot = 0;
    for (uint32_t kt = 0; kt < nk; kt++) {
        stage_sc nxt;
        if (kt + 1 < nk)
            load_scales<FMT, F16>(p, r, kt + 1, nxt);
        const uint32_t full = smem + BAR_AT + rg.slot * 8, empty = smem + BAR_AT + (STAGES + rg.slot) * 8;
        mbar_wait(full, rg.phase);
        fence_async_shared(); /* the producer's cp.async rows, for the wgmma's async proxy */
        stage_mma<FMT, F16, PROMOTE, SL>(acc, part, smem + rg.slot * STAGE_BYTES, r, cur, kt == 0, tg);
        if constexpr (PROMOTE) {
            wgmma_wait<0>();
            fence_regs(part);
            __syncwarp();
            if (lane == 0)
                mbar_arrive(empty);
            promote<SL>(acc, part, cur.sc);
        } else {
            if (kt > 0) {
                __syncwarp();
                if (lane == 0)
                    mbar_arrive(smem + BAR_AT + (STAGES + prev_slot) * 8);
            }
            prev_slot = rg.slot;
        }
        sc[0] = cur.sc[0];
        sc[1] = cur.sc[1];
        rg.next();
        if (kt + 1 < nk)
            cur = nxt;
    }
    if constexpr (!PROMOTE) {
        wgmma_wait<0>();
        fence_regs(acc);
        __syncwarp();
        if (lane == 0)
            mbar_arrive(smem + BAR_AT + (STAGES + prev_slot) * 8);
    }
}

/* One item of a consumer warp: the K loop, then each live pair's two
 * results of this thread through the stream form's epilogue (activation,
 * bias, out_mul). */
template <int FMT, bool F16, bool PROMOTE, int SL>
__device__ __forceinline__ void run_item(const fmcu_wq_gemm_args &p, const fmcu_dev::act_params &ap, ring &rg,
                                         uint32_t smem, const rows_t<FMT> &r, const item_t &it, uint32_t nk,
                                         int warp, int lane)
{
    const int gid = lane / 4, tg = lane % 4;
    float acc[SL * 4] = {};
    float psc[2];
    k_loop<FMT, F16, PROMOTE, SL>(p, acc, rg, smem, r, nk, lane, tg, psc);
    /* NVFP4's operand carries its block scales times 2^-8 (dq_e2m1_fused): the
     * sums times 2^8, exactly, with its global */
    const float omul = (p.w.out_mul ? p.w.out_mul[it.e] : 1.0f) * (FMT == FMCU_WQ_FP4 ? 256.0f : 1.0f);
    int r_lo, r_hi;
    bool ok_lo, ok_hi;
    proj_rows(p, it.nb, warp, gid, r_lo, r_hi, ok_lo, ok_hi);
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int row = 8 * j + 2 * tg + t;
            if (row >= it.rows)
                continue;
            float a_lo = acc[4 * j + t], a_hi = acc[4 * j + 2 + t];
            if constexpr (FMT == FMCU_WQ_INT4 && !PROMOTE) {
                a_lo *= psc[0];
                a_hi *= psc[1];
            }
            fmcu_wq_dev::store_rows(p, ap, it.e, p.sorted[it.pos0 + row], r_lo, r_hi, ok_lo, ok_hi, a_lo, a_hi,
                                    omul);
        }
}

template <int FMT, bool F16, bool PROMOTE>
__global__ void __launch_bounds__(THREADS, 1) wq_ring(const __grid_constant__ CUtensorMap map, const fmcu_wq_gemm_args p)
{
    using namespace fmcu_async;
    /* Launched overlapped (programmatic dependent launch): everything below
     * reads what earlier kernels wrote, so wait first. */
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t smem = (smem_addr(smem_raw) + 1023) & ~1023u;
    const int n_tiles = *(const volatile int32_t *)p.n_tiles;
    const bool gated1 = p.gemm1 && p.gated;
    const uint32_t nb_count = gated1 ? (p.n_out + HALF - 1) / HALF : (p.n_rows + BN - 1) / BN;
    const uint32_t nk = (p.w.kp + KS - 1) / KS;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    if (tid == 0) /* empty: one arrival a consumer warp */
        fmcu_ring::init_barriers<STAGES>(smem + BAR_AT, FULL_ARRIVALS, CONSUMER_WARPS);
    __syncthreads();
    if (warp >= CONSUMER_WARPS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (warp == CONSUMER_WARPS)
            produce(p, &map, smem, nb_count, n_tiles, nk, lane);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int gid = lane / 4, tg = lane % 4;
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};
    ring rg{0, 0};
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        rows_t<FMT> r;
        const int s_lo = gated1 ? 8 * warp + gid : 16 * warp + gid, s_hi = gated1 ? HALF + s_lo : s_lo + 8;
        r.at_lo = (uint32_t)(s_lo * WROW + tg * 4);
        r.at_hi = (uint32_t)(s_hi * WROW + tg * 4);
        r.swz = (uint32_t)((s_lo >> 1) & 3);
        int r_lo, r_hi;
        bool ok_lo, ok_hi;
        proj_rows(p, it.nb, warp, gid, r_lo, r_hi, ok_lo, ok_hi);
        const size_t srow = (size_t)it.e * p.n_rows;
        const size_t w_lo = srow + (ok_lo ? r_lo : 0), w_hi = srow + (ok_hi ? r_hi : 0);
        r.off[0] = (uint32_t)(w_lo * p.w.groups); /* < 2^32: fmcu_wq_ring_launch */
        r.off[1] = (uint32_t)(w_hi * p.w.groups);
        switch ((it.rows + 15) / 16) {
        case 1:
            run_item<FMT, F16, PROMOTE, 2>(p, ap, rg, smem, r, it, nk, warp, lane);
            break;
        case 2:
            run_item<FMT, F16, PROMOTE, 4>(p, ap, rg, smem, r, it, nk, warp, lane);
            break;
        case 3:
            run_item<FMT, F16, PROMOTE, 6>(p, ap, rg, smem, r, it, nk, warp, lane);
            break;
        default:
            run_item<FMT, F16, PROMOTE, 8>(p, ap, rg, smem, r, it, nk, warp, lane);
            break;
        }
    }
}

/* The weights [E * N rows, kp / 2 bytes] in boxes of 128 rows x 64 bytes,
 * 64-byte swizzled; rows and columns past the ends read as zeros. */
bool encode_weights(CUtensorMap *map, const fmcu_wq_gemm_args &a)
{
    return fmcu_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, a.w.w, (uint64_t)a.experts * a.n_rows, a.w.kp / 2, 1,
                              (uint32_t)WROW, (uint32_t)HALF, CU_TENSOR_MAP_SWIZZLE_64B);
}

template <int FMT, bool F16, bool PROMOTE> cudaError_t launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    CUtensorMap map;
    if (!encode_weights(&map, a))
        return cudaErrorInvalidValue;
    const bool gated1 = a.gemm1 && a.gated;
    const int64_t blocks = gated1 ? (a.n_out + HALF - 1) / HALF : (a.n_rows + BN - 1) / BN;
    const int64_t items = a.grid_tiles * blocks;
    const unsigned grid = (unsigned)(items < a.sms ? items : a.sms);
    return fmcu_dev::launch_overlapped(wq_ring<FMT, F16, PROMOTE>, dim3(grid), dim3(THREADS), (size_t)SMEM, stream,
                                       map, a);
}

template <int FMT, bool F16, bool PROMOTE> cudaError_t prepare_one()
{
    return cudaFuncSetAttribute(wq_ring<FMT, F16, PROMOTE>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
}

} // namespace

cudaError_t fmcu_wq_ring_prepare(void)
{
    cudaError_t e;
    if ((e = prepare_one<FMCU_WQ_INT4, false, false>()) != cudaSuccess ||
        (e = prepare_one<FMCU_WQ_INT4, false, true>()) != cudaSuccess ||
        (e = prepare_one<FMCU_WQ_INT4, true, false>()) != cudaSuccess ||
        (e = prepare_one<FMCU_WQ_INT4, true, true>()) != cudaSuccess ||
        (e = prepare_one<FMCU_WQ_FP4, false, false>()) != cudaSuccess ||
        (e = prepare_one<FP4_MX, false, false>()) != cudaSuccess)
        return e;
    return cudaSuccess;
}

cudaError_t fmcu_wq_ring_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    if (a.row_tile != BM || a.sms <= 0 || a.experts == 0 || a.a_k % 8 || (a.lda * 2) % 16 || (uintptr_t)a.a % 16 ||
        (uintptr_t)a.w.w % 16 || a.w.kp % 32 || (a.format == FMCU_WQ_FP4 && a.act_dtype != FMOE_DTYPE_BF16) ||
        (a.format != FMCU_WQ_FP4 && a.format != FMCU_WQ_INT4) || a.w.perm || a.w.kgrp ||
        (a.format == FMCU_WQ_INT4 && a.w.groups > 1 && a.w.group % KS) ||
        (uint64_t)a.experts * a.n_rows * a.w.groups > UINT32_MAX) /* 32-bit scale offsets */
        return cudaErrorInvalidValue; /* fmcu_wq_ring_serves refuses these layers first */
    const bool f16 = a.act_dtype == FMOE_DTYPE_F16;
    if (a.format == FMCU_WQ_FP4)
        return a.fp4_block == 32 ? launch<FP4_MX, false, false>(a, stream) : launch<FMCU_WQ_FP4, false, false>(a, stream);
    const bool promote = a.w.groups > 1;
    if (f16)
        return promote ? launch<FMCU_WQ_INT4, true, true>(a, stream) : launch<FMCU_WQ_INT4, true, false>(a, stream);
    return promote ? launch<FMCU_WQ_INT4, false, true>(a, stream) : launch<FMCU_WQ_INT4, false, false>(a, stream);
}
