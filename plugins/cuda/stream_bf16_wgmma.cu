/*
 * plugins/cuda/stream_bf16_wgmma.cu - the weight-streaming tier's BF16
 * GEMMs on wgmma (contract: gemm.h, fmcu_stream_bf16_wgmma_launch).
 * sm_90a.
 *
 * Why. The bf16 stream tier (stream_gemm.cu: each warp loads its weight
 * rows into registers and issues mma.sync) reads 3.1-4.1 TB/s at 4-8 rows
 * an expert, and vLLM's Triton kernel, on wgmma fed by TMA, is ahead of
 * our whole layer at two BF16 points there and within 1 % at two more
 * (bench/cuda/RESULTS.md, "vLLM's Triton fused MoE on the H200"). The
 * FP8 stream on TMA and wgmma (stream_wgmma.cu) reads up to 4.4 TB/s.
 * BF16 sums on wgmma are f32's, so both GEMMs run here (the FP8 GEMM1 has
 * to be exact in f32 for its requantization: stream_g1_wgmma.cu).
 *
 *   - Swap-AB as stream_wgmma.cu: an item is 256 weight rows of one expert
 *     (the MMA's M side, 64 a consumer warp group; a gated GEMM1's 128
 *     outputs, gate and up rows interleaved by 8 through a 4-D tensor map
 *     as in stream_g1_wgmma.cu) against a plan tile of up to 32 of its
 *     pairs (N, in n8 slices: 8, 16, 24 or 32).
 *   - A producer warp fills a ring of STAGES stages of 64 K (128 bytes, one
 *     swizzle atom a row): the weight rows by TMA, the pairs' bf16 rows by
 *     cp.async into the B operand's K-major layout, so that a stage has
 *     the byte layout of the FP8 stream's 128-K stage.
 *   - Consumers issue four m64nNk16 wgmmas a stage, both operands from
 *     shared memory, into f32 accumulators; the epilogue is the FP8
 *     streams' without scales.
 */
#include <cuda.h>

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
constexpr int HALF = BN / 2;             /* a gated item's outputs */
constexpr int KS = 128;                  /* K bytes per stage: 64 bf16, one 128-byte swizzle row */
constexpr int KE = KS / 2;               /* K elements per stage */
constexpr int STAGES = 6;
constexpr int CONSUMER_WARPS = BN / 16; /* 16: four warp groups of 64 rows */
constexpr int THREADS = (CONSUMER_WARPS + 4) * WARP;
constexpr int CONSUMER_REGS = 112, PRODUCER_REGS = 32;
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
static_assert(CONSUMER_WARPS * CONSUMER_REGS + 4 * PRODUCER_REGS <= (CONSUMER_WARPS + 4) * LAUNCH_REGS,
              "setmaxnreg's totals within the block's launch allocation");
constexpr int W_BYTES = BN * KS; /* 32768 */
constexpr int X_BYTES = BM * KS; /* 4096: the pairs' bf16 rows */
constexpr int W_AT = 0, X_AT = W_BYTES;
constexpr int STAGE_BYTES = (X_AT + X_BYTES + 1023) / 1024 * 1024;
constexpr int BAR_AT = STAGES * STAGE_BYTES; /* full[STAGES], empty[STAGES] */
constexpr int SMEM = BAR_AT + 2 * STAGES * 8 + 1024; /* + aligning the base for the swizzle */
constexpr int FULL_ARRIVALS = 1 + WARP;              /* the weights' expect_tx, and each producer lane's copies */
static_assert(SMEM <= 227 * 1024, "one block an SM");
static_assert(BM <= 32, "one lane a pair");

using fmcu_ring::item_t;
using ring = fmcu_ring::ring<STAGES>;

/* D (+)= A * B over one k16 step for SL n8 slices. */
template <int SL> __device__ __forceinline__ void mma(float (&d)[SL * 4], uint64_t da, uint64_t db, int acc)
{
    using namespace fmcu_wgmma;
    if constexpr (SL == 1)
        wgmma_m64n8k16_bf16(d, da, db, acc);
    else if constexpr (SL == 2)
        wgmma_m64n16k16_bf16(d, da, db, acc);
    else if constexpr (SL == 3)
        wgmma_m64n24k16_bf16(d, da, db, acc);
    else
        wgmma_m64n32k16_bf16(d, da, db, acc);
}

/* The item's weight rows (gated: outputs) and how many there are. */
__device__ __forceinline__ int span_of(const fmcu_gemm_args &p)
{
    return p.gated ? (int)p.n_out : (int)p.n_rows;
}

/* The producer warp: lane 0 waits for the slot's release and loads the
 * item's weight rows of the stage by TMA, only the boxes that hold the
 * expert's rows (gated: boxes of 64 outputs, each 8 groups of 8 gate rows
 * and their 8 up rows; else boxes of 64 rows), counted in bytes; lane
 * r < rows copies pair r's 128 bytes (zeros past K), and every lane
 * arrives on the full barrier when its copies have completed. */
__device__ __forceinline__ void produce(const fmcu_gemm_args &p, const CUtensorMap *map, uint32_t smem,
                                        uint32_t nb_count, int n_tiles, uint32_t nk, int lane)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    const uint8_t *A = (const uint8_t *)p.a;
    const bool gated = p.gated != 0;
    const int span = span_of(p), per_item = gated ? HALF : BN;
    const uint32_t k_bytes = p.k * 2;
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        const int first = (int)(it.nb * per_item);
        const int boxes = (min(per_item, span - first) + 63) / 64;
        const bool live = lane < it.rows;
        const int pair = live ? p.sorted[it.pos0 + lane] : 0;
        const uint8_t *xrow = A + (int64_t)(pair / p.a_row_div) * p.lda * 2;
        for (uint32_t kt = 0; kt < nk; kt++) {
            const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
            if (lane == 0) {
                mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u); /* a fresh slot passes */
                mbar_expect_tx(full, (uint32_t)boxes * 64 * (gated ? 2 : 1) * KS);
                for (int b = 0; b < boxes; b++) {
                    if (gated) /* 8 groups: 128 stage rows */
                        tma_load4(st + W_AT + (uint32_t)(b * 128 * KS), map, (int)(kt * KE), 0, 0,
                                  (it.e * (int)p.n_rows + first + 64 * b) / 8, full);
                    else
                        tma_load(st + W_AT + (uint32_t)(b * 64 * KS), map, (int)(kt * KE),
                                 it.e * (int)p.n_rows + first + 64 * b, full);
                }
            }
            __syncwarp();
            if (live) {
#pragma unroll
                for (int q = 0; q < KS / 16; q++) {
                    const uint32_t col = kt * KS + q * 16;
                    const bool in = col < k_bytes;
                    cp_async16_zfill(st + X_AT + fmcu_ring::x_chunk<BM>(lane, q), xrow + (in ? col : 0), in);
                }
            }
            mbar_arrive_on_cp_async(full);
            rg.next();
        }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* One item of a consumer warp group: the K loop (four k16 wgmmas a
 * stage), then the epilogue of its thread's two rows and 2 SL pairs
 * (accumulator 4 j + t (+ 2) is row r_lo (r_hi) and pair 8 j + 2 tg + t of
 * the tile): GEMM1's activation, or GEMM2's plain store. */
template <int SL>
__device__ __forceinline__ void run_item(const fmcu_gemm_args &p, ring &rg, uint32_t smem, const item_t &it,
                                         uint32_t nk, int wg, int wq, int lane)
{
    using namespace fmcu_async;
    using namespace fmcu_wgmma;
    const int gid = lane / 4, tg = lane % 4;
    int r_lo, r_hi;
    bool ok_lo, ok_hi;
    fmcu_swg::out_rows(p, it.nb, wg, wq, gid, r_lo, r_hi, ok_lo, ok_hi);
    float acc[SL * 4] = {};
    uint32_t prev_slot = 0;
    for (uint32_t kt = 0; kt < nk; kt++) {
        const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
        mbar_wait(full, rg.phase);
        fence_async_shared(); /* the producer's cp.async rows, for the wgmma's async proxy */
        const uint64_t da = sw128_desc(st + W_AT + (uint32_t)(wg * 64 * KS));
        const uint64_t db = fmcu_ring::x_desc<BM>(st + X_AT);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KS / 32; s++) /* a k16 step is 32 bytes of both operands */
            mma<SL>(acc, da + 2 * s, db + (uint64_t)((2 * s * BM * 16) >> 4), kt > 0 || s > 0);
        wgmma_commit();
        /* the stage before this one is complete once this one's group is
         * the only one in flight: release its slot */
        wgmma_wait<1>();
        if (kt > 0)
            fmcu_swg::release(smem + BAR_AT + (STAGES + prev_slot) * 8, lane);
        prev_slot = rg.slot;
        rg.next();
    }
    wgmma_wait<0>();
    fence_regs(acc);
    fmcu_swg::release(smem + BAR_AT + (STAGES + prev_slot) * 8, lane);

    fmcu_swg::store_item<false, SL, fmcu_swg::STORE_EITHER>(p, acc, it, tg, r_lo, r_hi, ok_lo, ok_hi);
}

__global__ void __launch_bounds__(THREADS, 1) stream_bf16_wgmma(const __grid_constant__ CUtensorMap map,
                                                                const fmcu_gemm_args p)
{
    using namespace fmcu_async;
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t smem = (smem_addr(smem_raw) + 1023) & ~1023u;
    const uint32_t nb_count = fmcu_swg::row_blocks<BN, true>(p);
    const uint32_t nk = (p.k + KE - 1) / KE;
    fmcu_swg::persistent<STAGES, BM, CONSUMER_WARPS, PRODUCER_REGS, CONSUMER_REGS>(
        p, smem + BAR_AT, FULL_ARRIVALS, nb_count,
        [&](int n_tiles, int pw, int lane) {
            if (pw == 0)
                produce(p, &map, smem, nb_count, n_tiles, nk, lane);
        },
        [&](ring &rg, const item_t &it, int wg, int wq, int lane) {
            fmcu_swg::by_slices(it.rows,
                                [&](auto sl) { run_item<decltype(sl)::value>(p, rg, smem, it, nk, wg, wq, lane); });
        });
}

} // namespace

cudaError_t fmcu_stream_bf16_wgmma_prepare(void)
{
    return cudaFuncSetAttribute(stream_bf16_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
}

cudaError_t fmcu_stream_bf16_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    /* What this kernel assumes (bf16 operands, 16-byte copies of K rows,
     * the gated map's 8-row groups); other calls keep the mma.sync kernel. */
    if (a.fp8 || a.act_dtype != FMOE_DTYPE_BF16 || a.row_tile != BM || a.sms <= 0 || a.experts == 0 || a.k % 8 ||
        a.lda % 8 || (uintptr_t)a.a % 16 || (uintptr_t)a.w % 16 || a.n_rows % 8 || (a.gated && a.n_out % 8))
        return fmcu_stream_gemm_launch(a, stream);
    CUtensorMap map;
    if (!fmcu_stream_weight_map(&map, a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, KE))
        return cudaErrorInvalidValue;
    const unsigned grid = fmcu_swg::persistent_grid(a, fmcu_swg::row_blocks<BN, true>(a));
    return fmcu_dev::launch_overlapped(stream_bf16_wgmma, dim3(grid), dim3(THREADS), (size_t)SMEM, stream, map, a);
}
