/*
 * plugins/cuda/gg_tiles.cuh - the tiles of the prefill tier's grouped GEMMs
 * (grouped_gemm_sm90.cu, gg_w4_swap.cu): a tile is (expert, 128-row
 * block of its expert-sorted rows, column block of its weight rows), and
 * a CTA finds tile t from a prefix of tile counts over the experts in
 * shared memory. Also the ring position producer and consumers each keep,
 * the producer's end of a launch in the counter order, and the two small
 * helpers both kernels' epilogues use.
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_GG_TILES_CUH
#define FMOE_PLUGIN_CUDA_GG_TILES_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "plugins/cuda/mbarrier.cuh"

namespace fmcu_gg {

constexpr int TILE_ROWS = 128; /* rows of a tile: two consumer warp groups of 64 */

/* Tile column block nb covers weight rows BN * nb .. + BN - 1 of its expert.
 * A half tile (an expert's last row block when it has at most 64 rows) is
 * 64 rows: it costs half a tile's wgmmas instead of a whole tile's, of
 * which at least half would be rows past the expert's end. */
struct tile_at {
    int e, row0, row_end, nb, half;
    int start; /* the expert's first row */
};

/* Tile t's expert (the last e with pre[e] <= t: experts without tiles
 * repeat the prefix), its first and end rows, column block and form. */
__device__ __forceinline__ tile_at find_tile(int t, const int *pre, const int *off, int E, int halves)
{
    int lo = 0, hi = E;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (pre[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    const int local = t - pre[lo];
    const int rows = off[lo + 1] - off[lo];
    const int mt = (rows + TILE_ROWS - 1) / TILE_ROWS;
    tile_at at;
    at.e = lo;
    at.row0 = off[lo] + (local % mt) * TILE_ROWS;
    at.row_end = off[lo + 1];
    at.start = off[lo];
    at.nb = local / mt;
    at.half = halves && local % mt == mt - 1 && rows - (mt - 1) * TILE_ROWS <= TILE_ROWS / 2;
    return at;
}

/* pre[e] = the tiles of experts before e, pre[E] = all, for nt column
 * blocks a row block; called by warp 0 (lane l scans a contiguous chunk
 * of experts), off[] already in shared memory. */
__device__ __forceinline__ void tile_prefix(int *pre, const int *off, int E, int nt, int lane)
{
    const int chunk = (E + 31) / 32;
    const int lo = min(E, lane * chunk), hi = min(E, lo + chunk);
    int sum = 0;
    for (int e = lo; e < hi; e++)
        sum += (off[e + 1] - off[e] + TILE_ROWS - 1) / TILE_ROWS * nt;
    int incl = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d)
            incl += v;
    }
    int run = incl - sum;
    for (int e = lo; e < hi; e++) {
        pre[e] = run;
        run += (off[e + 1] - off[e] + TILE_ROWS - 1) / TILE_ROWS * nt;
    }
    if (lane == 31)
        pre[E] = incl;
}

/* A position in a ring of stages. */
struct ring {
    int stage = 0;
    uint32_t phase = 0;
    __device__ __forceinline__ void next(int stages)
    {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1;
        }
    }
};

/* The producer's end of a launch in the counter order (tiles published in
 * tile_of with their first stage): tile -1 on the next stage, by an arrive
 * without bytes, tells the consumers there are no more; then the last CTA
 * to get here zeroes the counter (sched[2]: the next tile past the first
 * wave, CTAs done) for the next launch, every CTA having taken its last
 * tile by then. */
__device__ __forceinline__ void no_more_tiles(ring &r, uint64_t *full, uint64_t *empty, int *tile_of, int *sched)
{
    fmcu_async::mbar_wait(fmcu_async::smem_addr(&empty[r.stage]), r.phase ^ 1);
    tile_of[r.stage] = -1;
    fmcu_async::mbar_arrive(fmcu_async::smem_addr(&full[r.stage]));
    __threadfence();
    if (atomicAdd(sched + 1, 1) == (int)gridDim.x - 1) {
        atomicExch(sched, 0);
        atomicExch(sched + 1, 0);
    }
}

/* Barrier of one consumer warp group (ids 1, 2; 0 is __syncthreads). */
__device__ __forceinline__ void wg_sync(int id)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

/* Two floats rounded to bf16 (nearest even), packed low first. */
__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

} // namespace fmcu_gg

#endif
