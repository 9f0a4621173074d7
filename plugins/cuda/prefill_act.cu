/*
 * plugins/cuda/prefill_act.cu - the prefill tier's activation stage
 * (prefill_act.h): GEMM1's bf16 output h -> a = round(act(gate, up)) -> the
 * GEMM2 input; the exact amax of a dynamic per-tensor GEMM2 input scale.
 *
 * act_kernel is the largest of the tier's separate passes (Qwen3-30B-A3B
 * fp8 at M=8192: 172 of 1090 µs against ~84 µs of memory traffic), and it
 * was bound by instruction issue, not memory: 76 instructions per (gate,
 * up) pair for fp8 channel, 53 for bf16 (bench/cuda/RESULTS.md at 5ddad69, "Prefill:
 * the activation and plan kernels"). So
 * values stay packed as bf16 pairs in 32-bit words from load to store:
 * one shift or mask unpacks a value, one cvt.rn.bf16x2 rounds and packs
 * two, max.bf16x2 takes two at a time into the amax, cvt e4m3x2 converts
 * two; the SiLU form is chosen at compile time (no clamps without a
 * limit), its acceptance test is two multiply-adds (rounds_as_double), and
 * the double fallback is one out-of-line call. A thread loads all of its
 * chunks of a row before computing any (fmcu_act_shape), and a per-token row
 * waits for its amax in registers unless it is longer than 4096 columns
 * (up to 1024 columns a warp takes the row: act_token_warp_kernel).
 * The output bits are those of the float version (same hashes;
 * bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and plan kernels").
 */
#include "plugins/cuda/prefill_act.h"
#include "plugins/cuda/launch_shape.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>

#include <algorithm>

#include "plugins/cuda/nvfp4_quant.cuh" /* NVFP4 W4A4's GEMM2 input */

namespace fmcu_pf {

/* ------------------------------------------------------------------------ */
/* bf16 pairs in 32-bit words (value 2q in the low half of word q)           */
/* ------------------------------------------------------------------------ */

__device__ __forceinline__ float bf16_lo(uint32_t w)
{
    return __uint_as_float(w << 16);
}

__device__ __forceinline__ float bf16_hi(uint32_t w)
{
    return __uint_as_float(w & 0xFFFF0000u);
}

/* Round two values to bf16 (nearest even) and pack them: one cvt. */
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* max(m, |lo|, |hi|) per half; a NaN never wins (max.bf16x2 returns the
 * other operand), as amax_step. */
__device__ __forceinline__ uint32_t amax_bf16x2(uint32_t m, uint32_t w)
{
    __nv_bfloat162 a, b;
    *reinterpret_cast<uint32_t *>(&a) = m;
    *reinterpret_cast<uint32_t *>(&b) = w & 0x7FFF7FFFu;
    const __nv_bfloat162 r = __hmax2(a, b);
    return *reinterpret_cast<const uint32_t *>(&r);
}

__device__ __forceinline__ float amax_of(uint32_t m)
{
    return fmaxf(bf16_lo(m), bf16_hi(m));
}

/* W words (2W values) from p, 16- (W = 4) or 8-byte (W = 2) aligned. h is
 * read once: streaming loads (evict first). */
template <int W> __device__ __forceinline__ void load_words(const bf16 *p, uint32_t w[W])
{
    if constexpr (W == 4) {
        const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(p));
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
        static_assert(W == 2, "8 or 4 values");
        const uint2 v = __ldcs(reinterpret_cast<const uint2 *>(p));
        w[0] = v.x, w[1] = v.y;
    }
}

template <int W> __device__ __forceinline__ void store_words(bf16 *p, const uint32_t w[W])
{
    if constexpr (W == 4)
        *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    else
        *reinterpret_cast<uint2 *>(p) = make_uint2(w[0], w[1]);
}

template <int W> __device__ __forceinline__ void unpack(const uint32_t w[W], float v[2 * W])
{
#pragma unroll
    for (int q = 0; q < W; q++) {
        v[2 * q] = bf16_lo(w[q]);
        v[2 * q + 1] = bf16_hi(w[q]);
    }
}

/* v / s rounded as IEEE division would where its e4m3 code depends on it
 * (to_e4m3_r in pf_vec.cuh says why), before the conversion. */
__device__ __forceinline__ float quotient_r(float v, float s, float r)
{
    const float q0 = __fmul_rn(v, r);
    return copysignf(__fmaf_rn(__fmaf_rn(-q0, s, v), r, q0), v);
}

/* Two e4m3 codes (lo in the low byte) in one cvt. */
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi)
{
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}

/* 8 values of 4 words as e4m3 of v / s: r = 1 / s (finite s, |v| <= 448 s). */
__device__ __forceinline__ uint2 e4m3_words_r(const uint32_t w[4], float s, float r)
{
    uint32_t c[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
        c[q] = e4m3x2(quotient_r(bf16_lo(w[q]), s, r), quotient_r(bf16_hi(w[q]), s, r));
    return make_uint2(c[0] | c[1] << 16, c[2] | c[3] << 16);
}

/* ------------------------------------------------------------------------ */
/* Activation of 2W columns                                                  */
/* ------------------------------------------------------------------------ */

/* The activation's form, fixed per launch: gated SiLU without a limit (no
 * clamps), with one, or any other (act_bf16 per value). */
enum { AK_SILU, AK_SILU_LIMIT, AK_OTHER };

/* A value the fast path could not round (about 1 in 1000), or any value of
 * another activation: out of line, so that the double path is not inlined
 * at each of a thread's values. */
__device__ __noinline__ float act_slow(act_fn fn, float g, float u)
{
    return act_bf16(fn, g, u);
}

/* a = round(act(gate, up)) of 2W columns from their gate words gw and up
 * words uw (loaded by the caller, so that all of a thread's loads are in
 * flight before the first value is computed), packed into out. */
template <int K, int W>
__device__ __forceinline__ void act_words(const act_fn &fn, const uint32_t gw[W], const uint32_t uw[W], uint32_t out[W])
{
    if constexpr (K == AK_OTHER) {
#pragma unroll
        for (int q = 0; q < W; q++) {
            const float lo = act_slow(fn, bf16_lo(gw[q]), fn.gated ? bf16_lo(uw[q]) : 0.0f);
            const float hi = act_slow(fn, bf16_hi(gw[q]), fn.gated ? bf16_hi(uw[q]) : 0.0f);
            out[q] = pack_bf16x2(lo, hi);
        }
        return;
    }
    const float lim = fn.limit;
    float f[2 * W];
    bool all = true;
#pragma unroll
    for (int j = 0; j < 2 * W; j++) {
        float g = j & 1 ? bf16_hi(gw[j / 2]) : bf16_lo(gw[j / 2]);
        float u = j & 1 ? bf16_hi(uw[j / 2]) : bf16_lo(uw[j / 2]);
        if constexpr (K == AK_SILU_LIMIT) {
            g = g > lim ? lim : g;
            u = u < -lim ? -lim : u > lim ? lim : u;
        }
        f[j] = silu_mul_f32(g, u);
        all &= rounds_as_double(f[j]);
    }
    if (!all) {
#pragma unroll
        for (int j = 0; j < 2 * W; j++) {
            const float g = j & 1 ? bf16_hi(gw[j / 2]) : bf16_lo(gw[j / 2]);
            const float u = j & 1 ? bf16_hi(uw[j / 2]) : bf16_lo(uw[j / 2]);
            /* zeros of either input are exact (padding rows stay fast); the
             * limit's clamps keep zeros */
            if (!rounds_as_double(f[j]) && !zero_exact(f[j], g, u))
                f[j] = act_slow(fn, g, u);
        }
    }
#pragma unroll
    for (int q = 0; q < W; q++)
        out[q] = pack_bf16x2(f[2 * q], f[2 * q + 1]);
}

/* The gate and up words of 2W columns from c of a row of h. */
template <int W>
__device__ __forceinline__ void load_gate_up(const act_args &a, const bf16 *hrow, uint32_t c, uint32_t gw[W],
                                             uint32_t uw[W])
{
    load_words<W>(hrow + c, gw);
    if (a.fn.gated)
        load_words<W>(hrow + a.I + c, uw);
}

/* ------------------------------------------------------------------------ */
/* Rows of 8-column chunks                                                   */
/* ------------------------------------------------------------------------ */

/* A thread's chunks of a row: CH chunks of 8 columns, c0 + j * step for
 * j < CH (each warp's 16-byte accesses contiguous), held in registers
 * from the loads to the stores. The launch gives a row enough threads to
 * take it in one pass (fmcu_act_shape) where the values must wait for the row's
 * amax (per token), passes of CH * blockDim * 8 columns otherwise. */
template <int CH> struct row_chunks {
    uint32_t w[CH][4];
    uint32_t c0, step;
    __device__ __forceinline__ explicit row_chunks(uint32_t base = 0) : c0(base + threadIdx.x * 8), step(blockDim.x * 8)
    {
    }
    /* thread t of n taking the row */
    __device__ __forceinline__ row_chunks(uint32_t base, uint32_t t, uint32_t n) : c0(base + t * 8), step(n * 8) {}
    __device__ __forceinline__ uint32_t col(int j) const { return c0 + (uint32_t)j * step; }
};

/* The activations of the thread's chunks of row hrow, all loads first. */
template <int K, int CH>
__device__ __forceinline__ void act_chunks(const act_args &a, const bf16 *hrow, row_chunks<CH> &r)
{
    uint32_t uw[CH][4] = {};
#pragma unroll
    for (int j = 0; j < CH; j++)
        if (r.col(j) < a.I)
            load_gate_up<4>(a, hrow, r.col(j), r.w[j], uw[j]);
#pragma unroll
    for (int j = 0; j < CH; j++)
        if (r.col(j) < a.I)
            act_words<K, 4>(a.fn, r.w[j], uw[j], r.w[j]);
}

/* The largest |value| of the thread's chunks (bf16 pairs). */
template <int CH> __device__ __forceinline__ uint32_t chunks_amax(const row_chunks<CH> &r, uint32_t I)
{
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < CH; j++)
        if (r.col(j) < I)
#pragma unroll
            for (int q = 0; q < 4; q++)
                m = amax_bf16x2(m, r.w[j][q]);
    return m;
}

/* 8 values of a per-token row as e4m3 of v / s: by the reciprocal when the
 * row's amax is finite (fast), by IEEE division otherwise. */
__device__ __forceinline__ void quant8(const uint32_t w[4], float s, float rcp, bool fast, uint8_t *q)
{
    if (fast) {
        *reinterpret_cast<uint2 *>(q) = e4m3_words_r(w, s, rcp);
    } else {
        float v[8];
        unpack<4>(w, v);
        store_q8(q, v, s);
    }
}

/* A per-token (QM_TOKEN) GEMM2 row, by the whole block: fill(r) gives the
 * thread's chunks (row_chunks r, from column r.c0) as packed bf16; the
 * block's amax gives the scale (also written to *scale), then e4m3 to q
 * [I]. A row of at most CH * blockDim * 8 columns waits for its amax in
 * registers; a longer one (fmcu_act_shape: more than 512 chunks) in shared
 * memory sv [I / 8]. */
template <int CH, class Fill>
__device__ __forceinline__ void token_row(Fill fill, uint32_t I, uint4 *sv, float *red, float *scale, uint8_t *q)
{
    const uint32_t span = CH * blockDim.x * 8;
    if (I <= span) {
        row_chunks<CH> r;
        fill(r);
        const float s = scale_f32(block_max(amax_of(chunks_amax(r, I)), red));
        if (threadIdx.x == 0)
            *scale = s;
        const bool fast = isfinite(s); /* the amax is finite */
        const float rcp = 1.0f / s;
#pragma unroll
        for (int j = 0; j < CH; j++)
            if (r.col(j) < I)
                quant8(r.w[j], s, rcp, fast, q + r.col(j));
        return;
    }
    uint32_t m = 0;
    for (uint32_t base = 0; base < I; base += span) {
        row_chunks<CH> r(base);
        fill(r);
#pragma unroll
        for (int j = 0; j < CH; j++)
            if (r.col(j) < I)
                sv[r.col(j) / 8] = make_uint4(r.w[j][0], r.w[j][1], r.w[j][2], r.w[j][3]);
        m = amax_bf16x2(m, chunks_amax(r, I));
    }
    const float s = scale_f32(block_max(amax_of(m), red)); /* block_max's barriers also publish sv */
    if (threadIdx.x == 0)
        *scale = s;
    const bool fast = isfinite(s);
    const float rcp = 1.0f / s;
    for (uint32_t c = threadIdx.x * 8; c < I; c += blockDim.x * 8) {
        const uint4 v = sv[c / 8];
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        quant8(w, s, rcp, fast, q + c);
    }
}

/* ------------------------------------------------------------------------ */
/* The activation kernel: one sorted row per block                           */
/* ------------------------------------------------------------------------ */

/* A row of the block scheme's GEMM2 input (QM_GROUP): 1x128 groups, a
 * half-warp each (16 lanes x 8 columns), scales M-major per expert. */
template <int K> __device__ __forceinline__ void act_group_row(const act_args &a, const bf16 *hrow, int i)
{
    const uint32_t I = a.I, groups = I / GROUP;
    const int e = expert_of(a.offsets, (int)a.E, i);
    const int off = a.offsets[e], rows = a.offsets[e + 1] - off;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    uint8_t *q = (uint8_t *)a.dst + (int64_t)i * I;
    for (uint32_t g0 = 2 * warp; g0 < groups; g0 += 2 * warps) {
        const uint32_t g = g0 + (lane >> 4), c = g * GROUP + (lane & 15) * 8;
        const bool in = g < groups; /* the warp's second group may be past the row */
        uint32_t w[4] = {}, uw[4] = {};
        if (in) {
            load_gate_up<4>(a, hrow, c, w, uw);
            act_words<K, 4>(a.fn, w, uw, w);
        }
        uint32_t m2 = 0;
#pragma unroll
        for (int q2 = 0; q2 < 4; q2++)
            m2 = amax_bf16x2(m2, w[q2]);
        float m = amax_of(m2);
#pragma unroll
        for (int o = 8; o; o >>= 1) { /* within each half-warp */
            const float x = __shfl_xor_sync(0xffffffffu, m, o);
            m = x > m ? x : m;
        }
        if (!in)
            continue;
        const float s = a.ue8m0 ? scale_ue8m0(m) : scale_f32(m);
        if ((lane & 15) == 0)
            a.scale[(int64_t)off * groups + (int64_t)g * rows + (i - off)] = s;
        if (isfinite(m)) { /* |v| <= 448 s: e4m3_words_r's condition */
            *reinterpret_cast<uint2 *>(q + c) = e4m3_words_r(w, s, 1.0f / s);
        } else {
            float v[8];
            unpack<4>(w, v);
            store_q8(q + c, v, s);
        }
    }
}

/* NVFP4 W4A4's GEMM2 input (act_args.in_glob): each 8-column chunk's
 * values quantized with the row's expert's global gq, a thread's chunk and
 * its neighbour's forming a block of 16 (chunks are 8 columns apart by
 * thread, from a multiple of 16). This was a staging kernel re-reading the
 * stage's rows (bench/cuda/RESULTS.md at 7426a60, "4-bit input staging and the e2m1
 * scratch"). Every thread of the block calls it (the pair's shuffle). */
template <int CH> __device__ __forceinline__ void nvfp4_chunks(const row_chunks<CH> &r, uint32_t I, float gq, bf16 *d)
{
    const float rcp_g = 1.0f / gq;
#pragma unroll
    for (int j = 0; j < CH; j++) {
        const bool on = r.col(j) < I;
        float x[8];
        if (on)
            unpack<4>(r.w[j], x);
        const float vmax = fmcu_nvfp4::pair_vmax(x, on);
        if (!on)
            continue;
        float v[8];
        fmcu_nvfp4::quantize8(x, fmcu_nvfp4::scale_of(vmax, gq, rcp_g), v);
        store8(d + r.col(j), true, v);
    }
}

/* NV: NVFP4 W4A4's GEMM2 input (a.in_glob set), its own instantiations so
 * that the other schemes' kernels stay as they were. */
template <int K, int CH, bool NV>
__global__ void __launch_bounds__(ACT_MAX_THREADS) act_kernel(const act_args a)
{
    extern __shared__ uint4 act_sv[]; /* a long per-token row (token_row) */
    __shared__ float red[32];
    const int i = blockIdx.x;
    if (i >= a.offsets[a.E])
        return;
    const uint32_t I = a.I;
    const bf16 *hrow = a.h + (int64_t)i * a.rows13;
    if (a.mode == QM_GROUP) {
        act_group_row<K>(a, hrow, i);
        return;
    }
    if (a.mode == QM_TOKEN) {
        token_row<CH>([&](row_chunks<CH> &r) { act_chunks<K, CH>(a, hrow, r); }, I, act_sv, red, a.scale + i,
                      (uint8_t *)a.dst + (int64_t)i * I);
        return;
    }
    uint32_t m = 0;
    const float gq = NV ? a.in_glob[expert_of(a.offsets, (int)a.E, i)] : 0.0f;
    for (uint32_t base = 0; base < I; base += CH * blockDim.x * 8) {
        row_chunks<CH> r(base);
        act_chunks<K, CH>(a, hrow, r);
        if (a.mode == QM_TENSOR && !a.dynamic) { /* static scale: IEEE division (values may pass 448 s) */
            const float s = *a.static_scale;
            uint8_t *q = (uint8_t *)a.dst + (int64_t)i * I;
#pragma unroll
            for (int j = 0; j < CH; j++) {
                if (r.col(j) >= I)
                    continue;
                float v[8];
                unpack<4>(r.w[j], v);
                store_q8(q + r.col(j), v, s);
            }
            continue;
        }
        /* bf16 GEMM2 input, or the staged activations of a dynamic per-tensor one */
        bf16 *d = (a.mode == QM_BF16 ? (bf16 *)a.dst : a.stage) + (int64_t)i * I;
        if constexpr (NV) {
            nvfp4_chunks(r, I, gq, d);
        } else {
#pragma unroll
            for (int j = 0; j < CH; j++)
                if (r.col(j) < I)
                    store_words<4>(d + r.col(j), r.w[j]);
            if (a.mode == QM_TENSOR)
                m = amax_bf16x2(m, chunks_amax(r, I));
        }
    }
    if (a.mode == QM_TENSOR && a.dynamic) { /* the row's amax, for the call's and amax_exact_kernel */
        const float mf = block_max(amax_of(m), red);
        if (threadIdx.x == 0) {
            atomicMax(a.amax, __float_as_uint(mf));
            a.row_max[i] = mf;
        }
    }
}

/* Per-token (QM_TOKEN) rows of at most 32 * CH chunks, a warp each: the
 * row's amax by shuffles, no block barrier. With a block per row, the
 * barrier between a row's amax and its stores left the kernel waiting
 * (Qwen3-30B-A3B's I = 768: 128 us at M = 8192 against ~84 of memory
 * traffic, DRAM 59%; bench/cuda/RESULTS.md at 5ddad69, "Prefill: the activation and
 * plan kernels"); here a warp's wait
 * holds up only its own row. Same values as token_row (the amax is a max
 * of the same values, which no order changes). */
template <int K, int CH>
__global__ void __launch_bounds__(ACT_MAX_THREADS) act_token_warp_kernel(const act_args a)
{
    const uint32_t lane = threadIdx.x & 31, I = a.I;
    const int i = (int)(blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5));
    if (i >= a.offsets[a.E])
        return;
    row_chunks<CH> r(0, lane, 32);
    act_chunks<K, CH>(a, a.h + (int64_t)i * a.rows13, r);
    const float s = scale_f32(warp_max(amax_of(chunks_amax(r, I))));
    if (lane == 0)
        a.scale[i] = s;
    const bool fast = isfinite(s);
    const float rcp = 1.0f / s;
    uint8_t *q = (uint8_t *)a.dst + (int64_t)i * I;
#pragma unroll
    for (int j = 0; j < CH; j++)
        if (r.col(j) < I)
            quant8(r.w[j], s, rcp, fast, q + r.col(j));
}

/* The dynamic per-tensor GEMM2 input scale from an exact amax. wgmma's FP8
 * accumulation keeps fewer bits than f32 (DeepSeek-V3 3.3.2), so GEMM1 can
 * move the largest activation by a bf16 step against the reference; the
 * scale, amax / 448, then moves by ~0.4% and every GEMM2 input is
 * requantized with it: NMSE ~5e-4 against the reference, at conformance's
 * gate (fp8 tensor dynamic m1024 failed it in two runs of three,
 * bench/cuda/RESULTS.md at 5ddad69, "Prefill: the exact dynamic amax"). So every row
 * whose amax from act_kernel is within 2^-7 of the call's (the row holding
 * the true largest value is among them: GEMM1's error, ~2^-13, plus a bf16
 * step, 2^-8, stay below 2^-7) is recomputed from GEMM1's e4m3 operands,
 * exact products summed in double and rounded at the reference's points (h to
 * f32, times the scales, to bf16; act_bf16), and the largest |value| of those
 * rows is the amax (NMSE 5e-4 -> 2e-5). amax_candidates_kernel lists the rows
 * (usually one to a few), amax_exact_kernel spreads (row, column) tasks over
 * the whole GPU, a warp per task with lanes splitting K. Past EXACT_MAX_ROWS
 * candidates (rows tied at the maximum, e.g. repeated tokens) it keeps
 * GEMM1's amax, as before: each row costs a CUDA-core GEMM1 row. */
constexpr uint32_t EXACT_MAX_ROWS = 64;

__global__ void __launch_bounds__(256) amax_candidates_kernel(const act_args a)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float amax = __uint_as_float(*a.amax);
    if (i < a.offsets[a.E] && amax > 0.0f && a.row_max[i] >= amax * (1.0f - 1.0f / 128.0f))
        a.cand[atomicAdd(a.n_cand, 1u)] = i;
}

/* Sum over the warp of x[k] * w[k], k < H (a multiple of 16): e4m3 products
 * are exact in f32, their sum is kept in double. */
__device__ __forceinline__ double dot_e4m3(const uint8_t *x, const uint8_t *w, uint32_t H, int lane)
{
    double acc = 0.0;
    for (uint32_t k = lane * 16; k < H; k += 32 * 16) {
        const uint4 xv = *reinterpret_cast<const uint4 *>(x + k), wv = *reinterpret_cast<const uint4 *>(w + k);
        const uint32_t xs[4] = {xv.x, xv.y, xv.z, xv.w}, ws[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            __nv_fp8x4_e4m3 x4, w4;
            x4.__x = xs[q];
            w4.__x = ws[q];
            const float4 xf = float4(x4), wf = float4(w4);
            acc += (double)(xf.x * wf.x) + (double)(xf.y * wf.y) + (double)(xf.z * wf.z) + (double)(xf.w * wf.w);
        }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, d);
    return acc;
}

__global__ void __launch_bounds__(256) amax_exact_kernel(const act_args a)
{
    const int lane = threadIdx.x % 32;
    const uint32_t n = *a.n_cand;
    if (n > EXACT_MAX_ROWS) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            *a.amax_exact = *a.amax;
        return;
    }
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32), tasks = (int64_t)n * a.I;
    const float sx = *a.s_x;
    float m = 0.0f;
    for (int64_t t = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; t < tasks; t += warps) {
        const int row = a.cand[t / a.I], col = (int)(t % a.I), e = expert_of(a.offsets, (int)a.E, row);
        const float s = __fmul_rn(sx, a.s_w[e]);
        const uint8_t *x = a.a1 + (int64_t)row * a.H, *w = a.w13 + ((int64_t)e * a.rows13 + col) * a.H;
        const float g = round_bf16(__fmul_rn((float)dot_e4m3(x, w, a.H, lane), s));
        const float u =
            a.fn.gated ? round_bf16(__fmul_rn((float)dot_e4m3(x, w + (int64_t)a.I * a.H, a.H, lane), s)) : 0.0f;
        m = amax_step(m, act_bf16(a.fn, g, u));
    }
    if (lane == 0 && m > 0.0f)
        atomicMax(a.amax_exact, __float_as_uint(m));
}

/* Dynamic per-tensor GEMM2 input: quantize the staged activations with the
 * scale from their exact amax (also written to tensor_scale). */
__global__ void __launch_bounds__(256) quant_staged_kernel(const bf16 *stage, uint32_t I, const int32_t *total,
                                                           const uint32_t *amax, float *tensor_scale, uint8_t *dst)
{
    const int i = blockIdx.x;
    if (i >= *total)
        return;
    const float s = scale_f32(__uint_as_float(*amax));
    if (i == 0 && threadIdx.x == 0)
        *tensor_scale = s;
    for (uint32_t c = threadIdx.x * 8; c < I; c += blockDim.x * 8) {
        float v[8];
        load8(stage + (int64_t)i * I + c, true, v);
        store_q8(dst + (int64_t)i * I + c, v, s);
    }
}

/* ------------------------------------------------------------------------ */
/* The stage                                                                 */
/* ------------------------------------------------------------------------ */

/* Why each shape: launch_shape.h (fmcu_act_shape, unit-tested without a
 * GPU). Each QM_* is the FMCU_ACT_* of the same value. */
static_assert(QM_BF16 == FMCU_ACT_BF16 && QM_TENSOR == FMCU_ACT_TENSOR && QM_TOKEN == FMCU_ACT_TOKEN &&
                  QM_GROUP == FMCU_ACT_GROUP && GROUP == FMCU_ACT_GROUP_COLS && ACT_MAX_THREADS == FMCU_ACT_MAX_THREADS,
              "launch_shape.h's forms and sizes are prefill_act's");

template <int K> static void launch_token_warp(const act_args &aa, int ch, unsigned rows, cudaStream_t st)
{
    constexpr unsigned warps = ACT_MAX_THREADS / 32;
    const dim3 grid((rows + warps - 1) / warps), block(ACT_MAX_THREADS);
    switch (ch) {
    case 1: act_token_warp_kernel<K, 1><<<grid, block, 0, st>>>(aa); break;
    case 2: act_token_warp_kernel<K, 2><<<grid, block, 0, st>>>(aa); break;
    case 3: act_token_warp_kernel<K, 3><<<grid, block, 0, st>>>(aa); break;
    default: act_token_warp_kernel<K, 4><<<grid, block, 0, st>>>(aa); break;
    }
}

template <int K>
static void launch_act(const act_args &aa, const fmcu_act_launch &sh, unsigned rows, cudaStream_t st)
{
    if (sh.warp_rows) {
        launch_token_warp<K>(aa, sh.ch, rows, st);
        return;
    }
    if (aa.in_glob) { /* NVFP4 W4A4 (QM_BF16) */
        switch (sh.ch) {
        case 1: act_kernel<K, 1, true><<<rows, sh.threads, sh.smem, st>>>(aa); break;
        case 2: act_kernel<K, 2, true><<<rows, sh.threads, sh.smem, st>>>(aa); break;
        default: act_kernel<K, 4, true><<<rows, sh.threads, sh.smem, st>>>(aa); break;
        }
        return;
    }
    switch (sh.ch) {
    case 1: act_kernel<K, 1, false><<<rows, sh.threads, sh.smem, st>>>(aa); break;
    case 2: act_kernel<K, 2, false><<<rows, sh.threads, sh.smem, st>>>(aa); break;
    default: act_kernel<K, 4, false><<<rows, sh.threads, sh.smem, st>>>(aa); break;
    }
}

cudaError_t act_stage(const act_args &aa, unsigned rows, bool dyn_tensor, bool warp_rows, cudaStream_t st)
{
    if (aa.mode == QM_TOKEN && aa.I > TOKEN_MAX_I)
        return cudaErrorInvalidValue; /* refused at create (fmcu_prefill_supported) */
    const fmcu_act_launch sh = fmcu_act_shape(aa.mode, aa.I, warp_rows);
    const bool silu = aa.fn.gated && aa.fn.activation == FMOE_ACT_SILU;
    if (silu && aa.fn.limit > 0.0f)
        launch_act<AK_SILU_LIMIT>(aa, sh, rows, st);
    else if (silu)
        launch_act<AK_SILU>(aa, sh, rows, st);
    else
        launch_act<AK_OTHER>(aa, sh, rows, st);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || !dyn_tensor)
        return e;
    amax_candidates_kernel<<<(rows + 255) / 256, 256, 0, st>>>(aa);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    amax_exact_kernel<<<264, 256, 0, st>>>(aa); /* 2112 warps: one task each for a row of I <= 2112 */
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    const unsigned threads = std::min(256u, (aa.I / 8 + 31) / 32 * 32);
    quant_staged_kernel<<<rows, threads, 0, st>>>(aa.stage, aa.I, aa.offsets + aa.E, aa.amax_exact, aa.tensor_scale,
                                                  (uint8_t *)aa.dst);
    return cudaGetLastError();
}

} // namespace fmcu_pf
