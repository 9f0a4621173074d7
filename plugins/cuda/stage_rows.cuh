/*
 * plugins/cuda/stage_rows.cuh - a few rows of a GEMM input into shared
 * memory, quantized as quantize.cu's quant_row would quantize them into
 * global memory (same scales, same e4m3 codes), by one CTA. The decode
 * kernels that keep a whole call's GEMM input on chip use it: the fused
 * tail (decode_tail.cu) for GEMM2's input, the one-launch decode
 * (decode_fused.cu) for both GEMMs' inputs. Device-side C++ only.
 *
 * Rows are read with ld.global.cg (L2, not L1): the one-launch decode reads
 * GEMM1's output after a grid-wide barrier, written by other CTAs of the
 * same kernel, which the non-coherent L1 path must not serve.
 */
#ifndef FMOE_PLUGIN_CUDA_STAGE_ROWS_CUH
#define FMOE_PLUGIN_CUDA_STAGE_ROWS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/device_math.cuh"

namespace fmcu_stage {

/* What to stage: `rows` rows of `cols` act-dtype values (cols a multiple
 * of 8; rows 16-byte aligned) at src + r * ld. Rows with row_ok[r] < 0
 * (shared memory) are skipped, and left out of a per-tensor amax. */
struct rows_in {
    const void *src;
    int64_t ld;
    int32_t dtype;
    uint32_t rows, cols;
    const int *row_ok; /* nullptr: every row */
};

/* How: FMCU_Q_* with quant_row's scale rules. */
struct rows_quant {
    int quant;
    int dynamic;            /* FMCU_Q_TENSOR: scale from the amax of the staged rows */
    const float *static_s;  /* FMCU_Q_TENSOR static */
    int ue8m0;              /* FMCU_Q_BLOCK: power-of-two scales */
    uint32_t group;         /* FMCU_Q_BLOCK: columns per scale */
};

__device__ __forceinline__ uint4 load_row16(const void *src, int64_t elem)
{
    return __ldcg(reinterpret_cast<const uint4 *>((const uint16_t *)src + elem));
}

/* 8 act-dtype values from 16 bytes. */
__device__ __forceinline__ void unpack8(int32_t dtype, const uint4 &raw, float v[8])
{
    const uint16_t *h = reinterpret_cast<const uint16_t *>(&raw);
#pragma unroll
    for (int q = 0; q < 8; q++)
        v[q] = dtype == FMOE_DTYPE_F16 ? __half2float(__ushort_as_half(h[q]))
                                       : __bfloat162float(__ushort_as_bfloat16(h[q]));
}

__device__ __forceinline__ void store_codes8(uint8_t *q, const float v[8], float s)
{
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        lo |= (uint32_t)fmcu_dev::to_e4m3(v[j], s) << (8 * j);
        hi |= (uint32_t)fmcu_dev::to_e4m3(v[4 + j], s) << (8 * j);
    }
    *reinterpret_cast<uint2 *>(q) = make_uint2(lo, hi);
}

/* The rows are cut into 16-byte pieces (8 values), piece i = row i / (cols
 * / 8); thread t takes pieces t, t + THREADS, ... so that a whole call's
 * input is one or two loads per thread whatever the row count (a warp per
 * row would leave most warps idle at one token and walk 2048 values in a
 * chain of loads). Amaxes meet in shared memory: lanes of one scale group
 * combine theirs first (__match_any_sync, __reduce_max_sync), then one
 * atomicMax per group and warp; |v| of finite values compares as unsigned
 * bits, NaN never enters (fmcu_dev::amax_step). */
struct piece {
    uint32_t r, c;    /* row, first column */
    bool on;          /* inside the rows and staged */
};

__device__ __forceinline__ piece piece_of(const rows_in &in, uint32_t i)
{
    const uint32_t per_row = in.cols / 8;
    piece p;
    p.r = i / per_row;
    p.c = (i % per_row) * 8;
    p.on = p.r < in.rows && (!in.row_ok || in.row_ok[p.r] >= 0);
    return p;
}

/* Which amax a piece feeds: the row's (per-row scales), its block's
 * (block scales) or the one of the tensor. */
__device__ __forceinline__ uint32_t slot_of(const rows_quant &q, const piece &p, uint32_t kgroups)
{
    if (q.quant == FMCU_Q_BLOCK)
        return p.r * kgroups + p.c / q.group;
    return q.quant == FMCU_Q_TENSOR ? 0 : p.r;
}

__device__ __forceinline__ void amax_piece(const rows_quant &q, const rows_in &in, const piece &p, const uint4 &raw,
                                           uint32_t kgroups, uint32_t *m)
{
    float a = 0.0f;
    if (p.on) {
        float v[8];
        unpack8(in.dtype, raw, v);
#pragma unroll
        for (int j = 0; j < 8; j++)
            a = fmcu_dev::amax_step(a, v[j]);
    }
    const uint32_t slot = p.on ? slot_of(q, p, kgroups) : 0xffffffffu;
    const uint32_t same = __match_any_sync(0xffffffffu, slot);
    const uint32_t top = __reduce_max_sync(same, __float_as_uint(a));
    if (p.on && (threadIdx.x & 31) == __ffs(same) - 1 && top != 0)
        atomicMax(m + slot, top);
}

__device__ __forceinline__ float scale_of(const rows_quant &q, const piece &p, uint32_t kgroups, const uint32_t *m,
                                          float tensor_s)
{
    if (q.quant == FMCU_Q_TENSOR)
        return tensor_s;
    const float a = __uint_as_float(m[slot_of(q, p, kgroups)]);
    return q.quant == FMCU_Q_BLOCK && q.ue8m0 ? fmcu_dev::scale_ue8m0(a) : fmcu_dev::scale_f32(a);
}

__device__ __forceinline__ void code_piece(const rows_quant &q, const rows_in &in, const piece &p, const uint4 &raw,
                                           uint8_t *dst, uint32_t dst_stride, float *scale, uint32_t kgroups,
                                           const uint32_t *m, float tensor_s)
{
    if (!p.on)
        return;
    const float s = scale_of(q, p, kgroups, m, tensor_s);
    if (q.quant == FMCU_Q_CHANNEL && p.c == 0)
        scale[p.r] = s;
    if (q.quant == FMCU_Q_BLOCK && p.c % q.group == 0)
        scale[p.r * kgroups + p.c / q.group] = s;
    float v[8];
    unpack8(in.dtype, raw, v);
    store_codes8(dst + (size_t)p.r * dst_stride + p.c, v, s);
}

/* The barrier of the threads that stage: the whole CTA, or a named barrier
 * of some of its warps (the one-launch decode keeps a copy warp out). */
struct cta_sync {
    __device__ void operator()() const { __syncthreads(); }
};

struct named_sync {
    int id, threads;
    __device__ void operator()() const { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory"); }
};

/* A thread's first HOLD pieces (zeros where there is none): issued early,
 * they travel with whatever else the kernel has in flight. */
template <int THREADS, int HOLD> __device__ void stage_load(const rows_in &in, uint4 (&raw)[HOLD])
{
#pragma unroll
    for (int h = 0; h < HOLD; h++) {
        const piece p = piece_of(in, threadIdx.x + h * THREADS);
        raw[h] = p.on ? load_row16(in.src, (int64_t)p.r * in.ld + p.c) : make_uint4(0, 0, 0, 0);
    }
}

/* Stage the rows at dst + r * dst_stride (shared memory, 16-byte aligned
 * rows): e4m3 codes, or for FMCU_Q_NONE the bf16 values as they are. Scales
 * go to scale[r] (per row) or scale[r * kgroups + g] (block; q.group a
 * multiple of 8). Returns the per-tensor scale (1 when there is none).
 * Called by threads 0 .. THREADS - 1 of the CTA, which `sync` joins, with
 * what stage_load gave them; `m` is shared scratch of rows * kgroups
 * words. Pieces past a thread's first HOLD are read here (from L2). */
template <int THREADS, int HOLD, class Sync>
__device__ float stage_finish(const rows_quant &q, const rows_in &in, const uint4 (&raw)[HOLD], uint8_t *dst,
                              uint32_t dst_stride, float *scale, uint32_t kgroups, uint32_t *m, Sync sync)
{
    const uint32_t total = in.rows * (in.cols / 8);
    if (q.quant == FMCU_Q_NONE) { /* bf16 rows as they are */
#pragma unroll
        for (int h = 0; h < HOLD; h++) {
            const piece p = piece_of(in, threadIdx.x + h * THREADS);
            if (p.on)
                *reinterpret_cast<uint4 *>(dst + (size_t)p.r * dst_stride + p.c * 2) = raw[h];
        }
        for (uint32_t i = HOLD * THREADS + threadIdx.x; i < total; i += THREADS) {
            const piece p = piece_of(in, i);
            if (p.on)
                *reinterpret_cast<uint4 *>(dst + (size_t)p.r * dst_stride + p.c * 2) =
                    load_row16(in.src, (int64_t)p.r * in.ld + p.c);
        }
        return 1.0f;
    }
    const bool amax = !(q.quant == FMCU_Q_TENSOR && !q.dynamic);
    const uint32_t n_m = q.quant == FMCU_Q_BLOCK ? in.rows * kgroups : q.quant == FMCU_Q_TENSOR ? 1 : in.rows;
    if (amax) {
        for (uint32_t i = threadIdx.x; i < n_m; i += THREADS)
            m[i] = 0;
        sync();
#pragma unroll
        for (int h = 0; h < HOLD; h++)
            amax_piece(q, in, piece_of(in, threadIdx.x + h * THREADS), raw[h], kgroups, m);
        for (uint32_t i0 = HOLD * THREADS; i0 < total; i0 += THREADS) { /* warp-uniform trip count */
            const piece p = piece_of(in, i0 + threadIdx.x);
            const uint4 r = p.on ? load_row16(in.src, (int64_t)p.r * in.ld + p.c) : make_uint4(0, 0, 0, 0);
            amax_piece(q, in, p, r, kgroups, m);
        }
        sync();
    }
    const float tensor_s = q.quant != FMCU_Q_TENSOR ? 1.0f
                           : q.dynamic              ? fmcu_dev::scale_f32(__uint_as_float(m[0]))
                                                    : *q.static_s;
#pragma unroll
    for (int h = 0; h < HOLD; h++)
        code_piece(q, in, piece_of(in, threadIdx.x + h * THREADS), raw[h], dst, dst_stride, scale, kgroups, m,
                   tensor_s);
    for (uint32_t i = HOLD * THREADS + threadIdx.x; i < total; i += THREADS) {
        const piece p = piece_of(in, i);
        if (p.on)
            code_piece(q, in, p, load_row16(in.src, (int64_t)p.r * in.ld + p.c), dst, dst_stride, scale, kgroups,
                       m, tensor_s);
    }
    return tensor_s;
}

/* stage_load and stage_finish by the whole CTA. */
template <int THREADS, int HOLD>
__device__ float stage_rows(const rows_quant &q, const rows_in &in, uint8_t *dst, uint32_t dst_stride, float *scale,
                            uint32_t kgroups, uint32_t *m)
{
    uint4 raw[HOLD];
    stage_load<THREADS, HOLD>(in, raw);
    return stage_finish<THREADS, HOLD>(q, in, raw, dst, dst_stride, scale, kgroups, m, cta_sync());
}

} // namespace fmcu_stage

#endif
