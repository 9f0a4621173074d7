/*
 * plugins/cuda/pair_ring.cuh - what the swap-AB weight streams on wgmma
 * (wq_ring.cu: 4-bit weights; stream_wgmma.cu: e4m3 weights) share: the
 * ring's position, their work items (a plan tile of an expert's pairs
 * against a block of weight rows), and the pairs' rows as the wgmma's B
 * operand in shared memory. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_PAIR_RING_CUH
#define FMOE_PLUGIN_CUDA_PAIR_RING_CUH

#include <stdint.h>

#include "plugins/cuda/mbarrier.cuh"

namespace fmcu_ring {

/* The ring's position: the it-th stage a block handles (across items) is
 * in slot it % STAGES, in that slot's (it / STAGES)-th use. */
template <int STAGES> struct ring {
    uint32_t slot, phase;
    __device__ __forceinline__ void next()
    {
        if (++slot == STAGES) {
            slot = 0;
            phase ^= 1u;
        }
    }
};

/* The ring's barriers at shared address `bars`: full[STAGES] (each
 * stage's copies) then empty[STAGES] (its release), for one thread to set
 * up before the block's first sync. */
template <int STAGES>
__device__ __forceinline__ void init_barriers(uint32_t bars, uint32_t full_arrivals, uint32_t empty_arrivals)
{
    for (int s = 0; s < STAGES; s++) {
        fmcu_async::mbar_init(bars + s * 8, full_arrivals);
        fmcu_async::mbar_init(bars + (STAGES + s) * 8, empty_arrivals);
    }
    fmcu_async::mbar_init_fence();
}

/* One item: tile `tile` (expert e, its pairs pos0 .. pos0 + rows - 1)
 * against row block nb. */
struct item_t {
    int e, pos0, rows;
    uint32_t nb;
};

/* Item `item` of a persistent grid (tile item / nb_count, row block item %
 * nb_count), false past the call's tiles. Args: the GEMM's arguments (their
 * tiles and offsets), BM: the plan's row tile. */
template <int BM, class Args>
__device__ __forceinline__ bool item_of(const Args &p, uint64_t item, uint32_t nb_count, int n_tiles, item_t &it)
{
    const uint64_t tile = item / nb_count;
    if (tile >= (uint64_t)n_tiles)
        return false;
    const int2 t = p.tiles[tile];
    it.e = t.x;
    it.pos0 = t.y;
    it.rows = min(BM, p.offsets[t.x + 1] - t.y);
    it.nb = (uint32_t)(item % nb_count);
    return true;
}

/* Byte offset of 16-byte chunk q of pair row r in a stage's BM pair rows:
 * core matrices of 8 rows x 16 bytes, the 8-row groups 128 bytes apart
 * (stride offset), a row's chunks BM * 16 apart (leading offset). */
template <int BM> __device__ __forceinline__ uint32_t x_chunk(int r, int q)
{
    return (uint32_t)((q * BM + r) * 16);
}

/* The B descriptor (K-major, no swizzle) of those rows at shared address
 * `addr`; a step of 32 K bytes starts 2 BM chunks later. */
template <int BM> __device__ __forceinline__ uint64_t x_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((BM * 16) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
}

} // namespace fmcu_ring

#endif
