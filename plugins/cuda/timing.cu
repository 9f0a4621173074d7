/*
 * plugins/cuda/timing.cu - timing for tools without the CUDA runtime
 * (plugin ABI 1.2, fmoe_device_memory.time_replays / copy_rate;
 * cuda_api.h): the forwards are captured into CUDA graphs once and
 * replayed, each replay timed by events on the device, so launch overhead
 * on the host is not in the numbers (what spec/performance.md asks for).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "plugins/cuda/cuda_api.h"

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
