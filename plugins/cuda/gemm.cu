/*
 * plugins/cuda/gemm.cu - the grouped expert GEMM with fused epilogues
 * (contract in gemm.h).
 *
 * Algorithm. The pairs (token, slot) of a call are sorted by local expert
 * (plan.cu); a row tile is BM consecutive sorted pairs of one expert
 * (16, 32 or 64 rows: small for decode, large for prefill) and a column
 * tile is 128 rows of that expert's weight matrix. blockIdx.x walks the
 * row tiles (a bound computed on the host; tiles past the device-side count
 * exit at once, so the launch never depends on device data), blockIdx.y
 * the column tiles.
 *
 * Main loop: 4 warps, a 3-stage cp.async pipeline of 64-byte K slices
 * (32 bf16 or 64 fp8 values per row), rows padded to 80 bytes so that the
 * fragment loads hit 32 distinct banks. Tensor cores through mma.sync:
 * m16n8k16 bf16 or m16n8k32 e4m3 (both fp32 accumulation), with identical
 * fragment layouts when counted in 32-bit words, so one body serves both.
 * Warp tiles: BM=64 2x2 warps of 32x64, BM=32 2x2 of 16x64, BM=16 1x4 of 16x32.
 *
 * Scales. Per-tensor and per-channel/per-token scales multiply the fp32
 * accumulator once, in the epilogue. 128x128-block scales (DeepGEMM's
 * recipe) need a second accumulator: each K group of block_k values is
 * accumulated alone and then added with a_scale[row, g] * w_scale[n/bn, g].
 *
 * Epilogues. GEMM1 interleaves gate and up rows in 8-row groups of the
 * column tile, so that a thread holds gate and up of the same output
 * column in the same registers: h = round(C + bias), a = round(act(h)) is
 * computed straight from registers (SwiGLU and the other activations,
 * evaluated in double and rounded as core/activation.c does) and only the
 * activation is written. GEMM2 writes y = round(C + b2) per pair; the
 * weighted top-k combine reads it (combine.cu), in slot order, so the sum
 * is deterministic.
 *
 * This is the simple, correct tier (mma.sync, not wgmma/TMA); see
 * docs/CUDA.md for where the Hopper-specific path goes.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/gemm.h"

namespace {

constexpr int BN = 128;            /* weight rows per tile */
constexpr int BKB = 64;            /* K bytes per stage */
constexpr int PITCH = BKB + 16;    /* shared-memory row pitch (bytes) */
constexpr int STAGES = 3;
constexpr int THREADS = 128;

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

using fmcu_dev::load_act;
using fmcu_dev::mma;
using fmcu_dev::round_act;
using fmcu_dev::store_act2;

__device__ __forceinline__ float activate(const fmcu_gemm_args &p, float g, float u)
{
    return fmcu_dev::activate({p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit}, g, u);
}

/* Weight row and output column of row r of the column tile `nb`. */
__device__ __forceinline__ void tile_row(const fmcu_gemm_args &p, int nb, int r, int *wrow, int *col, bool *ok)
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

template <int BM, bool FP8, bool BLOCK>
__global__ void __launch_bounds__(THREADS) moe_gemm(const fmcu_gemm_args p)
{
    constexpr int WM = BM >= 32 ? 2 : 1;
    constexpr int WN = 4 / WM;
    constexpr int WTM = BM / WM, WTN = BN / WN;
    constexpr int MT = WTM / 16, NT = WTN / 8;
    constexpr int A_CHUNKS = BM * (BKB / 16);
    constexpr int A_PER = (A_CHUNKS + THREADS - 1) / THREADS;
    constexpr int B_PER = BN * (BKB / 16) / THREADS;

    __shared__ __align__(128) uint8_t sA[STAGES][BM * PITCH];
    __shared__ __align__(128) uint8_t sB[STAGES][BN * PITCH];
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

    const int esize = FP8 ? 1 : 2;
    const int64_t kbytes = (int64_t)p.k * esize;
    const int nk = (int)((kbytes + BKB - 1) / BKB);
    const uint8_t *A = (const uint8_t *)p.a;
    const uint8_t *W = (const uint8_t *)p.w + (size_t)e * p.n_rows * (size_t)kbytes;

    /* Source rows of this thread's copy chunks. */
    const uint8_t *a_src[A_PER];
    bool a_ok[A_PER];
    int a_dst[A_PER];
#pragma unroll
    for (int i = 0; i < A_PER; i++) {
        int ch = tid + i * THREADS;
        int r = ch / (BKB / 16), part = ch % (BKB / 16);
        int pair = ch < A_CHUNKS ? s_pair[r] : -1;
        a_ok[i] = pair >= 0;
        a_src[i] = A + (a_ok[i] ? (int64_t)(pair / p.a_row_div) * p.lda * esize : 0) + part * 16;
        a_dst[i] = ch < A_CHUNKS ? r * PITCH + part * 16 : -1;
    }
    const uint8_t *b_src[B_PER];
    bool b_ok[B_PER];
    int b_dst[B_PER];
#pragma unroll
    for (int i = 0; i < B_PER; i++) {
        int ch = tid + i * THREADS;
        int r = ch / (BKB / 16), part = ch % (BKB / 16);
        int wrow, col;
        bool ok;
        tile_row(p, nb, r, &wrow, &col, &ok);
        b_ok[i] = ok;
        b_src[i] = W + (ok ? (int64_t)wrow * kbytes : 0) + part * 16;
        b_dst[i] = r * PITCH + part * 16;
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
        for (int i = 0; i < B_PER; i++) {
            int64_t off = kb + (b_dst[i] % PITCH);
            bool ok = b_ok[i] && off < kbytes;
            cp_async16(&sB[stage][b_dst[i]], ok ? b_src[i] + kb : W, ok);
        }
    };

    float acc[MT][NT][4];
    float part[BLOCK ? MT : 1][BLOCK ? NT : 1][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[i][j][q] = 0.0f;
                if constexpr (BLOCK)
                    part[i][j][q] = 0.0f;
            }

    /* Rows (source index for scales) and weight rows of this thread's fragments. */
    int frag_src[MT][2];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int pair = s_pair[wm * WTM + i * 16 + g + h * 8];
            frag_src[i][h] = pair < 0 ? -1 : pair / p.a_row_div;
        }
    int frag_wrow[NT], frag_col[NT];
    bool frag_ok[NT];
#pragma unroll
    for (int j = 0; j < NT; j++)
        tile_row(p, nb, wn * WTN + j * 8 + 2 * c4, &frag_wrow[j], &frag_col[j], &frag_ok[j]);

    const int group_stages = BLOCK ? (int)(p.block_k / BKB) : 1;
    const int kgroups = BLOCK ? (int)((p.k + p.block_k - 1) / p.block_k) : 1;

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
#pragma unroll
        for (int ks = 0; ks < BKB / 32; ks++) {
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
                const uint8_t *base = b_s + (wn * WTN + j * 8 + g) * PITCH + ks * 32 + c4 * 4;
                bfr[j][0] = *(const uint32_t *)base;
                bfr[j][1] = *(const uint32_t *)(base + 16);
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if constexpr (BLOCK)
                        mma<FP8>(part[i][j], af[i], bfr[j]);
                    else
                        mma<FP8>(acc[i][j], af[i], bfr[j]);
                }
        }

        if constexpr (BLOCK) {
            if ((kt + 1) % group_stages == 0 || kt == nk - 1) {
                int kg = kt / group_stages;
                float sa[MT][2];
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        sa[i][h] = frag_src[i][h] < 0 ? 0.0f : p.a_scale[(int64_t)frag_src[i][h] * p.a_scale_ld + kg];
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    float sw = frag_ok[j] ? p.w_scale[(int64_t)e * p.w_scale_e +
                                                      (int64_t)(frag_wrow[j] / (int)p.block_n) * kgroups + kg]
                                          : 0.0f;
#pragma unroll
                    for (int i = 0; i < MT; i++)
#pragma unroll
                        for (int q = 0; q < 4; q++) {
                            acc[i][j][q] += part[i][j][q] * (sa[i][q >> 1] * sw);
                            part[i][j][q] = 0.0f;
                        }
                }
            }
        }
    }
    cp_async_wait<0>();

    /* Epilogue, straight from registers. */
    const int32_t dt = p.act_dtype;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = wm * WTM + i * 16 + g + h * 8;
            int pair = s_pair[r];
            if (pair < 0)
                continue;
            float sa = 1.0f;
            if (!BLOCK && p.a_scale)
                sa = p.a_scale[(int64_t)frag_src[i][h] * p.a_scale_ld];
            void *orow_base = p.out;
            int64_t orow = (int64_t)pair * p.ldo;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (!frag_ok[j])
                    continue;
                float v[2];
                for (int q = 0; q < 2; q++) {
                    float x = acc[i][j][h * 2 + q];
                    if (!BLOCK && p.w_scale)
                        x *= sa * p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)(frag_wrow[j] + q) * p.w_scale_n];
                    else if (!BLOCK)
                        x *= sa;
                    if (p.bias)
                        x += load_act(dt, p.bias, (int64_t)e * p.n_rows + frag_wrow[j] + q);
                    v[q] = round_act(dt, x);
                }
                if (p.gemm1 && p.gated) {
                    /* Even n8 blocks are gates; the odd one after holds the ups. */
                    if (j & 1)
                        continue;
                    float u[2];
                    for (int q = 0; q < 2; q++) {
                        float x = acc[i][j + 1][h * 2 + q];
                        if (!BLOCK && p.w_scale)
                            x *= sa * p.w_scale[(int64_t)e * p.w_scale_e + (int64_t)(frag_wrow[j + 1] + q) * p.w_scale_n];
                        else if (!BLOCK)
                            x *= sa;
                        if (p.bias)
                            x += load_act(dt, p.bias, (int64_t)e * p.n_rows + frag_wrow[j + 1] + q);
                        u[q] = round_act(dt, x);
                    }
                    store_act2(dt, orow_base, orow + frag_col[j], round_act(dt, activate(p, v[0], u[0])),
                               round_act(dt, activate(p, v[1], u[1])));
                } else if (p.gemm1) {
                    store_act2(dt, orow_base, orow + frag_col[j], round_act(dt, activate(p, v[0], 0.0f)),
                               round_act(dt, activate(p, v[1], 0.0f)));
                } else {
                    store_act2(dt, orow_base, orow + frag_col[j], v[0], v[1]);
                }
            }
        }
}

template <int BM, bool FP8, bool BLOCK> cudaError_t launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    unsigned cols = a.gemm1 && a.gated ? (a.n_out + BN / 2 - 1) / (BN / 2) : (a.n_out + BN - 1) / BN;
    dim3 grid((unsigned)a.grid_tiles, cols);
    moe_gemm<BM, FP8, BLOCK><<<grid, THREADS, 0, stream>>>(a);
    return cudaGetLastError();
}

template <bool FP8, bool BLOCK> cudaError_t launch_bm(const fmcu_gemm_args &a, cudaStream_t stream)
{
    switch (a.row_tile) {
    case 16: return launch<16, FP8, BLOCK>(a, stream);
    case 32: return launch<32, FP8, BLOCK>(a, stream);
    default: return launch<64, FP8, BLOCK>(a, stream);
    }
}

} // namespace

cudaError_t fmcu_gemm_launch(const fmcu_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    if (!a.fp8)
        return launch_bm<false, false>(a, stream);
    return a.block_scaled ? launch_bm<true, true>(a, stream) : launch_bm<true, false>(a, stream);
}

cudaError_t fmcu_gemm_prepare(void)
{
    /* Every instantiation fits the static 48 KiB of shared memory. */
    return cudaSuccess;
}
