/*
 * plugins/cuda/gg_w4_swap.cu - the prefill tier's grouped GEMM over 4-bit
 * weights (int4 g128, MXFP4, NVFP4) with the operands swapped
 * (grouped_gemm.h's contract with w4 = FMCU_GG_W4_INT4, 32 or 16;
 * fmcu_gg_w4_swap_launch). sm_90a only.
 *
 * Why. grouped_gemm_sm90.cu's 4-bit kinds have converter warps turn each
 * stage's codes into a bf16 B operand in shared memory, which wgmma reads
 * back: about 88 KB through shared memory a 128 x 128 x 64 stage; and in
 * its int4 kind a consumer thread's accumulator columns span 32 weight
 * rows, so each group's promotion loads 32 scales a thread after draining
 * its wgmmas (ncu, Mixtral-8x7B M = 8192 GEMM1: L1/shared 86 % busy,
 * compute 53 %; the promotion's scale loads the top stall:
 * bench/cuda/RESULTS.md at 7426a60, "int4 g128 through a bf16 scratch"). Here a
 * tile's 128 weight rows are wgmma's M side, dequantized in registers as
 * its A operand (wq_ring.cu's fragments: a lane's 4-byte word of a
 * 32-column chunk, wq_pack.h), and its 128 expert-sorted token rows the N
 * side, B by TMA from the gathered rows: no converter warps, no second
 * stage barrier, 2 scales (or scale codes) a thread a stage, and a
 * 128 x 128 x 128 stage moves 8 KB of codes and 32 KB of tokens by TMA
 * and reads 8 KB of codes back.
 *
 * Shape. 384 threads: a producer warp group (one thread issues TMA into a
 * ring of STAGES stages of 128 columns) and two consumer warp groups of 64
 * weight rows (m64n128k16 RS wgmmas; an expert's last block of at most 64
 * rows m64n64k16, of at most 32 m64n32k16: tile_n). Tiles as grouped_gemm_sm90.cu's
 * (gg_tiles.cuh) with BN = 128, in the fixed order (CTA b: tiles b, b +
 * grid, ...) or the counter's (fmcu_gg_args.order). int4: a stage is one
 * scale group; its eight wgmmas sum into partial sums from zero, drained
 * at the stage's end and promoted, fin += part x scale (the converting
 * kind's arithmetic in the same order).
 * e2m1: values times their block scales are exact bf16 operands, one
 * accumulator runs over all of K; FOLD (NVFP4 always, MXFP4 where every
 * scale code is at most 128: fmcu_gg_args.mx_fold) makes each register of
 * them with one multiply of the codes' bits by a folded scale
 * (dq_e2m1_fused: about 4 instructions where dq_fp4_bf16 takes 7, which
 * at 8 such registers a k16 step of two warps an SM sub-partition is what
 * made the unfolded form slower than the converting kind), NVFP4's times
 * 2^-8, undone exactly in the epilogue. Same bits as the converting kinds
 * (grouped_gemm_check) wherever wgmma sums a k16 step's products alike in
 * both roles. Epilogue: bf16(fin x (s_row x s_col)) (+ bias), written
 * transposed (token rows of weight columns) into a 128-byte-swizzled
 * staging buffer a warp group and sent by tensor stores; an expert's
 * partial last block is copied out by the threads (rows past its end are
 * never written).
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
using fmcu_gg::bf16x2_bits;
using fmcu_gg::tile_at;
using fmcu_gg::wg_sync;
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
    const float *gscale; /* int4: [E, N, groups] */
    const int8_t *zero;  /* int4: [E, N, groups] or NULL */
    const uint8_t *sf8;  /* e2m1: block scale codes [E, N, kp / W4] */
    int row_vec, col_vec, halves;
    int sf_align; /* e2m1: every row's codes of a whole stage start sf_align-byte aligned (8, 4, 2, 1) */
    int *sched;   /* the counter order's [2] (grouped_gemm.h), or NULL: the fixed order */
    uint32_t E, N, K, groups, kp;
};

/* wgmma of a warp group's 64 weight rows by N token rows, one k16 step. */
template <int N> __device__ __forceinline__ void mma(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int acc)
{
    if constexpr (N == 128)
        fmcu_wgmma::wgmma_m64n128k16_bf16_rs(d, a, desc, acc);
    else if constexpr (N == 64)
        fmcu_wgmma::wgmma_m64n64k16_bf16_rs(d, a, desc, acc);
    else
        fmcu_wgmma::wgmma_m64n32k16_bf16_rs(d, a, desc, acc);
}

/* Token rows a tile computes: 128, or for an expert's last row block of
 * at most 64 rows (a half tile) 64, of at most 32 rows 32: at 32 rows an
 * expert (Mixtral-8x7B M = 128, DeepSeek-V3 M = 1024) the wgmmas of a
 * 64-row tile would be half rows past the expert's end. */
__device__ __forceinline__ int tile_n(const tile_at &at)
{
    if (!at.half)
        return TR;
    return at.row_end - at.row0 <= TR / 4 ? TR / 4 : TR / 2;
}

/* A thread's two weight rows (fragment rows lo, hi): where their scale
 * data starts (NULL past N: those rows' codes belong to the next expert or
 * are TMA's zeros; computed, never stored). */
struct rows_at {
    const float *gs[2];    /* int4: the rows' first group scale */
    const int8_t *zp[2];   /* int4: their first zero point, or NULL */
    const uint8_t *sf[2];  /* e2m1: their first block scale code */
};

/* A stage's scale data of the two rows as loaded: int4 the group scale's
 * bits and the zero point; e2m1 the stage's block scale codes (MXFP4 4,
 * NVFP4 8 bytes a row), 0 past the row's last block. Loaded two stages
 * before their use and converted (stage_sf) one stage before: loads and
 * conversion in one step made every stage wait for its scales' latency
 * right after issuing them, which the scales of gpt-oss-120b's NVFP4
 * GEMMs (132 MB, past L2) turned into a third of the kernel's stalls
 * (ncu: L1TEX scoreboard 34.5 % of its cycles between issues). */
struct stage_raw {
    uint32_t w[2][2];
};

/* The same converted. int4: the group scale and 136 + zero point (a bf16
 * pair: dq_int4's subtrahend); e2m1: the stage's block scales (MXFP4 4,
 * NVFP4 8) as bf16 pairs, folded or not (UE8M0 code 0 past the row's end
 * is 2^-127 times TMA's zero codes: 0). */
struct stage_sf {
    float sc[2];
    uint32_t sub[2];
    uint32_t s2[2][8]; /* e2m1: row h's block i scale as a bf16 pair (MXFP4: i < 4) */
};

template <int W4> __device__ __forceinline__ stage_raw load_raw(const params &p, const rows_at &ra, int kb)
{
    stage_raw r;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t(&w)[2] = r.w[h];
        w[0] = w[1] = 0;
        if constexpr (W4 == FMCU_GG_W4_INT4) {
            w[0] = ra.gs[h] ? __float_as_uint(__ldg(ra.gs[h] + kb)) : 0u;
            w[1] = ra.zp[h] ? (uint32_t)(int32_t)ra.zp[h][kb] : 0u;
        } else {
            constexpr int PER = KS / W4; /* codes a stage: 4 (MXFP4) or 8 (NVFP4) */
            const uint32_t b0 = (uint32_t)kb * PER, blocks = p.kp / W4;
            const uint8_t *q = ra.sf[h] ? ra.sf[h] + b0 : nullptr;
            /* In the widest loads the rows' alignment allows (gpt-oss-120b's K = 2880:
             * 180 NVFP4 codes a row, 4-byte words; 90 MXFP4 ones, 2-byte): with byte
             * loads the NVFP4 layer there took 7189 us against 6100 (M = 8192,
             * bench/cuda/RESULTS.md, "e2m1 on the swapped GEMM: scales folded"). */
            if (q && b0 + PER <= blocks && p.sf_align >= PER) {
                if constexpr (PER == 4) {
                    w[0] = __ldg(reinterpret_cast<const uint32_t *>(q));
                } else {
                    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(q));
                    w[0] = v.x;
                    w[1] = v.y;
                }
            } else if (q && b0 + PER <= blocks && p.sf_align == 4) { /* NVFP4 */
                w[0] = __ldg(reinterpret_cast<const uint32_t *>(q));
                w[1] = __ldg(reinterpret_cast<const uint32_t *>(q + 4));
            } else if (q && b0 + PER <= blocks && p.sf_align == 2) {
#pragma unroll
                for (int i = 0; i < PER / 2; i++)
                    w[i >> 1] |= (uint32_t)__ldg(reinterpret_cast<const uint16_t *>(q + 2 * i)) << (16 * (i & 1));
            } else if (q) { /* a row's last, partial stage, or odd rows */
#pragma unroll
                for (int b = 0; b < PER; b++)
                    if (b0 + b < blocks)
                        w[b >> 2] |= (uint32_t)__ldg(q + b) << (8 * (b & 3));
            }
        }
    }
    return r;
}

template <int W4, bool FOLD> __device__ __forceinline__ stage_sf convert(const stage_raw &r)
{
    stage_sf s;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if constexpr (W4 == FMCU_GG_W4_INT4) {
            s.sc[h] = __uint_as_float(r.w[h][0]);
            const float z = 136.0f + (float)(int32_t)r.w[h][1];
            s.sub[h] = bf16x2_bits(z, z);
        } else if constexpr (W4 == 16 && FOLD) { /* two codes a conversion */
#pragma unroll
            for (int q = 0; q < 4; q++)
                fmcu_wq_dev::nv_fold_s2x2(r.w[h][q >> 1] >> (16 * (q & 1)), s.s2[h][2 * q], s.s2[h][2 * q + 1]);
        } else {
#pragma unroll
            for (int i = 0; i < KS / W4; i++) {
                const uint32_t c = (r.w[h][i >> 2] >> (8 * (i & 3))) & 0xFFu;
                if constexpr (FOLD) { /* MXFP4: NVFP4's folded pairs come above */
                    s.s2[h][i] = fmcu_wq_dev::mx_fold_s2(c);
                } else {
                    const float v = fmcu_wq_dev::scale_code(c, W4 == 32);
                    s.s2[h][i] = bf16x2_bits(v, v);
                }
            }
        }
    }
    return s;
}

/* k16 steps a consumer thread dequantizes and issues together (one
 * fence, one commit group): e2m1 four; int4 one, as before batches
 * (measured: two were no faster for int4, whose drain each stage ends
 * every batch anyway). */
template <int W4> __host__ __device__ constexpr int batch_steps()
{
    return W4 == FMCU_GG_W4_INT4 ? 1 : 4;
}

/* One stage of a consumer warp: its 16 weight rows by N token rows over
 * the stage's 128 K, eight k16 wgmmas into d (from zero at the first
 * unless `add`), in batches of G = batch_steps steps. With G > 1 the
 * stage's code words (rows lo, hi; a 4-byte word a 32-column chunk) are
 * loaded at its start, all eight at once (with G = 1 each chunk's before
 * its first step); each batch's operands are dequantized into one of two
 * register sets in turn while the batch before it runs: int4 as
 * q - 8 - zp (the scale comes after, in f32), e2m1 times its block scale
 * (exact in bf16, as the converting kinds and the scratch form make them;
 * FOLD: in one multiply, NVFP4's times 2^-8). Why batches: with one wgmma
 * at a time, each step's dequantization chain (a shared load, then three
 * or four dependent operations) ran between two wgmmas of 32-64 tensor
 * cycles, and the warps stalled on those fixed-latency dependencies more
 * than on anything else (ncu, MXFP4 Qwen3-30B-A3B M = 1024 GEMM1: "wait"
 * 1.12 cycles an issued instruction, the tensor pipe 46 % busy); four
 * steps a batch took the MXFP4 layer there 3 % and Mixtral-8x7B's 4 %
 * down. A batch waits for the one before it, whose set the next rewrites
 * (no branch between them: ptxas then serializes every wgmma, C7513).
 * Left in flight: the last batch; every earlier wgmma is complete on
 * return. */
template <int W4, bool FOLD, int N>
__device__ __forceinline__ void stage_mma(float (&d)[N / 2], uint32_t st, uint32_t at_lo, uint32_t at_hi,
                                          uint32_t swz, const stage_sf &s, bool add)
{
    constexpr int G = batch_steps<W4>(), STEPS = KS / 16;
    static_assert(STEPS % (2 * G) == 0, "batches alternate their register sets within a stage");
    const uint64_t d0 = sw128_desc(st), d1 = sw128_desc(st + TOK_BOX);
    uint32_t lo[STEPS / 2], hi[STEPS / 2]; /* the stage's words: chunk c covers steps 2c, 2c + 1 */
    auto load = [&](int c) {
        const uint32_t cw = st + CODE_AT + ((c ^ swz) << 4);
        lo[c] = lds32(cw + at_lo);
        hi[c] = lds32(cw + at_hi);
    };
    if constexpr (G > 1) {
#pragma unroll
        for (int c = 0; c < STEPS / 2; c++)
            load(c);
    }
    uint32_t a[2][G][4];
    auto dequant = [&](uint32_t (&ak)[4], int k) {
        const int j = 2 * (k & 1), c = k / 2;
        if constexpr (W4 == FMCU_GG_W4_INT4) {
            ak[0] = fmcu_wq_dev::dq_int4<false>(lo[c], j, s.sub[0]);
            ak[1] = fmcu_wq_dev::dq_int4<false>(hi[c], j, s.sub[1]);
            ak[2] = fmcu_wq_dev::dq_int4<false>(lo[c], j + 1, s.sub[0]);
            ak[3] = fmcu_wq_dev::dq_int4<false>(hi[c], j + 1, s.sub[1]);
        } else {
            const int b = W4 == 16 ? k : c; /* the step's block: NVFP4 one a step, MXFP4 one a chunk */
            auto dq = [](uint32_t x, int jj, uint32_t s2) {
                return FOLD ? fmcu_wq_dev::dq_e2m1_fused(x, jj, s2) : fmcu_wq_dev::dq_fp4_bf16(x, jj, s2);
            };
            ak[0] = dq(lo[c], j, s.s2[0][b]);
            ak[1] = dq(hi[c], j, s.s2[1][b]);
            ak[2] = dq(lo[c], j + 1, s.s2[0][b]);
            ak[3] = dq(hi[c], j + 1, s.s2[1][b]);
        }
    };
#pragma unroll
    for (int b = 0; b < STEPS / G; b++) {
        uint32_t(&ab)[G][4] = a[b & 1];
#pragma unroll
        for (int i = 0; i < G; i++) {
            if (G == 1 && (b * G + i) % 2 == 0)
                load((b * G + i) / 2);
            dequant(ab[i], b * G + i);
            fence_regs(ab[i]); /* computed before the fence: ptxas serializes wgmmas whose A is defined after it */
        }
        if (b == 0)
            fence_regs(d); /* the accumulators too (grouped_gemm_sm90.cu's issue_stage) */
        wgmma_fence();
#pragma unroll
        for (int i = 0; i < G; i++) { /* k16 step k: token box k / 4, 32 bytes a step inside it */
            const int k = b * G + i;
            mma<N>(d, ab[i], (k < 4 ? d0 : d1) + 2 * (k % 4), add || k > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();
#pragma unroll
        for (int i = 0; i < G; i++)
            fence_regs(a[(b + 1) & 1][i]);
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
                                           const CUtensorMap *map_d, int w, int tw, uint32_t out, float pw)
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
        sc[h] *= pw; /* exact: a power of two */
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
    if (rows == N && N % 64 == 0) { /* whole 64-row boxes: tensor stores */
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

/* A consumer warp group's tile: N token rows (128, 64 or 32: tile_n).
 * int4: each stage's sums from zero, drained at its end, promoted into fin
 * (fin += part x scale, the converting kind's arithmetic in its order);
 * e2m1: one accumulator over all of K (the scales are in the operand),
 * each stage's slot released once the next stage's wgmmas are issued
 * (all but the last of them complete). */
template <int W4, bool FOLD, int N>
__device__ __forceinline__ void run_tile(float (&fin)[N / 2], float (&part)[N / 2], ring &r, const tile_at &at,
                                         const params &p, const CUtensorMap *map_d, int KB, uint32_t base,
                                         uint64_t *full, uint64_t *empty, int w, int tw, uint32_t out)
{
    const int lane = tw % 32, warp = tw / 32;
    const int rl = 64 * w + 16 * warp + lane / 4; /* fragment rows rl, rl + 8 of the tile's 128 */
    const uint32_t at_lo = rl * CODE_ROW + 4 * (lane % 4), at_hi = at_lo + 8 * CODE_ROW;
    const uint32_t swz = (rl >> 1) & 3; /* TMA's 64-byte swizzle of both rows */
    rows_at ra;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int c = at.nb * WR + rl + 8 * h;
        const bool in = c < (int)p.N;
        const int64_t row = (int64_t)at.e * p.N + c;
        ra.gs[h] = in && p.gscale ? p.gscale + row * p.groups : nullptr;
        ra.zp[h] = in && p.zero ? p.zero + row * p.groups : nullptr;
        ra.sf[h] = in && p.sf8 ? p.sf8 + row * (p.kp / (W4 == FMCU_GG_W4_INT4 ? 1 : W4)) : nullptr;
    }
    auto release = [&](int slot) {
        __syncwarp();
        if (lane == 0)
            mbar_arrive(smem_addr(&empty[slot]));
    };
    /* Scales two stages ahead as loaded, one ahead converted (stage_raw). */
    stage_sf cur = convert<W4, FOLD>(load_raw<W4>(p, ra, 0));
    stage_raw ahead = KB > 1 ? load_raw<W4>(p, ra, 1) : stage_raw{};
    if constexpr (W4 == FMCU_GG_W4_INT4) {
#pragma unroll
        for (int i = 0; i < N / 2; i++)
            fin[i] = 0.0f;
        for (int kb = 0; kb < KB; kb++) {
            const stage_raw later = kb + 2 < KB ? load_raw<W4>(p, ra, kb + 2) : stage_raw{};
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            stage_mma<W4, FOLD, N>(part, base + r.stage * STAGE_BYTES, at_lo, at_hi, swz, cur, false);
            wgmma_wait<0>();
            fence_regs(part);
            release(r.stage);
#pragma unroll
            for (int i = 0; i < N / 2; i++)
                fin[i] = __fmaf_rn(part[i], cur.sc[(i % 4) >> 1], fin[i]);
            cur = convert<W4, FOLD>(ahead);
            ahead = later;
            r.next(STAGES);
        }
    } else {
#pragma unroll
        for (int i = 0; i < N / 2; i++) /* defined before the first wgmma (scale-d 0 ignores them) */
            fin[i] = 0.0f;
        int prev = -1; /* the slot whose last wgmma may still run */
        for (int kb = 0; kb < KB; kb++) {
            const stage_raw later = kb + 2 < KB ? load_raw<W4>(p, ra, kb + 2) : stage_raw{};
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            stage_mma<W4, FOLD, N>(fin, base + r.stage * STAGE_BYTES, at_lo, at_hi, swz, cur, kb > 0);
            if (prev >= 0) /* the previous stage's wgmmas are complete */
                release(prev);
            prev = r.stage;
            cur = convert<W4, FOLD>(ahead);
            ahead = later;
            r.next(STAGES);
        }
        wgmma_wait<0>();
        fence_regs(fin);
        if (prev >= 0)
            release(prev);
    }
    /* NVFP4's folded operand is e2m1 x s x 2^-8 (nv_fold_s2x2): its sums times 2^8, exactly */
    store_tile<N>(fin, at, p, map_d, w, tw, out, W4 == 16 && FOLD ? 256.0f : 1.0f);
}

template <int W4, bool FOLD>
__global__ void __launch_bounds__(THREADS, 1)
    gg_w4_swap_kernel(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_x64,
                      const __grid_constant__ CUtensorMap map_x32, const __grid_constant__ CUtensorMap map_w,
                      const __grid_constant__ CUtensorMap map_d, const params p)
{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ int pre[FMCU_GG_MAX_EXPERTS + 1], off[FMCU_GG_MAX_EXPERTS + 1];
    __shared__ int tile_of[STAGES]; /* the tile whose first stage this is, or -1: no more tiles */
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
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_x32) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_w) : "memory");
        /* Tile blockIdx.x first, then t + grid (fixed order) or the next
         * untaken one from the counter, fetched as a tile's first stage goes
         * out (its latency under that stage's loads) and published to the
         * consumers with the stage (tile_of, released by the full barrier's
         * arrive), as grouped_gemm_sm90.cu's producer does. */
        ring r;
        int t = blockIdx.x;
        while (t < total) {
            const tile_at at = find_tile(t, pre, off, E, p.halves);
            const int wrow = at.e * (int)p.N + at.nb * WR;
            const int n = tile_n(at);
            const CUtensorMap *mx = n == TR ? &map_x : n == TR / 2 ? &map_x64 : &map_x32;
            int next = total;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(smem_addr(&empty[r.stage]), r.phase ^ 1);
                if (kb == 0) {
                    tile_of[r.stage] = t;
                    next = p.sched ? (int)gridDim.x + atomicAdd(p.sched, 1) : t + (int)gridDim.x;
                }
                const uint32_t fb = smem_addr(&full[r.stage]), st = base + r.stage * STAGE_BYTES;
                mbar_expect_tx(fb, CODE_BYTES + 2 * n * 128); /* two boxes of n rows' 128 bytes */
                tma_load(st + CODE_AT, &map_w, kb * CODE_ROW, wrow, fb);
                tma_load(st, mx, kb * KS, at.row0, fb);
                tma_load(st + TOK_BOX, mx, kb * KS + 64, at.row0, fb);
                r.next(STAGES);
            }
            t = next;
        }
        if (p.sched) /* the counter order's consumers wait for the end */
            fmcu_gg::no_more_tiles(r, full, empty, tile_of, p.sched);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS_CONSUMER));
    const int w = wg - 1, tw = threadIdx.x % 128;
    const uint32_t out = base + OUT_AT + w * OUT_BYTES;
    float fin[TR / 2], part[TR / 2];
    float hfin[TR / 4], hpart[TR / 4];
    float qfin[TR / 8], qpart[TR / 8];
    ring r;
    /* The fixed order's tiles are known ahead, so run_tile's first scale
     * loads go out before its first stage is waited for; the counter's
     * come with that stage (tile_of). */
    for (int t = blockIdx.x;; t += gridDim.x) {
        if (p.sched) {
            mbar_wait(smem_addr(&full[r.stage]), r.phase); /* again in run_tile: complete there */
            t = tile_of[r.stage];
            if (t < 0)
                break;
        } else if (t >= total) {
            break;
        }
        const tile_at at = find_tile(t, pre, off, E, p.halves);
        const int n = tile_n(at);
        if (n == TR)
            run_tile<W4, FOLD, TR>(fin, part, r, at, p, &map_d, KB, base, full, empty, w, tw, out);
        else if (n == TR / 2)
            run_tile<W4, FOLD, TR / 2>(hfin, hpart, r, at, p, &map_d, KB, base, full, empty, w, tw, out);
        else
            run_tile<W4, FOLD, TR / 4>(qfin, qpart, r, at, p, &map_d, KB, base, full, empty, w, tw, out);
    }
    if (tw == 0)
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* A row-major [rows, inner] matrix of `elem`-byte elements moved in boxes
 * of box_inner x box_rows elements. */
bool encode(CUtensorMap *map, const void *base, uint64_t rows, uint64_t inner, uint32_t elem, uint32_t box_inner,
            uint32_t box_rows, CUtensorMapSwizzle swizzle)
{
    return fmcu_tensor_map_2d(map, elem == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, base,
                              rows, inner, elem, box_inner, box_rows, swizzle);
}

template <int W4, bool FOLD> cudaError_t launch(const fmcu_gg_args *a, int sms, cudaStream_t st)
{
    CUtensorMap map_x, map_x64, map_x32, map_w, map_d;
    if (!encode(&map_x, a->a, (uint64_t)a->rows_cap, a->K, 2, 64, TR, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode(&map_x64, a->a, (uint64_t)a->rows_cap, a->K, 2, 64, TR / 2, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode(&map_x32, a->a, (uint64_t)a->rows_cap, a->K, 2, 64, TR / 4, CU_TENSOR_MAP_SWIZZLE_128B) ||
        !encode(&map_w, a->b, (uint64_t)a->E * a->N, a->kp / 2, 1, CODE_ROW, WR, CU_TENSOR_MAP_SWIZZLE_64B) ||
        !encode(&map_d, a->d, (uint64_t)a->rows_cap, a->N, 2, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B))
        return cudaErrorInvalidValue;
    params p;
    p.d = a->d;
    p.s_row = a->s_row;
    p.s_col = a->s_col;
    p.bias = a->bias;
    p.offsets = a->offsets;
    p.gscale = W4 == FMCU_GG_W4_INT4 ? a->gscale : nullptr;
    p.zero = W4 == FMCU_GG_W4_INT4 ? a->zero : nullptr;
    p.sf8 = W4 == FMCU_GG_W4_INT4 ? nullptr : a->sf8;
    p.row_vec = a->row_vec;
    p.col_vec = a->col_vec;
    p.halves = !a->whole_tiles;
    /* AUTO is the counter: its order was 1-4 % faster at M = 1024 (H200,
     * Qwen3-30B-A3B and Mixtral-8x7B, all three formats; bench/cuda/RESULTS.md,
     * "The swapped 4-bit GEMM's tile order"), tiles of 32, 64 and 128 token
     * rows differing in cost as half tiles do in the fp8 GEMM1. */
    p.sched = a->order == FMCU_GG_ORDER_FIXED ? nullptr : a->sched;
    /* A stage's codes of a row start at row * (kp / W4) + kb * KS / W4 bytes
     * from sf8: aligned to the largest power of two (up to the stage's) that
     * divides the row stride, the stage's codes and the array's address. */
    p.sf_align = 1;
    if (W4 != FMCU_GG_W4_INT4) {
        const uintptr_t m = (uintptr_t)(a->kp / W4) | (uintptr_t)(KS / W4) | (uintptr_t)a->sf8;
        p.sf_align = (int)(m & (~m + 1)); /* the lowest set bit: at most KS / W4 */
    }
    p.E = a->E;
    p.N = a->N;
    p.K = a->K;
    p.groups = a->groups;
    p.kp = a->kp;
    auto kernel = gg_w4_swap_kernel<W4, FOLD>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    if (e != cudaSuccess)
        return e;
    /* More CTAs than tiles would only wait: at most ceil(rows / 128) + E row blocks. */
    const int64_t tiles = ((a->rows_cap + TR - 1) / TR + a->E) * (int64_t)((a->N + WR - 1) / WR);
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    kernel<<<grid, THREADS, SMEM, st>>>(map_x, map_x64, map_x32, map_w, map_d, p);
    return cudaGetLastError();
}

} // namespace

cudaError_t fmcu_gg_w4_swap_launch(const fmcu_gg_args *a, int sms, cudaStream_t st)
{
    if (!a || !a->bf16 || a->E == 0 || a->E > FMCU_GG_MAX_EXPERTS || a->K == 0 || a->K % 16 || a->N == 0 || a->N % 16 ||
        a->kp % 32 || a->kp < a->K || a->rows_cap <= 0 || a->rows_cap > INT32_MAX ||
        (uint64_t)a->E * a->N > INT32_MAX || sms <= 0 || ((uintptr_t)a->a | (uintptr_t)a->b | (uintptr_t)a->d) % 16 ||
        (uintptr_t)a->bias % 2 || (a->col_vec && (uintptr_t)a->s_col % 8) || a->a_sf || a->b_sf ||
        a->order < FMCU_GG_ORDER_AUTO || a->order > FMCU_GG_ORDER_COUNTER ||
        (a->order != FMCU_GG_ORDER_FIXED && (!a->sched || (uintptr_t)a->sched % 4)))
        return cudaErrorInvalidValue;
    switch (a->w4) {
    case FMCU_GG_W4_INT4:
        if (!a->gscale || a->groups != (a->K + KS - 1) / KS)
            return cudaErrorInvalidValue;
        return launch<FMCU_GG_W4_INT4, false>(a, sms, st);
    case 16:
    case 32:
        if (!a->sf8)
            return cudaErrorInvalidValue;
        if (a->w4 == 16)
            return launch<16, true>(a, sms, st);
        return a->mx_fold ? launch<32, true>(a, sms, st) : launch<32, false>(a, sms, st);
    default: return cudaErrorInvalidValue;
    }
}
