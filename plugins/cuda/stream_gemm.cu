/*
 * plugins/cuda/stream_gemm.cu - the weight-streaming tier of the grouped
 * expert GEMM, for calls where each expert sees few rows (decode). Same
 * contract and epilogues as gemm.cu (gemm.h); chosen by fmcu_gemm_tier.
 *
 * Why another kernel. With a handful of tokens per expert the work is
 * reading each active expert's weights once; arithmetic is free. The tiled
 * kernel of gemm.cu stages 128 weight rows per CTA through shared memory
 * with tokens on the MMA's 16-row side, which leaves too few bytes in
 * flight to cover HBM latency when only a few experts are active. Here the
 * roles are swapped (weights are the MMA's A operand, tokens its 8-column
 * B operand) and weights go straight from global memory into the fragment
 * registers, bypassing L1 and shared memory, several K chunks ahead.
 *
 * Work split. A row tile is up to 32 sorted pairs of one expert (the plan's
 * tile list with row_tile 32). A CTA owns a slab of 16 weight rows of that
 * expert -- for GEMM1 of a gated layer 8 gate rows and the 8 up rows of the
 * same outputs, so the SwiGLU-style epilogue runs from registers. With very
 * few rows per expert (split_k) its WARPS warps split K: each streams
 * batches of U 64-byte chunks (warp w takes batches w, w + WARPS, ...), then
 * the partial sums meet in shared memory in a fixed order; small CTAs in
 * large numbers (tiles x slabs) spread the bytes evenly over the SMs, which
 * is what decides the time when only a few experts are active (an SM streams
 * at about 1/132 of HBM's rate). With more rows each warp owns a slab and
 * streams all of K: every CTA re-reads its tile's token rows, and 64 rows
 * per CTA instead of 16 cut that traffic (from L2) by four.
 * blockIdx.x walks the row tiles (a host-side bound; tiles past the
 * device-side count exit), blockIdx.y the slabs.
 *
 * Latency, not bytes, decides the split-K case (decode: a CTA streams 12-46
 * KB and is gone), so the schedule keeps the dependent round trips short and
 * the CTAs many. The tile count and record are read together, and a warp's
 * first weight batch goes out as soon as the expert is known, before the
 * tile's rows and token rows are looked up. A split-K CTA holds one token
 * tile (8 columns) at a time and walks its tile's token tiles in turn,
 * streaming the slab again for each (from L2; at split-K sizes a tile rarely
 * has more than 8 rows): 80-90 registers instead of 112-146, so 5-6 CTAs fit
 * on an SM instead of 3-4 (Qwen3-30B-A3B's GEMM1 at M=1, 768 CTAs, now runs
 * in one wave). bench/cuda/RESULTS.md at 5ddad69, "Decode: the stream GEMM's split K
 * and weight loads" has the measurements.
 *
 * Fragment trick. The dot product over K does not care in which order K is
 * visited, as long as A and B agree. A thread loads 16 contiguous bytes of
 * weight rows g and g+8 (g = lane / 4) at byte offset 16 * (lane % 4) of the
 * chunk; read as 32-bit registers these are exactly the A fragments of two
 * m16n8k32 (e4m3) or m16n8k16 (bf16) MMAs over a permuted K, and the B
 * fragments are the same 16 bytes of token g's activation row. So every
 * weight byte is loaded once, with 128-bit loads, and no shuffles.
 *
 * Scales and epilogues are gemm.cu's: per-tensor / per-channel / per-token
 * scales multiply the f32 accumulator once; 128x128 block scales promote a
 * per-K-group partial sum (DeepGEMM's recipe). The rounding points are the
 * same as the tiled tier's; only the f32 summation order over K differs.
 *
 * Block scales are staged in shared memory once, while the first weight
 * batch is in flight: the tile's activation scales (rows x K groups) and
 * each slab's two weight-scale rows. Read from global memory at each
 * promotion they put a dependent L2 round trip between one weight batch and
 * the issue of the next, which is what a warp's cycle is made of here.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/gemm.h"
#include "plugins/cuda/tier.h"

namespace {

constexpr int WARPS = 4;       /* warps of a CTA, splitting K */
constexpr int U = 4;           /* 64-byte K chunks in flight per warp and batch */
constexpr int NT = 4;          /* token tiles of 8: the row tile is 32 */
constexpr int CHUNK = 64;      /* K bytes per chunk: 4 lanes x 16 bytes */

using fmcu_dev::load_stream;

/* Activations are shared by every warp of the CTA: through L1. */
__device__ __forceinline__ uint4 load_shared_use(const uint8_t *p)
{
    return __ldg((const uint4 *)p);
}

/* Weight scale of weight row r of expert e for K group kg (block scheme). */
__device__ __forceinline__ float block_w_scale(const fmcu_gemm_args &p, int e, int r, int kg, int kgroups)
{
    return p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)(r / (int)p.block_n) * kgroups + kg];
}

/* Activation scale of pair `pair` for K group kg (block scheme). */
__device__ __forceinline__ float block_a_scale(const fmcu_gemm_args &p, int pair, int kg)
{
    return p.a_scale[(int64_t)(pair / p.a_row_div) * p.a_scale_ld + kg];
}

/* Resident CTAs per SM that the split-K kernel is compiled for: 6 (80
 * registers). Block scales' partial sums took 90 registers and 5 CTAs;
 * held to 80 they spilled 12 bytes (none since the scales are staged and
 * the K groups counted along), and the sixth CTA's loads in flight were
 * worth more: 4-5 % faster at 16 and 128 tokens (bench/cuda/RESULTS.md at 7426a60,
 * "FP8 block scheme: the grid"). */
constexpr int SPLITK_CTAS = 6;

/* K groups of block scales staged in shared memory (K <= 64 x block_k:
 * 8192 at 128); groups past it are read from global memory. */
constexpr int KG_CAP = 64;

/* A CTA's staged block scales: activation scales of the tile's rows (padded
 * so that the 4 token columns of a fragment fall in different banks) and,
 * per slab, the scales of its rows r_lo and r_hi when each group of 8 lies
 * in one weight block (else w_uniform is false and they are read from
 * global memory). */
template <int SLABS> struct block_scales {
    float a[NT * 8][KG_CAP + 1];
    float w[SLABS][2][KG_CAP];
};

/* One batch: U chunks of both weight rows of this thread (zeros past K). */
template <int U>
__device__ __forceinline__ void load_batch(uint4 (&wl)[U], uint4 (&wh)[U], const uint8_t *w_lo, const uint8_t *w_hi,
                                           int kc, int nk, int64_t kbytes, int c4)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        int64_t off = (int64_t)(kc + u) * CHUNK;
        bool ok = kc + u < nk && off + c4 * 16 < kbytes;
        wl[u] = ok ? load_stream(w_lo + off) : make_uint4(0, 0, 0, 0);
        wh[u] = ok ? load_stream(w_hi + off) : make_uint4(0, 0, 0, 0);
    }
}

/* STAGED: block scales, a slab per warp, and every K group and weight
 * block staged (the launch checks: fmcu_stream_gemm_launch), so that the
 * loop holds no code for the unstaged case (437 SASS instructions in the
 * loop against 1073; Qwen3-30B-A3B M = 128 -6.6 %). Split K keeps the
 * checks at run time: there the same split cost registers (spills) and
 * 2-3 % (bench/cuda/RESULTS.md at 7426a60, "Block scales staged in shared memory by
 * the stream GEMM"). */
template <bool FP8, bool BLOCK, bool SPLITK, bool STAGED = false>
__global__ void __launch_bounds__(WARPS * 32, SPLITK ? SPLITK_CTAS : 4)
    stream_gemm(const fmcu_gemm_args p)
{
    static_assert(!STAGED || (BLOCK && !SPLITK), "staged at compile time: block scales, a slab per warp");
    constexpr int NTT = SPLITK ? 1 : NT; /* token tiles held at once */
    constexpr int SLABS = SPLITK ? 1 : WARPS;
    __shared__ float red[SPLITK ? WARPS - 1 : 1][NTT * 4][32];
    __shared__ float bs_raw[BLOCK ? sizeof(block_scales<SLABS>) / sizeof(float) : 1];
    block_scales<SLABS> &bs = *reinterpret_cast<block_scales<SLABS> *>(bs_raw);
    if (p.wait_first) {
        fmcu_dev::pdl_wait();
        fmcu_dev::pdl_trigger();
    } else {
        fmcu_dev::pdl_trigger();
        fmcu_dev::pdl_wait();
    }
    const int tile = blockIdx.x;
    /* Count and record in flight together (tile < grid_tiles: inside the list). */
    const int n_tiles = *(const volatile int32_t *)p.n_tiles;
    const int2 t = p.tiles[tile];
    if (tile >= n_tiles)
        return; /* uniform over the CTA */
    const int e = t.x, pos0 = t.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const bool gated1 = p.gemm1 && p.gated;
    /* Split K: the CTA's warps share one slab. Else each warp owns a slab
     * and the CTA's 64 rows share the token rows through L1. */
    const int slab = SPLITK ? (int)blockIdx.y : (int)blockIdx.y * WARPS + warp;
    const bool slab_ok = SPLITK || slab < (gated1 ? (int)p.n_out / 8 : (int)p.n_rows / 16);
    if (!BLOCK && !slab_ok)
        return; /* no barrier in this mode without block scales */

    /* This thread's two weight rows, and its first batch of them. */
    const int r_lo = gated1 ? slab * 8 + g : slab * 16 + g;
    const int r_hi = gated1 ? (int)p.n_out + slab * 8 + g : r_lo + 8;
    const int64_t kbytes = (int64_t)p.k * (FP8 ? 1 : 2);
    const uint8_t *W = (const uint8_t *)p.w + (size_t)e * p.n_rows * (size_t)kbytes;
    const uint8_t *w_lo = W + (int64_t)r_lo * kbytes + c4 * 16;
    const uint8_t *w_hi = W + (int64_t)r_hi * kbytes + c4 * 16;
    const int nk = (int)((kbytes + CHUNK - 1) / CHUNK);
    const int kc0 = SPLITK ? warp * U : 0;
    const int kstep = SPLITK ? WARPS * U : U;
    uint4 wl[U], wh[U];
    if (slab_ok)
        load_batch<U>(wl, wh, w_lo, w_hi, kc0, nk, kbytes, c4);

    /* The tile's rows: split K takes them 8 at a time (passes), else all
     * NT token tiles at once. */
    const int rows = min(NT * 8, p.offsets[e + 1] - pos0);
    const int passes = SPLITK ? (rows + 7) / 8 : 1;
    const int ntiles = SPLITK ? 1 : (rows + 7) / 8;
    const uint8_t *A = (const uint8_t *)p.a;
    const int32_t dt = p.act_dtype;
    const int wrow[2] = {r_lo, r_hi};
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};
    const int group_chunks = BLOCK ? (int)(p.block_k / CHUNK) : 1;
    const int kgroups = BLOCK ? (int)((p.k + p.block_k - 1) / p.block_k) : 1;
    /* Block scales: this warp's slot of staged weight scales, and whether
     * its rows r_lo (and r_hi) of all 8 lanes g share a weight block. */
    const int wslot = SPLITK ? 0 : warp;
    bool w_uniform = false;
    if constexpr (STAGED) {
        /* Thread t stages K group t % 64 of rows t / 64, t / 64 + 2, ...;
         * rows past the tile's, up to its last token tile, hold 0 (no pair). */
        static_assert(WARPS * 32 == 2 * KG_CAP, "two staged rows a pass of the CTA's threads");
        const int kg = (int)threadIdx.x % KG_CAP;
        for (int r = (int)threadIdx.x / KG_CAP; r < (rows + 7) / 8 * 8; r += 2)
            if (kg < kgroups)
                bs.a[r][kg] = r < rows ? block_a_scale(p, p.sorted[pos0 + r], kg) : 0.0f;
        if (slab_ok)
            for (int k = lane; k < kgroups; k += 32) {
                bs.w[wslot][0][k] = block_w_scale(p, e, r_lo - g, k, kgroups);
                bs.w[wslot][1][k] = block_w_scale(p, e, r_hi - g, k, kgroups);
            }
        __syncthreads();
        if (!slab_ok)
            return; /* past the barrier: none follows in this mode */
    } else if constexpr (BLOCK) {
        const int bn = (int)p.block_n, nkg = min(kgroups, KG_CAP);
        const int r0_lo = r_lo - g, r0_hi = r_hi - g; /* lane group's first rows */
        w_uniform = r0_lo / bn == (r0_lo + 7) / bn && r0_hi / bn == (r0_hi + 7) / bn;
        /* Rows past the tile's up to its last token tile hold 0 (no pair). */
        for (int i = threadIdx.x; i < (rows + 7) / 8 * 8 * nkg; i += WARPS * 32) {
            const int r = i / nkg, kg = i - r * nkg;
            bs.a[r][kg] = r < rows ? block_a_scale(p, p.sorted[pos0 + r], kg) : 0.0f;
        }
        if (slab_ok && w_uniform && (!SPLITK || warp == 0))
            for (int kg = lane; kg < nkg; kg += 32) {
                bs.w[wslot][0][kg] = block_w_scale(p, e, r0_lo, kg, kgroups);
                bs.w[wslot][1][kg] = block_w_scale(p, e, r0_hi, kg, kgroups);
            }
        __syncthreads();
        if (!slab_ok)
            return; /* past the barrier: none follows in this mode */
    }

    for (int pass = 0; pass < passes; pass++) {
        const int r0 = pass * 8; /* first row of this pass's token tiles */
        /* B operand: token g of each token tile (its activation row). */
        const uint8_t *b_src[NTT];
#pragma unroll
        for (int j = 0; j < NTT; j++) {
            int r = r0 + j * 8 + g;
            b_src[j] = nullptr;
            if (r < rows) {
                int64_t src = p.sorted[pos0 + r] / p.a_row_div;
                b_src[j] = A + src * p.lda * (FP8 ? 1 : 2) + c4 * 16;
            }
        }
        /* Accumulator columns: tokens 2*c4 and 2*c4 + 1 of each tile. */
        int c_pair[NTT][2];
#pragma unroll
        for (int j = 0; j < NTT; j++)
#pragma unroll
            for (int q = 0; q < 2; q++) {
                int r = r0 + j * 8 + 2 * c4 + q;
                c_pair[j][q] = r < rows ? p.sorted[pos0 + r] : -1;
            }
        float acc[NTT][4], part[BLOCK ? NTT : 1][4];
#pragma unroll
        for (int j = 0; j < NTT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[j][q] = 0.0f;
                if constexpr (BLOCK)
                    part[j][q] = 0.0f;
            }
        /* Block scales: promote the partial sums of K group kg into acc. */
        auto promote = [&](int kg) {
            bool staged;
            float sw_lo, sw_hi;
            if constexpr (STAGED) {
                staged = true;
                sw_lo = bs.w[wslot][0][kg];
                sw_hi = bs.w[wslot][1][kg];
            } else {
                staged = kg < KG_CAP;
                sw_lo = staged && w_uniform ? bs.w[wslot][0][kg] : block_w_scale(p, e, r_lo, kg, kgroups);
                sw_hi = staged && w_uniform ? bs.w[wslot][1][kg] : block_w_scale(p, e, r_hi, kg, kgroups);
            }
#pragma unroll
            for (int j = 0; j < NTT; j++) {
                if (j >= ntiles)
                    break;
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int pair = c_pair[j][q];
                    const float sa = staged     ? bs.a[r0 + j * 8 + 2 * c4 + q][kg]
                                     : pair < 0 ? 0.0f
                                                : block_a_scale(p, pair, kg);
                    acc[j][q] += part[j][q] * (sa * sw_lo);
                    acc[j][2 + q] += part[j][2 + q] * (sa * sw_hi);
                    part[j][q] = 0.0f;
                    part[j][2 + q] = 0.0f;
                }
            }
        };
        int kc = kc0;
        if (pass > 0) /* the slab again, for the next 8 rows */
            load_batch<U>(wl, wh, w_lo, w_hi, kc, nk, kbytes, c4);
        /* K group of chunk kc and kc's place in it, counted along (no
         * division a chunk); recomputed where split K jumps to its next batch. */
        int kg = BLOCK ? kc / group_chunks : 0, gpos = BLOCK ? kc - kg * group_chunks : 0;
        for (;;) {
            int kg_last = kg; /* the group of the batch's last chunk */
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int ck = kc + u;
                if (ck >= nk)
                    break;
                const int64_t off = (int64_t)ck * CHUNK;
                const bool in_k = off + c4 * 16 < kbytes;
                const uint32_t a0[4] = {wl[u].x, wh[u].x, wl[u].y, wh[u].y};
                const uint32_t a1[4] = {wl[u].z, wh[u].z, wl[u].w, wh[u].w};
#pragma unroll
                for (int j = 0; j < NTT; j++) {
                    if (j >= ntiles)
                        break;
                    uint4 b = b_src[j] && in_k ? load_shared_use(b_src[j] + off) : make_uint4(0, 0, 0, 0);
                    const uint32_t b0[2] = {b.x, b.y}, b1[2] = {b.z, b.w};
                    if constexpr (BLOCK) {
                        fmcu_dev::mma<FP8>(part[j], a0, b0);
                        fmcu_dev::mma<FP8>(part[j], a1, b1);
                    } else {
                        fmcu_dev::mma<FP8>(acc[j], a0, b0);
                        fmcu_dev::mma<FP8>(acc[j], a1, b1);
                    }
                }
                if constexpr (BLOCK) {
                    /* A group that ends inside the batch is promoted here;
                     * the batch's last one after the next batch is issued. */
                    kg_last = kg;
                    if (++gpos == group_chunks) {
                        if (u < U - 1 && ck < nk - 1)
                            promote(kg);
                        gpos = 0;
                        kg++;
                    }
                }
            }
            if constexpr (BLOCK) {
                /* The batch's last group (complete, cut by K, or continued by
                 * another warp's batch; none if this warp had no chunk, split
                 * K over a short K), promoted before the next batch is issued
                 * with split K and after it with a slab per warp: the other
                 * order holds the next batch's registers through the promotion
                 * and spills (split K 0 -> 24 bytes, 3-4 % slower at 16 and
                 * 128 tokens), where a slab per warp's four token tiles of
                 * promotion delay the issue more than its spills cost (2 %
                 * faster; bench/cuda/RESULTS.md at 7426a60, "Block scales staged ..."). */
                const int kc_next = kc + kstep;
                if (SPLITK && kc < nk)
                    promote(kg_last);
                if (kc_next < nk)
                    load_batch<U>(wl, wh, w_lo, w_hi, kc_next, nk, kbytes, c4);
                if (!SPLITK && kc < nk)
                    promote(kg_last);
                kc = kc_next;
                if (kc >= nk)
                    break;
                if constexpr (SPLITK) {
                    kg = kc / group_chunks;
                    gpos = kc - kg * group_chunks;
                }
            } else {
                kc += kstep;
                if (kc >= nk)
                    break;
                load_batch<U>(wl, wh, w_lo, w_hi, kc, nk, kbytes, c4);
            }
        }

        /* Split K: the warps' partial sums meet in warp 0, in warp order. */
        bool store = true;
        if constexpr (SPLITK) {
            if (warp > 0) {
#pragma unroll
                for (int q = 0; q < 4; q++)
                    red[warp - 1][q][lane] = acc[0][q];
            }
            __syncthreads();
            store = warp == 0;
            if (store) {
#pragma unroll
                for (int w = 0; w < WARPS - 1; w++)
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        acc[0][q] += red[w][q][lane];
            }
        }
        /* Epilogue: accumulator q of tile j is (row r_lo or r_hi, token 2*c4 + q % 2). */
        if (store) {
#pragma unroll
            for (int j = 0; j < NTT; j++) {
                if (j >= ntiles)
                    break;
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int pair = c_pair[j][q];
                    if (pair < 0)
                        continue;
                    float v[2];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float x = acc[j][2 * h + q];
                        if constexpr (!BLOCK) {
                            float sa = p.a_scale ? p.a_scale[(int64_t)(pair / p.a_row_div) * p.a_scale_ld] : 1.0f;
                            if (p.w_scale)
                                x *= sa * p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)wrow[h] * p.w_scale_n];
                            else
                                x *= sa;
                        }
                        if (p.bias)
                            x += fmcu_dev::load_act(dt, p.bias, (int64_t)e * p.n_rows + wrow[h]);
                        v[h] = fmcu_dev::round_act(dt, x);
                    }
                    const int64_t orow = (int64_t)pair * p.ldo;
                    if (gated1) {
                        fmcu_dev::store_act(dt, p.out, orow + slab * 8 + g,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], v[1])));
                    } else if (p.gemm1) {
                        fmcu_dev::store_act(dt, p.out, orow + r_lo,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], 0.0f)));
                        fmcu_dev::store_act(dt, p.out, orow + r_hi,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[1], 0.0f)));
                    } else {
                        fmcu_dev::store_act(dt, p.out, orow + r_lo, v[0]);
                        fmcu_dev::store_act(dt, p.out, orow + r_hi, v[1]);
                    }
                }
            }
        }
        if (SPLITK && pass + 1 < passes)
            __syncthreads(); /* warp 0 has read red before it is written again */
    }
}

template <bool FP8, bool BLOCK> cudaError_t launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    const unsigned slabs = a.gemm1 && a.gated ? a.n_out / 8 : a.n_rows / 16;
    if (a.split_k)
        return fmcu_dev::launch_overlapped(stream_gemm<FP8, BLOCK, true>, dim3((unsigned)a.grid_tiles, slabs),
                                           dim3(WARPS * 32), 0, stream, a);
    const dim3 grid((unsigned)a.grid_tiles, (slabs + WARPS - 1) / WARPS);
    if constexpr (BLOCK) {
        /* Every K group staged, and each group of 8 lanes' rows (r_lo, r_hi
         * from multiples of 8) inside one weight block. */
        const bool staged = (a.k + a.block_k - 1) / a.block_k <= (uint32_t)KG_CAP && a.block_n % 8 == 0 &&
                            (!(a.gemm1 && a.gated) || a.n_out % 8 == 0);
        if (staged)
            return fmcu_dev::launch_overlapped(stream_gemm<FP8, BLOCK, false, true>, grid, dim3(WARPS * 32), 0, stream,
                                               a);
    }
    return fmcu_dev::launch_overlapped(stream_gemm<FP8, BLOCK, false>, grid, dim3(WARPS * 32), 0, stream, a);
}

} // namespace

cudaError_t fmcu_stream_gemm_launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    if (a.row_tile != FMCU_STREAM_ROW_TILE)
        return cudaErrorInvalidValue; /* the plan must cut tiles of at most 32 rows */
    if (!a.fp8)
        return launch<false, false>(a, stream);
    return a.block_scaled ? launch<true, true>(a, stream) : launch<true, false>(a, stream);
}
