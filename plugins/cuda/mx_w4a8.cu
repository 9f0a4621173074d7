/*
 * plugins/cuda/mx_w4a8.cu - the MXFP4 x FP8 (MegaMoE) forward after the
 * plan (contract and the steps' list in mx_w4a8.h): its two row kernels,
 * and the launches in order around the 4-bit weight GEMMs (wq_gemm.h),
 * which run unchanged in their plain-store mode (no kernel of the other
 * schemes is touched or re-instantiated).
 *
 * Why fake-quant rows and not codes. The GEMMs take bf16 operands; an e4m3
 * code times its power-of-two scale is exact in bf16 (bench-free argument:
 * 4 significant bits; the input scale is at least 2^-22, so no value nears
 * bf16's subnormals), so writing e4m3(v / s) * s as bf16 hands the GEMM the
 * very value the reference multiplies, and its f32 accumulation of exact
 * bf16 x bf16 products differs from the reference's only in the order of
 * the sums. The requantized GEMM2 input is the same except for a group
 * whose amax is below about 2^-116 (sf < 2^-124): its smallest codes times
 * sf fall under bf16's subnormal step 2^-133 and round there (the
 * reference keeps them in f32); such a group adds less than 2^-107 per
 * weight to y.
 *
 * Why h is stored bf16 by GEMM1 and SwiGLU runs in a row kernel. The
 * reference reads gate and up as bf16 and requantizes the f32 value
 * a = (silu(g) * u) * w per 32 columns of I; a 32-group's columns sit in
 * four 8-column slabs of different warps (or CTAs) of the GEMM kernels, so
 * the group's amax is not in one thread's registers. Storing h [pairs, 2I]
 * bf16 moves the same bytes as storing a in f32 [pairs, I], needs no new
 * epilogue (the GEMMs' plain store rounds to bf16 as the reference does),
 * and the requantization then starts from the f32 a, never from a rounded
 * copy (double rounding would change codes).
 *
 * Numerics of the row kernels (= plugins/reference/method_megamoe.c and
 * plugins/megamoe's GEMM1 epilogue; the per-value rules are
 * mx_w4a8_rules.h's, unit-tested on the host): amax skips NaN; the input
 * scale is 2^ceil(log2(max(amax, 1e-4) / 448)) with the exponent byte
 * clamped to [1, 254], the code e4m3(sat(x / s)) with IEEE division; SiLU
 * is g / (1 + expf(-g)) * u (expf, IEEE division, no contraction: the
 * device's expf is within 2 ulps of the host's, so a's last bit may
 * differ, which moves an e4m3 code only at a rounding tie); a non-finite
 * group amax makes the group NaN as the reference does.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/mx_w4a8.h"
#include "plugins/cuda/mx_w4a8_rules.h"

namespace {

constexpr int GROUP = FMCU_MX_GROUP; /* elements per scale: one warp */
constexpr int THREADS = 256;         /* 8 warps, one (row, group) each */
constexpr int WARPS = THREADS / 32;

int fail(char *err, size_t cap, const char *what, cudaError_t e)
{
    snprintf(err, cap, "MXFP4 x FP8: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

/* e4m3(sat(q)) * s: the code RNE with |q| > 448 (and inf) saturated, NaN
 * kept (formats.h's encoder after the reference's clamp), decoded exactly,
 * times the power-of-two scale s (exact: in bf16 too, mx_w4a8.h). */
__device__ __forceinline__ float e4m3_times(float q, float s)
{
    const __nv_fp8_storage_t code = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
    const __half_raw h = __nv_cvt_fp8_to_halfraw(code, __NV_E4M3);
    return FMCU_MX_MUL(__half2float(__half(h)), s);
}

struct fq_args {
    const __nv_bfloat16 *src;
    int64_t ld;
    uint32_t cols;
    __nv_bfloat16 *dst; /* [rows, cols] */
};

/* GEMM1 input: each 32-group of a token row as e4m3(x / s) * s in bf16.
 * A lane reads its value before the warp's max and writes it after, so
 * dst may be src (the staged copy of x). */
__global__ void __launch_bounds__(THREADS) fq_x_kernel(const fq_args a, int64_t rows)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    const int64_t groups = a.cols / GROUP;
    const int64_t wi = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    if (wi >= rows * groups)
        return; /* uniform over the warp */
    const int64_t row = wi / groups;
    const int64_t c = (wi % groups) * GROUP + (threadIdx.x & 31);
    const float v = __bfloat162float(a.src[row * a.ld + c]);
    const float s = fmcu_mx_input_scale(fmcu_dev::warp_max(fmcu_dev::amax_step(0.0f, v)));
    a.dst[row * a.cols + c] = __float2bfloat16_rn(e4m3_times(FMCU_MX_DIV(v, s), s));
}

struct swiglu_args {
    const __nv_bfloat16 *h; /* [pairs, 2I]: gate columns, then up */
    const float *w;         /* [pairs] routing weights */
    const int32_t *pair_local;
    uint32_t I;
    float limit;        /* swiglu_limit; <= 0: no clamp */
    __nv_bfloat16 *dst; /* [pairs, I] */
};

/* GEMM2 input of the local pairs, per (pair, 32-group of I): a = (silu(g) *
 * u) * w from bf16 g, u (clamped in bf16), then sf from the bits of
 * amax * (1/448) (exponent field, plus one if the mantissa is not zero; no
 * floor), written as e4m3(sat(a / sf)) * sf in bf16. */
__global__ void __launch_bounds__(THREADS) swiglu_requant_kernel(const swiglu_args a, int64_t pairs)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    const int64_t groups = a.I / GROUP;
    const int64_t wi = (int64_t)blockIdx.x * WARPS + threadIdx.x / 32;
    if (wi >= pairs * groups)
        return; /* uniform over the warp */
    const int64_t q = wi / groups;
    if (a.pair_local[q] < 0)
        return; /* uniform: no local expert, no GEMM2 row */
    const int64_t i = (wi % groups) * GROUP + (threadIdx.x & 31);
    const __nv_bfloat16 *hr = a.h + q * 2 * (int64_t)a.I;
    const float c = __bfloat162float(__float2bfloat16_rn(a.limit));
    const float act = fmcu_mx_swiglu(__bfloat162float(hr[i]), __bfloat162float(hr[a.I + i]), a.limit > 0.0f, c,
                                     a.w[q]);
    const float amax = fmcu_dev::warp_max(fmcu_dev::amax_step(0.0f, act));
    float v;
    if (!isfinite(amax)) {
        v = __uint_as_float(0x7FC00000u); /* the reference makes the whole group NaN */
    } else {
        const int32_t ex = fmcu_mx_requant_exponent(amax);
        v = e4m3_times(FMCU_MX_MUL(act, fmcu_mx_pow2(-ex)), fmcu_mx_pow2(ex));
    }
    a.dst[q * a.I + i] = __float2bfloat16_rn(v);
}

unsigned warp_blocks(int64_t warps)
{
    return (unsigned)((warps + WARPS - 1) / WARPS);
}

} // namespace

int fmcu_mx_a8_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                       const fmcu_fwd::plan_args &pl, uint32_t bm, fmcu_mx_gemm_fn gemm, int sms, void *out,
                       int64_t ldo, cudaStream_t st, char *err, size_t cap)
{
    const fmcu_wq *wq = &L->wq;
    const int64_t pairs = m * L->top_k;
    const uint32_t H = L->hidden, I = L->inter;
    char *ws = (char *)L->workspace;
    /* Workspace (layout.h): the fake-quant x in a1 ([Mmax, H] bf16 for the
     * 4-bit schemes), h in the prefill path's pf_h ([Mmax*k, 2I] bf16, unused
     * by them), the GEMM2 input in act, y in y. */
    __nv_bfloat16 *xq = (__nv_bfloat16 *)(ws + L->ws.a1);
    __nv_bfloat16 *h = (__nv_bfloat16 *)(ws + L->ws.pf_h);
    __nv_bfloat16 *aq = (__nv_bfloat16 *)(ws + L->ws.act);
    void *y = ws + L->ws.y;
    cudaError_t e;

    fq_args fa = {(const __nv_bfloat16 *)x, x_ld, H, xq};
    e = fmcu_dev::launch_overlapped(fq_x_kernel, dim3(warp_blocks(m * (H / GROUP))), dim3(THREADS), 0, st, fa, m);
    if (e != cudaSuccess)
        return fail(err, cap, "GEMM1 input quantization", e);

    fmcu_wq_gemm_args g = {};
    g.format = wq->format;
    g.fp4_block = wq->fp4_block;
    g.row_tile = bm;
    g.grid_tiles = fmcu_max_tiles(pairs, L->local_experts, bm);
    g.sorted = pl.sorted;
    g.tiles = pl.tiles;
    g.n_tiles = pl.n_tiles;
    g.offsets = pl.offsets;
    g.act_dtype = FMOE_DTYPE_BF16;
    g.activation = L->activation;
    /* GEMM1 as a plain GEMM over all 2I rows of W13 (gate rows, then up
     * rows): h rounded to bf16 by the store. */
    g.w = wq->w13;
    g.gemm1 = 0;
    g.gated = 0;
    g.n_rows = 2 * I;
    g.n_out = 2 * I;
    g.bias = nullptr;
    g.a = xq;
    g.lda = H;
    g.a_k = H;
    g.a_row_div = (int)L->top_k;
    g.out = h;
    g.ldo = 2 * I;
    g.slabs_per_cta = fmcu_wq_stream_slabs(g.grid_tiles, (2 * I + 15) / 16, sms);
    if ((e = gemm(g, st)) != cudaSuccess)
        return fail(err, cap, "GEMM1", e);

    swiglu_args sa = {h, topk_w, pl.pair_local, I, L->swiglu_limit, aq};
    e = fmcu_dev::launch_overlapped(swiglu_requant_kernel, dim3(warp_blocks(pairs * (I / GROUP))), dim3(THREADS), 0,
                                    st, sa, pairs);
    if (e != cudaSuccess)
        return fail(err, cap, "SwiGLU and GEMM2 input quantization", e);

    g.w = wq->w2;
    g.n_rows = H;
    g.n_out = H;
    g.a = aq;
    g.lda = I;
    g.a_k = I;
    g.a_row_div = 1;
    g.out = y;
    g.ldo = H;
    g.slabs_per_cta = fmcu_wq_stream_slabs(g.grid_tiles, (H + 15) / 16, sms);
    if ((e = gemm(g, st)) != cudaSuccess)
        return fail(err, cap, "GEMM2", e);

    /* The weights are in y already: the combine's unit-weight form (the
     * one the router weight on the input uses) sums y in slot order in f32
     * and rounds once. */
    fmcu_fwd::combine_args cb = {};
    cb.y = y;
    cb.w = topk_w;
    cb.pair_local = pl.pair_local;
    cb.k = L->top_k;
    cb.hidden = H;
    cb.on_input = 1;
    cb.dtype = FMOE_DTYPE_BF16;
    cb.out = out;
    cb.ldo = ldo;
    if ((e = fmcu_fwd::combine_launch(cb, m, st)) != cudaSuccess)
        return fail(err, cap, "combine", e);
    return 0;
}
