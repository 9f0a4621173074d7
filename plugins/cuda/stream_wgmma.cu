/*
 * plugins/cuda/stream_wgmma.cu - the weight-streaming tier's FP8 GEMM2 on
 * native FP8 wgmma (contract: gemm.h, fmcu_stream_wgmma_launch). sm_90a.
 *
 * Why. sm_90 has no e4m3 mma.sync: ptxas turns each m16n8k32 e4m3 MMA of
 * stream_gemm.cu into eight conversions, two f16 MMAs and four adds, and
 * its split-K kernels are bound by that ALU work (ncu at DeepSeek-V3
 * M = 16: 83 instructions a 64-byte chunk a warp, 134 with block scales),
 * where vLLM's Triton kernel, on FP8 wgmma, beat our layer at FP8 block
 * DeepSeek-V3 M = 16 and 128 by 17 and 27 % (bench/cuda/RESULTS.md,
 * "vLLM's Triton fused MoE on the H200"). Here the weights reach the
 * tensor cores with no instruction of ours on them.
 *
 * GEMM2 only: wgmma's fp8 sums keep fewer bits than f32 even within one
 * instruction, and GEMM1's output is quantized again with a scale from
 * its row's (or 128-column group's) amax, so a sum one bf16 step off the
 * reference's re-rolls every code of that row. With GEMM1 here too the
 * conformance suite failed three fp8 channel cases at M = 16 (NMSE up to
 * 9.4e-4, gate 5e-4) and cuda_check one or three cases a seed, every
 * scale kind (commit 5256e00 has that form: a 4-D weight map that
 * interleaves gate and up rows). GEMM2's output is not quantized again.
 *
 *   - Swap-AB as wq_ring.cu: an item is 256 weight rows of one expert (the
 *     MMA's M side, 64 a consumer warp group) against a plan tile of up to
 *     32 of its pairs (N, in n8 slices: 8, 16, 24 or 32).
 *   - A producer warp fills a ring of STAGES stages of 128 K: the weight
 *     rows by TMA (boxes of 64 rows, 128-byte swizzled) and the
 *     pairs' e4m3 rows by cp.async into the B operand's K-major layout.
 *   - Consumers issue four m64nNk32 wgmmas a stage, both operands from
 *     shared memory. Channel, token and tensor scales multiply the f32
 *     sums at the end; 128 x 128 block scales (the stage is one K group)
 *     promote each stage's sum, acc += part * (s_w * s_a), with the
 *     stage's activation scales copied into the stage by the producer.
 */
#include <cuda.h>
#include <cuda_fp8.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/pair_ring.cuh"
#include "plugins/cuda/stream_weight_map.h"
#include "plugins/cuda/stream_wgmma_parts.cuh"
#include "plugins/cuda/tier.h"
#include "plugins/cuda/wgmma_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"

namespace {

constexpr int WARP = 32;
constexpr int BM = FMCU_STREAM_ROW_TILE; /* pairs per tile: the MMA's N side, up to 32 */
constexpr int BN = 256;                  /* weight rows per item: the MMA's M side */
constexpr int BOX = BN / 4;              /* rows of one TMA box: one consumer warp group's */
constexpr int KS = 128;                  /* K bytes (e4m3) per stage: one block-scale group */
constexpr int STAGES = 5;
constexpr int CONSUMER_WARPS = BN / 16;  /* 16: four warp groups of 64 rows */
constexpr int THREADS = (CONSUMER_WARPS + 4) * WARP;
constexpr int CONSUMER_REGS = 112, PRODUCER_REGS = 32;
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
static_assert(CONSUMER_WARPS * CONSUMER_REGS + 4 * PRODUCER_REGS <= (CONSUMER_WARPS + 4) * LAUNCH_REGS,
              "setmaxnreg's totals within the block's launch allocation");
constexpr int W_BYTES = BN * KS;     /* 32768 */
constexpr int X_BYTES = BM * KS;     /* 4096: the pairs' e4m3 rows */
constexpr int S_BYTES = BM * 4;      /* 128: the pairs' block activation scales of the stage */
constexpr int W_AT = 0, X_AT = W_BYTES, S_AT = W_BYTES + X_BYTES;
constexpr int STAGE_BYTES = (S_AT + S_BYTES + 1023) / 1024 * 1024;
constexpr int BAR_AT = STAGES * STAGE_BYTES; /* full[STAGES], empty[STAGES] */
constexpr int SMEM = BAR_AT + 2 * STAGES * 8 + 1024; /* + aligning the base for the swizzle */
constexpr int FULL_ARRIVALS = 1 + WARP;              /* the weights' expect_tx, and each producer lane's copies */
static_assert(SMEM <= 227 * 1024, "one block an SM");
static_assert(KS == 128 && BM <= 32, "one lane a pair; a stage a 128-wide K group");

using fmcu_ring::item_t;
using ring = fmcu_ring::ring<STAGES>;

/* D (+)= A * B over one k32 step for SL n8 slices. */
template <int SL> __device__ __forceinline__ void mma(float (&d)[SL * 4], uint64_t da, uint64_t db, int acc)
{
    using namespace fmcu_wgmma;
    if constexpr (SL == 1)
        wgmma_m64n8k32_e4m3(d, da, db, acc);
    else if constexpr (SL == 2)
        wgmma_m64n16k32_e4m3(d, da, db, acc);
    else if constexpr (SL == 3)
        wgmma_m64n24k32_e4m3(d, da, db, acc);
    else
        wgmma_m64n32k32_e4m3(d, da, db, acc);
}

/* 4 bytes by cp.async (a pair's block scale), or zeros when !valid. */
__device__ __forceinline__ void cp_async4_zfill(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}

/* The producer warp: lane 0 waits for the slot's release and loads the
 * item's weight rows of the stage (up to four boxes of 64 rows), counted
 * in bytes; lane r < rows copies pair r's 128 bytes (and
 * with block scales its stage scale), and every lane arrives on the full
 * barrier when its copies have completed. */
template <bool BLOCK>
__device__ __forceinline__ void produce(const fmcu_gemm_args &p, const CUtensorMap *map, uint32_t smem,
                                        uint32_t nb_count, int n_tiles, uint32_t nk, int lane)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    const uint8_t *A = (const uint8_t *)p.a;
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        const int row = it.e * (int)p.n_rows + (int)(it.nb * BN);
        const int boxes = (min(BN, (int)p.n_rows - (int)(it.nb * BN)) + BOX - 1) / BOX;
        const bool live = lane < it.rows;
        const int pair = live ? p.sorted[it.pos0 + lane] : 0;
        const int64_t src = pair / p.a_row_div;
        const uint8_t *xrow = A + src * p.lda;
        for (uint32_t kt = 0; kt < nk; kt++) {
            const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
            if (lane == 0) {
                mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u); /* a fresh slot passes */
                /* only the boxes that hold the expert's rows: gpt-oss-120b's
                 * H = 2880 leaves 64 of the last item's 256 */
                mbar_expect_tx(full, boxes * BOX * KS);
                for (int b = 0; b < boxes; b++)
                    tma_load(st + W_AT + b * BOX * KS, map, (int)(kt * KS), row + b * BOX, full);
            }
            __syncwarp();
            if (live) {
#pragma unroll
                for (int q = 0; q < KS / 16; q++) {
                    const uint32_t col = kt * KS + q * 16;
                    const bool in = col < p.k;
                    cp_async16_zfill(st + X_AT + fmcu_ring::x_chunk<BM>(lane, q), xrow + (in ? col : 0), in);
                }
                if constexpr (BLOCK)
                    cp_async4_zfill(st + S_AT + lane * 4, p.a_scale + src * p.a_scale_ld + kt, true);
            }
            mbar_arrive_on_cp_async(full);
            rg.next();
        }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* A consumer thread's output rows in item nb, and whether they exist. */
__device__ __forceinline__ void out_rows(const fmcu_gemm_args &p, uint32_t nb, int wg, int wq, int gid, int &r_lo,
                                         int &r_hi, bool &ok_lo, bool &ok_hi)
{
    r_lo = (int)(nb * BN) + 64 * wg + 16 * wq + gid;
    r_hi = r_lo + 8;
    ok_lo = r_lo < (int)p.n_rows;
    ok_hi = r_hi < (int)p.n_rows;
}

/* One item of a consumer warp group: the K loop (four k32 wgmmas a
 * stage), then the epilogue of its thread's two rows and 2 SL pairs. */
template <bool BLOCK, int SL>
__device__ __forceinline__ void run_item(const fmcu_gemm_args &p, ring &rg, uint32_t smem, const item_t &it,
                                         uint32_t nk, int wg, int wq, int lane)
{
    using namespace fmcu_async;
    using namespace fmcu_wgmma;
    const int gid = lane / 4, tg = lane % 4;
    int r_lo, r_hi;
    bool ok_lo, ok_hi;
    out_rows(p, it.nb, wg, wq, gid, r_lo, r_hi, ok_lo, ok_hi);
    const int64_t wbase = (int64_t)it.e * p.w_scale_e;
    const int kgroups = BLOCK ? (int)((p.k + p.block_k - 1) / p.block_k) : 1;
    const float *sw_lo = BLOCK ? p.w_scale + wbase + (int64_t)((ok_lo ? r_lo : 0) / (int)p.block_n) * kgroups : nullptr;
    const float *sw_hi = BLOCK ? p.w_scale + wbase + (int64_t)((ok_hi ? r_hi : 0) / (int)p.block_n) * kgroups : nullptr;
    float acc[SL * 4] = {}, part[BLOCK ? SL * 4 : 1];
    uint32_t prev_slot = 0;
    float w_lo = BLOCK ? __ldg(sw_lo) : 0.0f, w_hi = BLOCK ? __ldg(sw_hi) : 0.0f;
    for (uint32_t kt = 0; kt < nk; kt++) {
        const uint32_t st = smem + rg.slot * STAGE_BYTES;
        const uint32_t full = smem + BAR_AT + rg.slot * 8, empty = smem + BAR_AT + (STAGES + rg.slot) * 8;
        /* the next stage's weight scales, loaded while this stage runs */
        float n_lo = 0.0f, n_hi = 0.0f;
        if (BLOCK && kt + 1 < nk) {
            n_lo = __ldg(sw_lo + kt + 1);
            n_hi = __ldg(sw_hi + kt + 1);
        }
        mbar_wait(full, rg.phase);
        fence_async_shared(); /* the producer's cp.async rows, for the wgmma's async proxy */
        const uint64_t da = sw128_desc(st + W_AT + (uint32_t)(wg * 64 * KS));
        const uint64_t db = fmcu_ring::x_desc<BM>(st + X_AT);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KS / 32; s++) {
            if constexpr (BLOCK)
                mma<SL>(part, da + 2 * s, db + (uint64_t)((2 * s * BM * 16) >> 4), s > 0);
            else
                mma<SL>(acc, da + 2 * s, db + (uint64_t)((2 * s * BM * 16) >> 4), kt > 0 || s > 0);
        }
        wgmma_commit();
        if constexpr (BLOCK) {
            wgmma_wait<0>();
            fence_regs(part);
            /* the stage's activation scales of this thread's 2 SL pairs, then release the slot */
            float sa[SL][2];
            fmcu_swg::stage_scales<SL>(st + S_AT, tg, sa);
            fmcu_swg::release(empty, lane);
            fmcu_swg::promote<SL>(acc, part, sa, w_lo, w_hi);
            w_lo = n_lo;
            w_hi = n_hi;
        } else {
            /* the stage before this one is complete once this one's group is
             * the only one in flight: release its slot */
            wgmma_wait<1>();
            if (kt > 0)
                fmcu_swg::release(smem + BAR_AT + (STAGES + prev_slot) * 8, lane);
            prev_slot = rg.slot;
        }
        rg.next();
    }
    if constexpr (!BLOCK) {
        wgmma_wait<0>();
        fence_regs(acc);
        fmcu_swg::release(smem + BAR_AT + (STAGES + prev_slot) * 8, lane);
    }

    /* Epilogue, as stream_gemm.cu's: accumulator 4 j + t (+ 2) is row r_lo
     * (r_hi) and pair 8 j + 2 tg + t of the tile. */
    fmcu_swg::store_item<BLOCK, SL, fmcu_swg::STORE_GEMM2>(p, acc, it, tg, r_lo, r_hi, ok_lo, ok_hi);
}

/* The frame stream_g1_wgmma.cu and stream_bf16_wgmma.cu take from
 * fmcu_swg::persistent, written out: moved onto it, this kernel's code
 * compiled to another schedule (cuobjdump -sass differs beyond register
 * names), so that move waits for a GPU run of its own. */
template <bool BLOCK>
__global__ void __launch_bounds__(THREADS, 1) stream_wgmma(const __grid_constant__ CUtensorMap map,
                                                           const fmcu_gemm_args p)
{
    using namespace fmcu_async;
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t smem = (smem_addr(smem_raw) + 1023) & ~1023u;
    const int n_tiles = *(const volatile int32_t *)p.n_tiles;
    const uint32_t nb_count = (p.n_rows + BN - 1) / BN;
    const uint32_t nk = (p.k + KS - 1) / KS;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    if (tid == 0) /* empty: one arrival a consumer warp */
        fmcu_ring::init_barriers<STAGES>(smem + BAR_AT, FULL_ARRIVALS, CONSUMER_WARPS);
    __syncthreads();
    if (warp >= CONSUMER_WARPS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (warp == CONSUMER_WARPS)
            produce<BLOCK>(p, &map, smem, nb_count, n_tiles, nk, lane);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int wg = warp / 4, wq = warp % 4;
    ring rg{0, 0};
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        switch ((it.rows + 7) / 8) {
        case 1:
            run_item<BLOCK, 1>(p, rg, smem, it, nk, wg, wq, lane);
            break;
        case 2:
            run_item<BLOCK, 2>(p, rg, smem, it, nk, wg, wq, lane);
            break;
        case 3:
            run_item<BLOCK, 3>(p, rg, smem, it, nk, wg, wq, lane);
            break;
        default:
            run_item<BLOCK, 4>(p, rg, smem, it, nk, wg, wq, lane);
            break;
        }
    }
}

template <bool BLOCK> cudaError_t launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    CUtensorMap map;
    if (!fmcu_stream_weight_map(&map, a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, KS))
        return cudaErrorInvalidValue;
    const unsigned grid = fmcu_swg::persistent_grid(a, fmcu_swg::row_blocks<BN, false>(a));
    return fmcu_dev::launch_overlapped(stream_wgmma<BLOCK>, dim3(grid), dim3(THREADS), (size_t)SMEM, stream, map, a);
}

} // namespace

cudaError_t fmcu_stream_wgmma_prepare(void)
{
    const cudaFuncAttribute smem = cudaFuncAttributeMaxDynamicSharedMemorySize;
    cudaError_t e = cudaFuncSetAttribute(stream_wgmma<false>, smem, SMEM);
    return e == cudaSuccess ? cudaFuncSetAttribute(stream_wgmma<true>, smem, SMEM) : e;
}

cudaError_t fmcu_stream_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    /* What this kernel assumes (GEMM2, 16-byte copies of K, a stage per
     * block-scale group); other calls keep the mma.sync kernel. */
    if (a.gemm1 || !a.fp8 || a.row_tile != BM || a.sms <= 0 || a.experts == 0 || a.k % 16 || a.lda % 16 ||
        (uintptr_t)a.a % 16 || (uintptr_t)a.w % 16 || a.n_rows % 8 ||
        (a.block_scaled && (a.block_k != KS || a.block_n % 8 || !a.a_scale || !a.w_scale)))
        return fmcu_stream_gemm_launch(a, stream);
    return a.block_scaled ? launch<true>(a, stream) : launch<false>(a, stream);
}
