/*
 * plugins/cuda/quantize.cu - the forward's quant and amax steps: GEMM input
 * rows to fp8 e4m3 (or to bf16 for the unquantized method when the router
 * weight goes on the input), a block a row (quant_row.cuh: per tensor, per
 * token, or per 1 x block_k group with f32 or UE8M0 scales; q =
 * e4m3(sat(x / s)) with IEEE division, as formats.h). A dynamic per-tensor
 * scale first takes max |x| over all rows (atomicMax on the float bits,
 * which order like the non-negative floats).
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/launch_shape.h"
#include "plugins/cuda/quant_row.cuh"

namespace {

using fmcu_quant::QM_TENSOR;
using fmcu_quant::quant_args;
using fmcu_quant::quant_row;

/* One block per row (up to 1024 threads: fmcu_quant_threads). */
__global__ void __launch_bounds__(1024) quant_kernel(const quant_args a)
{
    __shared__ float red[32];
    fmcu_dev::pdl_trigger();
    fmcu_dev::pdl_wait();
    quant_row(a, blockIdx.x, red);
}

__global__ void __launch_bounds__(1024) amax_kernel(const quant_args a, uint32_t *amax)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    fmcu_dev::pdl_trigger();
    fmcu_dev::pdl_wait();
    if (a.row_valid && a.row_valid[row] < 0)
        return;
    const float m = fmcu_quant::row_amax(a, row, red);
    if (threadIdx.x == 0)
        atomicMax(amax, __float_as_uint(m));
}

int fail(char *err, size_t cap, const char *what, cudaError_t e)
{
    snprintf(err, cap, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

} // namespace

int fmcu_fwd::quantize(quant_args q, int64_t rows, uint32_t *amax, cudaStream_t st, char *err, size_t cap)
{
    if (rows <= 0)
        return 0;
    cudaError_t e;
    if (q.mode == QM_TENSOR && !q.static_scale) {
        if ((e = cudaMemsetAsync(amax, 0, sizeof *amax, st)) != cudaSuccess)
            return fail(err, cap, "cudaMemsetAsync(amax)", e);
        e = fmcu_dev::launch_overlapped(amax_kernel, dim3((unsigned)rows), dim3(fmcu_quant_threads(q.cols)), 0, st, q,
                                        amax);
        if (e != cudaSuccess)
            return fail(err, cap, "amax kernel", e);
        q.amax = amax;
    }
    e = fmcu_dev::launch_overlapped(quant_kernel, dim3((unsigned)rows), dim3(fmcu_quant_threads(q.cols)), 0, st, q);
    if (e != cudaSuccess)
        return fail(err, cap, "quant kernel", e);
    return 0;
}
