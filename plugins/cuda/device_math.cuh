/*
 * plugins/cuda/device_math.cuh - device helpers shared by the GEMM tiers
 * (gemm.cu, stream_gemm.cu): the tensor-core instruction both use, and the
 * epilogue arithmetic, which must round at the same points as the reference
 * (core/activation.c: activations in double, rounded once to f32, then to
 * the activation dtype). Device-side C++ only.
 */
#ifndef FMOE_PLUGIN_CUDA_DEVICE_MATH_CUH
#define FMOE_PLUGIN_CUDA_DEVICE_MATH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "fusedmoe/common.h"

namespace fmcu_dev {

/* Programmatic dependent launch (sm_90+): a kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may start while the
 * previous one drains. It must call pdl_wait() before it reads anything the
 * previous kernels wrote (the wait returns once they completed and their
 * writes are visible); pdl_trigger() lets the next kernel launch early.
 * Both are no-ops for a kernel launched without the attribute. */
__device__ __forceinline__ void pdl_wait()
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void pdl_trigger()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

/* Launch `kernel` so that it may overlap the tail of the previous kernel on
 * the stream (it must begin with pdl_wait(), or do only independent work
 * before it). Works under graph capture. */
template <typename... Params, typename... Args>
cudaError_t launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                              Args &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

/* 16 bytes of weights that are read once: kept out of L1, with whole 256-byte
 * sectors asked of L2 (the weight-streaming kernels). */
__device__ __forceinline__ uint4 load_stream(const uint8_t *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* 16 bytes of shared memory at a shared-window address. */
__device__ __forceinline__ uint4 lds128(uint32_t addr)
{
    uint4 r;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr));
    return r;
}

/* Let each kernel ask for up to `bytes` of dynamic shared memory (above the
 * default 48 KiB); the first error, or cudaSuccess. */
template <typename... Kernels> cudaError_t allow_dynamic_smem(int bytes, Kernels... kernels)
{
    cudaError_t e = cudaSuccess;
    ((e = e == cudaSuccess ? cudaFuncSetAttribute(kernels, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) : e),
     ...);
    return e;
}

/* D += A·B on one warp: m16n8k32 e4m3 or m16n8k16 bf16, f32 accumulation.
 * Counted in 32-bit registers both fragments have the same layout, so one
 * caller serves both element types. */
template <bool FP8> __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    if constexpr (FP8) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

/* Activation quantization to e4m3, as include/fusedmoe/formats.h defines it
 * and the reference does: scale = amax / 448 (at least 1/(448*512)), or its
 * UE8M0 power of two (DeepGEMM: 2^ceil(log2), amax at least 1e-4); code =
 * e4m3(saturate(v / scale)) with IEEE division. */
constexpr float FP8_MAX = 448.0f;

__device__ __forceinline__ float scale_f32(float amax)
{
    float s = amax / FP8_MAX, floor = 1.0f / (FP8_MAX * 512.0f);
    return s > floor ? s : floor;
}

__device__ __forceinline__ float scale_ue8m0(float amax)
{
    float a = amax > 1e-4f ? amax : 1e-4f;
    uint32_t u = __float_as_uint(a / FP8_MAX);
    uint32_t e = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    e = e < 1 ? 1 : e > 254 ? 254 : e;
    return __uint_as_float(e << 23);
}

/* max(m, |v|); a NaN v never wins (the reference's amax skips NaN). */
__device__ __forceinline__ float amax_step(float m, float v)
{
    const float x = fabsf(v);
    return x > m ? x : m;
}

/* The largest of a warp's 32 values (lane order does not matter: max). */
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o; o >>= 1) {
        const float x = __shfl_xor_sync(0xffffffffu, v, o);
        v = x > v ? x : v;
    }
    return v;
}

/* The largest of the block's values (every thread gets it); red holds one
 * float per warp. Its barriers also order what the block wrote before it. */
__device__ __forceinline__ float block_max(float v, float *red)
{
    v = warp_max(v);
    const int w = threadIdx.x >> 5;
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        red[w] = v;
    __syncthreads();
    float m = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        m = red[i] > m ? red[i] : m;
    return m;
}

__device__ __forceinline__ uint8_t to_e4m3(float v, float s)
{
    return (uint8_t)__nv_cvt_float_to_fp8(v / s, __NV_SATFINITE, __NV_E4M3);
}

/* e4m3(v / s) for |v| <= 448 s (s from the amax of the values quantized
 * with it), r = 1 / s with IEEE division, s finite: the quotient from
 * v * r and one Markstein correction, fma(v - q0 * s, r, q0), which is the
 * correctly rounded v / s (Markstein's theorem: r the rounded reciprocal,
 * q0 within an ulp, the residual exact) wherever the e4m3 code depends on
 * it; only quotients far below e4m3's smallest subnormal (residual
 * underflow) differ, and the sign of a zero, which copysignf restores.
 * Without IEEE division's range check and slow-path branch per value.
 * Checked against e4m3(v / s) for every finite bf16 v and 2^20 scales on an
 * H100 (bench/cuda/RESULTS.md at 5ddad69, "Prefill: tile shapes and FP8
 * accumulation"). */
__device__ __forceinline__ uint32_t to_e4m3_r(float v, float s, float r)
{
    const float q0 = __fmul_rn(v, r);
    const float q = copysignf(__fmaf_rn(__fmaf_rn(-q0, s, v), r, q0), v);
    return (uint8_t)__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
}

/* Activation-quantization modes: the GEMM input of each scheme (forward.cu,
 * quant_row.cuh; the prefill tier's pf_vec.cuh). */
enum { QM_BF16, QM_TENSOR, QM_TOKEN, QM_GROUP };

__device__ __forceinline__ float round_act(int32_t dtype, float v)
{
    return dtype == FMOE_DTYPE_F16 ? __half2float(__float2half_rn(v)) : __bfloat162float(__float2bfloat16_rn(v));
}

__device__ __forceinline__ float load_act(int32_t dtype, const void *p, int64_t i)
{
    return dtype == FMOE_DTYPE_F16 ? __half2float(((const __half *)p)[i])
                                   : __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

/* One value, already rounded to the dtype. */
__device__ __forceinline__ void store_act(int32_t dtype, void *p, int64_t i, float v)
{
    if (dtype == FMOE_DTYPE_F16)
        ((__half *)p)[i] = __float2half_rn(v);
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

/* Two adjacent values, already rounded to the dtype. */
__device__ __forceinline__ void store_act2(int32_t dtype, void *p, int64_t i, float v0, float v1)
{
    if (dtype == FMOE_DTYPE_F16)
        *(__half2 *)((__half *)p + i) = __floats2half2_rn(v0, v1);
    else
        *(__nv_bfloat162 *)((__nv_bfloat16 *)p + i) = __floats2bfloat162_rn(v0, v1);
}

/* The activations of core/activation.c, in double, rounded once to f32. */
__device__ inline double silu_d(double x)
{
    return x / (1.0 + exp(-x));
}

__device__ inline double gate_fn(int32_t act, double g)
{
    switch (act) {
    case FMOE_ACT_SILU: return silu_d(g);
    case FMOE_ACT_GELU: return 0.5 * g * erfc(-g * 0.70710678118654752440);
    case FMOE_ACT_GELU_TANH: {
        double inner = 0.79788456080286535588 * (g + 0.044715 * g * g * g);
        return 0.5 * g * (1.0 + tanh(inner));
    }
    case FMOE_ACT_RELU2: {
        double r = g > 0.0 ? g : 0.0;
        return r * r;
    }
    default: return nan("");
    }
}

__device__ inline double min_keep_nan(double x, double hi)
{
    return x > hi ? hi : x;
}

__device__ inline double clamp_keep_nan(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The expert's activation of what GEMM1 produced: act(g) * u when gated
 * (with the clamps of swigluoai / swiglustep / clamped silu), act(g) when not. */
struct act_params {
    int32_t activation;
    int gated;
    float alpha, limit;
};

__device__ inline float activate(const act_params &p, float gf, float uf)
{
    double g = gf, u = uf, limit = p.limit;
    if (!p.gated)
        return (float)gate_fn(p.activation, g);
    switch (p.activation) {
    case FMOE_ACT_SWIGLUOAI:
        if (limit > 0.0) {
            g = min_keep_nan(g, limit);
            u = clamp_keep_nan(u, -limit, limit);
        }
        return (float)(g * (1.0 / (1.0 + exp(-((double)p.alpha * g)))) * (u + 1.0));
    case FMOE_ACT_SWIGLUSTEP:
        return (float)(min_keep_nan(silu_d(g), 7.0) * clamp_keep_nan(u, -7.0, 7.0));
    default:
        if (p.activation == FMOE_ACT_SILU && limit > 0.0) {
            g = min_keep_nan(g, limit);
            u = clamp_keep_nan(u, -limit, limit);
        }
        return (float)(gate_fn(p.activation, g) * u);
    }
}

} // namespace fmcu_dev

#endif
