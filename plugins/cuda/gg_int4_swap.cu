/*
 * plugins/cuda/gg_int4_swap.cu - the prefill tier's int4 g128 grouped GEMM
 * with the operands swapped (grouped_gemm.h's contract with w4 =
 * FMCU_GG_W4_INT4; fmcu_gg_int4_swap_launch). sm_90a only.
 *
 * Why. grouped_gemm_sm90.cu's int4 kind has converter warps turn each
 * stage's codes into a bf16 B operand in shared memory, which wgmma reads
 * back: about 88 KB through shared memory a 128 x 128 x 64 stage, and a
 * consumer thread's accumulator columns span 32 weight rows, so each
 * group's promotion loads 32 scales a thread after draining its wgmmas
 * (ncu, Mixtral-8x7B M = 8192 GEMM1: L1/shared 86 % busy, compute 53 %;
 * the promotion's scale loads the top stall: bench/cuda/RESULTS.md, "int4
 * g128 through a bf16 scratch"). Here a tile's 128 weight rows are wgmma's
 * M side, dequantized in registers as its A operand (wq_ring.cu's
 * fragments: a lane's 4-byte word of a 32-column chunk, wq_pack.h), and
 * its 128 expert-sorted token rows the N side, B by TMA from the gathered
 * rows: no converter warps, no second stage barrier, 2 scales a thread a
 * group, and a 128 x 128 x 128 stage moves 8 KB of codes and 32 KB of
 * tokens by TMA and reads 8 KB of codes back.
 *
 * Shape. 384 threads: a producer warp group (one thread issues TMA into a
 * ring of STAGES stages of one 128-column scale group each) and two
 * consumer warp groups of 64 weight rows (m64n128k16 RS wgmmas; half tiles,
 * an expert's last block of at most 64 rows, m64n64k16). Tiles as
 * grouped_gemm_sm90.cu's (gg_tiles.cuh) with BN = 128, in the fixed order
 * (CTA b: tiles b, b + grid, ...). A stage's eight wgmmas sum into partial
 * sums from zero, drained at the stage's end and promoted, fin += part x
 * scale (the converting kind's arithmetic in the same order: same bits
 * wherever wgmma sums a k16 step's products alike in both roles). Epilogue:
 * bf16(fin x (s_row x s_col)) (+ bias), written transposed (token rows of
 * weight columns) into a 128-byte-swizzled staging buffer a warp group and
 * sent by tensor stores; an expert's partial last block is copied out by
 * the threads (rows past its end are never written).
 */
#include "plugins/cuda/gg_tiles.cuh"
#include "plugins/cuda/grouped_gemm.h"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/tensor_map.h"
#include "plugins/cuda/wgmma_rs_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/cuda/wq_dev.cuh"

#include <cuda.h>
#include <cuda_bf16.h>

namespace {

using fmcu_async::lds32;
using fmcu_async::mbar_arrive;
using fmcu_async::mbar_expect_tx;
using fmcu_async::mbar_init;
using fmcu_async::mbar_wait;
using fmcu_async::smem_addr;
using fmcu_async::tma_load;
using fmcu_gg::find_tile;
using fmcu_gg::ring;
using fmcu_gg::tile_at;
using fmcu_wgmma::fence_regs;
using fmcu_wgmma::sw128_desc;
using fmcu_wgmma::wgmma_commit;
using fmcu_wgmma::wgmma_fence;
using fmcu_wgmma::wgmma_wait;

constexpr int TR = fmcu_gg::TILE_ROWS; /* token rows a tile: wgmma's N */
constexpr int WR = 128;                /* weight rows a tile: two warp groups of 64 */
constexpr int KS = 128;                /* K a stage: one scale group */
constexpr int CODE_ROW = KS / 2;       /* a weight row's code bytes a stage */
constexpr int TOK_BOX = TR * 128;      /* 64 bf16 columns of 128 token rows, 128-byte swizzled */
constexpr int CODE_AT = 2 * TOK_BOX;   /* a stage: two token boxes, then the codes */
constexpr int CODE_BYTES = WR * CODE_ROW;
constexpr int STAGE_BYTES = CODE_AT + CODE_BYTES; /* 40 KB */
constexpr int STAGES = 4;
constexpr int OUT_BYTES = TR * 128; /* a warp group's 64 columns of 128 token rows, bf16 */
constexpr int OUT_AT = STAGES * STAGE_BYTES;
constexpr int SMEM = OUT_AT + 2 * OUT_BYTES + 1024; /* + aligning the base for the swizzle */
static_assert(STAGE_BYTES % 1024 == 0 && SMEM <= 227 * 1024, "stages 1024-aligned, one CTA an SM");
constexpr int THREADS = 384;
constexpr int REGS_PRODUCER = 40, REGS_CONSUMER = 232;
static_assert(REGS_PRODUCER * 128 + REGS_CONSUMER * 256 <= (65536 / THREADS & ~7) * THREADS,
              "setmaxnreg's totals within the launch's allocation");

struct params {
    __nv_bfloat16 *d;
    const float *s_row, *s_col;
    const __nv_bfloat16 *bias;
    const int32_t *offsets;
    const float *gscale;
    const int8_t *zero;
    int row_vec, col_vec, halves;
    uint32_t E, N, K, groups;
};

__device__ __forceinline__ void wg_sync(int id)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* wgmma of a warp group's 64 weight rows by N token rows, one k16 step. */
template <int N> __device__ __forceinline__ void mma(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int acc)
{
    if constexpr (N == 128)
        fmcu_wgmma::wgmma_m64n128k16_bf16_rs(d, a, desc, acc);
    else
        fmcu_wgmma::wgmma_m64n64k16_bf16_rs(d, a, desc, acc);
}

/* A thread's two weight rows: the group scale and 136 + zero point (a bf16
 * pair: dq_int4's subtrahend) of group g; rows past N (their codes belong
 * to the next expert or are TMA's zeros) get scale 0 and are never stored. */
struct row_sc {
    float sc[2];
    uint32_t sub[2];
};

__device__ __forceinline__ row_sc load_group(const params &p, const int64_t (&wrow)[2], const bool (&in)[2], int g)
{
    row_sc s;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t at = wrow[h] * p.groups + g;
        s.sc[h] = in[h] ? __ldg(p.gscale + at) : 0.0f;
        const float z = 136.0f + (p.zero && in[h] ? (float)p.zero[at] : 0.0f);
        s.sub[h] = bf16x2_bits(z, z);
    }
    return s;
}

/* One stage of a consumer warp: its 16 weight rows by N token rows over
 * the stage's 128 K, eight k16 wgmmas into part (from zero), two a batch:
 * a chunk's two steps dequantized from its words (rows lo, hi) just before
 * the batch is issued, into one of two register sets in turn; each batch
 * waits for the one before it, whose set the next rewrites. Left in flight:
 * the last batch. */
template <int N>
__device__ __forceinline__ void stage_mma(float (&part)[N / 2], uint32_t st, uint32_t at_lo, uint32_t at_hi,
                                          uint32_t swz, const row_sc &s)
{
    const uint64_t d0 = sw128_desc(st), d1 = sw128_desc(st + TOK_BOX);
    uint32_t a[2][2][4];
#pragma unroll
    for (int c = 0; c < KS / 32; c++) {
        const uint32_t cw = st + CODE_AT + ((c ^ swz) << 4);
        const uint32_t lo = lds32(cw + at_lo), hi = lds32(cw + at_hi);
        uint32_t(&ac)[2][4] = a[c & 1];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int j = 2 * i;
            ac[i][0] = fmcu_wq_dev::dq_int4<false>(lo, j, s.sub[0]);
            ac[i][1] = fmcu_wq_dev::dq_int4<false>(hi, j, s.sub[1]);
            ac[i][2] = fmcu_wq_dev::dq_int4<false>(lo, j + 1, s.sub[0]);
            ac[i][3] = fmcu_wq_dev::dq_int4<false>(hi, j + 1, s.sub[1]);
        }
        wgmma_fence();
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int k = 2 * c + i; /* k16 step: token box k / 4, 32 bytes a step inside it */
            mma<N>(part, ac[i], (k < 4 ? d0 : d1) + 2 * (k % 4), k > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();
#pragma unroll
        for (int i = 0; i < 2; i++)
            fence_regs(a[(c + 1) & 1][i]);
    }
}

/* Epilogue of one warp group: its fragment rows are weight columns c0 +
 * 16 warp + lane / 4 (+8), its fragment columns token rows; each value
 * pair of a token row and two adjacent weight columns is formed across
 * lanes lane and lane ^ 4 (shuffles), stored as one bf16 pair into the
 * staging buffer (token row t at t * 128, 16-byte chunk q at (q ^ t % 8)),
 * then sent by tensor stores, or, for an expert's partial last block,
 * copied out by the threads. */
template <int N>
__device__ __forceinline__ void store_tile(const float (&fin)[N / 2], const tile_at &at, const params &p,
                                           const CUtensorMap *map_d, int w, int tw, uint32_t out)
{
    const int lane = tw % 32, g = lane / 4, c4 = lane % 4, warp = tw / 32;
    const int cl = 16 * warp + g;                   /* the thread's first column in the warp group's 64 */
    const int c0 = at.nb * WR + 64 * w, col = c0 + cl; /* and in D */
    const bool odd = g & 1;
    float sc[2] = {1.0f, 1.0f}, bs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = col + 8 * h;
        const bool in = c < (int)p.N;
        if (p.s_col)
            sc[h] = in ? p.s_col[p.col_vec ? (int64_t)at.e * p.N + c : at.e] : 0.0f;
        if (p.bias)
            bs[h] = in ? __bfloat162float(p.bias[(int64_t)at.e * p.N + c]) : 0.0f;
    }
    if (tw == 0)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); /* the last tile's stores left */
    wg_sync(1 + w);
#pragma unroll
    for (int j = 0; j < N / 8; j++) {
        const int t0 = 8 * j + 2 * c4; /* token rows t0, t0 + 1 */
        float sr[2] = {1.0f, 1.0f};
        if (p.s_row) {
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const int row = at.row0 + t0 + q;
                sr[q] = !p.row_vec ? p.s_row[0] : row < at.row_end ? p.s_row[row] : 0.0f;
            }
        }
        float x[4]; /* (t0, col), (t0 + 1, col), (t0, col + 8), (t0 + 1, col + 8) */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            x[i] = __fmul_rn(fin[4 * j + i], __fmul_rn(sr[i & 1], sc[i >> 1]));
            if (p.bias)
                x[i] = __fadd_rn(x[i], bs[i >> 1]);
        }
        /* Even g keeps token row t0 (columns g, g + 1 and g + 8, g + 9), odd g
         * row t0 + 1 (columns g - 1, g and g + 7, g + 8). */
        const float y0 = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[1], 4);
        const float y1 = __shfl_xor_sync(0xffffffffu, odd ? x[2] : x[3], 4);
        const int t = t0 + (odd ? 1 : 0), cp = cl - (odd ? 1 : 0); /* the pair's row and first column */
        const uint32_t v0 = odd ? bf16x2_bits(y0, x[1]) : bf16x2_bits(x[0], y0);
        const uint32_t v1 = odd ? bf16x2_bits(y1, x[3]) : bf16x2_bits(x[2], y1);
        const uint32_t row_at = out + t * 128, sw = t % 8;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(row_at + (((cp / 8) ^ sw) << 4) + 2 * (cp % 8)), "r"(v0)
                     : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(row_at + ((((cp + 8) / 8) ^ sw) << 4) + 2 * (cp % 8)),
                     "r"(v1)
                     : "memory");
    }
    fmcu_async::fence_async_shared();
    wg_sync(1 + w);
    const int rows = min(N, at.row_end - at.row0);
    if (rows == N) {
        if (tw == 0 && c0 < (int)p.N) {
#pragma unroll
            for (int h = 0; h < N / 64; h++)
                asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                                 (uint64_t)map_d),
                             "r"(c0), "r"(at.row0 + 64 * h), "r"(out + h * 8192)
                             : "memory");
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
        return;
    }
    for (int i = tw; i < rows * 8; i += 128) { /* 16-byte chunks of the expert's rows */
        const int r = i / 8, q = i % 8, c = c0 + 8 * q;
        if (c >= (int)p.N)
            continue;
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(out + r * 128 + ((q ^ (r % 8)) << 4)));
        *reinterpret_cast<uint4 *>(p.d + (int64_t)(at.row0 + r) * p.N + c) = v;
    }
}

/* A consumer warp group's tile: N token rows (128, or 64 for a half tile). */
template <int N>
__device__ __forceinline__ void run_tile(float (&fin)[N / 2], float (&part)[N / 2], ring &r, const tile_at &at,
                                         const params &p, const CUtensorMap *map_d, int KB, uint32_t base,
                                         uint64_t *full, uint64_t *empty, int w, int tw, uint32_t out)
{
    const int lane = tw % 32, warp = tw / 32;
    const int rl = 64 * w + 16 * warp + lane / 4; /* fragment rows rl, rl + 8 of the tile's 128 */
    const uint32_t at_lo = rl * CODE_ROW + 4 * (lane % 4), at_hi = at_lo + 8 * CODE_ROW;
    const uint32_t swz = (rl >> 1) & 3; /* TMA's 64-byte swizzle of both rows */
    int64_t wrow[2];
    bool in[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = at.nb * WR + rl + 8 * h;
        in[h] = c < (int)p.N;
        wrow[h] = (int64_t)at.e * p.N + c;
    }
#pragma unroll
    for (int i = 0; i < N / 2; i++)
        fin[i] = 0.0f;
    row_sc cur = load_group(p, wrow, in, 0);
    for (int kb = 0; kb < KB; kb++) {
        row_sc nxt = cur;
        if (kb + 1 < KB)
            nxt = load_group(p, wrow, in, kb + 1);
        mbar_wait(smem_addr(&full[r.stage]), r.phase);
        stage_mma<N>(part, base + r.stage * STAGE_BYTES, at_lo, at_hi, swz, cur);
        wgmma_wait<0>();
        fence_regs(part);
        __syncwarp();
        if (lane == 0)
            mbar_arrive(smem_addr(&empty[r.stage]));
#pragma unroll
        for (int i = 0; i < N / 2; i++)
            fin[i] = __fmaf_rn(part[i], cur.sc[(i % 4) >> 1], fin[i]);
        cur = nxt;
        r.next(STAGES);
    }
    store_tile<N>(fin, at, p, map_d, w, tw, out);
}

__global__ void __launch_bounds__(THREADS, 1)
    gg_int4_swap_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_x64,
                        const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_d,
                        const params p)
{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ int pre[FMCU_GG_MAX_EXPERTS + 1], off[FMCU_GG_MAX_EXPERTS + 1];
    const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
    const int E = (int)p.E, KB = (int)((p.K + KS - 1) / KS), nt = (int)((p.N + WR - 1) / WR);
    for (int e = threadIdx.x; e <= E; e += THREADS)
        off[e] = p.offsets[e];
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), 8); /* lane 0 of each consumer warp */
        }
        fmcu_async::mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x < 32)
        fmcu_gg::tile_prefix(pre, off, E, nt, threadIdx.x);
    __syncthreads();
    const int total = pre[E], wg = threadIdx.x / 128;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS_PRODUCER));
        if (threadIdx.x != 0)
            return;
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_x) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_x64) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_w) : "memory");
        ring r;
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            const tile_at at = find_tile(t, pre, off, E, p.halves);
            const int wrow = at.e * (int)p.N + at.nb * WR;
            const CUtensorMap *mx = at.half ? &map_x64 : &map_x;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(smem_addr(&empty[r.stage]), r.phase ^ 1);
                const uint32_t fb = smem_addr(&full[r.stage]), st = base + r.stage * STAGE_BYTES;
                mbar_expect_tx(fb, CODE_BYTES + (at.half ? TOK_BOX : 2 * TOK_BOX));
                tma_load(st + CODE_AT, &map_w, kb * CODE_ROW, wrow, fb);
                tma_load(st, mx, kb * KS, at.row0, fb);
                tma_load(st + TOK_BOX, mx, kb * KS + 64, at.row0, fb);
                r.next(STAGES);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS_CONSUMER));
    const int w = wg - 1, tw = threadIdx.x % 128;
    const uint32_t out = base + OUT_AT + w * OUT_BYTES;
    float fin[TR / 2], part[TR / 2];
    float hfin[TR / 4], hpart[TR / 4];
    ring r;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        const tile_at at = find_tile(t, pre, off, E, p.halves);
        if (!at.half)
            run_tile<TR>(fin, part, r, at, p, &map_d, KB, base, full, empty, w, tw, out);
        else
            run_tile<TR / 2>(hfin, hpart, r, at, p, &map_d, KB, base, full, empty, w, tw, out);
    }
    if (tw == 0)
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* A row-major [rows, inner] matrix of `elem`-byte elements moved in boxes
 * of box_inner x box_rows elements. */
bool encode(CUtensorMap *map, const void *base, uint64_t rows, uint64_t inner, uint32_t elem, uint32_t box_inner,
            uint32_t box_rows, CUtensorMapSwizzle swizzle)
{
    fmcu_encode_tiled_fn f = fmcu_tensor_map_encoder();
    if (!f)
        return false;
    const cuuint64_t dims[2] = {inner, rows};
    const cuuint64_t strides[1] = {inner * elem};
    const cuuint32_t box[2] = {box_inner, box_rows};
    const cuuint32_t step[2] = {1, 1};
    return f(map, elem == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, 2,
             const_cast<void *>(base), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} // namespace

cudaError_t fmcu_gg_int4_swap_launch(const fmcu_gg_args *a, int sms, cudaStream_t st)
{
    if (!a || a->w4 != FMCU_GG_W4_INT4 || !a->bf16 || !a->gscale || a->E == 0 || a->E > FMCU_GG_MAX_EXPERTS ||
        a->K == 0 || a->K % 16 || a->N == 0 || a->N % 16 || a->kp % 32 || a->kp < a->K ||
        a->groups != (a->K + KS - 1) / KS || a->rows_cap <= 0 || a->rows_cap > INT32_MAX ||
        (uint64_t)a->E * a->N > INT32_MAX || sms <= 0 || ((uintptr_t)a->a | (uintptr_t)a->b | (uintptr_t)a->d) % 16 ||
        (uintptr_t)a->bias % 2 || (a->col_vec && (uintptr_t)a->s_col % 8) || a->a_sf || a->b_sf)
        return cudaErrorInvalidValue;
    CUtensorMap map_x, map_x64, map_w, map_d;
    if (!encode(&map_x, a->a, (uint64_t)a->rows_cap, a->K, 2, 64, TR, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode(&map_x64, a->a, (uint64_t)a->rows_cap, a->K, 2, 64, TR / 2, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode(&map_w, a->b, (uint64_t)a->E * a->N, a->kp / 2, 1, CODE_ROW, WR, CU_TENSOR_MAP_SWIZZLE_64B) ||
        !encode(&map_d, a->d, (uint64_t)a->rows_cap, a->N, 2, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B))
        return cudaErrorInvalidValue;
    params p;
    p.d = a->d;
    p.s_row = a->s_row;
    p.s_col = a->s_col;
    p.bias = a->bias;
    p.offsets = a->offsets;
    p.gscale = a->gscale;
    p.zero = a->zero;
    p.row_vec = a->row_vec;
    p.col_vec = a->col_vec;
    p.halves = !a->whole_tiles;
    p.E = a->E;
    p.N = a->N;
    p.K = a->K;
    p.groups = a->groups;
    cudaError_t e = cudaFuncSetAttribute(gg_int4_swap_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    if (e != cudaSuccess)
        return e;
    /* More CTAs than tiles would only wait: at most ceil(rows / 128) + E row blocks. */
    const int64_t tiles = ((a->rows_cap + TR - 1) / TR + a->E) * (int64_t)((a->N + WR - 1) / WR);
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    gg_int4_swap_kernel<<<grid, THREADS, SMEM, st>>>(map_x, map_x64, map_w, map_d, p);
    return cudaGetLastError();
}
