/*
 * bench/cuda/launch-2026-11-23/launch_cost.cu - what a CUDA-graph replay of
 * one kernel costs before the kernel does any work, timed the way
 * plugins/cuda/timing.cu times the bench's forwards (events around each
 * replay, median of many): the floor under the one-launch decode's 30 µs.
 *
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itests/cuda \
 *        bench/cuda/launch-2026-11-23/launch_cost.cu -o /tmp/launch_cost
 *
 * Forms: an empty kernel of one warp; empty, one CTA per SM of 416 threads
 * and 212 KB of dynamic shared memory (the one-launch decode's shape at
 * Qwen3-30B-A3B fp8 M=1), plain and cooperative; the same with a grid
 * barrier (a counter every CTA adds to and waits on, reset by the last);
 * and the last with each CTA first reading 288 KB from global memory (about
 * one SM's share of Qwen3-30B-A3B's active fp8 weights at M=1), 8
 * independent 16-byte loads in flight per thread, over 8 rotated copies.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "cuda_ok.h" /* tests/cuda: CUDA_OK */

__global__ void empty_kernel() {}

__global__ void barrier_kernel(unsigned *sync, const uint4 *w, size_t per_cta, unsigned long long *sink)
{
    uint4 acc = {0, 0, 0, 0};
    if (w) { /* stream this CTA's slice once, 8 independent 16-byte loads in flight per thread */
        const uint4 *src = w + blockIdx.x * per_cta;
        size_t i = threadIdx.x;
        for (; i + 7 * blockDim.x < per_cta; i += 8 * blockDim.x) {
            uint4 v[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = __ldcs(src + i + j * blockDim.x);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                acc.x ^= v[j].x;
                acc.y ^= v[j].y;
            }
        }
        for (; i < per_cta; i += blockDim.x) {
            const uint4 v = __ldcs(src + i);
            acc.x ^= v.x;
            acc.y ^= v.y;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned arrived = atomicAdd(&sync[0], 1) + 1;
        if (arrived == gridDim.x)
            atomicExch(&sync[1], 1);
        else
            while (atomicAdd(&sync[1], 0) == 0) {
            }
        if (atomicAdd(&sync[2], 1) + 1 == gridDim.x) { /* the last to leave resets */
            atomicExch(&sync[0], 0);
            atomicExch(&sync[1], 0);
            atomicExch(&sync[2], 0);
        }
    }
    if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u) /* keep the loads */
        *sink = acc.x;
}

/* Median replay time (events around each) of execs[i % n] over `reps`
 * replays, after `warmup` untimed ones, in µs. */
static float median_replay(cudaStream_t st, const std::vector<cudaGraphExec_t> &execs, int warmup, int reps)
{
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    const size_t n = execs.size();
    for (int i = 0; i < warmup; i++)
        CUDA_OK(cudaGraphLaunch(execs[i % n], st));
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CUDA_OK(cudaEventRecord(a, st));
        CUDA_OK(cudaGraphLaunch(execs[(warmup + i) % n], st));
        CUDA_OK(cudaEventRecord(b, st));
        CUDA_OK(cudaEventSynchronize(b));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[t.size() / 2];
}

/* What `launch` enqueues, captured once as a graph. */
template <class F> static cudaGraphExec_t capture(cudaStream_t st, F launch)
{
    cudaGraph_t g;
    cudaGraphExec_t ex;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    launch();
    CUDA_OK(cudaStreamEndCapture(st, &g));
    CUDA_OK(cudaGraphInstantiate(&ex, g, 0));
    cudaGraphDestroy(g);
    return ex;
}

template <class F> static float time_form(cudaStream_t st, F launch)
{
    const std::vector<cudaGraphExec_t> ex = {capture(st, launch)};
    const float us = median_replay(st, ex, 50, 400);
    cudaGraphExecDestroy(ex[0]);
    return us;
}

/* A launch configuration on `st`, cooperative or not (`attr` holds the attribute). */
static cudaLaunchConfig_t config(cudaStream_t st, int grid, int block, int smem, bool coop, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t c = {};
    c.gridDim = grid;
    c.blockDim = block;
    c.dynamicSmemBytes = smem;
    c.stream = st;
    attr->id = cudaLaunchAttributeCooperative;
    attr->val.cooperative = 1;
    c.attrs = attr;
    c.numAttrs = coop ? 1 : 0;
    return c;
}

int main()
{
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int smem = 212224, threads = 416;
    CUDA_OK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUDA_OK(cudaFuncSetAttribute(barrier_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    unsigned *sync;
    unsigned long long *sink;
    CUDA_OK(cudaMalloc(&sync, 16));
    CUDA_OK(cudaMemset(sync, 0, 16));
    CUDA_OK(cudaMalloc(&sink, 8));
    const size_t per_cta = 288 * 1024 / 16; /* uint4 */
    const size_t rot = 8;                   /* rotate over 8 copies: no replay finds its bytes in L2 */
    uint4 *w;
    CUDA_OK(cudaMalloc(&w, rot * sms * per_cta * 16));
    CUDA_OK(cudaMemset(w, 1, rot * sms * per_cta * 16));

    auto ex_launch = [&](void (*k)(), int grid, int block, int sm, bool coop) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t c = config(st, grid, block, sm, coop, &at);
        CUDA_OK(cudaLaunchKernelEx(&c, k));
    };
    auto bar_launch = [&](const uint4 *src, bool coop) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t c = config(st, sms, threads, smem, coop, &at);
        CUDA_OK(cudaLaunchKernelEx(&c, barrier_kernel, sync, src, per_cta, sink));
    };
    printf("graph replay, event-timed, median of 400 (us)\n");
    printf("empty <<<1, 32>>>                          %7.2f\n", time_form(st, [&] { ex_launch(empty_kernel, 1, 32, 0, false); }));
    printf("empty <<<%d, %d, %d>>>               %7.2f\n", sms, threads, smem,
           time_form(st, [&] { ex_launch(empty_kernel, sms, threads, smem, false); }));
    printf("empty, cooperative                         %7.2f\n", time_form(st, [&] { ex_launch(empty_kernel, sms, threads, smem, true); }));
    printf("grid barrier, cooperative                  %7.2f\n", time_form(st, [&] { bar_launch(nullptr, true); }));
    /* 8 graphs over rotated copies, replayed in turn (as the bench rotates routing sets) */
    std::vector<cudaGraphExec_t> ex(rot);
    for (size_t r = 0; r < rot; r++)
        ex[r] = capture(st, [&] { bar_launch(w + r * sms * per_cta, true); });
    const float us = median_replay(st, ex, 40, 360);
    const double bytes = (double)sms * per_cta * 16;
    printf("288 KB per CTA read + grid barrier, coop   %7.2f  (%.1f MB: %.0f GB/s)\n", us, bytes / 1e6,
           bytes / (us * 1e3));
    return 0;
}
