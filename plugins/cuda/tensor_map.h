/*
 * plugins/cuda/tensor_map.h - the driver's cuTensorMapEncodeTiled, reached
 * through the runtime (the plugin links no libcuda), and the 2-D map every
 * kernel that stages operands with TMA encodes (grouped_gemm_sm90.cu,
 * gg_w4_swap.cu, wq_ring.cu, stream_weight_map.h). Host-side C++ only
 * (inline: each object that needs it carries it).
 */
#ifndef FMOE_PLUGIN_CUDA_TENSOR_MAP_H
#define FMOE_PLUGIN_CUDA_TENSOR_MAP_H

#include <atomic>
#include <cuda.h> /* CUtensorMap and the encoder's signature; the function comes from the runtime */
#include <cuda_runtime.h>
#include <stdint.h>

typedef CUresult (*fmcu_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                         const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                         CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);

/* The encoder, looked up once; NULL when the driver has none (then no
 * kernel that needs a map can run: the callers refuse with
 * cudaErrorInvalidValue). */
inline fmcu_encode_tiled_fn fmcu_tensor_map_encoder(void)
{
    static std::atomic<fmcu_encode_tiled_fn> fn{nullptr};
    fmcu_encode_tiled_fn f = fn.load(std::memory_order_acquire);
    if (!f) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !p) {
            cudaGetLastError();
            return nullptr;
        }
        f = (fmcu_encode_tiled_fn)p;
        fn.store(f, std::memory_order_release);
    }
    return f;
}

/* A row-major [rows, inner] matrix of `dt` elements of `elem_bytes` bytes
 * at `base`, moved in boxes of box_inner x box_rows elements with
 * `swizzle`, L2 promotion of 256 B; boxes past its ends read as zeros.
 * False when the driver has no encoder or refuses the map (the callers
 * then refuse the launch with cudaErrorInvalidValue). */
inline bool fmcu_tensor_map_2d(CUtensorMap *map, CUtensorMapDataType dt, const void *base, uint64_t rows,
                               uint64_t inner, uint32_t elem_bytes, uint32_t box_inner, uint32_t box_rows,
                               CUtensorMapSwizzle swizzle)
{
    fmcu_encode_tiled_fn f = fmcu_tensor_map_encoder();
    if (!f)
        return false;
    const cuuint64_t dims[2] = {inner, rows};
    const cuuint64_t strides[1] = {inner * elem_bytes};
    const cuuint32_t box[2] = {box_inner, box_rows};
    const cuuint32_t step[2] = {1, 1};
    return f(map, dt, 2, const_cast<void *>(base), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

#endif
