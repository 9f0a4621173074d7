/*
 * plugins/cuda/routing.cu - the forward's routing step (monolithic methods):
 * one warp per token computes the router's scores in double, rounded once,
 * as core/routing.c does (softmax, sigmoid or sqrt-softplus), keeps the
 * experts of the topk_group best groups (grouped top-k: a group's score is
 * its best expert's, or its two best with a correction bias), selects the
 * top k by repeated arg-max over the biased scores, or over the logits
 * when there is no bias (ties to the lower id, NaN below every number),
 * takes the weights from the scores, renormalizes and scales; maps the logical ids to EPLB replicas
 * (fusedmoe/kit/eplb.h) and keeps the logical ones for topk_ids_out.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/quant_row.cuh"

namespace {

using fmcu_fwd::route_args;
using fmcu_quant::load_val;

__device__ __forceinline__ bool ranks_above(float a, float b)
{
    if (isnan(a))
        return false;
    if (isnan(b))
        return true;
    return a > b;
}

/* (value, index) a beats b: higher rank, or equal rank and lower index; -1 loses. */
__device__ __forceinline__ bool beats(float av, int ai, float bv, int bi)
{
    if (ai < 0)
        return false;
    if (bi < 0)
        return true;
    if (ranks_above(av, bv))
        return true;
    if (ranks_above(bv, av))
        return false;
    return ai < bi;
}

__device__ float group_score_max(const float *v, int n)
{
    float best = v[0];
    for (int i = 1; i < n; i++)
        if (ranks_above(v[i], best))
            best = v[i];
    return best;
}

__device__ float group_score_top2(const float *v, int n)
{
    if (n == 1)
        return v[0];
    int first = 0;
    for (int i = 1; i < n; i++)
        if (ranks_above(v[i], v[first]))
            first = i;
    int second = first == 0 ? 1 : 0;
    for (int i = 0; i < n; i++)
        if (i != first && ranks_above(v[i], v[second]))
            second = i;
    return v[first] + v[second];
}

/* One warp per token (blockDim 32). Shared: s[n], v[n], eligible[n], group scores and
 * availability [2 * n_groups]. */
__global__ void route_kernel(const route_args a)
{
    extern __shared__ float sm[];
    const int n = (int)a.n, lane = threadIdx.x;
    const int64_t t = blockIdx.x;
    float *s = sm, *v = s + n, *elig = v + n, *gscore = elig + n;
    /* Launched overlapped (programmatic dependent launch): the logits may
     * be an earlier kernel's writes, so wait first; the plan may launch
     * now (it waits for this kernel before it reads the routing). */
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();

    /* Scores. */
    if (a.scoring == FMOE_SCORING_SOFTMAX) {
        double mx = -INFINITY;
        for (int e = lane; e < n; e += 32) {
            float l = load_val(a.dtype, a.logits, t * a.ld + e * a.cs);
            s[e] = l;
            if (l > mx)
                mx = l;
        }
        for (int o = 16; o; o >>= 1) {
            double other = __shfl_xor_sync(0xffffffffu, mx, o);
            if (other > mx)
                mx = other;
        }
        double sum = 0.0;
        for (int e = lane; e < n; e += 32)
            sum += exp((double)s[e] - mx);
        for (int o = 16; o; o >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
        __syncwarp();
        for (int e = lane; e < n; e += 32)
            s[e] = (float)(exp((double)s[e] - mx) / sum);
    } else {
        for (int e = lane; e < n; e += 32) {
            float l = load_val(a.dtype, a.logits, t * a.ld + e * a.cs);
            if (a.scoring == FMOE_SCORING_SIGMOID) {
                s[e] = (float)(1.0 / (1.0 + exp(-(double)l)));
            } else if (isnan(l)) {
                s[e] = l;
            } else {
                double d = l;
                s[e] = (float)sqrt((d > 0.0 ? d : 0.0) + log1p(exp(-fabs(d))));
            }
        }
    }
    __syncwarp();
    /* What is ranked: with a correction bias the biased scores; without
     * one the logits themselves (core/routing.c rank_by_logits). Every
     * scoring function keeps the logits' order, but distinct logits can
     * round to equal f32 scores (sigmoid is 1.0f above ~17: Llama-4's
     * saturated routers), and transformers takes the top-k of the logits
     * there; ranking the scores would hand such ties to the lowest id. */
    for (int e = lane; e < n; e += 32) {
        v[e] = a.bias ? s[e] + a.bias[e] : load_val(a.dtype, a.logits, t * a.ld + e * a.cs);
        elig[e] = 1.0f;
    }
    __syncwarp();

    /* Grouped top-k: keep the experts of the topk_group best groups. */
    if (a.grouped) {
        int ng = (int)a.n_groups, per = n / ng;
        for (int gi = lane; gi < ng; gi += 32)
            gscore[gi] = a.bias ? group_score_top2(v + gi * per, per) : group_score_max(v + gi * per, per);
        __syncwarp();
        if (lane == 0) {
            float *gtaken = gscore + ng; /* 1: still available (best_index of core/routing.c) */
            for (int gi = 0; gi < ng; gi++)
                gtaken[gi] = 1.0f;
            for (int e = 0; e < n; e++)
                elig[e] = 0.0f;
            for (uint32_t r = 0; r < a.topk_group; r++) {
                int best = -1;
                for (int gi = 0; gi < ng; gi++)
                    if (gtaken[gi] != 0.0f && (best < 0 || ranks_above(gscore[gi], gscore[best])))
                        best = gi;
                if (best < 0)
                    break;
                gtaken[best] = 0.0f;
                for (int e = best * per; e < (best + 1) * per; e++)
                    elig[e] = 1.0f;
            }
        }
        __syncwarp();
    }

    /* Top-k by repeated arg-max. */
    float *w_row = a.w + t * a.k;
    int32_t *id_row = a.ids + t * a.k;
    int32_t *idl_row = a.ids_logical + t * a.k;
    float wsel[32];
    int isel[32];
    for (uint32_t j = 0; j < a.k; j++) {
        float bv = 0.0f;
        int bi = -1;
        for (int e = lane; e < n; e += 32)
            if (elig[e] != 0.0f && beats(v[e], e, bv, bi)) {
                bv = v[e];
                bi = e;
            }
        for (int o = 16; o; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (beats(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        isel[j] = bi;
        wsel[j] = bi >= 0 ? s[bi] : 0.0f;
        __syncwarp();
        if (lane == 0 && bi >= 0)
            elig[bi] = 0.0f;
        __syncwarp();
    }
    if (lane != 0)
        return;
    if (a.renormalize) {
        double sum = 0.0;
        for (uint32_t j = 0; j < a.k; j++)
            sum += wsel[j];
        if (sum < 1e-20)
            sum = 1e-20;
        for (uint32_t j = 0; j < a.k; j++)
            wsel[j] = (float)(wsel[j] / sum);
    }
    for (uint32_t j = 0; j < a.k; j++) {
        float wj = wsel[j] * a.scaling;
        int l = isel[j];
        int phys = l;
        if (l >= 0 && a.redundant) {
            uint32_t L = a.n;
            uint32_t count = 1u + a.redundant / L + ((uint32_t)l < a.redundant % L ? 1u : 0u);
            int64_t flat = t * a.k + j;
            phys = (int)((uint32_t)l + (uint32_t)(flat % count) * L);
        }
        w_row[j] = wj;
        id_row[j] = phys;
        idl_row[j] = l;
    }
}

} // namespace

cudaError_t fmcu_fwd::route_launch(const route_args &r, int64_t m, cudaStream_t st)
{
    /* s[n], v[n], eligible[n], group scores and availability [2 * groups]. */
    const size_t smem = (3 * (size_t)r.n + 2 * (size_t)(r.grouped ? r.n_groups : 1)) * sizeof(float);
    return fmcu_dev::launch_overlapped(route_kernel, dim3((unsigned)m), dim3(32), smem, st, r);
}
