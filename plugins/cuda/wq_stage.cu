/*
 * plugins/cuda/wq_stage.cu - the 4-bit schemes' per-pair GEMM input
 * staging (fmcu_wq_stage_launch, contract in wq_gemm.h): a block per pair
 * writes the pair's GEMM input row, gathered through the act-order
 * permutation, or NVFP4-quantized with the pair's expert's input global
 * exactly as fmoe_nvfp4_quantize does (vmax, e4m3 scale of g * vmax / 6,
 * 1 / (sf * (1/g)), e2m1 RNE), or MXFP4-quantized (W4A4) as
 * fmoe_mxfp4_quantize does, each value written back decoded (exact in
 * bf16 and f16).
 *
 * Why its own loads. The NVFP4 form first gave each thread a block of 16
 * values read and written one or two at a time, 32 bytes apart across a
 * warp: every load and store instruction touched 32 sectors for 64 or 128
 * useful bytes. ncu on the H200 (Qwen3-30B-A3B, M = 1024, 8192 pairs):
 * GEMM1's staging 82 us and GEMM2's 36 us, against about 10 and 7 us of
 * their traffic, 20 % of the NVFP4 W4A4 forward (bench/cuda/RESULTS.md at 7426a60,
 * "4-bit input staging and the e2m1 scratch"). Now, where the rows are
 * 16-byte aligned, a lane takes 8 values in one 16-byte load and store
 * and a lane pair shares its block's vmax by a shuffle, so a warp moves
 * 512 contiguous bytes an instruction; the e2m1 rounding is float selects
 * (nvfp4_quant.cuh) and a block has as many threads as the row has units
 * (42.8 and 20.5 us). The values are the same, so are the bits; unaligned
 * rows keep the scalar form. On the prefill tier the gather quantizes
 * NVFP4's GEMM1 input itself (prefill_rows.cu).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/nvfp4_quant.cuh"
#include "plugins/cuda/sm100_layout.h" /* the MXFP4 block quantizer, shared with the native path */
#include "plugins/cuda/stage_rows.cuh"
#include "plugins/cuda/wq_dev.cuh"
#include "plugins/cuda/wq_gemm.h"

namespace {

constexpr int THREADS = 256;                 /* NVFP4 K = 2048: a lane each 8 values in one pass */
constexpr int VEC = fmcu_nvfp4::LANE_VALUES; /* values a 16-byte access */

using fmcu_dev::load_act;
using fmcu_dev::store_act2;
using fmcu_wq_dev::e2m1_value;

/* Eight values of the act dtype from one 16-byte load (stage_rows.cuh's
 * unpack8), and back (wq_dev.cuh's pack2). */
__device__ __forceinline__ void load8(int32_t dt, const void *p, float v[VEC])
{
    fmcu_stage::unpack8(dt, *(const uint4 *)p, v);
}

__device__ __forceinline__ uint32_t pack2(int32_t dt, float a, float b)
{
    return dt == FMOE_DTYPE_F16 ? fmcu_wq_dev::pack2<true>(a, b) : fmcu_wq_dev::pack2<false>(a, b);
}

__device__ __forceinline__ void store8(int32_t dt, void *p, const float v[VEC])
{
    *(uint4 *)p = make_uint4(pack2(dt, v[0], v[1]), pack2(dt, v[2], v[3]), pack2(dt, v[4], v[5]),
                             pack2(dt, v[6], v[7]));
}

/* NVFP4, aligned rows: lane pairs per block of 16, whole warps a pass (the
 * pair's shuffle needs both lanes; k % 16 == 0 keeps a pair together). */
__device__ void stage_nvfp4_vec(const fmcu_wq_stage_args &a, const void *src, void *dst, float gq)
{
    const float rcp_g = 1.0f / gq;
    const int32_t dt = a.dtype;
    const uint32_t units = a.k / VEC;
    const uint32_t lane = threadIdx.x % 32;
    for (uint32_t base = threadIdx.x - lane; base < units; base += blockDim.x) {
        const uint32_t u = base + lane;
        const bool on = u < units;
        float x[VEC];
        if (on)
            load8(dt, (const uint16_t *)src + (size_t)u * VEC, x);
        const float vmax = fmcu_nvfp4::pair_vmax(x, on);
        if (!on)
            continue;
        float v[VEC];
        fmcu_nvfp4::quantize8(x, fmcu_nvfp4::scale_of(vmax, gq, rcp_g), v);
        store8(dt, (uint16_t *)dst + (size_t)u * VEC, v);
    }
}

/* NVFP4, any alignment: a thread per block of 16, one value at a time. */
__device__ void stage_nvfp4_scalar(const fmcu_wq_stage_args &a, const void *src, void *dst, float gq)
{
    const float rcp_g = 1.0f / gq;
    const int32_t dt = a.dtype;
    for (uint32_t b = threadIdx.x; b < a.k / 16; b += blockDim.x) {
        float x[16], vmax = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            x[i] = load_act(dt, src, b * 16 + i);
            vmax = fmcu_nvfp4::vmax_step(vmax, fabsf(x[i]));
        }
        const fmcu_nvfp4::block_scale s = fmcu_nvfp4::scale_of(vmax, gq, rcp_g);
#pragma unroll
        for (int i = 0; i < 16; i += 2) {
            const float v0 = fmcu_nvfp4::e2m1_round(x[i] * s.out) * s.sfq;
            const float v1 = fmcu_nvfp4::e2m1_round(x[i + 1] * s.out) * s.sfq;
            store_act2(dt, dst, b * 16 + i, v0, v1);
        }
    }
}

/* MXFP4 (OCP recipe) of each 32 values, decoded: e2m1 x 2^(byte - 127). A
 * thread a block; aligned rows by four 16-byte loads and stores. */
template <bool ALIGNED> __device__ void stage_mxfp4(const fmcu_wq_stage_args &a, const void *src, void *dst)
{
    const int32_t dt = a.dtype;
    for (uint32_t b = threadIdx.x; b < a.k / 32; b += blockDim.x) {
        float x[32];
        uint8_t packed[16];
        if (ALIGNED) {
#pragma unroll
            for (int q = 0; q < 4; q++)
                load8(dt, (const uint16_t *)src + b * 32 + q * VEC, x + q * VEC);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++)
                x[i] = load_act(dt, src, b * 32 + i);
        }
        const uint32_t byte = fmcu_sm100_mxfp4_block(x, packed);
        const float s = fmcu_sm100_mxfp4_scale(byte);
        float v[32];
#pragma unroll
        for (int i = 0; i < 32; i += 2) {
            v[i] = e2m1_value(packed[i / 2] & 0xF) * s;
            v[i + 1] = e2m1_value(packed[i / 2] >> 4) * s;
        }
        if (ALIGNED) {
#pragma unroll
            for (int q = 0; q < 4; q++)
                store8(dt, (uint16_t *)dst + b * 32 + q * VEC, v + q * VEC);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i += 2)
                store_act2(dt, dst, b * 32 + i, v[i], v[i + 1]);
        }
    }
}

template <bool ALIGNED> __global__ void __launch_bounds__(THREADS) wq_stage_kernel(const fmcu_wq_stage_args a)
{
    const int64_t pair = blockIdx.x; /* a row: the pair's, or the sorted row's */
    /* Launched overlapped: the plan and the rows are earlier kernels' writes;
     * the GEMM after may launch now (it waits for this kernel's writes). */
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    if (a.sorted && pair >= *a.n_sorted)
        return;
    const int e = a.pair_local[a.sorted ? a.sorted[pair] : pair];
    if (e < 0)
        return;
    const int64_t row = pair / a.row_div;
    const uint16_t *src = (const uint16_t *)a.src + row * a.ld;
    uint16_t *dst = (uint16_t *)a.dst + pair * a.kp;
    if (a.in_glob) {
        if (ALIGNED)
            stage_nvfp4_vec(a, src, dst, a.in_glob[e]);
        else
            stage_nvfp4_scalar(a, src, dst, a.in_glob[e]);
        return;
    }
    if (a.mx_a4) {
        stage_mxfp4<ALIGNED>(a, src, dst);
        return;
    }
    const int32_t *perm = a.perm ? a.perm + (size_t)e * a.kp : nullptr;
    for (uint32_t c = threadIdx.x; c < a.kp; c += blockDim.x) {
        int32_t from = perm ? perm[c] : (c < a.k ? (int32_t)c : -1);
        dst[c] = from >= 0 ? src[from] : (uint16_t)0;
    }
}

} // namespace

cudaError_t fmcu_wq_stage_launch(const fmcu_wq_stage_args &a, int64_t pairs, cudaStream_t stream)
{
    if (pairs <= 0)
        return cudaSuccess;
    /* The vector form reads and writes 16-byte pieces of both rows. */
    const bool aligned = (uintptr_t)a.src % 16 == 0 && (uintptr_t)a.dst % 16 == 0 && a.ld % VEC == 0 &&
                         a.kp % VEC == 0 && a.k % 16 == 0;
    /* A thread a unit of the row (8 values, a block of 16 or 32, or a
     * value), whole warps, at most THREADS a pass: GEMM2's rows (I = 768
     * at Qwen3-30B-A3B) would leave most of 256 threads idle. */
    const uint32_t units = a.in_glob ? a.k / (aligned ? VEC : 16) : a.mx_a4 ? a.k / 32 : a.kp;
    const uint32_t threads = units >= THREADS ? THREADS : units < 32 ? 32 : (units + 31) / 32 * 32;
    return aligned
               ? fmcu_dev::launch_overlapped(wq_stage_kernel<true>, dim3((unsigned)pairs), dim3(threads), 0, stream, a)
               : fmcu_dev::launch_overlapped(wq_stage_kernel<false>, dim3((unsigned)pairs), dim3(threads), 0, stream,
                                             a);
}
