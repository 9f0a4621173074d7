/*
 * plugins/cuda/decode_tail.cu - the fused decode tail (decode_tail.h): the
 * GEMM2-input quantization, GEMM2 and the combine of a call of at most
 * FMCU_TAIL_MAX_PAIRS pairs, in one launch.
 *
 * Why. At decode sizes the chain after GEMM1 was three launches (quant,
 * GEMM2, combine), each a dependent kernel that starts only when the one
 * before has finished: GEMM2's weight reads began after GEMM1 and the quant
 * kernel had drained, and the combine waited for all of GEMM2. Qwen3-30B-A3B
 * fp8 at M=1 spent about 20 of its 34 us there for 12.6 MB of weights
 * (bench/cuda/RESULTS.md at 5ddad69, "Decode: the stream tier's kernel chain"). Here
 * GEMM2's weights do not wait: they
 * depend only on the plan's expert ids, so each CTA copies its rows into
 * shared memory as soon as it is resident -- while GEMM1 still drains,
 * since the launch is programmatic -- and only the GEMM2 input waits for
 * GEMM1. Measured (H100, graph-timed, same build; bench/cuda/RESULTS.md at 5ddad69,
 * "Decode: the fused tail"):
 * Qwen3-30B-A3B fp8 M=1 33.6 -> 32.0 us; bf16 44.7 -> 44.2 (within its spread). GEMM1's
 * six CTAs an SM leave no room for the tail's CTAs until they leave, so the
 * overlap is GEMM1's last wave only; the kernel alone (ncu) takes 15 us for
 * 12.6 MB, the separate GEMM2 11.6 us, both near 4 us of launch.
 *
 * Work split. CTA b owns output columns (W2 rows) n = 16b .. 16b + 15 of
 * every pair, so the top-k sum of a token is within the CTA: no y buffer,
 * no second pass. Its W2 rows (pairs x 16 rows x I) arrive by one bulk copy
 * each, all in flight from the CTA's start (tier.h's fmcu_tail_plan takes
 * only calls where that fits in shared memory and every CTA is resident at
 * once); rows are padded by 16 bytes so that the fragment loads below are
 * conflict-free.
 * Each CTA quantizes the pairs' GEMM1 outputs itself (P rows of I: a few
 * thousand values) exactly as quant_row does, into shared memory
 * (stage_rows.cuh).
 *
 * Arithmetic. One warp per pair (pairs w and w + 4), or with fewer than four
 * pairs the warps of a pair split K by 128-byte units and meet in shared
 * memory in warp order. The MMA is stream_gemm.cu's fragment trick (weights
 * as the 16-row A operand, the K permutation shared by A and B), with the
 * pair's input row in every one of the 8 B columns: only column 0 is used,
 * compute is free here. Scales, bias and rounding are gemm.h's GEMM2
 * epilogue; block scales promote per 128 K as stream_gemm.cu does; the
 * combine is combine_kernel's (f32, slot order, no FMA).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/decode_tail.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/stage_rows.cuh"
#include "plugins/cuda/tail_ops.cuh"

namespace {

/* Four warps. (Two warps of at most 64 registers, which fit beside
 * GEMM1's six CTAs an SM, were slower: 41.5 against 33.8 us at Qwen3 fp8
 * M=1, bench/cuda/RESULTS.md at 5ddad69, "Decode: the fused tail".) */
constexpr int THREADS = 128;
constexpr int WARPS = THREADS / 32;
constexpr int SLOTS = FMCU_TAIL_MAX_PAIRS / WARPS; /* pairs a warp may hold */
constexpr int R = FMCU_TAIL_ROWS;
constexpr int UNIT = fmcu_tail_ops::UNIT; /* K bytes a warp takes at a time */
constexpr int HOLD = 8;   /* 16-byte pieces of the GEMM2 input a thread keeps between the amax and the codes */
/* The dynamic shared memory a CTA may ask for: the plan's largest (the
 * static arrays come on top, within the SM's 227 KiB per block). */
constexpr uint32_t SMEM_LIMIT = FMCU_TAIL_SMEM_MAX;

using namespace fmcu_async;

template <bool FP8, bool BLOCK> __global__ void __launch_bounds__(THREADS) tail_kernel(const fmcu_tail_args a)
{
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ int s_e[FMCU_TAIL_MAX_PAIRS];
    __shared__ float red[WARPS][2][32];
    const int P = (int)a.pairs, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const uint32_t H = a.H, I = a.I, Ib = I * (FP8 ? 1 : 2);
    const int c0 = blockIdx.x * R, nrows = min(R, (int)H - c0);
    const uint32_t kgroups = BLOCK ? (I + a.block_k - 1) / a.block_k : 1;
    const uint32_t rowb = Ib + FMCU_TAIL_ROW_PAD; /* staged row stride */
    const fmcu_tail_layout &L = a.cfg.layout;
    const uint32_t w_sm = smem_addr(smem + L.weights), act_sm = smem_addr(smem + L.act);
    uint8_t *act = smem + L.act;
    float *a_scale = reinterpret_cast<float *>(smem + L.a_scale);
    float *ybuf = reinterpret_cast<float *>(smem + L.y);
    const uint32_t bar = smem_addr(smem + L.bar);

    /* The plan's expert ids are complete: GEMM1 waited for the plan before
     * it let this kernel launch (wait_first). */
    if (tid < P)
        s_e[tid] = a.pair_local[tid];
    if (tid == 0) {
        mbar_init(bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    /* Every valid pair's 16 rows, one bulk copy per row, in flight before
     * the wait. (16-byte cp.async copies instead: the same time.) */
    if (tid == 0) {
        int valid = 0;
        for (int p = 0; p < P; p++)
            valid += s_e[p] >= 0;
        mbar_expect_tx(bar, (uint32_t)(valid * nrows) * Ib);
    }
    if (tid < P * R) {
        const int p = tid / R, r = tid % R, e = s_e[p];
        if (e >= 0 && r < nrows)
            bulk_load(w_sm + (uint32_t)(p * R + r) * rowb, a.w2 + ((int64_t)e * H + c0 + r) * Ib, Ib, bar);
    }

    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    const fmcu_stage::rows_quant q = {a.quant, a.a_dynamic, a.a_static, a.ue8m0, a.block_k};
    const fmcu_stage::rows_in in = {a.act, a.I, a.act_dtype, a.pairs, a.I, s_e};
    const float tensor_s = fmcu_stage::stage_rows<THREADS, HOLD>(q, in, act, Ib, a_scale, kgroups,
                                                                     reinterpret_cast<uint32_t *>(smem + L.amax));
    __syncthreads();

    /* This warp's pairs (warp, warp + WARPS, ...) or, with fewer pairs
     * than warps, its pair and K share. */
    const int split = P >= WARPS ? 1 : WARPS / P;
    const int part = warp % split;
    int pair[SLOTS];
    bool on[SLOTS];
#pragma unroll
    for (int i = 0; i < SLOTS; i++) {
        pair[i] = P >= WARPS ? warp + i * WARPS : i == 0 ? warp / split : P;
        on[i] = pair[i] < P && s_e[pair[i]] >= 0;
    }
    const int rlo = c0 + g, rhi = c0 + g + 8;
    float acc[SLOTS][4] = {}, prt[BLOCK ? SLOTS : 1][4] = {};

    auto block_scale = [&](int p, int row, uint32_t kg) {
        if (row >= (int)H)
            return 0.0f;
        return a.w_scale[(int64_t)s_e[p] * a.w_scale_e + (int64_t)(row / (int)a.block_n) * kgroups + kg];
    };

    mbar_wait(bar, 0);
#pragma unroll
    for (int i = 0; i < SLOTS; i++) {
        if (!on[i])
            continue;
        const int p = pair[i];
        const uint32_t wrow = w_sm + (uint32_t)(p * R + g) * rowb;
        for (uint32_t u0 = part * UNIT; u0 < Ib; u0 += split * UNIT) {
            fmcu_tail_ops::unit_mma<FP8>(wrow, rowb, act_sm + (uint32_t)p * Ib, u0, Ib, c4,
                                         BLOCK ? prt[BLOCK ? i : 0] : acc[i]);
            if constexpr (BLOCK) { /* a 128-byte unit lies in one K group */
                const uint32_t kg = u0 / a.block_k;
                fmcu_tail_ops::promote(acc[i], prt[i], a_scale[p * kgroups + kg], block_scale(p, rlo, kg),
                                       block_scale(p, rhi, kg));
            }
        }
    }

    /* Split K: the warps of a pair meet in warp order (rows g and g + 8 of column 0). */
    if (split > 1) {
        if (part > 0) {
            red[warp][0][lane] = acc[0][0];
            red[warp][1][lane] = acc[0][2];
        }
        __syncthreads();
        if (part == 0)
            for (int w = warp + 1; w < warp + split; w++) {
                acc[0][0] += red[w][0][lane];
                acc[0][2] += red[w][1][lane];
            }
    }

    /* GEMM2 epilogue of column 0 (every column holds the same sums). */
    if (part == 0 && c4 == 0) {
#pragma unroll
        for (int i = 0; i < SLOTS; i++) {
            if (!on[i])
                continue;
            const int p = pair[i], e = s_e[p];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = h ? rhi : rlo;
                if (row >= (int)H)
                    continue;
                float x = acc[i][2 * h];
                if constexpr (!BLOCK) {
                    const float sa = a.quant == FMCU_Q_CHANNEL ? a_scale[p] : tensor_s;
                    if (a.w_scale)
                        x *= sa * a.w_scale[(int64_t)e * a.w_scale_e + (int64_t)row * a.w_scale_n];
                    else
                        x *= sa;
                }
                if (a.bias)
                    x += fmcu_dev::load_act(a.act_dtype, a.bias, (int64_t)e * H + row);
                ybuf[p * R + (row - c0)] = fmcu_dev::round_act(a.act_dtype, x);
            }
        }
    }
    __syncthreads();

    /* Combine. */
    fmcu_tail_ops::combine_rows(THREADS, P / (int)a.top_k, (int)a.top_k, nrows, s_e, ybuf,
                                [&](int p) { return a.on_input ? 1.0f : a.topk_w[p]; }, a.act_dtype, a.out, a.ldo,
                                c0);
}

template <bool FP8, bool BLOCK> cudaError_t launch(const fmcu_tail_args &a, cudaStream_t st)
{
    return fmcu_dev::launch_overlapped(tail_kernel<FP8, BLOCK>, dim3(a.cfg.ctas), dim3(THREADS),
                                       a.cfg.layout.total, st, a);
}

} // namespace

cudaError_t fmcu_tail_launch(const fmcu_tail_args &a, cudaStream_t st)
{
    /* What the kernel assumes; fmcu_tail_plan and forward.cu guarantee it. */
    if (a.pairs == 0 || a.pairs > FMCU_TAIL_MAX_PAIRS || a.top_k == 0 || a.pairs % a.top_k || a.I % 16 ||
        a.cfg.layout.total > SMEM_LIMIT ||
        (a.quant == FMCU_Q_BLOCK && (a.block_k == 0 || a.block_k % UNIT || a.block_n == 0)) ||
        ((uintptr_t)a.w2 | (uintptr_t)a.act) % 16)
        return cudaErrorInvalidValue;
    if (a.quant == FMCU_Q_NONE)
        return launch<false, false>(a, st);
    return a.quant == FMCU_Q_BLOCK ? launch<true, true>(a, st) : launch<true, false>(a, st);
}

cudaError_t fmcu_tail_prepare(void)
{
    return fmcu_dev::allow_dynamic_smem((int)SMEM_LIMIT, tail_kernel<false, false>, tail_kernel<true, false>,
                                        tail_kernel<true, true>);
}
