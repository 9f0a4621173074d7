/*
 * plugins/cuda/timing.cu - timing for tools without the CUDA runtime
 * (plugin ABI 1.2, fmoe_device_memory.time_replays / copy_rate; 1.4,
 * read_rate; timing.h): the forwards are captured into CUDA graphs once
 * and replayed, each replay timed by events on the device, so launch
 * overhead on the host is not in the numbers (what spec/performance.md
 * asks for). The device's copy and read rates are the benchmark's memory
 * floor.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugins/cuda/timing.h"
#include "plugins/cuda/device_math.cuh"

namespace {

int fail(char *err, size_t cap, const char *what, cudaError_t e)
{
    snprintf(err, cap, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

/* Everything one timing call holds, released in one place. */
struct replay_state {
    cudaStream_t stream = nullptr;
    cudaGraphExec_t *exec = nullptr;
    uint32_t n_exec = 0;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    ~replay_state()
    {
        for (uint32_t i = 0; i < n_exec; i++)
            cudaGraphExecDestroy(exec[i]);
        free(exec);
        if (e0)
            cudaEventDestroy(e0);
        if (e1)
            cudaEventDestroy(e1);
        if (stream)
            cudaStreamDestroy(stream);
    }
};

#define CK(call, what)                                                                                              \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess)                                                                                      \
            return fail(err, cap, what, e_);                                                                        \
    } while (0)

} // namespace

extern "C" int fmcu_time_replays(int device, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                                 int (*enqueue)(void *ctx, uint32_t index, void *stream), void *ctx, double *seconds,
                                 char *err, size_t cap)
{
    CK(cudaSetDevice(device), "cudaSetDevice");
    replay_state s;
    CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    s.exec = (cudaGraphExec_t *)calloc(n_graphs, sizeof *s.exec);
    if (!s.exec) {
        snprintf(err, cap, "out of host memory for %u graphs", n_graphs);
        return -1;
    }
    for (uint32_t i = 0; i < n_graphs; i++) {
        /* One eager run first: a method may set things up on its first call. */
        if (enqueue(ctx, i, s.stream) != 0) {
            snprintf(err, cap, "forward %u failed before capture", i);
            return -1;
        }
        CK(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize after the eager forward");
        CK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        int rc = enqueue(ctx, i, s.stream);
        cudaGraph_t graph = nullptr;
        cudaError_t e = cudaStreamEndCapture(s.stream, &graph);
        if (rc != 0) {
            if (graph)
                cudaGraphDestroy(graph);
            snprintf(err, cap, "forward %u failed under capture", i);
            return -1;
        }
        if (e != cudaSuccess)
            return fail(err, cap, "cudaStreamEndCapture (the forward synchronized or allocated?)", e);
        e = cudaGraphInstantiate(&s.exec[i], graph, 0);
        cudaGraphDestroy(graph);
        if (e != cudaSuccess)
            return fail(err, cap, "cudaGraphInstantiate", e);
        s.n_exec = i + 1;
    }
    for (uint32_t r = 0; r < warmup; r++)
        CK(cudaGraphLaunch(s.exec[r % n_graphs], s.stream), "cudaGraphLaunch");
    CK(cudaEventCreate(&s.e0), "cudaEventCreate");
    CK(cudaEventCreate(&s.e1), "cudaEventCreate");
    for (uint32_t r = 0; r < reps; r++) {
        float ms = 0.0f;
        CK(cudaEventRecord(s.e0, s.stream), "cudaEventRecord");
        CK(cudaGraphLaunch(s.exec[r % n_graphs], s.stream), "cudaGraphLaunch");
        CK(cudaEventRecord(s.e1, s.stream), "cudaEventRecord");
        CK(cudaEventSynchronize(s.e1), "cudaEventSynchronize (a replayed forward failed)");
        CK(cudaEventElapsedTime(&ms, s.e0, s.e1), "cudaEventElapsedTime");
        seconds[r] = ms * 1e-3;
    }
    return 0;
}

extern "C" int fmcu_copy_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err,
                              size_t cap)
{
    CK(cudaSetDevice(device), "cudaSetDevice");
    void *a = nullptr, *b = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(a, 0x5a, bytes); /* never time copies of never-written memory */
    if (e == cudaSuccess)
        e = cudaEventCreate(&e0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&e1);
    double best = 0.0;
    for (uint32_t r = 0; r <= reps && e == cudaSuccess; r++) {
        float ms = 0.0f;
        e = cudaEventRecord(e0, 0);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        if (e == cudaSuccess)
            e = cudaEventRecord(e1, 0);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(e1);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, e0, e1);
        double rate = ms > 0.0f ? 2.0 * (double)bytes / (ms * 1e-3) : 0.0;
        if (e == cudaSuccess && r > 0 && rate > best) /* the first copy warms up */
            best = rate;
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    if (e != cudaSuccess)
        return fail(err, cap, "device-to-device copy", e);
    *bytes_per_second = best;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Pure read bandwidth (ABI 1.4 read_rate)                                   */
/* ------------------------------------------------------------------------ */

/* A weight stream only reads. A copy spends part of the DRAM's time on
 * writes (and read/write turnarounds), so bytes / copy rate can be beaten
 * by a kernel that streams weights: the floor needs what the device can
 * read. Each thread keeps READ_UNROLL independent 16-byte loads in flight
 * (enough bytes in flight per SM to cover DRAM latency at full occupancy),
 * a block's round reads one contiguous 32 KiB run, and all of it is
 * XOR-folded into one word written once per block, so the loads cannot be
 * dropped. The fold is checked against the buffer's contents. */
namespace {

constexpr int READ_THREADS = 256;
constexpr int READ_UNROLL = 8;

/* Loads are the weight-streaming kernels' (fmcu_dev::load_stream: out of
 * L1, whole 256-byte sectors asked of L2). On an H200 neither they nor
 * __ldg, nor contiguous runs instead of a grid-stride unroll, moved the
 * rate off 3.91-3.94 TB/s, below the copy rate (4.21-4.25) and the 4.35
 * TB/s the bf16 stream GEMM streamed at DeepSeek-V3 M = 16
 * (bench/cuda/RESULTS.md, "The read rate"). */
__global__ void __launch_bounds__(READ_THREADS) read_stream(const uint4 *__restrict__ p, size_t n, uint32_t *block_xor)
{
    /* A round of a block reads one contiguous run of READ_UNROLL x
     * READ_THREADS vectors (32 KiB), the grid's runs side by side: each
     * thread's loads of a round are READ_THREADS vectors apart in one run. */
    constexpr size_t RUN = (size_t)READ_UNROLL * READ_THREADS;
    const size_t runs = n / RUN;
    uint32_t acc[READ_UNROLL] = {};
    for (size_t r = blockIdx.x; r < runs; r += gridDim.x) {
        const uint4 *q = p + r * RUN + threadIdx.x;
        uint4 v[READ_UNROLL];
#pragma unroll
        for (int u = 0; u < READ_UNROLL; u++)
            v[u] = fmcu_dev::load_stream((const uint8_t *)(q + u * READ_THREADS));
#pragma unroll
        for (int u = 0; u < READ_UNROLL; u++)
            acc[u] ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    /* The tail past the last whole run, by the first block. */
    for (size_t i = runs * RUN + threadIdx.x; blockIdx.x == 0 && i < n; i += READ_THREADS) {
        uint4 v = __ldg(p + i);
        acc[0] ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    uint32_t x = 0;
#pragma unroll
    for (int u = 0; u < READ_UNROLL; u++)
        x ^= acc[u];
    for (int o = 16; o > 0; o >>= 1)
        x ^= __shfl_xor_sync(0xffffffffu, x, o);
    __shared__ uint32_t block;
    if (threadIdx.x == 0)
        block = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        atomicXor(&block, x);
    __syncthreads();
    if (threadIdx.x == 0)
        block_xor[blockIdx.x] = block;
}

/* Everything one read-rate call holds, released in one place. */
struct read_state {
    void *buf = nullptr;
    uint32_t *block_xor = nullptr, *host_xor = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    ~read_state()
    {
        if (e0)
            cudaEventDestroy(e0);
        if (e1)
            cudaEventDestroy(e1);
        if (stream)
            cudaStreamDestroy(stream);
        cudaFree(buf);
        cudaFree(block_xor);
        free(host_xor);
    }
};

} // namespace

extern "C" int fmcu_read_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err,
                              size_t cap)
{
    CK(cudaSetDevice(device), "cudaSetDevice");
    int l2 = 0, sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute(L2 size)");
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SM count)");
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_stream, READ_THREADS, 0),
       "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    /* At least 8x the L2, so no rep reads what the previous one left there. */
    uint64_t want = bytes > 8ull * (uint64_t)l2 ? bytes : 8ull * (uint64_t)l2;
    want = want / 16 * 16;
    uint32_t grid = (uint32_t)(sms > 0 ? sms : 1) * (uint32_t)(per_sm > 0 ? per_sm : 1);
    read_state s;
    CK(cudaMalloc(&s.buf, want), "cudaMalloc (read-rate buffer)");
    CK(cudaMalloc((void **)&s.block_xor, grid * sizeof(uint32_t)), "cudaMalloc");
    s.host_xor = (uint32_t *)malloc(grid * sizeof(uint32_t));
    if (!s.host_xor) {
        snprintf(err, cap, "out of host memory for %u blocks", grid);
        return -1;
    }
    CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    /* Never read never-written memory. 0x5a in every byte but the first
     * word's: an odd number of 0x5a5a5a5a words, so a full read folds to
     * exactly that, and a kernel that skipped its loads would not. */
    CK(cudaMemsetAsync(s.buf, 0x5a, want, s.stream), "cudaMemset");
    CK(cudaMemsetAsync(s.buf, 0, 4, s.stream), "cudaMemset");
    CK(cudaEventCreate(&s.e0), "cudaEventCreate");
    CK(cudaEventCreate(&s.e1), "cudaEventCreate");
    double best = 0.0;
    for (uint32_t r = 0; r <= reps; r++) { /* the first read warms up */
        float ms = 0.0f;
        CK(cudaEventRecord(s.e0, s.stream), "cudaEventRecord");
        read_stream<<<grid, READ_THREADS, 0, s.stream>>>((const uint4 *)s.buf, want / 16, s.block_xor);
        CK(cudaGetLastError(), "read kernel launch");
        CK(cudaEventRecord(s.e1, s.stream), "cudaEventRecord");
        CK(cudaEventSynchronize(s.e1), "read kernel");
        CK(cudaEventElapsedTime(&ms, s.e0, s.e1), "cudaEventElapsedTime");
        double rate = ms > 0.0f ? (double)want / (ms * 1e-3) : 0.0;
        if (r > 0 && rate > best)
            best = rate;
    }
    CK(cudaMemcpy(s.host_xor, s.block_xor, grid * sizeof(uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
    uint32_t fold = 0;
    for (uint32_t b = 0; b < grid; b++)
        fold ^= s.host_xor[b];
    if (fold != 0x5a5a5a5au) {
        snprintf(err, cap, "read kernel folded the buffer to %08x, expected 5a5a5a5a (a load was lost)", fold);
        return -1;
    }
    *bytes_per_second = best;
    return 0;
}
