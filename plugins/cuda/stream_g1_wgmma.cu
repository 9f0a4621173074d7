/*
 * plugins/cuda/stream_g1_wgmma.cu - the weight-streaming tier's FP8 GEMM1
 * on wgmma with f32's sums (contract: gemm.h, fmcu_stream_g1_wgmma_launch).
 * sm_90a.
 *
 * Why. GEMM1's output is quantized again with its row's (or 128-column
 * group's) amax as the scale, so its sums must be what f32 gives: FP8
 * wgmma keeps fewer bits, and one row maximum a bf16 step off the
 * reference's re-rolls every code of the row (stream_wgmma.cu, which
 * runs GEMM2 so, says what that cost). stream_gemm.cu's mma.sync is exact
 * (each e4m3 MMA is conversions and f16 MMAs into f32) but bound by those
 * instructions. Here the e4m3 weights, exact in f16, are converted once a
 * stage into wgmma's register A operand and the pairs' rows into its
 * shared-memory B operand, and f16 wgmmas sum into f32 accumulators: the
 * same products and f32 sums, with the conversions amortized over up to
 * 32 pairs.
 *
 *   - Items as stream_wgmma.cu: 256 weight rows of an expert (the MMA's M
 *     side, 64 a consumer warp group; a gated GEMM1's 128 outputs, gate
 *     and up rows interleaved by 8 through a 4-D tensor map, so that a
 *     thread's fragment rows r and r + 8 are one output's gate and up
 *     rows) against a plan tile of up to 32 of its pairs (N = 16 or 32).
 *   - Warp roles: a producer warp loads each stage's weight rows by TMA
 *     (128-byte swizzle); three pair warps take the stages in turn and
 *     write the pairs' e4m3 rows into the stage as f16 (and with block
 *     scales the stage's activation scales); sixteen consumer warps.
 *   - K order. A consumer thread reads its two rows' 16-byte chunks 2 tg
 *     and 2 tg + 1 of a stage (under the swizzle a warp's eight rows then
 *     hit distinct banks) and uses word jj of chunk 2 tg + q as its A
 *     fragment of k16 step 4 q + jj: bytes 0-1 at fragment columns 2 tg,
 *     2 tg + 1, bytes 2-3 at 2 tg + 8, 2 tg + 9 (pair_k below). The pair
 *     warps write each pair's byte P of the stage at the B row that the
 *     wgmma multiplies with weight byte P, so every product is still
 *     w[k] * x[k]; only the order of the sum changes.
 *
 * Status: built and ptxas-checked, not yet run on a GPU; the forward
 * takes it only with the option stream_wgmma_gemm1 (default false).
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
#include "plugins/cuda/wgmma_rs_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"

namespace {

constexpr int WARP = 32;
constexpr int BM = FMCU_STREAM_ROW_TILE; /* pairs per tile: the MMA's N side, up to 32 */
constexpr int BN = 256;                  /* weight rows per item: the MMA's M side */
constexpr int HALF = BN / 2;             /* a gated item's outputs */
constexpr int KS = 128;                  /* K (e4m3 bytes) per stage: one block-scale group */
constexpr int STAGES = 5;
constexpr int CONSUMER_WARPS = BN / 16; /* 16: four warp groups of 64 rows */
constexpr int PAIR_WARPS = 3;           /* the producer warp group's other warps */
constexpr int THREADS = (CONSUMER_WARPS + 4) * WARP;
constexpr int CONSUMER_REGS = 104, PRODUCER_REGS = 56; /* a pair warp holds a pair's 128 bytes */
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
static_assert(CONSUMER_WARPS * CONSUMER_REGS + 4 * PRODUCER_REGS <= (CONSUMER_WARPS + 4) * LAUNCH_REGS,
              "setmaxnreg's totals within the block's launch allocation");
constexpr int W_BYTES = BN * KS;    /* 32768: e4m3 weight rows */
constexpr int X_BYTES = BM * KS * 2; /* 8192: the pairs' rows as f16 */
constexpr int S_BYTES = BM * 4;      /* 128: the pairs' block activation scales of the stage */
constexpr int W_AT = 0, X_AT = W_BYTES, S_AT = W_BYTES + X_BYTES;
constexpr int STAGE_BYTES = (S_AT + S_BYTES + 1023) / 1024 * 1024;
constexpr int BAR_AT = STAGES * STAGE_BYTES; /* full[STAGES], empty[STAGES] */
constexpr int SMEM = BAR_AT + 2 * STAGES * 8 + 1024; /* + aligning the base for the swizzle */
constexpr int FULL_ARRIVALS = 1 + WARP;              /* the weights' expect_tx, and the stage's pair warp's lanes */
static_assert(SMEM <= 227 * 1024, "one block an SM");
static_assert(KS == 128 && BM == 32, "one lane a pair; a stage a 128-wide K group");

using fmcu_ring::item_t;
using ring = fmcu_ring::ring<STAGES>;

/* D (+)= A * B over one k16 step, N = 8 SL (16 or 32). */
template <int SL> __device__ __forceinline__ void mma(float (&d)[SL * 4], const uint32_t (&a)[4], uint64_t db, int acc)
{
    static_assert(SL == 2 || SL == 4, "N of 16 or 32");
    if constexpr (SL == 2)
        fmcu_wgmma::wgmma_m64n16k16_f16_rs(d, a, db, acc);
    else
        fmcu_wgmma::wgmma_m64n32k16_f16_rs(d, a, db, acc);
}

/* Four e4m3 codes (bytes 0-3 of w) as two f16 pairs: bytes 0-1 in lo,
 * 2-3 in hi, the lower byte in the lower half (exact: e4m3 is in f16). */
__device__ __forceinline__ void f16x4_of_e4m3x4(uint32_t w, uint32_t &lo, uint32_t &hi)
{
    asm("{\n.reg .b16 a, b;\nmov.b32 {a, b}, %2;\ncvt.rn.f16x2.e4m3x2 %0, a;\ncvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}

__device__ __forceinline__ uint4 lds128(uint32_t addr)
{
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr));
    return v;
}

__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t word(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* The producer warp: lane 0 waits for each stage's slot and loads the
 * item's weight rows of it by TMA, only the boxes that hold the expert's
 * rows (gated: boxes of 64 outputs, each 8 groups of 8 gate rows and
 * their 8 up rows; else boxes of 64 rows), counted in bytes. */
__device__ __forceinline__ void produce_weights(const fmcu_gemm_args &p, const CUtensorMap *map, uint32_t smem,
                                                uint32_t nb_count, int n_tiles, uint32_t nk)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    const bool gated = p.gated != 0;
    const int span = gated ? (int)p.n_out : (int)p.n_rows; /* outputs (gated) or rows of an expert */
    const int per_item = gated ? HALF : BN;
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        const int first = (int)(it.nb * per_item);
        const int boxes = (min(per_item, span - first) + 63) / 64;
        for (uint32_t kt = 0; kt < nk; kt++) {
            const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
            mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u); /* a fresh slot passes */
            mbar_expect_tx(full, (uint32_t)boxes * 64 * (gated ? 2 : 1) * KS);
            for (int b = 0; b < boxes; b++) {
                if (gated) /* 8 groups: 128 stage rows */
                    tma_load4(st + W_AT + (uint32_t)(b * 128 * KS), map, (int)(kt * KS), 0, 0,
                              (it.e * (int)p.n_rows + first + 64 * b) / 8, full);
                else
                    tma_load(st + W_AT + (uint32_t)(b * 64 * KS), map, (int)(kt * KS),
                             it.e * (int)p.n_rows + first + 64 * b, full);
            }
            rg.next();
        }
    }
}

/* A pair warp (w of PAIR_WARPS): the stages whose running count is w
 * modulo PAIR_WARPS. Lane r < rows converts pair r's 128 bytes of the
 * stage to f16 into the B operand (zeros past K), in the K order the
 * consumers' fragments imply: its 16-byte piece 2 tg + q holds, in word
 * jj, the codes that k16 step 4 q + jj multiplies at fragment columns
 * 2 tg, 2 tg + 1 (bytes 0-1: B chunk 2 (4 q + jj)) and 2 tg + 8, 2 tg + 9
 * (bytes 2-3: chunk 2 (4 q + jj) + 1), word tg of each chunk. With block
 * scales lane r also writes pair r's scale of the stage. Every lane then
 * makes its writes visible to the wgmma's async proxy and arrives. */
template <bool BLOCK>
__device__ __forceinline__ void produce_pairs(const fmcu_gemm_args &p, uint32_t smem, uint32_t nb_count, int n_tiles,
                                              uint32_t nk, int w, int lane)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    uint32_t count = 0;
    const uint8_t *A = (const uint8_t *)p.a;
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        const bool live = lane < it.rows;
        const int pair = live ? p.sorted[it.pos0 + lane] : 0;
        const int64_t src = pair / p.a_row_div;
        const uint8_t *xrow = A + src * p.lda;
        for (uint32_t kt = 0; kt < nk; kt++, count++, rg.next()) {
            if (count % PAIR_WARPS != (uint32_t)w)
                continue;
            const uint32_t st = smem + rg.slot * STAGE_BYTES;
            float sa = 0.0f;
            if constexpr (BLOCK)
                sa = live ? __ldg(p.a_scale + src * p.a_scale_ld + kt) : 0.0f;
            /* two halves of four pieces (piece 2 tg + q), the first loaded
             * before the slot is free */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                uint4 v[4];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const uint32_t col = kt * KS + (4 * h + i) * 16;
                    v[i] = live && col < p.k ? __ldg(reinterpret_cast<const uint4 *>(xrow + col)) : make_uint4(0, 0, 0, 0);
                }
                if (h == 0)
                    mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int pc = 4 * h + i, tg = pc / 2, q = pc % 2;
#pragma unroll
                    for (int jj = 0; jj < 4; jj++) {
                        const int step = 4 * q + jj;
                        uint32_t lo, hi;
                        f16x4_of_e4m3x4(word(v[i], jj), lo, hi);
                        sts32(st + X_AT + fmcu_ring::x_chunk<BM>(lane, 2 * step) + 4 * tg, lo);
                        sts32(st + X_AT + fmcu_ring::x_chunk<BM>(lane, 2 * step + 1) + 4 * tg, hi);
                    }
                }
            }
            if constexpr (BLOCK)
                sts32(st + S_AT + (uint32_t)lane * 4, __float_as_uint(sa));
            fence_async_shared();
            mbar_arrive(smem + BAR_AT + rg.slot * 8);
        }
    }
}

/* One stage of a consumer warp: eight k16 wgmmas in four groups of two,
 * each group's A fragments converted from the stage just before it is
 * issued, into two register sets in turn; each group waits for the one
 * before it (whose set the next group rewrites). PROMOTE (block scales):
 * into part from zero; else into acc (from zero at the item's first
 * stage). The stage's second group is left in flight. */
template <bool PROMOTE, int SL>
__device__ __forceinline__ void stage_mma(float (&acc)[SL * 4], float (&part)[SL * 4], uint32_t st, uint32_t row_lo,
                                          int gid, int tg, bool first)
{
    using namespace fmcu_wgmma;
    const uint64_t desc = fmcu_ring::x_desc<BM>(st + X_AT);
    uint32_t a[2][2][4];
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const uint32_t chunk = (uint32_t)((((2 * tg + q) ^ gid) & 7) << 4);
        const uint4 lo = lds128(st + W_AT + row_lo * KS + chunk);
        const uint4 hi = lds128(st + W_AT + (row_lo + 8) * KS + chunk);
#pragma unroll
        for (int g = 0; g < 2; g++) { /* group 2 q + g: steps 4 q + 2 g, + 1; register set g */
#pragma unroll
            for (int i = 0; i < 2; i++) {
                f16x4_of_e4m3x4(word(lo, 2 * g + i), a[g][i][0], a[g][i][2]);
                f16x4_of_e4m3x4(word(hi, 2 * g + i), a[g][i][1], a[g][i][3]);
            }
            wgmma_fence();
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int step = 4 * q + 2 * g + i;
                if constexpr (PROMOTE)
                    mma<SL>(part, a[g][i], desc + (uint64_t)(step * 2 * BM), step > 0);
                else
                    mma<SL>(acc, a[g][i], desc + (uint64_t)(step * 2 * BM), !(first && step == 0));
            }
            wgmma_commit();
            wgmma_wait<1>();
#pragma unroll
            for (int i = 0; i < 2; i++)
                fence_regs(a[g ^ 1][i]);
        }
    }
}

/* One item of a consumer warp group: the K loop, then the epilogue of its
 * thread's two rows and 2 SL pairs (accumulator 4 j + t (+ 2) is row r_lo
 * (r_hi) and pair 8 j + 2 tg + t of the tile), as stream_gemm.cu's. */
template <bool BLOCK, int SL>
__device__ __forceinline__ void run_item(const fmcu_gemm_args &p, ring &rg, uint32_t smem, const item_t &it,
                                         uint32_t nk, int wg, int wq, int lane)
{
    using namespace fmcu_async;
    using namespace fmcu_wgmma;
    const int gid = lane / 4, tg = lane % 4;
    int r_lo, r_hi;
    bool ok_lo, ok_hi;
    fmcu_swg::out_rows(p, it.nb, wg, wq, gid, r_lo, r_hi, ok_lo, ok_hi);
    const uint32_t row_lo = (uint32_t)(64 * wg + 16 * wq + gid); /* the thread's first stage row */
    const int64_t wbase = (int64_t)it.e * p.w_scale_e;
    const int kgroups = BLOCK ? (int)((p.k + p.block_k - 1) / p.block_k) : 1;
    const float *sw_lo = BLOCK ? p.w_scale + wbase + (int64_t)((ok_lo ? r_lo : 0) / (int)p.block_n) * kgroups : nullptr;
    const float *sw_hi = BLOCK ? p.w_scale + wbase + (int64_t)((ok_hi ? r_hi : 0) / (int)p.block_n) * kgroups : nullptr;
    float acc[SL * 4] = {}, part[SL * 4];
    uint32_t prev_slot = 0;
    float w_lo = BLOCK ? __ldg(sw_lo) : 0.0f, w_hi = BLOCK ? __ldg(sw_hi) : 0.0f;
    for (uint32_t kt = 0; kt < nk; kt++) {
        const uint32_t st = smem + rg.slot * STAGE_BYTES;
        const uint32_t full = smem + BAR_AT + rg.slot * 8, empty = smem + BAR_AT + (STAGES + rg.slot) * 8;
        float n_lo = 0.0f, n_hi = 0.0f; /* the next stage's weight scales, loaded while this one runs */
        if (BLOCK && kt + 1 < nk) {
            n_lo = __ldg(sw_lo + kt + 1);
            n_hi = __ldg(sw_hi + kt + 1);
        }
        mbar_wait(full, rg.phase);
        stage_mma<BLOCK, SL>(acc, part, st, row_lo, gid, tg, kt == 0);
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
            /* this stage's first group has been waited for, so the stage
             * before is complete: release its slot */
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

    fmcu_swg::store_item<BLOCK, SL, fmcu_swg::STORE_GEMM1>(p, acc, it, tg, r_lo, r_hi, ok_lo, ok_hi);
}

template <bool BLOCK>
__global__ void __launch_bounds__(THREADS, 1) stream_g1_wgmma(const __grid_constant__ CUtensorMap map,
                                                              const fmcu_gemm_args p)
{
    using namespace fmcu_async;
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t smem = (smem_addr(smem_raw) + 1023) & ~1023u;
    const uint32_t nb_count = fmcu_swg::row_blocks<BN, true>(p);
    const uint32_t nk = (p.k + KS - 1) / KS;
    fmcu_swg::persistent<STAGES, BM, CONSUMER_WARPS, PRODUCER_REGS, CONSUMER_REGS>(
        p, smem + BAR_AT, FULL_ARRIVALS, nb_count,
        [&](int n_tiles, int pw, int lane) {
            if (pw == 0) {
                if (lane == 0)
                    produce_weights(p, &map, smem, nb_count, n_tiles, nk);
            } else {
                produce_pairs<BLOCK>(p, smem, nb_count, n_tiles, nk, pw - 1, lane);
            }
        },
        [&](ring &rg, const item_t &it, int wg, int wq, int lane) {
            if (it.rows <= 16)
                run_item<BLOCK, 2>(p, rg, smem, it, nk, wg, wq, lane);
            else
                run_item<BLOCK, 4>(p, rg, smem, it, nk, wg, wq, lane);
        });
}

template <bool BLOCK> cudaError_t launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    CUtensorMap map;
    if (!fmcu_stream_weight_map(&map, a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, KS))
        return cudaErrorInvalidValue;
    const unsigned grid = fmcu_swg::persistent_grid(a, fmcu_swg::row_blocks<BN, true>(a));
    return fmcu_dev::launch_overlapped(stream_g1_wgmma<BLOCK>, dim3(grid), dim3(THREADS), (size_t)SMEM, stream, map,
                                       a);
}

} // namespace

cudaError_t fmcu_stream_g1_wgmma_prepare(void)
{
    const cudaFuncAttribute smem = cudaFuncAttributeMaxDynamicSharedMemorySize;
    cudaError_t e = cudaFuncSetAttribute(stream_g1_wgmma<false>, smem, SMEM);
    return e == cudaSuccess ? cudaFuncSetAttribute(stream_g1_wgmma<true>, smem, SMEM) : e;
}

cudaError_t fmcu_stream_g1_wgmma_launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    /* What this kernel assumes (GEMM1, 16-byte loads of K, 8-row groups of
     * the gated map, a stage per block-scale group); other calls keep the
     * mma.sync kernel. */
    if (!a.gemm1 || !a.fp8 || a.row_tile != BM || a.sms <= 0 || a.experts == 0 || a.k % 16 || a.lda % 16 ||
        (uintptr_t)a.a % 16 || (uintptr_t)a.w % 16 || a.n_rows % 8 || (a.gated && a.n_out % 8) ||
        (a.block_scaled && (a.block_k != KS || !a.a_scale || !a.w_scale)))
        return fmcu_stream_gemm_launch(a, stream);
    return a.block_scaled ? launch<true>(a, stream) : launch<false>(a, stream);
}
