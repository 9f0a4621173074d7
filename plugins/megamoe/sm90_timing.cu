/*
 * plugins/megamoe/sm90_timing.cu - timing for tools that do not link the
 * CUDA runtime (plugin ABI 1.2 time_replays and copy_rate; timing.h), so
 * `fusedmoe bench` times MegaMoE's forwards on the device: each forward is
 * captured once into a CUDA graph (the forward allocates nothing and never
 * synchronizes, so it captures), then replayed with events around each
 * replay; the device-to-device copy rate is the benchmark's memory floor
 * (no read_rate yet: bench falls back to the copy rate).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugins/megamoe/timing.h"

namespace {

int fail(const char *what, cudaError_t e, char *why, size_t cap)
{
    snprintf(why, cap, "MegaMoE timing: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

/* What one timing call owns; released by the destructor on every path. */
struct replays {
    cudaStream_t stream = nullptr;
    cudaGraphExec_t *exec = nullptr;
    uint32_t made = 0;
    cudaEvent_t start = nullptr, stop = nullptr;
    ~replays()
    {
        for (uint32_t i = 0; i < made; i++)
            cudaGraphExecDestroy(exec[i]);
        free(exec);
        if (start)
            cudaEventDestroy(start);
        if (stop)
            cudaEventDestroy(stop);
        if (stream)
            cudaStreamDestroy(stream);
    }
};

} // namespace

#define TRY(call, what)                                                                                             \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess)                                                                                      \
            return fail(what, e_, why, cap);                                                                        \
    } while (0)

extern "C" int mm90_time_replays(int device, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                                 int (*enqueue)(void *ctx, uint32_t index, void *stream), void *ctx, double *seconds,
                                 char *why, size_t cap)
{
    TRY(cudaSetDevice(device), "cudaSetDevice");
    replays r;
    TRY(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    r.exec = static_cast<cudaGraphExec_t *>(calloc(n_graphs, sizeof *r.exec));
    if (!r.exec) {
        snprintf(why, cap, "MegaMoE timing: out of host memory for %u graphs", n_graphs);
        return -1;
    }
    for (uint32_t i = 0; i < n_graphs; i++) {
        if (enqueue(ctx, i, r.stream) != 0) { /* once eagerly: errors show here, not in capture */
            snprintf(why, cap, "MegaMoE timing: forward %u failed", i);
            return -1;
        }
        TRY(cudaStreamSynchronize(r.stream), "the eager forward");
        TRY(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        const int rc = enqueue(ctx, i, r.stream);
        cudaGraph_t graph = nullptr;
        const cudaError_t e = cudaStreamEndCapture(r.stream, &graph);
        if (rc != 0 || e != cudaSuccess) {
            if (graph)
                cudaGraphDestroy(graph);
            if (rc != 0) {
                snprintf(why, cap, "MegaMoE timing: forward %u failed under capture", i);
                return -1;
            }
            return fail("cudaStreamEndCapture", e, why, cap);
        }
        const cudaError_t ei = cudaGraphInstantiate(&r.exec[i], graph, 0);
        cudaGraphDestroy(graph);
        if (ei != cudaSuccess)
            return fail("cudaGraphInstantiate", ei, why, cap);
        r.made = i + 1;
    }
    for (uint32_t w = 0; w < warmup; w++)
        TRY(cudaGraphLaunch(r.exec[w % n_graphs], r.stream), "cudaGraphLaunch");
    TRY(cudaEventCreate(&r.start), "cudaEventCreate");
    TRY(cudaEventCreate(&r.stop), "cudaEventCreate");
    for (uint32_t i = 0; i < reps; i++) {
        float ms = 0.0f;
        TRY(cudaEventRecord(r.start, r.stream), "cudaEventRecord");
        TRY(cudaGraphLaunch(r.exec[i % n_graphs], r.stream), "cudaGraphLaunch");
        TRY(cudaEventRecord(r.stop, r.stream), "cudaEventRecord");
        TRY(cudaEventSynchronize(r.stop), "a replayed forward");
        TRY(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime");
        seconds[i] = ms * 1e-3;
    }
    return 0;
}

extern "C" int mm90_copy_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *why,
                              size_t cap)
{
    TRY(cudaSetDevice(device), "cudaSetDevice");
    void *src = nullptr, *dst = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    double best = 0.0;
    cudaError_t e = cudaMalloc(&src, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&dst, bytes);
    if (e == cudaSuccess)
        e = cudaMemset(src, 0x3c, bytes); /* copies of written memory only */
    if (e == cudaSuccess)
        e = cudaEventCreate(&start);
    if (e == cudaSuccess)
        e = cudaEventCreate(&stop);
    /* rep 0 warms up and is not counted */
    for (uint32_t i = 0; i <= reps && e == cudaSuccess; i++) {
        float ms = 0.0f;
        e = cudaEventRecord(start, 0);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
        if (e == cudaSuccess)
            e = cudaEventRecord(stop, 0);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(stop);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, start, stop);
        const double rate = ms > 0.0f ? 2.0 * (double)bytes / (ms * 1e-3) : 0.0; /* read + written */
        if (e == cudaSuccess && i > 0 && rate > best)
            best = rate;
    }
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    cudaFree(src);
    cudaFree(dst);
    if (e != cudaSuccess)
        return fail("device-to-device copy", e, why, cap);
    *bytes_per_second = best;
    return 0;
}
