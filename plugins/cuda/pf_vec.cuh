/*
 * plugins/cuda/pf_vec.cuh - the arithmetic and vector helpers the prefill
 * tier's small kernels share (prefill_rows.cu: gather and combine;
 * prefill_act.cu: the activation stage): quantization as quantize.cu does
 * it, block reductions, 8 or 4 bf16 values to and from registers.
 * Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_PF_VEC_CUH
#define FMOE_PLUGIN_CUDA_PF_VEC_CUH

#include "plugins/cuda/device_math.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace fmcu_pf {

using bf16 = __nv_bfloat16;
constexpr int GROUP = 128;        /* block scheme: activation group and weight block (both dimensions) */

/* ------------------------------------------------------------------------ */
/* Arithmetic shared with quantize.cu / gemm.cu (same expressions)          */
/* ------------------------------------------------------------------------ */

using fmcu_dev::scale_f32;
using fmcu_dev::scale_ue8m0;

/* The e4m3 code of v / s, widened for packing four into a word. */
__device__ __forceinline__ uint32_t to_e4m3(float v, float s)
{
    return fmcu_dev::to_e4m3(v, s);
}

using fmcu_dev::amax_step;
using fmcu_dev::block_max;
using fmcu_dev::warp_max;

__device__ __forceinline__ float round_bf16(float v)
{
    return __bfloat162float(__float2bfloat16_rn(v));
}

/* ------------------------------------------------------------------------ */
/* Vector helpers (8 or 4 bf16 values)                                       */
/* ------------------------------------------------------------------------ */

__device__ __forceinline__ void load8(const bf16 *p, bool vec, float v[8])
{
    if (vec) {
        uint4 u = *(const uint4 *)p;
        const bf16 *h = (const bf16 *)&u;
#pragma unroll
        for (int q = 0; q < 8; q++)
            v[q] = __bfloat162float(h[q]);
    } else {
#pragma unroll
        for (int q = 0; q < 8; q++)
            v[q] = __bfloat162float(p[q]);
    }
}

__device__ __forceinline__ void load4(const bf16 *p, bool vec, float v[4])
{
    if (vec) {
        uint2 u = *(const uint2 *)p;
        const bf16 *h = (const bf16 *)&u;
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = __bfloat162float(h[q]);
    } else {
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = __bfloat162float(p[q]);
    }
}

/* v already representable in bf16 (rounding is exact). */
__device__ __forceinline__ void store8(bf16 *p, bool vec, const float v[8])
{
    if (vec) {
        uint4 u;
        bf16 *h = (bf16 *)&u;
#pragma unroll
        for (int q = 0; q < 8; q++)
            h[q] = __float2bfloat16_rn(v[q]);
        *(uint4 *)p = u;
    } else {
#pragma unroll
        for (int q = 0; q < 8; q++)
            p[q] = __float2bfloat16_rn(v[q]);
    }
}

__device__ __forceinline__ void store_q8(uint8_t *p, const float v[8], float s)
{
    uint2 u;
    u.x = to_e4m3(v[0], s) | to_e4m3(v[1], s) << 8 | to_e4m3(v[2], s) << 16 | to_e4m3(v[3], s) << 24;
    u.y = to_e4m3(v[4], s) | to_e4m3(v[5], s) << 8 | to_e4m3(v[6], s) << 16 | to_e4m3(v[7], s) << 24;
    *(uint2 *)p = u;
}

using fmcu_dev::to_e4m3_r;

__device__ __forceinline__ void store_q8_r(uint8_t *p, const float v[8], float s, float r)
{
    uint2 u;
    u.x = to_e4m3_r(v[0], s, r) | to_e4m3_r(v[1], s, r) << 8 | to_e4m3_r(v[2], s, r) << 16 |
          to_e4m3_r(v[3], s, r) << 24;
    u.y = to_e4m3_r(v[4], s, r) | to_e4m3_r(v[5], s, r) << 8 | to_e4m3_r(v[6], s, r) << 16 |
          to_e4m3_r(v[7], s, r) << 24;
    *(uint2 *)p = u;
}

__device__ __forceinline__ void store_q4(uint8_t *p, const float v[4], float s)
{
    *(uint32_t *)p = to_e4m3(v[0], s) | to_e4m3(v[1], s) << 8 | to_e4m3(v[2], s) << 16 | to_e4m3(v[3], s) << 24;
}

/* Local expert of sorted row i (offsets[e] <= i < offsets[e + 1]). */
__device__ __forceinline__ int expert_of(const int32_t *offsets, int E, int i)
{
    int lo = 0, hi = E;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (offsets[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

using fmcu_dev::QM_BF16;
using fmcu_dev::QM_GROUP;
using fmcu_dev::QM_TENSOR;
using fmcu_dev::QM_TOKEN;

} // namespace fmcu_pf

#endif
