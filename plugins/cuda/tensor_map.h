/*
 * plugins/cuda/tensor_map.h - the driver's cuTensorMapEncodeTiled, reached
 * through the runtime (the plugin links no libcuda), for the kernels that
 * stage operands with TMA (grouped_gemm_sm90.cu, wq_ring.cu). Host-side
 * C++ only (inline: each object that needs it carries it).
 */
#ifndef FMOE_PLUGIN_CUDA_TENSOR_MAP_H
#define FMOE_PLUGIN_CUDA_TENSOR_MAP_H

#include <atomic>
#include <cuda.h> /* CUtensorMap and the encoder's signature; the function comes from the runtime */
#include <cuda_runtime.h>

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

#endif
