/*
 * plugins/cuda/nvfp4_quant.cuh - NVFP4 activation quantization as
 * fmoe_nvfp4_quantize does it (QUANT convention, g the expert's input
 * global): per block of 16 values vmax = max |x| (NaN skipped), block
 * scale sf = e4m3(g * vmax / 6), each value e2m1_RNE(x / (sf * (1/g)))
 * and written back decoded, e2m1 * sf (exact in bf16 and f16). The
 * W4A4 GEMM inputs are staged with it: per pair by wq_stage.cu, and in
 * the prefill gather (prefill_rows.cu) per token for each of its pairs.
 *
 * A block is two lanes' 8 values each (one 16-byte access a lane), so
 * pair_vmax shuffles with the neighbouring lane: callers run whole warps,
 * the lanes of a pair together. C++ for nvcc; the scalar pieces are
 * host-callable too, so tests/cuda/test_nvfp4_quant.cu checks them
 * against the core's quantizer without a GPU.
 */
#ifndef FMOE_PLUGIN_CUDA_NVFP4_QUANT_CUH
#define FMOE_PLUGIN_CUDA_NVFP4_QUANT_CUH

#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

namespace fmcu_nvfp4 {

constexpr int LANE_VALUES = 8; /* a lane's half of a block of 16 */

/* The value of fmoe_fp4_e2m1_encode(x)'s code: RNE onto the e2m1 grid,
 * saturating at 6, sign of zero kept, NaN -> +6. By float arithmetic:
 * the grid's step at |x| is 0.5 below 2, else half of |x|'s binade
 * (1 in [2, 4), 2 from 4), and adding c = 1.5 * 2^23 * step, then
 * subtracting it, rounds |x| to a multiple of the step with ties to even
 * multiples, which are the even codes (ties: 0.25 -> 0, 0.75 -> 1,
 * 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4); past 6 (and for
 * infinities, whose sum is NaN) the minimum gives 6. About 9 instructions
 * where selecting among the thresholds took 17, in the two quantizing
 * passes of NVFP4 W4A4 that are bound by instructions (ncu, H200,
 * bench/cuda/RESULTS.md, "e2m1 on the swapped GEMM: scales folded"). The
 * same value for every f32 input: checked over all 2^32 on the host, and
 * in CI against the core's encoder and decoder near every threshold
 * (tests/cuda/test_nvfp4_quant.cu). */
__host__ __device__ __forceinline__ float e2m1_round(float x)
{
    const float a = fabsf(x);
#ifdef __CUDA_ARCH__
    const float e = __uint_as_float(__float_as_uint(a) & 0x7F800000u); /* 2^floor(log2 a); 0 below normals */
    const float c = __fmul_rn(fmaxf(e, 1.0f), 6291456.0f);              /* 1.5 * 2^23 * step */
    const float q = fminf(__fsub_rn(__fadd_rn(a, c), c), 6.0f);
#else
    uint32_t b;
    memcpy(&b, &a, 4);
    b &= 0x7F800000u;
    float e;
    memcpy(&e, &b, 4);
    const float c = fmaxf(e, 1.0f) * 6291456.0f;
    volatile float sum = a + c; /* rounded to f32 here, whatever the host's evaluation method */
    const float q = fminf(sum - c, 6.0f);
#endif
    return isnan(x) ? 6.0f : copysignf(q, x);
}

/* vmax's step: NaN never replaces it. */
__host__ __device__ __forceinline__ float vmax_step(float vmax, float m)
{
    return m > vmax ? m : vmax;
}

/* A block's scale and its output multiplier. */
struct block_scale {
    float sfq, out;
};

__host__ __device__ __forceinline__ block_scale scale_of(float vmax, float gq, float rcp_g)
{
    __nv_fp8_e4m3 sf(gq * (vmax * (1.0f / 6.0f)));
    const float sfq = (float)sf;
    return {sfq, sfq != 0.0f ? 1.0f / (sfq * rcp_g) : 0.0f};
}

/* The block's vmax from this lane's 8 values (`on`: the lane holds some;
 * else it contributes 0) and its pair lane's. All 32 lanes call it. */
__device__ __forceinline__ float pair_vmax(const float (&x)[LANE_VALUES], bool on)
{
    float vmax = 0.0f;
    if (on) {
#pragma unroll
        for (int i = 0; i < LANE_VALUES; i++)
            vmax = vmax_step(vmax, fabsf(x[i]));
    }
    return vmax_step(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
}

/* The lane's 8 values quantized and decoded with the block's scale. */
__host__ __device__ __forceinline__ void quantize8(const float (&x)[LANE_VALUES], block_scale s,
                                                   float (&v)[LANE_VALUES])
{
#ifdef __CUDA_ARCH__ /* the host compiler does not know the pragma */
#pragma unroll
#endif
    for (int i = 0; i < LANE_VALUES; i++)
        v[i] = e2m1_round(x[i] * s.out) * s.sfq;
}

} // namespace fmcu_nvfp4

#endif
