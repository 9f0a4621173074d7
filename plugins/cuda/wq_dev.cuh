/*
 * plugins/cuda/wq_dev.cuh - device pieces shared by the two kernels over
 * 4-bit and int weights (wq_gemm.cu tiled, wq_stream.cu weight-streaming):
 * the bf16/f16 MMA, exact value packing and the e2m1 code values.
 */
#ifndef FMOE_PLUGIN_CUDA_WQ_DEV_CUH
#define FMOE_PLUGIN_CUDA_WQ_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

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

} // namespace fmcu_wq_dev

#endif
