/*
 * plugins/cuda/prefill_dequant.cu - e2m1 weights into bf16 rows for the
 * prefill path (contract in prefill_dequant.h).
 *
 * A thread takes one 32-column chunk of one weight row: its 16 bytes of
 * codes (four lanes' words in wq_pack.h's fragment order) and its one
 * (MXFP4) or two (NVFP4) scale codes, and converts the 32 bf16 values
 * (wq_dev.cuh dq_chunk_bf16). Consecutive threads take consecutive chunks
 * of a row, so the code loads are contiguous. The values go out through
 * shared memory: each thread then stores 16-byte pieces that sit next to
 * its neighbours' (a warp 512 contiguous bytes an instruction), where a
 * thread writing its own chunk's 64 bytes had a warp's store span 2 KB in
 * 16-byte pieces. Memory-bound: 0.5 byte read (+ scales) per 2 bytes
 * written; ncu on the H200 (Qwen3-30B-A3B MXFP4, M = 8192: W13's 805 MB
 * in 506 us, 1.6 TB/s written) had the chunk-a-thread stores at about half
 * the device's rate; now 81 % of DRAM's (bench/cuda/RESULTS.md at 7426a60, "4-bit
 * input staging and the e2m1 scratch").
 */
#include "plugins/cuda/prefill_dequant.h"
#include "plugins/cuda/wq_dev.cuh"

namespace fmcu_pf {

namespace {

constexpr int THREADS = 256;
constexpr int QUADS = FMCU_WQ_CHUNK * 2 / 16; /* 16-byte pieces of a chunk's bf16 values: 4 */
/* A thread's chunk in shared memory, 80 bytes apart: the 8 threads of a
 * 16-byte store phase then hit distinct banks. */
constexpr int PITCH = FMCU_WQ_CHUNK * 2 + 16;

__global__ void __launch_bounds__(THREADS) dequant_kernel(const dequant_args a)
{
    __shared__ __align__(16) uint8_t stage[THREADS * PITCH];
    const uint32_t j = blockIdx.y, e = a.e0 + j;
    if (a.offsets[e + 1] == a.offsets[e])
        return; /* no rows: its GEMM tiles do not exist (the whole block returns) */
    const uint32_t cpr = a.kp / FMCU_WQ_CHUNK; /* chunks per row */
    const uint64_t chunks = (uint64_t)a.N * cpr;
    const uint64_t first = (uint64_t)blockIdx.x * THREADS;
    const uint64_t idx = first + threadIdx.x;
    if (idx < chunks) {
        const uint32_t n = (uint32_t)(idx / cpr), c = (uint32_t)(idx % cpr);
        const uint64_t row = (uint64_t)e * a.N + n;
        const uint4 code = *reinterpret_cast<const uint4 *>(a.w + (row * cpr + c) * 16);
        const bool mx = a.block == 32;
        const uint32_t per_row = a.kp / a.block;
        uint32_t s2[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            /* Columns 16 h .. 16 h + 15: block c (MXFP4) or 2 c + h (NVFP4). */
            const uint32_t b = mx ? c : 2 * c + h;
            const float s = fmcu_wq_dev::scale_code(a.sf8[row * per_row + b], mx);
            s2[h] = fmcu_wq_dev::bits_of(__floats2bfloat162_rn(s, s)); /* exact: a power of 2 or an e4m3 value */
        }
        const uint32_t words[4] = {code.x, code.y, code.z, code.w};
        uint32_t out[16];
        fmcu_wq_dev::dq_chunk_bf16(words, s2, out);
        uint4 *mine = reinterpret_cast<uint4 *>(stage + threadIdx.x * PITCH);
#pragma unroll
        for (int q = 0; q < QUADS; q++)
            mine[q] = make_uint4(out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
    }
    __syncthreads();
    /* Piece p of the block: chunk p / 4's 16-byte piece p % 4. */
#pragma unroll
    for (int r = 0; r < QUADS; r++) {
        const uint32_t p = r * THREADS + threadIdx.x, t = p / QUADS, q = p % QUADS;
        const uint64_t at = first + t;
        if (at >= chunks)
            continue;
        const uint32_t n = (uint32_t)(at / cpr), c = (uint32_t)(at % cpr);
        /* Padding (kp may exceed K by a chunk or more) would land in the
         * next row; K is a multiple of 16, so a chunk is whole, or its
         * first two pieces are. */
        if ((uint64_t)c * FMCU_WQ_CHUNK + (q + 1) * 8 > a.K)
            continue;
        *reinterpret_cast<uint4 *>(a.dst + ((uint64_t)j * a.N + n) * a.K + (uint64_t)c * FMCU_WQ_CHUNK + q * 8) =
            *reinterpret_cast<const uint4 *>(stage + t * PITCH + q * 16);
    }
}

} // namespace

cudaError_t dequant_launch(const dequant_args &a, cudaStream_t st)
{
    if (a.count == 0)
        return cudaSuccess;
    if (a.K % 16 || (a.block != 16 && a.block != 32) || a.kp % FMCU_WQ_CHUNK || a.kp < a.K || !a.w || !a.sf8 ||
        !a.dst || !a.offsets || (uintptr_t)a.w % 16 || (uintptr_t)a.dst % 16 || a.count > 65535)
        return cudaErrorInvalidValue;
    const uint64_t chunks = (uint64_t)a.N * (a.kp / FMCU_WQ_CHUNK);
    const uint64_t blocks = (chunks + THREADS - 1) / THREADS;
    if (blocks == 0 || blocks > INT32_MAX)
        return cudaErrorInvalidValue;
    dequant_kernel<<<dim3((unsigned)blocks, a.count), THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

} // namespace fmcu_pf
