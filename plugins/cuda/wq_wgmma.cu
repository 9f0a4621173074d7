/*
 * plugins/cuda/wq_wgmma.cu - the grouped GEMM over 4-bit weights (contract
 * in wq_gemm.h) on Hopper's wgmma, for calls where experts see more rows
 * than the stream form (wq_stream.cu) serves well: mid-size batches and
 * prefill. sm_90a only.
 *
 * Why. The tiled kernel (wq_gemm.cu) dequantizes each 64-row tile's
 * weights again and feeds mma.sync: at Qwen3-30B-A3B M = 1024 it ran 4.3x
 * slower than the bf16 path (bench/cuda/RESULTS.md at 5ddad69, "4-bit weights: first
 * correctness and timings"). Here weights are wgmma's A operand FROM
 * REGISTERS: each warp's 16 rows per k16 step are exactly mma.sync's A
 * fragment, which is what wq_pack.h's chunk order hands a lane (its own
 * 4 bytes of each 32-column chunk), so a lane dequantizes its fragment
 * and one wgmma multiplies it by 64 token rows (FMCU_WQ_WGMMA_TILE) held
 * in shared memory (the B operand, K-major, 128-byte swizzled).
 *
 * CTA. 256 threads, two CTAs an SM (one dequantizes while the other's
 * wgmmas run; int4 with group scales then spills 48 bytes, held there by
 * check_ptxas_wq_wgmma, which still beat one CTA of 128 token rows:
 * wq_pack.h), two warp groups of 64 weight rows (128 rows, or 64
 * output columns of a gated GEMM1: warp w's fragment rows g are gate rows
 * and rows g + 8 the up rows of the same 8 columns, so the activation is
 * applied in registers), one tile of BN token rows of one expert (the
 * plan's row tiles), all of K in stages of 128 columns. CTA b takes column
 * block b % blocks of tile b / blocks: the CTAs in flight together share
 * their token rows and their expert's weights through L2 (tile-major
 * order re-read every token row from DRAM once per column block: Qwen3-30B-A3B
 * int4 M = 8192 ran at 124 TFLOP/s). Every thread
 * copies its share of each stage with cp.async (weights 64 B a row, token
 * rows by index: x is not grouped by expert), STAGES - 1 stages ahead;
 * a __syncthreads per stage publishes it (after the proxy fence: wgmma
 * reads shared memory through the async proxy).
 *
 * Weights in shared memory: row r at 64 r, its 16-byte chunk j at
 * position j ^ ((r >> 1) & 3), so the 4-byte fragment reads of a warp's
 * 8 rows x 4 lanes fall in 32 distinct banks.
 *
 * Pipeline. Three stages are in flight while one is read; each warp group
 * waits for its stage's wgmmas before it dequantizes the next (a second
 * stage in flight over register A operands made ptxas serialize every
 * wgmma, C7513), so the two warp groups and the CTAs beside them keep the
 * tensor cores busy.
 *
 * Scales. int4 with group scales (groups of a multiple of 128 columns):
 * each stage's 8 wgmmas start from zero into that stage's partial sums,
 * which are added in f32 times the row's group scale once they are done
 * (promotion), as the stream and tiled kernels scale each group's partial
 * sum once; channelwise int4 accumulates all of K and scales at the end. e2m1 (MXFP4, NVFP4) is dequantized with its block
 * scale folded in, exact in bf16 (docs/CUDA.md, "4-bit and int weights"),
 * so all of K accumulates in wgmma; NVFP4's 1/global multiplies the end.
 * Served: fmcu_wq_wgmma_serves.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/wgmma_rs_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/cuda/wq_dev.cuh"
#include "plugins/cuda/wq_gemm.h"

namespace {

constexpr int THREADS = 256;
constexpr int ROWS = 128;   /* weight rows of a CTA */
constexpr int KS = 128;     /* K columns per stage */
constexpr int STAGES = 4;
constexpr int W_ROW = 64;   /* bytes of a weight row per stage (4-bit) */
constexpr int W_BYTES = ROWS * W_ROW;

template <int BN> struct tile_cfg {
    static_assert(BN == FMCU_WQ_WGMMA_TILE, "the plan's row tile (wq_pack.h)");
    /* Token rows per stage: two 128-byte swizzled halves of 64 columns. */
    static constexpr int B_HALF = BN * 128;
    static constexpr int STAGE = W_BYTES + 2 * B_HALF; /* a multiple of 1024: swizzle atoms stay aligned */
    static constexpr int SMEM = STAGES * STAGE + 1024;
};

using fmcu_wgmma::fence_regs;
using fmcu_wgmma::sw128_desc;
using fmcu_wq_dev::bits_of;
using fmcu_wq_dev::dq_fp4_bf16;
using fmcu_wq_dev::dq_int4;
using fmcu_wq_dev::scale_code;
using fmcu_async::lds32;

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* t if FIRST, else u (arrays of different sizes, so no ?:). */
template <bool FIRST, class T, class U> __device__ __forceinline__ auto &either(T &t, U &u)
{
    if constexpr (FIRST)
        return t;
    else
        return u;
}

template <int BN, bool F16>
__device__ __forceinline__ void wgmma_step(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t db, int acc)
{
    static_assert(BN == 64 || BN == 128, "no wrapper of this width");
    if constexpr (BN == 64) {
        if constexpr (F16)
            fmcu_wgmma::wgmma_m64n64k16_f16_rs(d, a, db, acc);
        else
            fmcu_wgmma::wgmma_m64n64k16_bf16_rs(d, a, db, acc);
    } else {
        if constexpr (F16)
            fmcu_wgmma::wgmma_m64n128k16_f16_rs(d, a, db, acc);
        else
            fmcu_wgmma::wgmma_m64n128k16_bf16_rs(d, a, db, acc);
    }
}

/* CTA-local weight row lr (0..127) -> the projection's row, and whether it
 * exists. Gated GEMM1: warp w = lr / 16 owns output columns c0 + 8 w ..
 * c0 + 8 w + 7, its rows 0-7 the gate rows, 8-15 the up rows. */
__device__ __forceinline__ int weight_row(const fmcu_wq_gemm_args &p, bool gated1, int cb, int lr, bool *ok)
{
    if (gated1) {
        const int col = cb * 64 + (lr >> 4) * 8 + (lr & 7);
        *ok = col < (int)p.n_out;
        return (lr & 8) ? (int)p.n_out + col : col;
    }
    const int r = cb * ROWS + lr;
    *ok = r < (int)p.n_rows;
    return r;
}

template <int FMT, bool F16, int BN, bool PROMOTE>
__global__ void __launch_bounds__(THREADS, 2) wq_wgmma(const fmcu_wq_gemm_args p)
{
    using cfg = tile_cfg<BN>;
    constexpr bool INT = FMT == FMCU_WQ_INT4;
    constexpr int NACC = BN / 2;
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();

    const bool gated1 = p.gemm1 && p.gated;
    const int blocks = gated1 ? ((int)p.n_out + 63) / 64 : ((int)p.n_rows + ROWS - 1) / ROWS;
    const int tile = (int)(blockIdx.x / (unsigned)blocks), cb = (int)(blockIdx.x % (unsigned)blocks);
    if (tile >= *(const volatile int32_t *)p.n_tiles)
        return; /* uniform over the CTA */
    const int2 t = p.tiles[tile];
    const int e = t.x, pos0 = t.y;
    const int rows = min(BN, p.offsets[e + 1] - pos0);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const uint32_t base = (fmcu_async::smem_addr(smem_raw) + 1023u) & ~1023u;

    const int64_t rowb = (int64_t)(p.w.kp / 32) * 16; /* bytes of a weight row */
    const int nks = (int)((p.w.kp + KS - 1) / KS);
    const size_t srow = (size_t)e * p.n_rows;
    const uint8_t *W = (const uint8_t *)p.w.w + srow * (size_t)rowb;

    /* This thread's cp.async pieces: weight rows lr = tid / 4 + 64 i, chunk
     * tid % 4; token rows j = tid / 16 + 16 i, 16-byte column chunk tid % 16. */
    const uint8_t *w_src[2];
    bool w_ok[2];
    uint32_t w_dst[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int lr = tid / 4 + 64 * i, j = tid % 4;
        const int r = weight_row(p, gated1, cb, lr, &w_ok[i]);
        w_src[i] = W + (int64_t)(w_ok[i] ? r : 0) * rowb + 16 * j;
        w_dst[i] = (uint32_t)(lr * W_ROW + ((j ^ ((lr >> 1) & 3)) << 4));
    }
    constexpr int BPT = BN / 16; /* token pieces per thread and stage */
    const uint8_t *b_src[BPT];
    uint32_t b_dst[BPT];
    const int bc = tid % 16; /* 16-byte chunk: columns 8 bc .. 8 bc + 7 of the stage */
#pragma unroll
    for (int i = 0; i < BPT; i++) {
        const int j = tid / 16 + 16 * i;
        b_src[i] = j < rows ? (const uint8_t *)p.a + (int64_t)(p.sorted[pos0 + j] / p.a_row_div) * p.lda * 2 +
                                  (int64_t)bc * 16
                            : nullptr;
        b_dst[i] = (uint32_t)(W_BYTES + (bc >> 3) * cfg::B_HALF + j * 128 + (((bc & 7) ^ (j & 7)) << 4));
    }
    auto load_stage = [&](int ks) {
        const uint32_t st = base + (uint32_t)((ks % STAGES) * cfg::STAGE);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const bool in = w_ok[i] && (int64_t)ks * W_ROW + 16 * (tid % 4) < rowb;
            fmcu_async::cp_async16_zfill(st + w_dst[i], in ? w_src[i] + (int64_t)ks * W_ROW : W, in);
        }
#pragma unroll
        for (int i = 0; i < BPT; i++) {
            const bool in = b_src[i] && ks * KS + bc * 8 < (int)p.a_k;
            fmcu_async::cp_async16_zfill(st + b_dst[i], in ? b_src[i] + (int64_t)ks * KS * 2 : p.a, in);
        }
    };

    /* This thread's fragment rows (CTA-local), and their projection rows. */
    const int lr_lo = warp * 16 + g, lr_hi = lr_lo + 8;
    bool ok_lo, ok_hi;
    const int r_lo = weight_row(p, gated1, cb, lr_lo, &ok_lo), r_hi = weight_row(p, gated1, cb, lr_hi, &ok_hi);
    const uint32_t wq_lo = (uint32_t)(lr_lo * W_ROW + 4 * c4), wq_hi = (uint32_t)(lr_hi * W_ROW + 4 * c4);
    const int sw_lo = (lr_lo >> 1) & 3, sw_hi = (lr_hi >> 1) & 3;
    const uint32_t groups = p.w.groups;
    const bool mx = p.fp4_block == 32;

    float acc[NACC], part[PROMOTE ? NACC : 1];
#pragma unroll
    for (int i = 0; i < NACC; i++)
        acc[i] = 0.0f;
    float s_lo = 1.0f, s_hi = 1.0f; /* channelwise int scales, applied at the end */
    uint32_t sub_lo = 0, sub_hi = 0;
    if constexpr (INT) {
        if (!PROMOTE) {
            s_lo = ok_lo ? p.w.scale[srow + r_lo] : 0.0f;
            s_hi = ok_hi ? p.w.scale[srow + r_hi] : 0.0f;
            const float zl = p.w.zero && ok_lo ? (float)p.w.zero[srow + r_lo] : 0.0f;
            const float zh = p.w.zero && ok_hi ? (float)p.w.zero[srow + r_hi] : 0.0f;
            const float cl = (F16 ? 1032.0f : 136.0f) + zl, ch = (F16 ? 1032.0f : 136.0f) + zh;
            sub_lo = F16 ? bits_of(__floats2half2_rn(cl, cl)) : bits_of(__floats2bfloat162_rn(cl, cl));
            sub_hi = F16 ? bits_of(__floats2half2_rn(ch, ch)) : bits_of(__floats2bfloat162_rn(ch, ch));
        }
    }

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nks)
            load_stage(s);
        cp_async_commit();
    }

    for (int ks = 0; ks < nks; ks++) {
        /* Per-stage scales, asked for before the wait. */
        float gs_lo = 1.0f, gs_hi = 1.0f;
        uint32_t fs[2][8]; /* e2m1: bf16x2 block scale of (row, k16 step) */
        (void)gs_lo, (void)gs_hi, (void)fs; /* each kind uses its own */
        if constexpr (INT) {
            if (PROMOTE) {
                const uint32_t grp = min((uint32_t)(ks * KS) / p.w.group, groups - 1);
                gs_lo = ok_lo ? p.w.scale[(srow + r_lo) * groups + grp] : 0.0f;
                gs_hi = ok_hi ? p.w.scale[(srow + r_hi) * groups + grp] : 0.0f;
                const float zl = p.w.zero && ok_lo ? (float)p.w.zero[(srow + r_lo) * groups + grp] : 0.0f;
                const float zh = p.w.zero && ok_hi ? (float)p.w.zero[(srow + r_hi) * groups + grp] : 0.0f;
                const float cl = (F16 ? 1032.0f : 136.0f) + zl, ch = (F16 ? 1032.0f : 136.0f) + zh;
                sub_lo = F16 ? bits_of(__floats2half2_rn(cl, cl)) : bits_of(__floats2bfloat162_rn(cl, cl));
                sub_hi = F16 ? bits_of(__floats2half2_rn(ch, ch)) : bits_of(__floats2bfloat162_rn(ch, ch));
            }
        } else {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const bool ok = h ? ok_hi : ok_lo;
                const size_t rb = (srow + (h ? r_hi : r_lo)) * groups;
#pragma unroll
                for (int st = 0; st < 8; st++) {
                    const uint32_t blk = mx ? (uint32_t)(ks * 4 + st / 2) : (uint32_t)(ks * 8 + st);
                    const float f = ok && blk < groups ? scale_code(p.w.sf8[rb + blk], mx) : 0.0f;
                    fs[h][st] = bits_of(__floats2bfloat162_rn(f, f));
                }
            }
        }

        cp_async_wait<STAGES - 2>();
        fmcu_async::fence_async_shared();
        __syncthreads(); /* stage ks is in; every thread is done with stage ks - 1 */
        if (ks + STAGES - 1 < nks)
            load_stage(ks + STAGES - 1);
        cp_async_commit();

        const uint32_t st = base + (uint32_t)((ks % STAGES) * cfg::STAGE);
        /* A fragments of the 8 k16 steps: chunk j = step / 2. */
        uint32_t a[8][4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t wl = lds32(st + wq_lo + ((j ^ sw_lo) << 4));
            const uint32_t wh = lds32(st + wq_hi + ((j ^ sw_hi) << 4));
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                const int step = 2 * j + kk;
                if constexpr (INT) {
                    a[step][0] = dq_int4<F16>(wl, 2 * kk, sub_lo);
                    a[step][1] = dq_int4<F16>(wh, 2 * kk, sub_hi);
                    a[step][2] = dq_int4<F16>(wl, 2 * kk + 1, sub_lo);
                    a[step][3] = dq_int4<F16>(wh, 2 * kk + 1, sub_hi);
                } else {
                    a[step][0] = dq_fp4_bf16(wl, 2 * kk, fs[0][step]);
                    a[step][1] = dq_fp4_bf16(wh, 2 * kk, fs[1][step]);
                    a[step][2] = dq_fp4_bf16(wl, 2 * kk + 1, fs[0][step]);
                    a[step][3] = dq_fp4_bf16(wh, 2 * kk + 1, fs[1][step]);
                }
            }
        }
        const uint32_t b0 = st + W_BYTES;
        /* The 8 wgmmas of the stage: promoted kinds into the stage's partial
         * sums (from zero), the others into acc; then wait for them (a
         * second stage in flight over register A operands made ptxas
         * serialize every wgmma, C7513). */
        auto &d = either<PROMOTE>(part, acc);
#pragma unroll
        for (int s = 0; s < 8; s++)
            fence_regs(a[s]);
        fence_regs(d);
        fmcu_wgmma::wgmma_fence();
#pragma unroll
        for (int step = 0; step < 8; step++) {
            const uint64_t db = sw128_desc(b0 + (uint32_t)((step >> 2) * cfg::B_HALF)) + 2 * (step & 3);
            wgmma_step<BN, F16>(d, a[step], db, PROMOTE ? step > 0 : (ks > 0 || step > 0));
        }
        fmcu_wgmma::wgmma_commit();
        fmcu_wgmma::wgmma_wait<0>();
        fence_regs(d);
#pragma unroll
        for (int s = 0; s < 8; s++)
            fence_regs(a[s]);
        if constexpr (PROMOTE) {
            /* Accumulator 4 i + q: row lo (q < 2) or hi. */
#pragma unroll
            for (int i = 0; i < NACC; i++)
                acc[i] += part[i] * ((i & 2) ? gs_hi : gs_lo);
        }
    }
    cp_async_wait<0>();

    /* Epilogue: accumulator 4 i + q is (row lo if q < 2 else hi, token
     * 8 i + 2 c4 + (q & 1)). */
    const float omul = p.w.out_mul ? p.w.out_mul[e] : 1.0f;
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};
#pragma unroll
    for (int i = 0; i < NACC / 4; i++)
#pragma unroll
        for (int q = 0; q < 2; q++) {
            const int r = 8 * i + 2 * c4 + q;
            if (r >= rows)
                continue;
            const int pair = p.sorted[pos0 + r];
            fmcu_wq_dev::store_rows(p, ap, e, pair, r_lo, r_hi, ok_lo, ok_hi, acc[4 * i + q] * s_lo,
                                    acc[4 * i + 2 + q] * s_hi, omul);
        }
}

template <int FMT, bool F16, int BN, bool PROMOTE> cudaError_t launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    auto k = wq_wgmma<FMT, F16, BN, PROMOTE>;
    const unsigned blocks = a.gemm1 && a.gated ? (a.n_out + 63) / 64 : (a.n_rows + ROWS - 1) / ROWS;
    const int64_t ctas = a.grid_tiles * (int64_t)blocks;
    if (ctas > INT32_MAX)
        return cudaErrorInvalidValue;
    return fmcu_dev::launch_overlapped(k, dim3((unsigned)ctas), dim3(THREADS), tile_cfg<BN>::SMEM, stream, a);
}

template <int BN> cudaError_t launch_bn(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    const bool f16 = a.act_dtype == FMOE_DTYPE_F16;
    if (a.format == FMCU_WQ_FP4)
        return launch<FMCU_WQ_FP4, false, BN, false>(a, stream);
    if (a.w.groups > 1)
        return f16 ? launch<FMCU_WQ_INT4, true, BN, true>(a, stream) : launch<FMCU_WQ_INT4, false, BN, true>(a, stream);
    return f16 ? launch<FMCU_WQ_INT4, true, BN, false>(a, stream) : launch<FMCU_WQ_INT4, false, BN, false>(a, stream);
}

template <int BN> cudaError_t prepare_bn()
{
    return fmcu_dev::allow_dynamic_smem(tile_cfg<BN>::SMEM, wq_wgmma<FMCU_WQ_FP4, false, BN, false>,
                                        wq_wgmma<FMCU_WQ_INT4, false, BN, false>, wq_wgmma<FMCU_WQ_INT4, false, BN, true>,
                                        wq_wgmma<FMCU_WQ_INT4, true, BN, false>, wq_wgmma<FMCU_WQ_INT4, true, BN, true>);
}

} // namespace

cudaError_t fmcu_wq_wgmma_prepare(void)
{
    return prepare_bn<FMCU_WQ_WGMMA_TILE>();
}

cudaError_t fmcu_wq_wgmma_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    if (a.row_tile != FMCU_WQ_WGMMA_TILE || a.a_k % 8 || (a.lda * 2) % 16 || (uintptr_t)a.a % 16 ||
        (a.format == FMCU_WQ_FP4 && a.act_dtype != FMOE_DTYPE_BF16) ||
        (a.format != FMCU_WQ_FP4 && a.format != FMCU_WQ_INT4) || a.w.perm || a.w.kgrp ||
        (a.format == FMCU_WQ_INT4 && a.w.groups > 1 && a.w.group % KS))
        return cudaErrorInvalidValue; /* fmcu_wq_wgmma_serves refuses these layers first */
    return launch_bn<FMCU_WQ_WGMMA_TILE>(a, stream);
}
