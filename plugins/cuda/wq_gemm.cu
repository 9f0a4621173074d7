/*
 * plugins/cuda/wq_gemm.cu - the grouped expert GEMM over 4-bit and int
 * weights (contract in wq_gemm.h), and the per-pair input staging.
 *
 * Algorithm. gemm.cu's tiled structure (row tiles of BM sorted pairs of one
 * expert from the plan, column tiles of 128 weight rows, 4 warps, a 3-stage
 * cp.async pipeline of 32 K columns, mma.sync m16n8k16 with f32
 * accumulation, the same epilogues), with the weights in wq_pack.h's
 * fragment order: a stage copies each weight row's 32-column chunk (16
 * bytes of 4-bit codes, 32 of int8) into shared memory, and each lane
 * reads its share of a chunk with one load and forms its B registers in
 * place:
 *
 *   int4/int8  (q - zp) as bf16/f16: exact (|q - zp| <= 255). The scale of
 *              (row, group) is not folded in (a 4-bit value times a bf16
 *              scale has up to 12 significant bits): each group's products
 *              are summed in a partial f32 accumulator, which is multiplied
 *              by the scale and added once the group ends. Groups are whole
 *              k16 steps: 32/64/128 columns, channelwise, or act-order's
 *              padded runs (kgrp).
 *   e2m1       e2m1 * block scale as bf16/f16: exact (e2m1 x e4m3 has at
 *              most 6 significant bits; e2m1 x 2^e is a power-of-two
 *              shift). NVFP4's per-expert global 1/g (and W4A4's 1/g_in)
 *              multiplies the accumulator in the epilogue.
 *
 * So the result is the reference's sum of x * dq(w) in f32 up to the
 * order of the f32 roundings (docs/CUDA.md, "4-bit and int weights").
 * BM = 16 serves decode (an expert's weights are read once per row tile:
 * one tile when it sees at most 16 rows), BM = 64 larger calls.
 *
 * The per-pair input staging before these GEMMs (act-order gathers, W4A4
 * quantization) is wq_stage.cu.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/wq_dev.cuh"
#include "plugins/cuda/wq_gemm.h"

namespace {

constexpr int BN = 128;          /* weight rows per tile */
constexpr int BKB = 64;          /* A bytes per stage (32 columns) */
constexpr int PITCH = BKB + 16;  /* A row pitch in shared memory */
constexpr int STAGES = 3;
constexpr int THREADS = 128;

using fmcu_dev::load_act;
using fmcu_dev::round_act;
using fmcu_dev::store_act2;
using fmcu_wq_dev::e2m1_value;
using fmcu_wq_dev::mma16;
using fmcu_wq_dev::pack2;

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool pred)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void tile_row(const fmcu_wq_gemm_args &p, int nb, int r, int *wrow, int *col, bool *ok)
{
    if (p.gemm1 && p.gated) {
        int b8 = r >> 3;
        int c = nb * (BN / 2) + (b8 >> 1) * 8 + (r & 7);
        *col = c;
        *ok = c < (int)p.n_out;
        *wrow = (b8 & 1) ? (int)p.n_out + c : c;
    } else {
        int c = nb * BN + r;
        *col = c;
        *ok = c < (int)p.n_out;
        *wrow = c;
    }
}

template <int BM, int FMT, bool F16>
__global__ void __launch_bounds__(THREADS) wq_gemm(const fmcu_wq_gemm_args p)
{
    constexpr bool INT = FMT != FMCU_WQ_FP4;
    constexpr int CB = FMT == FMCU_WQ_INT8 ? 32 : 16; /* weight bytes per row per stage */
    constexpr int WM = BM >= 32 ? 2 : 1;
    constexpr int WN = 4 / WM;
    constexpr int WTM = BM / WM, WTN = BN / WN;
    constexpr int MT = WTM / 16, NT = WTN / 8;
    constexpr int A_CHUNKS = BM * (BKB / 16);
    constexpr int A_PER = (A_CHUNKS + THREADS - 1) / THREADS;
    constexpr int B_PER = BN * (CB / 16) / THREADS;

    __shared__ __align__(128) uint8_t sA[STAGES][BM * PITCH];
    __shared__ __align__(128) uint8_t sB[STAGES][BN * CB];
    __shared__ int s_pair[BM];

    const int tile = blockIdx.x;
    if (tile >= *p.n_tiles)
        return;
    const int2 t = p.tiles[tile];
    const int e = t.x, pos0 = t.y;
    const int rows = min(BM, p.offsets[e + 1] - pos0);
    const int nb = blockIdx.y;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c4 = lane & 3;
    const int wm = warp / WN, wn = warp % WN;

    for (int i = tid; i < BM; i += THREADS)
        s_pair[i] = i < rows ? p.sorted[pos0 + i] : -1;
    __syncthreads();

    const int64_t kbytes = (int64_t)p.a_k * 2;
    const int nk = (int)(p.w.kp / 32);
    const uint8_t *A = (const uint8_t *)p.a;
    const size_t wrow_bytes = (size_t)nk * CB;
    const uint8_t *W = (const uint8_t *)p.w.w + (size_t)e * p.n_rows * wrow_bytes;

    const uint8_t *a_src[A_PER];
    bool a_ok[A_PER];
    int a_dst[A_PER];
#pragma unroll
    for (int i = 0; i < A_PER; i++) {
        int ch = tid + i * THREADS;
        int r = ch / (BKB / 16), part = ch % (BKB / 16);
        int pair = ch < A_CHUNKS ? s_pair[r] : -1;
        a_ok[i] = pair >= 0;
        a_src[i] = A + (a_ok[i] ? (int64_t)(pair / p.a_row_div) * p.lda * 2 : 0) + part * 16;
        a_dst[i] = ch < A_CHUNKS ? r * PITCH + part * 16 : -1;
    }
    const uint8_t *b_src[B_PER];
    bool b_ok[B_PER];
    int b_dst[B_PER];
#pragma unroll
    for (int i = 0; i < B_PER; i++) {
        int ch = tid + i * THREADS;
        int r = ch / (CB / 16), part = ch % (CB / 16);
        int wrow, col;
        bool ok;
        tile_row(p, nb, r, &wrow, &col, &ok);
        b_ok[i] = ok;
        b_src[i] = W + (ok ? (size_t)wrow * wrow_bytes : 0) + part * 16;
        b_dst[i] = r * CB + part * 16;
    }

    auto load_stage = [&](int stage, int kt) {
        int64_t kb = (int64_t)kt * BKB;
#pragma unroll
        for (int i = 0; i < A_PER; i++) {
            if (a_dst[i] < 0)
                continue;
            int64_t off = kb + (a_dst[i] % PITCH);
            bool ok = a_ok[i] && off < kbytes;
            cp_async16(&sA[stage][a_dst[i]], ok ? a_src[i] + kb : A, ok);
        }
#pragma unroll
        for (int i = 0; i < B_PER; i++)
            cp_async16(&sB[stage][b_dst[i]], b_ok[i] ? b_src[i] + (size_t)kt * CB : W, b_ok[i]);
    };

    float acc[MT][NT][4];
    float part[INT ? MT : 1][INT ? NT : 1][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[i][j][q] = 0.0f;
                if constexpr (INT)
                    part[i][j][q] = 0.0f;
            }

    /* Weight rows of this lane's B fragments (row g of each n8 block) and of
     * its accumulator columns (2 c4, 2 c4 + 1). */
    int b_wrow[NT], frag_wrow[NT], frag_col[NT];
    bool b_rok[NT], frag_ok[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        int col;
        tile_row(p, nb, wn * WTN + j * 8 + g, &b_wrow[j], &col, &b_rok[j]);
        tile_row(p, nb, wn * WTN + j * 8 + 2 * c4, &frag_wrow[j], &frag_col[j], &frag_ok[j]);
    }
    const size_t srow = (size_t)e * p.n_rows;
    const int kg16 = INT && !p.w.kgrp ? (int)(p.w.group / 16) : 1;
    auto group_of = [&](int step) -> int {
        if (p.w.kgrp)
            return p.w.kgrp[(size_t)e * (p.w.kp / 16) + step];
        return min(step / kg16, (int)p.w.groups - 1);
    };
    int cur = -1;
    float zp[INT ? NT : 1], sc[INT ? NT : 1][2];
#pragma unroll
    for (int j = 0; j < (INT ? NT : 1); j++) {
        zp[j] = 0.0f;
        sc[j][0] = sc[j][1] = 0.0f;
    }
    auto flush = [&]() {
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    acc[i][j][q] += part[i][j][q] * sc[j][q & 1];
                    part[i][j][q] = 0.0f;
                }
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nk)
            load_stage(s, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < nk; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        int next = kt + STAGES - 1;
        if (next < nk)
            load_stage(next % STAGES, next);
        cp_async_commit();

        const uint8_t *a_s = sA[kt % STAGES];
        const uint8_t *b_s = sB[kt % STAGES];
        uint32_t raw[NT][CB / 16];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const uint8_t *base = b_s + (wn * WTN + j * 8 + g) * CB + c4 * (CB / 4);
            raw[j][0] = *(const uint32_t *)base;
            if constexpr (CB == 32)
                raw[j][CB / 16 - 1] = *(const uint32_t *)(base + 4);
        }
#pragma unroll
        for (int ks = 0; ks < 2; ks++) {
            const int step = kt * 2 + ks;
            if constexpr (INT) {
                int grp = group_of(step);
                if (grp != cur) {
                    if (cur >= 0)
                        flush();
                    cur = grp;
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        zp[j] = p.w.zero && b_rok[j] ? (float)p.w.zero[(srow + b_wrow[j]) * p.w.groups + grp] : 0.0f;
#pragma unroll
                        for (int q = 0; q < 2; q++)
                            sc[j][q] = frag_ok[j] ? p.w.scale[(srow + frag_wrow[j] + q) * p.w.groups + grp] : 0.0f;
                    }
                }
            }
            uint32_t af[MT][4], bfr[NT][2];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const uint8_t *base = a_s + (wm * WTM + i * 16 + g) * PITCH + ks * 32 + c4 * 4;
                af[i][0] = *(const uint32_t *)base;
                af[i][1] = *(const uint32_t *)(base + 8 * PITCH);
                af[i][2] = *(const uint32_t *)(base + 16);
                af[i][3] = *(const uint32_t *)(base + 8 * PITCH + 16);
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                float v[4];
                if constexpr (FMT == FMCU_WQ_INT4) {
#pragma unroll
                    for (int h = 0; h < 4; h++)
                        v[h] = (float)((int)((raw[j][0] >> (4 * fmcu_wq_dev::nibble_of(4 * ks + h))) & 0xF) - 8) - zp[j];
                } else if constexpr (FMT == FMCU_WQ_INT8) {
#pragma unroll
                    for (int h = 0; h < 4; h++)
                        v[h] = (float)(int8_t)((raw[j][ks] >> (8 * h)) & 0xFF) - zp[j];
                } else {
                    const int blk = (step * 16) / (int)p.fp4_block;
                    const float s = b_rok[j] ? p.w.scale[(srow + b_wrow[j]) * p.w.groups + blk] : 0.0f;
#pragma unroll
                    for (int h = 0; h < 4; h++)
                        v[h] = e2m1_value((raw[j][0] >> (4 * fmcu_wq_dev::nibble_of(4 * ks + h))) & 0xF) * s;
                }
                bfr[j][0] = pack2<F16>(v[0], v[1]);
                bfr[j][1] = pack2<F16>(v[2], v[3]);
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if constexpr (INT)
                        mma16<F16>(part[i][j], af[i], bfr[j]);
                    else
                        mma16<F16>(acc[i][j], af[i], bfr[j]);
                }
        }
    }
    cp_async_wait<0>();
    if constexpr (INT)
        flush();

    const int32_t dt = p.act_dtype;
    const float omul = p.w.out_mul ? p.w.out_mul[e] : 1.0f;
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = wm * WTM + i * 16 + g + h * 8;
            int pair = s_pair[r];
            if (pair < 0)
                continue;
            int64_t orow = (int64_t)pair * p.ldo;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (!frag_ok[j])
                    continue;
                float v[2];
                for (int q = 0; q < 2; q++) {
                    float x = acc[i][j][h * 2 + q] * omul;
                    if (p.bias)
                        x += load_act(dt, p.bias, (int64_t)e * p.n_rows + frag_wrow[j] + q);
                    v[q] = round_act(dt, x);
                }
                if (p.gemm1 && p.gated) {
                    if (j & 1)
                        continue;
                    float u[2];
                    for (int q = 0; q < 2; q++) {
                        float x = acc[i][j + 1][h * 2 + q] * omul;
                        if (p.bias)
                            x += load_act(dt, p.bias, (int64_t)e * p.n_rows + frag_wrow[j + 1] + q);
                        u[q] = round_act(dt, x);
                    }
                    store_act2(dt, p.out, orow + frag_col[j], round_act(dt, fmcu_dev::activate(ap, v[0], u[0])),
                               round_act(dt, fmcu_dev::activate(ap, v[1], u[1])));
                } else if (p.gemm1) {
                    store_act2(dt, p.out, orow + frag_col[j], round_act(dt, fmcu_dev::activate(ap, v[0], 0.0f)),
                               round_act(dt, fmcu_dev::activate(ap, v[1], 0.0f)));
                } else {
                    store_act2(dt, p.out, orow + frag_col[j], v[0], v[1]);
                }
            }
        }
}

template <int BM, int FMT, bool F16> cudaError_t launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    unsigned cols = a.gemm1 && a.gated ? (a.n_out + BN / 2 - 1) / (BN / 2) : (a.n_out + BN - 1) / BN;
    dim3 grid((unsigned)a.grid_tiles, cols);
    wq_gemm<BM, FMT, F16><<<grid, THREADS, 0, stream>>>(a);
    return cudaGetLastError();
}

template <int FMT, bool F16> cudaError_t launch_bm(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    return a.row_tile <= 16 ? launch<16, FMT, F16>(a, stream) : launch<64, FMT, F16>(a, stream);
}

template <bool F16> cudaError_t launch_fmt(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    switch (a.format) {
    case FMCU_WQ_INT4: return launch_bm<FMCU_WQ_INT4, F16>(a, stream);
    case FMCU_WQ_INT8: return launch_bm<FMCU_WQ_INT8, F16>(a, stream);
    default: return launch_bm<FMCU_WQ_FP4, F16>(a, stream);
    }
}

} // namespace

cudaError_t fmcu_wq_gemm_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    return a.act_dtype == FMOE_DTYPE_F16 ? launch_fmt<true>(a, stream) : launch_fmt<false>(a, stream);
}
