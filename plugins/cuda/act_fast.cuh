/*
 * plugins/cuda/act_fast.cuh - the gated SiLU of a GEMM1 epilogue that
 * computes the activation from its registers (prefill_sm90.cu's
 * GatedActStore, fp8_grouped_sm90.cu's gated epilogue), and the amax
 * helpers both use. Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_ACT_FAST_CUH
#define FMOE_PLUGIN_CUDA_ACT_FAST_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace fmcu_act {

/* max(m, |v|); a NaN v leaves m (the reference's amax ignores NaN). */
__device__ __forceinline__ float amax_step(float m, float v)
{
    float x = fabsf(v);
    return x > m ? x : m;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o; o >>= 1) {
        float x = __shfl_xor_sync(0xffffffffu, v, o);
        v = x > v ? x : v;
    }
    return v;
}

/* act_bf16's SiLU fast path alone (prefill_sm90.cu), for GEMM1's fused
 * epilogue: branch-free (the epilogue runs on one warp per scheduler, so
 * its speed is the instruction-level parallelism across a fragment's pairs)
 * and call-free (a call saves the live accumulators to the stack: the fp8
 * kernel spilled in its main loop and ran 5x slower). IEEE division has a
 * called slow path, so this divides with __fdividef (2 ulps for divisors in
 * [1, 2^126]; larger ones give 0, which falls back): the f32 value stays
 * well inside act_bf16's 32-ulp margin, so an accepted value rounds to the
 * same bf16 as act_bf16's. Exact zeros of either input are exact here too
 * (0 * x in f32 as in double). lim: the SiLU limit, or +inf for none.
 * Returns the f32 value, not rounded; ok = false: the caller must take
 * act_bf16. */
__device__ __forceinline__ float act_bf16_fast(float lim, float g, float u, bool &ok)
{
    const float gg = g > lim ? lim : g;
    const float uu = u < -lim ? -lim : u > lim ? lim : u;
    const float f = __fdividef(gg, 1.0f + expf(-gg)) * uu;
    const int low = (int)(__float_as_uint(f) & 0xFFFFu);
    ok = ((int)isfinite(f) & (int)(fabsf(f) >= 1e-30f) & (int)(abs(low - 0x8000) > 32)) |
         ((int)(gg == 0.0f) & (int)isfinite(uu)) | ((int)(uu == 0.0f) & (int)isfinite(gg));
    return f;
}

} // namespace fmcu_act

#endif
