/*
 * plugins/cuda/wq_dev.cuh - device pieces shared by the two kernels over
 * 4-bit and int weights (wq_gemm.cu tiled, wq_stream.cu weight-streaming):
 * the bf16/f16 MMA, exact value packing, the e2m1 code values, the
 * register-level dequantization of packed codes, and the epilogue of a
 * thread's two weight rows (wq_stream.cu, wq_wgmma.cu).
 */
#ifndef FMOE_PLUGIN_CUDA_WQ_DEV_CUH
#define FMOE_PLUGIN_CUDA_WQ_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "plugins/cuda/act_math.cuh"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/wq_gemm.h"

namespace fmcu_wq_dev {

/* D += A·B, m16n8k16, f16 or bf16 operands, f32 accumulation. */
template <bool F16> __device__ __forceinline__ void mma16(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    if constexpr (F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Two values (exact in the type) as one 32-bit MMA register. */
template <bool F16> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    if constexpr (F16) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    } else {
        __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&b);
    }
}

/* Exact value of an e2m1 code (low 4 bits). */
__device__ __forceinline__ float e2m1_value(uint32_t c)
{
    uint32_t e = (c >> 1) & 3, m = c & 1;
    float mag = e == 0 ? 0.5f * (float)m : (1.0f + 0.5f * (float)m) * (float)(1u << (e - 1));
    return (c & 8) ? -mag : mag;
}

__device__ __forceinline__ uint32_t bits_of(__nv_bfloat162 v)
{
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ __nv_bfloat162 bf2_of(uint32_t v)
{
    return *reinterpret_cast<__nv_bfloat162 *>(&v);
}

__device__ __forceinline__ uint32_t bits_of(__half2 v)
{
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ __half2 h2_of(uint32_t v)
{
    return *reinterpret_cast<__half2 *>(&v);
}

/* Nibble of a lane's 4-byte word that holds its fragment position i (0..7):
 * wq_pack.h's fmcu_wq_nibble within one lane. */
__host__ __device__ constexpr int nibble_of(int i)
{
    return 4 * (i & 1) + (i >> 1);
}

/* Register j (0..3) of a lane's 4-byte word of 4-bit codes: the codes of
 * fragment positions 2 j and 2 j + 1, which wq_pack.h places at nibbles j
 * and j + 4, as bits 0-3 and 16-19. */
__device__ __forceinline__ uint32_t nibble_pair(uint32_t w, int j)
{
    return (w >> (4 * j)) & 0x000F000Fu;
}

/* (x & mask) | or in one LOP3 (the compiler emits two: one immediate each). */
__device__ __forceinline__ uint32_t and_or(uint32_t x, uint32_t mask, uint32_t or_)
{
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(x), "r"(mask), "r"(or_));
    return r;
}

/* int4 codes (value + 8) of register j of word w as (q - 8 - zp) pairs;
 * sub = 128 + 8 + zp (bf16) or 1024 + 8 + zp (f16) in both halves: the
 * nibbles OR-ed into the mantissa of 128 (1024), then one packed
 * subtraction. */
template <bool F16> __device__ __forceinline__ uint32_t dq_int4(uint32_t w, int j, uint32_t sub)
{
    const uint32_t x = and_or(w >> (4 * j), 0x000F000Fu, F16 ? 0x64006400u : 0x43004300u);
    if constexpr (F16)
        return bits_of(__hsub2(h2_of(x), h2_of(sub)));
    else
        return bits_of(__hsub2(bf2_of(x), bf2_of(sub)));
}

/* e2m1 codes of register j of word w as bf16 e2m1 * s pairs; s2 = (s, s),
 * bf16: the bits moved into place as e2m1 * 2^-126 (a subnormal for 0.5),
 * then two exact products. */
__device__ __forceinline__ uint32_t dq_fp4_bf16(uint32_t w, int j, uint32_t s2)
{
    const uint32_t x = nibble_pair(w, j);
    const uint32_t sub = ((x << 6) | (x << 12)) & 0x81C081C0u; /* e2m1 * 2^-126 */
    const __nv_bfloat162 two126 = bf2_of(0x7E807E80u);
    return bits_of(__hmul2(__hmul2(bf2_of(sub), two126), bf2_of(s2)));
}

/* Register j (0..3) of a lane's word of e2m1 codes (wq_pack.h: nibbles j
 * and j + 4, bits 4 j and 4 j + 16) as bf16 e2m1 * s, where s2 holds
 * (s * 2^126, twice) and that is finite: one multiply of the codes' bits
 * moved into place as e2m1 * 2^-126 (a subnormal for 0.5), where
 * dq_fp4_bf16 makes two. The masked nibbles times 2^6 + 2^12 (j even; j
 * odd: 2^2 + 2^8, from the word or from it shifted by 8 for j >= 2) put
 * each nibble's e1 e0 m at bits 8..6 and its sign at bit 15 of its half,
 * the two copies in disjoint bits (no carries); the mask keeps those.
 * Scale pairs for it: mx_fold_s2, nv_fold_s2. */
__device__ __forceinline__ uint32_t dq_e2m1_fused(uint32_t w, int j, uint32_t s2)
{
    const uint32_t v = j < 2 ? w : w >> 8;
    const uint32_t x = v & ((j & 1) ? 0x00F000F0u : 0x000F000Fu);
    const uint32_t t = (x * ((j & 1) ? 260u : 4160u)) & 0x81C081C0u;
    return bits_of(__hmul2(bf2_of(t), bf2_of(s2)));
}

/* dq_e2m1_fused's scale pair of a ue8m0 code c <= 128: 2^(c - 127) * 2^126
 * = 2^(c - 1), bf16 bits (c + 126) << 7 in both halves (c = 0: 0.5, the
 * same formula). A code above 128 would overflow: callers check. */
__device__ __forceinline__ uint32_t mx_fold_s2(uint32_t c)
{
    return (c + 126u) * 0x00800080u;
}

/* A block scale code as f32 (ue8m0: 2^(c-127), 0xFF NaN; else e4m3fn). */
__device__ __forceinline__ float scale_code(uint32_t c, bool mx)
{
    if (mx) {
        if (c == 0xFF)
            return __int_as_float(0x7FC00000);
        return c == 0 ? __int_as_float(0x00400000) : __int_as_float((int)(c << 23));
    }
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    return __half2float(__half(h));
}

/* dq_e2m1_fused's scale pair of an e4m3fn code: s * 2^118 (finite for
 * every code, |s| <= 448 < 2^9; exact in bf16, 4 significant bits), so the
 * products come out 2^-8 of e2m1 * s and the caller's epilogue multiplies
 * its sums by 2^8, exactly. */
__device__ __forceinline__ uint32_t nv_fold_s2(uint32_t c)
{
    const float f = scale_code(c, false) * 0x1p118f;
    return bits_of(__floats2bfloat162_rn(f, f));
}

/* nv_fold_s2 of the two e4m3fn codes in the low 16 bits of `two` (the
 * first in the low byte), the same bits: one conversion for both (e4m3x2
 * to f16x2, exact), then the same products and rounding. A code at a
 * time, with its extraction, the swapped GEMM spent 28 more instructions
 * a stage (SASS of its NVFP4 kernel: 5816 -> 5648). */
__device__ __forceinline__ void nv_fold_s2x2(uint32_t two, uint32_t &first, uint32_t &second)
{
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xFFFFu), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    const float a = f.x * 0x1p118f, b = f.y * 0x1p118f;
    first = bits_of(__floats2bfloat162_rn(a, a));
    second = bits_of(__floats2bfloat162_rn(b, b));
}

/* A 32-column chunk of e2m1 codes (16 bytes: four lane words in wq_pack.h's
 * fragment order) times its scales as 32 bf16 values in column order:
 * out[i] is bf16 pair i. s2[h] = (s, s) of columns 16 h .. 16 h + 15 (one
 * MXFP4 scale twice, or two NVFP4 ones). Register j of word c4 holds
 * columns 16 (j >> 1) + 8 (j & 1) + 2 c4 and the one after, so it is pair
 * 8 (j >> 1) + 4 (j & 1) + c4: all indices constants after unrolling. The
 * prefill dequant kernel and the grouped GEMM's converter share it. */
__device__ __forceinline__ void dq_chunk_bf16(const uint32_t (&words)[4], const uint32_t (&s2)[2], uint32_t (&out)[16])
{
#pragma unroll
    for (int c4 = 0; c4 < 4; c4++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            out[8 * (j >> 1) + 4 * (j & 1) + c4] = dq_fp4_bf16(words[c4], j, s2[j >> 1]);
}

/* The gated activation of a non-SiLU function, or a SiLU value the fast
 * path could not round (about 1 in 1000): out of line, so that the double
 * path is not inlined at every stored value. */
static __device__ __noinline__ float act_gated_slow(fmcu_dev::act_params ap, float g, float u)
{
    return fmcu_dev::activate(ap, g, u);
}

/* round_act(act(g, u)) of a gated GEMM1: bf16 SiLU in f32 where that
 * provably rounds as the double path does (act_math.cuh), else the double
 * path. */
__device__ __forceinline__ float act_gated(const fmcu_dev::act_params &ap, int32_t dt, float g, float u)
{
    if (dt == FMOE_DTYPE_BF16 && ap.activation == FMOE_ACT_SILU) {
        bool ok;
        const float f = fmcu_pf::act_bf16_fast(ap.limit > 0.0f ? ap.limit : INFINITY, g, u, ok);
        if (ok)
            return fmcu_dev::round_act(dt, f);
    }
    return fmcu_dev::round_act(dt, act_gated_slow(ap, g, u));
}

/* One token's results a_lo, a_hi of a thread's weight rows r_lo, r_hi
 * (f32 sums with the int scales applied), into the pair's output row:
 * times the expert's out_mul, plus bias, rounded to the act dtype; GEMM1
 * gated (r_lo the gate row of output column r_lo, r_hi its up row) stores
 * act(gate, up), GEMM1 plain act of each row, GEMM2 each row. */
__device__ __forceinline__ void store_rows(const fmcu_wq_gemm_args &p, const fmcu_dev::act_params &ap, int e,
                                           int pair, int r_lo, int r_hi, bool ok_lo, bool ok_hi, float a_lo,
                                           float a_hi, float omul)
{
    const int32_t dt = p.act_dtype;
    const int wrow[2] = {r_lo, r_hi};
    const bool wok[2] = {ok_lo, ok_hi};
    const float a[2] = {a_lo, a_hi};
    float v[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float x = a[h] * omul;
        if (p.bias && wok[h])
            x += fmcu_dev::load_act(dt, p.bias, (int64_t)e * p.n_rows + wrow[h]);
        v[h] = fmcu_dev::round_act(dt, x);
    }
    const int64_t orow = (int64_t)pair * p.ldo;
    if (p.gemm1 && p.gated) {
        if (ok_lo)
            fmcu_dev::store_act(dt, p.out, orow + r_lo, act_gated(ap, dt, v[0], v[1]));
    } else if (p.gemm1) {
        if (ok_lo)
            fmcu_dev::store_act(dt, p.out, orow + r_lo, fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], 0.0f)));
        if (ok_hi)
            fmcu_dev::store_act(dt, p.out, orow + r_hi, fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[1], 0.0f)));
    } else {
        if (ok_lo)
            fmcu_dev::store_act(dt, p.out, orow + r_lo, v[0]);
        if (ok_hi)
            fmcu_dev::store_act(dt, p.out, orow + r_hi, v[1]);
    }
}

} // namespace fmcu_wq_dev

#endif
