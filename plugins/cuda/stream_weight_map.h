/*
 * plugins/cuda/stream_weight_map.h - the tensor map through which the
 * stream tier's wgmma kernels (stream_wgmma.cu, stream_g1_wgmma.cu,
 * stream_bf16_wgmma.cu) load an item's weight rows by TMA. Host-side C++
 * only (inline: each object that needs it carries it).
 */
#ifndef FMOE_PLUGIN_CUDA_STREAM_WEIGHT_MAP_H
#define FMOE_PLUGIN_CUDA_STREAM_WEIGHT_MAP_H

#include <cuda.h>
#include <stdint.h>

#include "plugins/cuda/gemm.h"
#include "plugins/cuda/tensor_map.h"

/* The weights [E * n_rows, K] of `a` (elements of `elem_bytes` bytes, type
 * `dt`), 128-byte swizzled, boxes of `box_k` elements along K (128 bytes).
 * A gated GEMM1's map is 4-D (K, 8 rows, gate or up, groups of 8 rows): a
 * box of (box_k, 8, 2, 8) is 8 groups of 8 gate rows, each followed by its
 * 8 up rows (n_out rows further), so that a consumer thread's fragment rows
 * r and r + 8 are one output's gate and up rows; its groups end at the last
 * expert's last gate group, so that a box past it is filled with zeros
 * rather than read past the tensor. Else 2-D, boxes of 64 rows. False when
 * the driver has no encoder or refuses the map. */
inline bool fmcu_stream_weight_map(CUtensorMap *map, const fmcu_gemm_args &a, CUtensorMapDataType dt,
                                   uint32_t elem_bytes, uint32_t box_k)
{
    fmcu_encode_tiled_fn f = fmcu_tensor_map_encoder();
    if (!f)
        return false;
    const uint64_t rows = (uint64_t)a.experts * a.n_rows, row_bytes = (uint64_t)a.k * elem_bytes;
    if (a.gated) {
        const cuuint64_t dims[4] = {a.k, 8, 2, (rows - a.n_out) / 8};
        const cuuint64_t strides[3] = {row_bytes, (uint64_t)a.n_out * row_bytes, 8 * row_bytes};
        const cuuint32_t box[4] = {box_k, 8, 2, 8};
        const cuuint32_t elem[4] = {1, 1, 1, 1};
        return f(map, dt, 4, const_cast<void *>(a.w), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    }
    return fmcu_tensor_map_2d(map, dt, a.w, rows, a.k, elem_bytes, box_k, 64, CU_TENSOR_MAP_SWIZZLE_128B);
}

#endif
