/*
 * plugins/cuda/wq_stream.cu - the weight-streaming form of the grouped GEMM
 * over 4-bit and int weights (contract in wq_gemm.h), for calls where each
 * expert sees few rows (decode). The tiled kernel (wq_gemm.cu) serves the
 * rest, and the layers this one does not (fmcu_wq_stream_serves).
 *
 * Why. At M = 1 the tiled kernel gave each CTA 128 weight rows and the whole
 * of K, staged 16 bytes per row at a time: a few dozen CTAs with little in
 * flight, 0.2 TB/s (bench/cuda/RESULTS.md at 5ddad69, "4-bit weights: first
 * correctness and timings"). Here, as in stream_gemm.cu, weights are the
 * MMA's A operand and go straight from global memory into registers with
 * 16-byte loads, tokens are its 8-column B operand, a CTA owns 16 weight
 * rows of one expert and its 4 warps split K, so an expert's bytes spread
 * over hundreds of small CTAs.
 *
 * Reading wq_pack.h's layout with 16-byte loads. A row is a run of 32-column
 * chunks of 16 bytes (int8: 32). Lane (g, c4) loads 16 bytes of rows g and
 * g + 8 at byte 64 * s + 16 * c4 of a 64-byte "span" s: for 4-bit codes that
 * is the whole chunk 4 s + c4, i.e. the fragments the tiled kernel spreads
 * over a quad's four lanes. The lane plays those four lanes in turn: word v
 * of its 16 bytes holds what lane v would hold, and its register j (k16
 * step j / 2, k slot j % 2) is the word's nibbles j and j + 4, columns
 * 16 (j / 2) + 8 (j % 2) + 2 v and the next, i.e. activation word 4 j + v
 * of the chunk's 32 activations. The dot product does not care in which
 * order K is visited as long as A and B agree, so one MMA may take register
 * j of words 2 vp and 2 vp + 1 as its two k slots: its B operand is then
 * activation words 4 j + 2 vp and 4 j + 2 vp + 1, two adjacent registers of
 * one 16-byte load (int8: words 8 ks + v and 8 ks + 4 + v). One MMA thus
 * sums columns of four chunks (128 columns; 64 for int8), which is why an
 * int scale group must cover whole spans: each span's partial sum is
 * multiplied by its group's scale once, as the tiled kernel does per group.
 *
 * Dequantization in registers, exact (docs/CUDA.md, "4-bit and int
 * weights"): an int4 pair becomes bf16 (or f16) 128 + q (1024 + q) by
 * OR-ing the nibbles into the mantissa of a constant, then one packed
 * subtraction of 128 + 8 + zp leaves q - 8 - zp; an e2m1 pair becomes
 * e2m1 * 2^-126 by moving its bits into place (a subnormal for 0.5), then
 * one packed product by the block scale with 2^126 folded in (MXFP4 with
 * scales up to 2; NVFP4 with 2^118, the epilogue restoring 2^8), else two
 * (e2m1 times an e4m3 or power-of-two scale has at most 6 significant
 * bits). int8, and e2m1 with f16 activations, go through f32 as the tiled
 * kernel does. The folded form cut the FP4 span loop from 265 to 165
 * instructions (MXFP4) and its decode time by about a quarter
 * (bench/cuda/RESULTS.md at 7426a60, "4-bit decode: the e2m1 scales folded").
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

constexpr int WARPS = 4; /* warps of a CTA */
constexpr int U = 2;     /* spans per batch; two batches in flight per warp */
constexpr int SPAN = 64; /* row bytes per span: 4 lanes x 16 */

/* How e2m1 codes meet their block scales (template SF; int formats: ANY).
 * ANY: the codes' bits as e2m1 * 2^-126, then products by 2^126 and by the
 * scale (either scale kind, f16 activations). MX: ue8m0 codes all <= 128
 * (fmcu_wq_proj.mx_fold, checked at finalize), one product by 2^(c - 1).
 * NV: e4m3 codes, one product by s * 2^118, the epilogue's 2^8 restoring
 * the sums. The folded forms decode a register in four instructions where
 * ANY takes six (dq_e2m1_fused). */
constexpr int SF_ANY = 0, SF_MX = 1, SF_NV = 2;

using fmcu_wq_dev::bits_of;
using fmcu_wq_dev::dq_e2m1_fused;
using fmcu_wq_dev::dq_fp4_bf16;
using fmcu_wq_dev::dq_int4;
using fmcu_wq_dev::e2m1_value;
using fmcu_wq_dev::mma16;
using fmcu_wq_dev::mx_fold_s2;
using fmcu_wq_dev::nibble_of;
using fmcu_wq_dev::nv_fold_s2;
using fmcu_wq_dev::pack2;
using fmcu_wq_dev::scale_code;

/* One batch of U spans of both weight rows of this thread (zeros past the
 * row; FULL: rows are whole spans). A row past the last slab reads a valid
 * row of the expert instead: its sums are never stored. */
template <bool FULL>
__device__ __forceinline__ void load_spans(uint4 (&wl)[U], uint4 (&wh)[U], const uint8_t *at_lo, const uint8_t *at_hi,
                                           int first, int stride, int nspan, int64_t rowb, int c4)
{
    /* at_lo / at_hi: the rows' bytes at span `first` (advanced by the
     * caller, not recomputed from the row start). */
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int s = first + stride * u;
        const bool in = s < nspan && (FULL || (int64_t)s * SPAN + c4 * 16 < rowb);
        wl[u] = in ? fmcu_dev::load_stream(at_lo + u * stride * SPAN) : make_uint4(0, 0, 0, 0);
        wh[u] = in ? fmcu_dev::load_stream(at_hi + u * stride * SPAN) : make_uint4(0, 0, 0, 0);
    }
}

/* FULL: K is whole spans in weights and GEMM input alike (no tail tests);
 * ZP: int zero points; SF: the e2m1 scale form (above). All cut
 * instructions that are issued whether or not they are needed
 * (fmcu_wq_stream_launch picks them). */
template <int FMT, bool F16, bool FULL, bool ZP, int SF>
__global__ void __launch_bounds__(WARPS * 32, FMT == FMCU_WQ_FP4 && F16 ? 3 : 4) wq_stream(const fmcu_wq_gemm_args p)
{
    static_assert(SF == SF_ANY || (FMT == FMCU_WQ_FP4 && !F16), "folded scales: e2m1 with bf16 activations");
    constexpr bool INT = FMT != FMCU_WQ_FP4;
    constexpr int CB = FMT == FMCU_WQ_INT8 ? 32 : 16;  /* chunk bytes per row */
    constexpr int SPAN_COLS = FMT == FMCU_WQ_INT8 ? 64 : 128;
    __shared__ float red[WARPS - 1][4][32];
    /* Launched overlapped (programmatic dependent launch): everything below
     * reads what earlier kernels wrote, so wait first, then let the next
     * kernel (GEMM2, the combine) start its launch. */
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();

    const int tile = blockIdx.x;
    const int n_tiles = *(const volatile int32_t *)p.n_tiles;
    if (tile >= n_tiles)
        return; /* uniform over the CTA */
    const int2 t = p.tiles[tile];
    const int e = t.x, pos0 = t.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, c4 = lane & 3;
    const bool gated1 = p.gemm1 && p.gated;
    /* S slabs of 16 weight rows per CTA; the 4 / S warps of a slab split K. */
    const int S = (int)p.slabs_per_cta, parts = WARPS / S;
    const int slab = blockIdx.y * S + warp % S, kpart = warp / S;

    /* This thread's two weight rows. */
    const int r_lo = gated1 ? slab * 8 + g : slab * 16 + g;
    const int r_hi = gated1 ? (int)p.n_out + slab * 8 + g : r_lo + 8;
    const bool ok_lo = gated1 ? slab * 8 + g < (int)p.n_out : r_lo < (int)p.n_rows; /* false past the last slab */
    const bool ok_hi = gated1 ? ok_lo : r_hi < (int)p.n_rows;
    const int64_t rowb = (int64_t)(p.w.kp / 32) * CB;
    const int nspan = (int)((rowb + SPAN - 1) / SPAN);
    const size_t srow = (size_t)e * p.n_rows;
    const uint8_t *W = (const uint8_t *)p.w.w + srow * (size_t)rowb;
    const uint8_t *w_lo = W + (int64_t)(ok_lo ? r_lo : 0) * rowb + c4 * 16;
    const uint8_t *w_hi = W + (int64_t)(ok_hi ? r_hi : 0) * rowb + c4 * 16;
    const bool mx = p.fp4_block == 32;
    const uint32_t groups = p.w.groups;
    /* Per-row constants hoisted out of the span loop (the divisions and
     * conversions there were a tenth of its instructions): a span lies in
     * one int group (fmcu_wq_stream_serves), spg = spans per group; without
     * zero points the int4 subtrahend is one constant. */
    const uint32_t spg = groups == 1 ? 0u : p.w.group / (uint32_t)SPAN_COLS;
    const float *sc_row[2] = {INT ? p.w.scale + (srow + (ok_lo ? r_lo : 0)) * groups : nullptr,
                              INT ? p.w.scale + (srow + (ok_hi ? r_hi : 0)) * groups : nullptr};
    const int8_t *zp_row[2] = {ZP && p.w.zero ? p.w.zero + (srow + (ok_lo ? r_lo : 0)) * groups : nullptr,
                               ZP && p.w.zero ? p.w.zero + (srow + (ok_hi ? r_hi : 0)) * groups : nullptr};
    const uint8_t *sf_row[2] = {INT ? nullptr : p.w.sf8 + (srow + (ok_lo ? r_lo : 0)) * groups,
                                INT ? nullptr : p.w.sf8 + (srow + (ok_hi ? r_hi : 0)) * groups};
    const float sub0 = F16 ? 1032.0f : 136.0f;
    const uint32_t sub_sym = F16 ? bits_of(__floats2half2_rn(sub0, sub0)) : bits_of(__floats2bfloat162_rn(sub0, sub0));

    const int rows = min(32, p.offsets[e + 1] - pos0);
    const int passes = (rows + 7) / 8;
    const uint8_t *A = (const uint8_t *)p.a;
    const fmcu_dev::act_params ap = {p.activation, p.gated, p.swiglu_alpha, p.swiglu_limit};

    for (int pass = 0; pass < passes; pass++) {
        const int r0 = pass * 8;
        /* B operand: token g of this pass (its GEMM input row); past the
         * tile's rows the pass's first token, whose products land in MMA
         * columns that are never stored. */
        const uint8_t *b_row = A + (int64_t)(p.sorted[pos0 + r0 + (r0 + g < rows ? g : 0)] / p.a_row_div) * p.lda * 2;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

        /* The U spans of one batch, s = base + parts * u. */
        auto batch = [&](const uint4(&wl)[U], const uint4(&wh)[U], int base) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int s = base + parts * u;
                if (s >= nspan)
                    break;
                const bool in = FULL || (int64_t)s * SPAN + c4 * 16 < rowb;
                /* The chunk this lane holds, and its 32 activations of token g:
                 * xv[q] holds activation words 4 q .. 4 q + 3. */
                const int chunk = FMT == FMCU_WQ_INT8 ? 2 * s + (c4 >> 1) : 4 * s + c4;
                uint4 xv[4];
                const uint8_t *x_span = b_row + (int64_t)chunk * 64;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    /* one address a span, the four loads at immediate offsets */
                    const int col = chunk * 32 + q * 8;
                    xv[q] = FULL || (in && col < (int)p.a_k) ? __ldg((const uint4 *)(x_span + q * 16))
                                                             : make_uint4(0, 0, 0, 0);
                }
                const uint32_t lw[4] = {wl[u].x, wl[u].y, wl[u].z, wl[u].w};
                const uint32_t hw[4] = {wh[u].x, wh[u].y, wh[u].z, wh[u].w};

                /* Per-span constants: int group scale and zero point, or the
                 * chunk's block scales. */
                float sc[2] = {1.0f, 1.0f};
                uint32_t sub[2] = {0, 0};
                float fs[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}; /* [row][k16 step] */
                if constexpr (INT) {
                    const uint32_t grp = spg == 0 ? 0u : min(spg == 1 ? (uint32_t)s : (uint32_t)s / spg, groups - 1);
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        sc[h] = sc_row[h][grp];
                        const float zp = ZP && zp_row[h] ? (float)zp_row[h][grp] : 0.0f;
                        if constexpr (FMT == FMCU_WQ_INT4) {
                            const float c = sub0 + zp;
                            sub[h] = !ZP ? sub_sym
                                   : F16 ? bits_of(__floats2half2_rn(c, c))
                                         : bits_of(__floats2bfloat162_rn(c, c));
                        } else {
                            sub[h] = __float_as_uint(zp);
                        }
                    }
                } else if constexpr (SF == SF_ANY) {
#pragma unroll
                    for (int h = 0; h < 2; h++)
#pragma unroll
                        for (int ks = 0; ks < 2; ks++) {
                            const uint32_t blk = mx ? (uint32_t)chunk : (uint32_t)(2 * chunk + ks);
                            fs[h][ks] = in ? scale_code(sf_row[h][blk], mx) : 0.0f;
                        }
                }
                /* [row][k16 step]: the bf16 scale pair (ANY), or the folded one */
                uint32_t fs2[2][2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    if constexpr (SF == SF_MX) {
                        fs2[h][0] = fs2[h][1] = in ? mx_fold_s2(sf_row[h][chunk]) : 0u;
                    } else {
#pragma unroll
                        for (int ks = 0; ks < 2; ks++)
                            fs2[h][ks] = SF == SF_NV ? (in ? nv_fold_s2(sf_row[h][2 * chunk + ks]) : 0u)
                                                     : bits_of(__floats2bfloat162_rn(fs[h][ks], fs[h][ks]));
                    }
                }

                float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                float *dst = INT ? part : acc;
                if constexpr (FMT == FMCU_WQ_INT8) {
                    /* Word m holds one (v, ks) = (2 (c4 % 2) + m / 2, m % 2):
                     * bytes 0-1 (k slot 0) and 2-3 (k slot 1); its B words are
                     * 8 ks + v and 8 ks + 4 + v of the chunk's activations. */
                    const uint32_t xw[16] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y,
                                             xv[1].z, xv[1].w, xv[2].x, xv[2].y, xv[2].z, xv[2].w,
                                             xv[3].x, xv[3].y, xv[3].z, xv[3].w};
#pragma unroll
                    for (int m = 0; m < 4; m++) {
                        const int v = 2 * (c4 & 1) + (m >> 1), ks = m & 1;
                        const uint32_t words[2] = {lw[m], hw[m]};
                        uint32_t a[4];
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            const float zp = __uint_as_float(sub[h]);
                            float f[4];
#pragma unroll
                            for (int i = 0; i < 4; i++)
                                f[i] = (float)(int8_t)((words[h] >> (8 * i)) & 0xFF) - zp;
                            a[h] = pack2<F16>(f[0], f[1]);     /* rows g / g + 8, k slot 0 */
                            a[2 + h] = pack2<F16>(f[2], f[3]); /* k slot 1 */
                        }
                        const uint32_t b[2] = {xw[8 * ks + v], xw[8 * ks + 4 + v]};
                        mma16<F16>(dst, a, b);
                    }
                } else {
                    /* Register j of word v: activation word 4 j + v. One MMA
                     * takes register j of words 2 vp (k slot 0) and 2 vp + 1
                     * (k slot 1), whose activations are the adjacent words
                     * 4 j + 2 vp, 4 j + 2 vp + 1 of xv[j]: the B operand is
                     * a register pair as loaded, with no copies. */
                    auto dq = [&](uint32_t w, int j, int h) -> uint32_t {
                        if constexpr (FMT == FMCU_WQ_INT4) {
                            return dq_int4<F16>(w, j, sub[h]);
                        } else if constexpr (SF != SF_ANY) {
                            return dq_e2m1_fused(w, j, fs2[h][j >> 1]);
                        } else if constexpr (!F16) {
                            return dq_fp4_bf16(w, j, fs2[h][j >> 1]);
                        } else {
                            const float f = fs[h][j >> 1];
                            return pack2<F16>(e2m1_value((w >> (4 * nibble_of(2 * j))) & 0xF) * f,
                                              e2m1_value((w >> (4 * nibble_of(2 * j + 1))) & 0xF) * f);
                        }
                    };
#pragma unroll
                    for (int j = 0; j < 4; j++)
#pragma unroll
                        for (int vp = 0; vp < 2; vp++) {
                            const uint32_t a[4] = {dq(lw[2 * vp], j, 0), dq(hw[2 * vp], j, 1),
                                                   dq(lw[2 * vp + 1], j, 0), dq(hw[2 * vp + 1], j, 1)};
                            const uint32_t b[2] = {vp ? xv[j].z : xv[j].x, vp ? xv[j].w : xv[j].y};
                            mma16<F16>(dst, a, b);
                        }
                }
                if constexpr (INT) {
                    acc[0] += part[0] * sc[0];
                    acc[1] += part[1] * sc[0];
                    acc[2] += part[2] * sc[1];
                    acc[3] += part[3] * sc[1];
                }
            }
        };

        /* Span s of this warp's part: kpart + parts * i, in batches of U.
         * Two batches in flight, in two register sets used in turn (the next
         * is asked for before this one is used; no copies between them). */
        const int step = parts * U;
        uint4 wl0[U], wh0[U], wl1[U], wh1[U];
        const int bstep = step * SPAN; /* bytes from one batch to the next */
        const uint8_t *at_lo = w_lo + kpart * SPAN, *at_hi = w_hi + kpart * SPAN;
        load_spans<FULL>(wl0, wh0, at_lo, at_hi, kpart, parts, nspan, rowb, c4);
        for (int base = kpart; base < nspan; base += 2 * step) {
            at_lo += bstep, at_hi += bstep;
            load_spans<FULL>(wl1, wh1, at_lo, at_hi, base + step, parts, nspan, rowb, c4);
            batch(wl0, wh0, base);
            if (base + step >= nspan)
                break;
            at_lo += bstep, at_hi += bstep;
            load_spans<FULL>(wl0, wh0, at_lo, at_hi, base + 2 * step, parts, nspan, rowb, c4);
            batch(wl1, wh1, base + step);
        }

        /* A slab's K parts meet in its part-0 warp, in part order. */
        if (kpart > 0) {
#pragma unroll
            for (int q = 0; q < 4; q++)
                red[warp - S][q][lane] = acc[q];
        }
        __syncthreads();
        if (kpart == 0) {
            for (int j = 1; j < parts; j++)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    acc[q] += red[warp + S * (j - 1)][q][lane];
            const float omul = (p.w.out_mul ? p.w.out_mul[e] : 1.0f) * (SF == SF_NV ? 256.0f : 1.0f);
            /* Accumulator q: weight row r_lo (q < 2) or r_hi, token 2 c4 + q % 2. */
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const int r = r0 + 2 * c4 + q;
                if (r >= rows)
                    continue;
                const int pair = p.sorted[pos0 + r];
                /* gated: r_lo = slab * 8 + g is the output column */
                fmcu_wq_dev::store_rows(p, ap, e, pair, r_lo, r_hi, ok_lo, ok_hi, acc[q], acc[2 + q], omul);
            }
        }
        if (pass + 1 < passes)
            __syncthreads(); /* warp 0 has read red before it is written again */
    }
}

template <int FMT, bool F16, bool FULL, bool ZP, int SF = SF_ANY>
cudaError_t launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    const unsigned slabs = a.gemm1 && a.gated ? (a.n_out + 7) / 8 : (a.n_rows + 15) / 16;
    const unsigned ctas = (slabs + a.slabs_per_cta - 1) / a.slabs_per_cta;
    return fmcu_dev::launch_overlapped(wq_stream<FMT, F16, FULL, ZP, SF>, dim3((unsigned)a.grid_tiles, ctas),
                                       dim3(WARPS * 32), 0, stream, a);
}

template <bool F16> cudaError_t launch_fmt(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    /* Whole spans: 4-bit rows of a multiple of 128 columns and a GEMM input
     * at least that wide. int8 always takes the general form. */
    const bool full = a.w.kp % 128 == 0 && a.a_k >= a.w.kp;
    const bool zp = a.w.zero != nullptr;
    switch (a.format) {
    case FMCU_WQ_INT4:
        if (full)
            return zp ? launch<FMCU_WQ_INT4, F16, true, true>(a, stream)
                      : launch<FMCU_WQ_INT4, F16, true, false>(a, stream);
        return zp ? launch<FMCU_WQ_INT4, F16, false, true>(a, stream)
                  : launch<FMCU_WQ_INT4, F16, false, false>(a, stream);
    case FMCU_WQ_INT8: return launch<FMCU_WQ_INT8, F16, false, true>(a, stream);
    default:
        if constexpr (!F16) {
            if (a.fp4_block == 32 && a.w.mx_fold)
                return full ? launch<FMCU_WQ_FP4, F16, true, false, SF_MX>(a, stream)
                            : launch<FMCU_WQ_FP4, F16, false, false, SF_MX>(a, stream);
            if (a.fp4_block == 16)
                return full ? launch<FMCU_WQ_FP4, F16, true, false, SF_NV>(a, stream)
                            : launch<FMCU_WQ_FP4, F16, false, false, SF_NV>(a, stream);
        }
        return full ? launch<FMCU_WQ_FP4, F16, true, false>(a, stream)
                    : launch<FMCU_WQ_FP4, F16, false, false>(a, stream);
    }
}

} // namespace

cudaError_t fmcu_wq_stream_launch(const fmcu_wq_gemm_args &a, cudaStream_t stream)
{
    if (a.grid_tiles <= 0)
        return cudaSuccess;
    if (a.row_tile != 32 || (a.slabs_per_cta != 1 && a.slabs_per_cta != 2 && a.slabs_per_cta != 4))
        return cudaErrorInvalidValue; /* tiles of at most 32 rows; 1, 2 or 4 slabs a CTA */
    return a.act_dtype == FMOE_DTYPE_F16 ? launch_fmt<true>(a, stream) : launch_fmt<false>(a, stream);
}
