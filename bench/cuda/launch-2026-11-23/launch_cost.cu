/*
 * bench/cuda/launch-2026-11-23/launch_cost.cu - what a CUDA-graph replay of
 * one kernel costs before the kernel does any work, timed the way
 * plugins/cuda/timing.cu times the bench's forwards (events around each
 * replay, median of many): the floor under the one-launch decode's 30 µs.
 *
 *   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a \
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
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                                                   \
    do {                                                                                                        \
        cudaError_t e_ = (x);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                  \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

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

static float median_replay(cudaStream_t st, cudaGraphExec_t ex, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 50; i++)
        CK(cudaGraphLaunch(ex, st));
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ex, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[t.size() / 2];
}

template <class F> static float time_form(cudaStream_t st, F launch)
{
    cudaGraph_t g;
    cudaGraphExec_t ex;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    launch();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ex, g, 0));
    const float us = median_replay(st, ex, 400);
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(g);
    return us;
}

int main()
{
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int smem = 212224, threads = 416;
    CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(barrier_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    unsigned *sync;
    unsigned long long *sink;
    CK(cudaMalloc(&sync, 16));
    CK(cudaMemset(sync, 0, 16));
    CK(cudaMalloc(&sink, 8));
    const size_t per_cta = 288 * 1024 / 16; /* uint4 */
    const size_t rot = 8;                   /* rotate over 8 copies: no replay finds its bytes in L2 */
    uint4 *w;
    CK(cudaMalloc(&w, rot * sms * per_cta * 16));
    CK(cudaMemset(w, 1, rot * sms * per_cta * 16));

    auto ex_launch = [&](void (*k)(), int grid, int block, int sm, bool coop) {
        cudaLaunchConfig_t c = {};
        c.gridDim = grid;
        c.blockDim = block;
        c.dynamicSmemBytes = sm;
        c.stream = st;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        c.attrs = at;
        c.numAttrs = coop ? 1 : 0;
        CK(cudaLaunchKernelEx(&c, k));
    };
    auto bar_launch = [&](const uint4 *src, bool coop) {
        cudaLaunchConfig_t c = {};
        c.gridDim = sms;
        c.blockDim = threads;
        c.dynamicSmemBytes = smem;
        c.stream = st;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        c.attrs = at;
        c.numAttrs = coop ? 1 : 0;
        CK(cudaLaunchKernelEx(&c, barrier_kernel, sync, src, per_cta, sink));
    };
    printf("graph replay, event-timed, median of 400 (us)\n");
    printf("empty <<<1, 32>>>                          %7.2f\n", time_form(st, [&] { ex_launch(empty_kernel, 1, 32, 0, false); }));
    printf("empty <<<%d, %d, %d>>>               %7.2f\n", sms, threads, smem,
           time_form(st, [&] { ex_launch(empty_kernel, sms, threads, smem, false); }));
    printf("empty, cooperative                         %7.2f\n", time_form(st, [&] { ex_launch(empty_kernel, sms, threads, smem, true); }));
    printf("grid barrier, cooperative                  %7.2f\n", time_form(st, [&] { bar_launch(nullptr, true); }));
    /* 8 graphs over rotated copies, replayed in turn (as the bench rotates routing sets) */
    std::vector<cudaGraphExec_t> ex(rot);
    for (size_t r = 0; r < rot; r++) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        bar_launch(w + r * sms * per_cta, true);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ex[r], g, 0));
        cudaGraphDestroy(g);
    }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int i = 0; i < 400; i++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ex[i % rot], st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (i >= 40)
            t.push_back(ms * 1000.0f);
    }
    std::sort(t.begin(), t.end());
    const double bytes = (double)sms * per_cta * 16;
    printf("288 KB per CTA read + grid barrier, coop   %7.2f  (%.1f MB: %.0f GB/s)\n", t[t.size() / 2], bytes / 1e6,
           bytes / (t[t.size() / 2] * 1e3));
    return 0;
}
