/*
 * plugins/cuda/stream_wgmma_parts.cuh - what the stream tier's wgmma GEMMs
 * (stream_wgmma.cu: fp8 GEMM2 on FP8 wgmma; stream_g1_wgmma.cu: fp8 GEMM1
 * on f16 wgmma; stream_bf16_wgmma.cu: both bf16 GEMMs) share around their
 * MMAs: a slot's release, the block scales' promotion of a stage's
 * partial sums, a thread's output rows, and the scaling and storing of
 * finished sums; and the persistent frame they run in (the ring's set-up,
 * the producer and consumer roles, the walk over items, the grid). Items
 * are 256 weight rows (a gated GEMM1's 128 outputs). A thread's
 * accumulator 4 j + t (+ 2) is its row lo (hi) and pair 8 j + 2 tg + t of
 * the tile, as wgmma's m64nN fragments are. CUDA C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_STREAM_WGMMA_PARTS_CUH
#define FMOE_PLUGIN_CUDA_STREAM_WGMMA_PARTS_CUH

#include <stdint.h>

#include <type_traits>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/pair_ring.cuh"

namespace fmcu_swg {

/* A consumer warp's release of a ring slot, its lanes done with it: one
 * arrival a warp on the slot's empty barrier. */
__device__ __forceinline__ void release(uint32_t empty, int lane)
{
    __syncwarp();
    if (lane == 0)
        fmcu_async::mbar_arrive(empty);
}

/* The stage's activation scales of a thread's 2 SL pairs, from the
 * stage's scale slots at shared address `at` (one f32 a pair). */
template <int SL> __device__ __forceinline__ void stage_scales(uint32_t at, int tg, float (&sa)[SL][2])
{
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++)
            sa[j][t] = __uint_as_float(fmcu_async::lds32(at + (uint32_t)(8 * j + 2 * tg + t) * 4));
}

/* acc += part * (s_w * s_a): a stage's 128 x 128 block sums promoted with
 * the rows' weight scales (w_lo, w_hi) and the pairs' activation scales. */
template <int SL>
__device__ __forceinline__ void promote(float (&acc)[SL * 4], const float (&part)[SL * 4], const float (&sa)[SL][2],
                                        float w_lo, float w_hi)
{
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            acc[4 * j + t] = fmaf(part[4 * j + t], w_lo * sa[j][t], acc[4 * j + t]);
            acc[4 * j + 2 + t] = fmaf(part[4 * j + 2 + t], w_hi * sa[j][t], acc[4 * j + 2 + t]);
        }
}

/* A finished sum x of weight row `row` (valid: ok) of expert e and pair
 * `pair`: times its tensor, channel or token scales unless BLOCK (block
 * sums come promoted), plus the bias, rounded to the activation dtype as
 * stream_gemm.cu's epilogue does. */
template <bool BLOCK>
__device__ __forceinline__ float finish(const fmcu_gemm_args &p, float x, int e, int row, bool ok, int pair)
{
    if constexpr (!BLOCK) {
        const float sa = p.a_scale ? p.a_scale[(int64_t)(pair / p.a_row_div) * p.a_scale_ld] : 1.0f;
        x *= p.w_scale && ok ? sa * p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)row * p.w_scale_n] : sa;
    }
    if (p.bias && ok)
        x += fmcu_dev::load_act(p.act_dtype, p.bias, (int64_t)e * p.n_rows + row);
    return fmcu_dev::round_act(p.act_dtype, x);
}

/* A consumer thread's output rows in item nb (warp wq of warp group wg,
 * lane group gid) and whether they exist: gated, 8 outputs a warp, r_lo
 * the output column and its gate row, r_hi its up row (the weight map
 * interleaves them by 8: stream_weight_map.h); else rows 16 wq + gid and
 * + 8 of the warp group's 64. */
__device__ __forceinline__ void out_rows(const fmcu_gemm_args &p, uint32_t nb, int wg, int wq, int gid, int &r_lo,
                                         int &r_hi, bool &ok_lo, bool &ok_hi)
{
    if (p.gated) {
        r_lo = (int)(nb * 128) + 8 * (4 * wg + wq) + gid;
        r_hi = (int)p.n_out + r_lo;
        ok_lo = ok_hi = r_lo < (int)p.n_out;
    } else {
        r_lo = (int)(nb * 256) + 64 * wg + 16 * wq + gid;
        r_hi = r_lo + 8;
        ok_lo = r_lo < (int)p.n_rows;
        ok_hi = r_hi < (int)p.n_rows;
    }
}

/* Which epilogue store_item runs: GEMM1's, GEMM2's, or the one p.gemm1 says. */
enum { STORE_GEMM1, STORE_GEMM2, STORE_EITHER };

/* The epilogue of a thread's two rows and 2 SL pairs of item `it`: GEMM2
 * stores the finished sums as they are; GEMM1 stores, gated, the output's
 * activation of its gate and up sums (rows r_lo, r_hi), else each row's
 * activation. KIND fixes which at compile time where a kernel runs one. */
template <bool BLOCK, int SL, int KIND>
__device__ __forceinline__ void store_item(const fmcu_gemm_args &p, const float (&acc)[SL * 4],
                                           const fmcu_ring::item_t &it, int tg, int r_lo, int r_hi, bool ok_lo,
                                           bool ok_hi)
{
    const int32_t dt = p.act_dtype;
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};
#pragma unroll
    for (int j = 0; j < SL; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int idx = 8 * j + 2 * tg + t;
            if (idx >= it.rows)
                continue;
            const int pair = p.sorted[it.pos0 + idx];
            const float v[2] = {finish<BLOCK>(p, acc[4 * j + t], it.e, r_lo, ok_lo, pair),
                                finish<BLOCK>(p, acc[4 * j + 2 + t], it.e, r_hi, ok_hi, pair)};
            const int64_t orow = (int64_t)pair * p.ldo;
            if (KIND == STORE_GEMM2 || (KIND == STORE_EITHER && !p.gemm1)) {
                if (ok_lo)
                    fmcu_dev::store_act(dt, p.out, orow + r_lo, v[0]);
                if (ok_hi)
                    fmcu_dev::store_act(dt, p.out, orow + r_hi, v[1]);
            } else if (p.gated) {
                if (ok_lo)
                    fmcu_dev::store_act(dt, p.out, orow + r_lo,
                                        fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], v[1])));
            } else {
                if (ok_lo)
                    fmcu_dev::store_act(dt, p.out, orow + r_lo,
                                        fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], 0.0f)));
                if (ok_hi)
                    fmcu_dev::store_act(dt, p.out, orow + r_hi,
                                        fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[1], 0.0f)));
            }
        }
}

/* An item's row blocks in a projection: BN weight rows each, or BN / 2
 * outputs of a gated GEMM1 (gate and up rows interleaved) where the
 * kernel serves one (GATED). */
template <int BN, bool GATED> __host__ __device__ __forceinline__ uint32_t row_blocks(const fmcu_gemm_args &p)
{
    return GATED && p.gated ? (p.n_out + BN / 2 - 1) / (BN / 2) : (p.n_rows + BN - 1) / BN;
}

/* The persistent grid: a block an SM, fewer where the call's bound on
 * items (row tiles x row blocks) is smaller. */
__host__ inline unsigned persistent_grid(const fmcu_gemm_args &a, int64_t blocks)
{
    const int64_t items = a.grid_tiles * blocks;
    return (unsigned)(items < a.sms ? items : a.sms);
}

/* The kernels' frame, called once the launch's programmatic wait is done:
 * thread 0 sets up the ring's barriers at `bars` (a consumer warp's
 * arrival empties a slot); the warps from CONSUMER_WARPS on (the producer
 * warp group) give registers to the consumers and run produce(n_tiles,
 * producer warp, lane); each consumer warp walks items b, b + grid, ...
 * (tile item / nb_count, row block item % nb_count) and runs consume(ring,
 * item, warp group, warp in it, lane) on each, the ring running on across
 * them. */
template <int STAGES, int BM, int CONSUMER_WARPS, int PRODUCER_REGS, int CONSUMER_REGS, class Produce, class Consume>
__device__ __forceinline__ void persistent(const fmcu_gemm_args &p, uint32_t bars, uint32_t full_arrivals,
                                           uint32_t nb_count, Produce produce, Consume consume)
{
    const int n_tiles = *(const volatile int32_t *)p.n_tiles;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    if (tid == 0)
        fmcu_ring::init_barriers<STAGES>(bars, full_arrivals, CONSUMER_WARPS);
    __syncthreads();
    if (warp >= CONSUMER_WARPS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        produce(n_tiles, warp - CONSUMER_WARPS, lane);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    fmcu_ring::ring<STAGES> rg{0, 0};
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        fmcu_ring::item_t it;
        if (!fmcu_ring::item_of<BM>(p, item, nb_count, n_tiles, it))
            break;
        consume(rg, it, warp / 4, warp % 4, lane);
    }
}

/* f(SL) for the n8 slices (SL, 1 to 4, as std::integral_constant) that a
 * tile of `rows` pairs needs, so that each count is its own K loop. */
template <class F> __device__ __forceinline__ void by_slices(int rows, F f)
{
    switch ((rows + 7) / 8) {
    case 1:
        f(std::integral_constant<int, 1>{});
        break;
    case 2:
        f(std::integral_constant<int, 2>{});
        break;
    case 3:
        f(std::integral_constant<int, 3>{});
        break;
    default:
        f(std::integral_constant<int, 4>{});
        break;
    }
}

} // namespace fmcu_swg

#endif
