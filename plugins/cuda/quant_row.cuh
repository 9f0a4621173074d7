/*
 * plugins/cuda/quant_row.cuh - one GEMM-input row quantized by one block:
 * the row work of quantize.cu's quant and amax kernels and of plan.cu's plan
 * kernel's blocks 1..M (the stream and tiled tiers' GEMM inputs; the plan
 * kernel takes the scalar loop only). Device-side C++ only.
 *
 * Arithmetic (include/fusedmoe/formats.h, the reference's): per tensor, per
 * token or per 1 x group, scale = amax / 448 (f32, at least 1/(448*512)) or
 * its UE8M0 power of two, code = e4m3(sat(v / scale)).
 *
 * Why two paths. A row of 16-bit values whose 16-byte pieces fit QV a
 * thread (at most 8 * QV * blockDim values) is held in registers: every
 * thread issues all its loads first, the amax is taken from registers and
 * the codes are written from them, so the row costs one load round trip.
 * The scalar loop below it (any dtype, stride or length) waits a round trip
 * per value a thread owns, in each of its two passes: a Mixtral-8x7B GEMM2
 * input row (14336 values, 256 threads) took 19 us that way on an H100
 * (bench/cuda/RESULTS.md at 5ddad69, "Decode: GEMM-input rows quantized in
 * registers"). Both paths give the same codes: where the
 * scale comes from the values it quantizes (per token, per group, dynamic
 * per tensor), the register path divides bf16 values by one reciprocal and
 * a Markstein correction (fmcu_dev::to_e4m3_r, exact there and checked for
 * every bf16 value); f16 values and a static scale (which values may exceed
 * 448 times) keep IEEE division.
 */
#ifndef FMOE_PLUGIN_CUDA_QUANT_ROW_CUH
#define FMOE_PLUGIN_CUDA_QUANT_ROW_CUH

#include "plugins/cuda/device_math.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace fmcu_quant {

using fmcu_dev::QM_BF16;
using fmcu_dev::QM_GROUP;
using fmcu_dev::QM_TENSOR;
using fmcu_dev::QM_TOKEN;

struct quant_args {
    const void *src;
    int64_t ld;
    int32_t dtype;              /* src dtype (act) */
    uint32_t cols;
    const float *row_weight;    /* on_input: w[row] (top_k = 1), else NULL */
    const int32_t *row_valid;   /* skip rows with a negative entry; NULL: all */
    int mode;
    uint32_t group;
    int ue8m0;
    const float *static_scale;  /* TENSOR static */
    const uint32_t *amax;       /* TENSOR dynamic */
    void *dst;                  /* [rows, cols] */
    float *scale;               /* TENSOR: [1] (dynamic, written); TOKEN [rows]; GROUP [rows, groups] */
};

/* 16-byte pieces (8 values) a thread holds on the register path: rows of
 * up to 4096 values at 256 threads, 16384 at 1024 (fmcu_quant_threads).
 * Two, not eight: with eight the quant kernel of a Mixtral-8x7B GEMM2
 * input row took 6.9 us under ncu, with two 5.5 (H100; bench/cuda/RESULTS.md at 5ddad69,
 * "Decode: GEMM-input rows quantized in registers"). */
constexpr int QV = 2;
constexpr uint32_t QV_GROUP = 128; /* the one group size the register path takes: a half-warp's 16 pieces */

__device__ __forceinline__ float load_val(int32_t dtype, const void *p, int64_t i)
{
    switch (dtype) {
    case FMOE_DTYPE_F16: return __half2float(((const __half *)p)[i]);
    case FMOE_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

__device__ __forceinline__ float input_value(const quant_args &a, int64_t row, uint32_t c)
{
    float v = load_val(a.dtype, a.src, row * a.ld + c);
    return a.row_weight ? fmcu_dev::round_act(a.dtype, v * a.row_weight[row]) : v;
}

/* Whether row quantization takes the register path (uniform over the block). */
__device__ __forceinline__ bool row_in_registers(const quant_args &a)
{
    return a.mode != QM_BF16 && (a.dtype == FMOE_DTYPE_BF16 || a.dtype == FMOE_DTYPE_F16) && a.cols % 8 == 0 &&
           a.ld % 8 == 0 && (uintptr_t)a.src % 16 == 0 && (uintptr_t)a.dst % 8 == 0 &&
           a.cols / 8 <= QV * blockDim.x && (a.mode != QM_GROUP || a.group == QV_GROUP);
}

/* Piece u of this thread: pieces threadIdx.x + blockDim.x * u, so that the
 * 16 lanes of a half-warp hold one 128-value group. */
struct row_pieces {
    uint4 x[QV];
    int n;                      /* pieces in the row */
    float w;                    /* router weight on the input, if any */
    bool weighted;

    __device__ __forceinline__ int index(int u) const
    {
        return (int)threadIdx.x + (int)blockDim.x * u;
    }

    /* Every load first (zeros past the row: they do not move an amax). */
    __device__ __forceinline__ void load(const quant_args &a, int64_t row)
    {
        n = (int)(a.cols / 8);
        weighted = a.row_weight != nullptr;
        w = weighted ? a.row_weight[row] : 1.0f;
        const uint4 *src = (const uint4 *)((const uint16_t *)a.src + row * a.ld);
#pragma unroll
        for (int u = 0; u < QV; u++)
            x[u] = index(u) < n ? src[index(u)] : make_uint4(0, 0, 0, 0);
    }

    /* The 8 values of piece u as input_value gives them. */
    __device__ __forceinline__ void values(int32_t dtype, int u, float v[8]) const
    {
        const uint32_t h[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            if (dtype == FMOE_DTYPE_F16) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&h[q]));
                v[2 * q] = f.x;
                v[2 * q + 1] = f.y;
            } else {
                v[2 * q] = __uint_as_float(h[q] << 16);
                v[2 * q + 1] = __uint_as_float(h[q] & 0xFFFF0000u);
            }
        }
        if (weighted)
#pragma unroll
            for (int q = 0; q < 8; q++)
                v[q] = fmcu_dev::round_act(dtype, v[q] * w);
    }

    __device__ __forceinline__ float amax_of(int32_t dtype, int u) const
    {
        float v[8], m = 0.0f;
        values(dtype, u, v);
#pragma unroll
        for (int q = 0; q < 8; q++)
            m = fmcu_dev::amax_step(m, v[q]);
        return m;
    }

    __device__ __forceinline__ float amax(int32_t dtype) const
    {
        float m = 0.0f;
#pragma unroll
        for (int u = 0; u < QV; u++) {
            const float x_u = amax_of(dtype, u);
            m = x_u > m ? x_u : m;
        }
        return m;
    }

    /* Piece u's 8 codes; r = 1 / s for the Markstein quotient, or 0: IEEE division. */
    __device__ __forceinline__ uint2 codes(int32_t dtype, int u, float s, float r) const
    {
        float v[8];
        values(dtype, u, v);
        uint32_t c[8];
#pragma unroll
        for (int q = 0; q < 8; q++)
            c[q] = r != 0.0f ? fmcu_dev::to_e4m3_r(v[q], s, r) : (uint32_t)fmcu_dev::to_e4m3(v[q], s);
        return make_uint2(c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24, c[4] | c[5] << 8 | c[6] << 16 | c[7] << 24);
    }
};

/* 1 / s for the Markstein quotient of values of this dtype, or 0: IEEE
 * division (to_e4m3_r was checked against it for every bf16 value). */
__device__ __forceinline__ float quotient_recip(int32_t dtype, float s)
{
    return dtype == FMOE_DTYPE_BF16 ? __frcp_rn(s) : 0.0f;
}

/* The register path; `red` holds 32 floats. */
__device__ __forceinline__ void quant_row_registers(const quant_args &a, int64_t row, float *red)
{
    row_pieces p;
    p.load(a, row);
    uint2 *q = (uint2 *)((uint8_t *)a.dst + row * a.cols);
    if (a.mode == QM_GROUP) {
        const int groups = (int)((a.cols + QV_GROUP - 1) / QV_GROUP);
#pragma unroll
        for (int u = 0; u < QV; u++) {
            float m = p.amax_of(a.dtype, u);
#pragma unroll
            for (int o = 8; o; o >>= 1) { /* the half-warp's group; every lane takes part */
                const float x = __shfl_xor_sync(0xffffffffu, m, o);
                m = x > m ? x : m;
            }
            const int j = p.index(u);
            if (j < p.n) {
                const float s = a.ue8m0 ? fmcu_dev::scale_ue8m0(m) : fmcu_dev::scale_f32(m);
                if (j % 16 == 0)
                    a.scale[row * groups + j / 16] = s;
                q[j] = p.codes(a.dtype, u, s, quotient_recip(a.dtype, s));
            }
        }
        return;
    }
    float s, r;
    if (a.mode == QM_TOKEN) {
        s = fmcu_dev::scale_f32(fmcu_dev::block_max(p.amax(a.dtype), red));
        r = quotient_recip(a.dtype, s);
        if (threadIdx.x == 0)
            a.scale[row] = s;
    } else if (a.static_scale) {
        s = *a.static_scale;
        r = 0.0f;
    } else {
        s = fmcu_dev::scale_f32(__uint_as_float(*a.amax));
        r = quotient_recip(a.dtype, s);
        if (threadIdx.x == 0)
            a.scale[0] = s; /* every block writes the same value */
    }
#pragma unroll
    for (int u = 0; u < QV; u++)
        if (p.index(u) < p.n)
            q[p.index(u)] = p.codes(a.dtype, u, s, r);
}

/* One row by one block (blockDim a multiple of 32); `red` holds 32 floats.
 * REGISTERS = false: the scalar loop only (the plan kernel's blocks 1..M:
 * plan.cu says why). */
template <bool REGISTERS = true>
__device__ __forceinline__ void quant_row(const quant_args &a, int64_t row, float *red)
{
    if (a.row_valid && a.row_valid[row] < 0)
        return;
    if (REGISTERS && row_in_registers(a)) {
        quant_row_registers(a, row, red);
        return;
    }
    const uint32_t n = a.cols;
    if (a.mode == QM_BF16) {
        __nv_bfloat16 *d = (__nv_bfloat16 *)a.dst + row * n;
        for (uint32_t c = threadIdx.x; c < n; c += blockDim.x)
            d[c] = __float2bfloat16_rn(input_value(a, row, c));
        return;
    }
    uint8_t *q = (uint8_t *)a.dst + row * n;
    if (a.mode == QM_GROUP) {
        const uint32_t groups = (n + a.group - 1) / a.group;
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
        for (uint32_t gi = warp; gi < groups; gi += warps) {
            uint32_t c0 = gi * a.group, c1 = min(n, c0 + a.group);
            float amax = 0.0f;
            for (uint32_t c = c0 + lane; c < c1; c += 32)
                amax = fmcu_dev::amax_step(amax, input_value(a, row, c));
            amax = fmcu_dev::warp_max(amax);
            float s = a.ue8m0 ? fmcu_dev::scale_ue8m0(amax) : fmcu_dev::scale_f32(amax);
            if (lane == 0)
                a.scale[row * groups + gi] = s;
            for (uint32_t c = c0 + lane; c < c1; c += 32)
                q[c] = fmcu_dev::to_e4m3(input_value(a, row, c), s);
        }
        return;
    }
    float s;
    if (a.mode == QM_TOKEN) {
        float amax = 0.0f;
        for (uint32_t c = threadIdx.x; c < n; c += blockDim.x)
            amax = fmcu_dev::amax_step(amax, input_value(a, row, c));
        s = fmcu_dev::scale_f32(fmcu_dev::block_max(amax, red));
        if (threadIdx.x == 0)
            a.scale[row] = s;
    } else if (a.static_scale) {
        s = *a.static_scale;
    } else {
        s = fmcu_dev::scale_f32(__uint_as_float(*a.amax));
        if (threadIdx.x == 0)
            a.scale[0] = s; /* every block writes the same value */
    }
    for (uint32_t c = threadIdx.x; c < n; c += blockDim.x)
        q[c] = fmcu_dev::to_e4m3(input_value(a, row, c), s);
}

/* max |value| of one row by one block (every thread gets it). */
__device__ __forceinline__ float row_amax(const quant_args &a, int64_t row, float *red)
{
    float m = 0.0f;
    if (row_in_registers(a)) {
        row_pieces p;
        p.load(a, row);
        m = p.amax(a.dtype);
    } else {
        for (uint32_t c = threadIdx.x; c < a.cols; c += blockDim.x)
            m = fmcu_dev::amax_step(m, input_value(a, row, c));
    }
    return fmcu_dev::block_max(m, red);
}

} // namespace fmcu_quant

#endif
