/*
 * plugins/cuda/ep_kernels.cu - the EP forward's kernels (ep_kernels.cuh
 * says what each does) and their launches (ep_launch.h).
 */
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>

#include "plugins/cuda/ep_kernels.cuh"
#include "plugins/cuda/ep_launch.h"
#include "plugins/cuda/ep_plan.h"

namespace fmcu_ep_dev {
namespace {

/* Columns a thread moves at a time: 8 (one 16-byte load of bf16/f16). */
constexpr int VEC = 8;

struct dispatch_args {
    common_args c;
    const uint16_t *x;
    int64_t x_ld;
    const int32_t *ids;
    const float *w;
    int64_t m;
    unsigned long long *load; /* the layer's load record [num_experts], or null */
};

/* The max over `lanes` adjacent lanes (a power of two <= 32). Every lane of
 * the warp must call it (full mask): __activemask() names only the lanes
 * that happen to be converged, and after a divergent branch that can be a
 * subset, whose max then misses the others' values (a per-token FP8 scale
 * too small, codes saturated: issue 32's load-count branch did this). */
__device__ __forceinline__ float group_amax(float v, int lanes)
{
    for (int o = lanes / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

__global__ void __launch_bounds__(THREADS) dispatch_kernel(const dispatch_args a)
{
    const fmcu_ep_layout &L = a.c.L;
    const uint32_t H = L.hidden, k = L.top_k, me = a.c.rank;
    __shared__ uint64_t s_mask;
    __shared__ float s_red[THREADS / 32];
    for (int64_t t = blockIdx.x; t < a.m; t += gridDim.x) {
        if (threadIdx.x == 0)
            s_mask = ranks_of(a.c, a.ids + t * k, k);
        __syncthreads();
        const uint64_t mask = s_mask;
        /* ids and weights go to every rank; the row only where it is used */
        for (uint32_t i = threadIdx.x; i < L.size * k; i += blockDim.x) {
            const uint32_t r = i / k, j = i % k;
            char *b = a.c.p.disp[r];
            ((int32_t *)(b + L.c_ids))[t * k + j] = a.ids[t * k + j];
            ((float *)(b + L.c_w))[t * k + j] = a.w[t * k + j];
            /* The load record: this kernel already reads every slot of the
             * rank's routing once, so it counts here (no pass of its own). */
            if (r == 0 && a.load) {
                const int32_t id = a.ids[t * k + j];
                if (id >= 0 && (uint32_t)id < a.c.num_experts)
                    atomicAdd(a.load + id, 1ull);
            }
        }
        const uint16_t *xr = a.x + t * a.x_ld;
        if (L.dispatch == FMOE_EP_DISPATCH_ACTIVATION) {
            for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC) {
                const uint4 v = *(const uint4 *)(xr + c);
                for (uint64_t mk = mask; mk; mk &= mk - 1) {
                    const int r = __ffsll((long long)mk) - 1;
                    *(uint4 *)(a.c.p.disp[r] + L.c_x + t * L.x_row_bytes + c * 2) = v;
                }
            }
        } else {
            /* FP8: scale = amax / 448 per token or per 1x128 group; codes
             * saturate to +-448 (the e4m3 range). */
            const bool block = L.dispatch == FMOE_EP_DISPATCH_FP8_BLOCK;
            float token_scale = 1.0f;
            if (!block) {
                float mx = 0.0f;
                for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC) {
                    const uint4 v = *(const uint4 *)(xr + c);
                    const uint16_t *h = (const uint16_t *)&v;
                    for (int q = 0; q < VEC; q++)
                        mx = fmaxf(mx, fabsf(to_f(L.act_dtype, h[q])));
                }
                mx = group_amax(mx, 32);
                if (threadIdx.x % 32 == 0)
                    s_red[threadIdx.x / 32] = mx;
                __syncthreads();
                mx = 0.0f;
                for (int i = 0; i < THREADS / 32; i++)
                    mx = fmaxf(mx, s_red[i]);
                token_scale = mx > 0.0f ? mx / 448.0f : 1.0f;
                if (threadIdx.x == 0)
                    for (uint64_t mk = mask; mk; mk &= mk - 1) {
                        const int r = __ffsll((long long)mk) - 1;
                        ((float *)(a.c.p.disp[r] + L.c_scale))[t] = token_scale;
                    }
            }
            /* a 1x128 group is 16 threads of one warp (8 columns each);
             * every thread runs every round (group_amax needs the whole
             * warp), those past H with zeros and no stores */
            for (uint32_t c0 = 0; c0 < H; c0 += blockDim.x * VEC) {
                const uint32_t c = c0 + threadIdx.x * VEC;
                const bool in = c < H;
                const uint4 v = in ? *(const uint4 *)(xr + c) : make_uint4(0, 0, 0, 0);
                const uint16_t *h = (const uint16_t *)&v;
                float f[VEC], mx = 0.0f;
                for (int q = 0; q < VEC; q++) {
                    f[q] = to_f(L.act_dtype, h[q]);
                    mx = fmaxf(mx, fabsf(f[q]));
                }
                float scale = token_scale;
                if (block) {
                    mx = group_amax(mx, 16);
                    scale = mx > 0.0f ? mx / 448.0f : 1.0f;
                }
                if (!in)
                    continue;
                uint2 codes;
                uint8_t *cb = (uint8_t *)&codes;
                for (int q = 0; q < VEC; q++)
                    cb[q] = (uint8_t)__nv_cvt_float_to_fp8(f[q] / scale, __NV_SATFINITE, __NV_E4M3);
                for (uint64_t mk = mask; mk; mk &= mk - 1) {
                    const int r = __ffsll((long long)mk) - 1;
                    *(uint2 *)(a.c.p.disp[r] + L.c_x + t * L.x_row_bytes + c) = codes;
                    if (block && (c % 128) == 0)
                        ((float *)(a.c.p.disp[r] + L.c_scale))[t * L.scales_per_row + c / 128] = scale;
                }
            }
        }
        __syncthreads();
    }
    if (blockIdx.x == 0)
        for (uint32_t r = threadIdx.x; r < L.size; r += blockDim.x)
            *(volatile int32_t *)(a.c.p.disp[r] + L.c_count) = (int32_t)a.m;
    __syncthreads();
    if (threadIdx.x == 0 && a.c.counted) {
        __threadfence_system();
        for (uint32_t r = 0; r < L.size; r++)
            red_release_add((uint64_t *)(a.c.p.base[r] + L.disp_arrive) + me, 1);
    }
}

struct plan_args {
    common_args c;
    int32_t *pos;       /* [size x max_tokens] packed index of each row, or -1 */
    int64_t *rows_host; /* host-mapped: R, the live rows */
};

/* HIGH_THROUGHPUT (ep_plan.h): one block waits for every source's
 * dispatch, then packs the live rows in (s, t) order with a block scan. */
__global__ void __launch_bounds__(PLAN_THREADS) plan_kernel(const plan_args a)
{
    const fmcu_ep_layout &L = a.c.L;
    const uint32_t k = L.top_k, me = a.c.rank;
    const char *own = a.c.own;
    wait_all(a.c, (const uint64_t *)(own + L.disp_arrive), (*a.c.seq + 1) * DISPATCH_BLOCKS, 1);
    using scan = cub::BlockScan<int, PLAN_THREADS>;
    __shared__ typename scan::TempStorage tmp;
    __shared__ int32_t s_count[FMCU_EP_MAX_RANKS];
    for (uint32_t s = threadIdx.x; s < L.size; s += blockDim.x)
        s_count[s] = *(volatile const int32_t *)(own + L.disp + s * L.disp_chunk + L.c_count);
    __syncthreads();
    const uint64_t rows = (uint64_t)L.size * L.max_tokens;
    int base = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += PLAN_THREADS) {
        const uint64_t row = r0 + threadIdx.x;
        int live = 0;
        if (row < rows) {
            const uint64_t s = row / L.max_tokens, t = row % L.max_tokens;
            const int32_t *ids = (const int32_t *)(own + L.disp + s * L.disp_chunk + L.c_ids) + t * k;
            live = fmcu_ep_row_live(ids, k, a.c.owner, a.c.num_experts, me, (uint32_t)t, s_count[s]);
        }
        int before = 0, total = 0;
        scan(tmp).ExclusiveSum(live, before, total);
        if (row < rows)
            a.pos[row] = live ? base + before : -1;
        base += total;
        __syncthreads(); /* tmp is reused */
    }
    if (threadIdx.x == 0)
        *(volatile int64_t *)a.rows_host = base;
}

struct unpack_args {
    common_args c;
    uint16_t *x_in;
    int32_t *ids_in;
    float *w_in;
    uint8_t *live;
    const int32_t *pos; /* HIGH_THROUGHPUT: the plan (rows go to pos[row]); null: row to row */
};

__global__ void __launch_bounds__(THREADS) unpack_kernel(const unpack_args a)
{
    const fmcu_ep_layout &L = a.c.L;
    const uint32_t H = L.hidden, k = L.top_k, me = a.c.rank;
    const char *own = a.c.own;
    wait_all(a.c, (const uint64_t *)(own + L.disp_arrive), (*a.c.seq + 1) * DISPATCH_BLOCKS, 1);
    __shared__ int64_t s_dst;
    const uint64_t rows = (uint64_t)L.size * L.max_tokens;
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const uint32_t s = (uint32_t)(row / L.max_tokens), t = (uint32_t)(row % L.max_tokens);
        const char *chunk = own + L.disp + s * L.disp_chunk;
        const int32_t *ids = (const int32_t *)(chunk + L.c_ids) + (uint64_t)t * k;
        const float *w = (const float *)(chunk + L.c_w) + (uint64_t)t * k;
        /* The method's row for this one: itself (low latency: every row,
         * dead ones with ids -1), or its packed index (-1: dead, skipped). */
        if (threadIdx.x == 0) {
            if (a.pos) {
                s_dst = a.pos[row];
            } else {
                const int32_t cnt = *(volatile const int32_t *)(chunk + L.c_count);
                const int live = (int32_t)t < cnt && ((ranks_of(a.c, ids, k) >> me) & 1);
                a.live[row] = (uint8_t)live;
                s_dst = live ? (int64_t)row : -1;
            }
        }
        __syncthreads();
        const int64_t d = s_dst;
        const int live = d >= 0;
        if (live || !a.pos) {
            const uint64_t o = live ? (uint64_t)d : row;
            for (uint32_t j = threadIdx.x; j < k; j += blockDim.x) {
                a.ids_in[o * k + j] = live ? ids[j] : -1;
                a.w_in[o * k + j] = live ? w[j] : 0.0f;
            }
        }
        if (live) {
            uint16_t *dst = a.x_in + (uint64_t)d * H;
            if (L.dispatch == FMOE_EP_DISPATCH_ACTIVATION) {
                for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC)
                    *(uint4 *)(dst + c) = *(const uint4 *)(chunk + L.c_x + (uint64_t)t * L.x_row_bytes + c * 2);
            } else {
                const float *sc = (const float *)(chunk + L.c_scale) + (uint64_t)t * L.scales_per_row;
                for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC) {
                    const uint2 codes = *(const uint2 *)(chunk + L.c_x + (uint64_t)t * L.x_row_bytes + c);
                    const uint8_t *cb = (const uint8_t *)&codes;
                    const float scale = L.dispatch == FMOE_EP_DISPATCH_FP8_BLOCK ? sc[c / 128] : sc[0];
                    uint4 out;
                    uint16_t *o = (uint16_t *)&out;
                    for (int q = 0; q < VEC; q++) {
                        __half_raw hr = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)cb[q], __NV_E4M3);
                        o[q] = from_f(L.act_dtype, __half2float(__half(hr)) * scale);
                    }
                    *(uint4 *)(dst + c) = out;
                }
            }
        }
        __syncthreads();
    }
}

struct combine_args {
    common_args c;
    const uint16_t *y;
    const uint8_t *live;
    const int32_t *pos; /* HIGH_THROUGHPUT: row's result is y[pos[row]]; null: y[row] where live */
};

__global__ void __launch_bounds__(THREADS) combine_send_kernel(const combine_args a)
{
    const fmcu_ep_layout &L = a.c.L;
    const uint32_t H = L.hidden, me = a.c.rank;
    const uint64_t rows = (uint64_t)L.size * L.max_tokens;
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t src = a.pos ? a.pos[row] : a.live[row] ? (int64_t)row : -1;
        if (src < 0)
            continue;
        const uint32_t s = (uint32_t)(row / L.max_tokens), t = (uint32_t)(row % L.max_tokens);
        char *dst = a.c.p.comb[s] + (uint64_t)t * L.y_row_bytes;
        for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC)
            *(uint4 *)(dst + c * 2) = *(const uint4 *)(a.y + (uint64_t)src * H + c);
    }
    __syncthreads();
    if (threadIdx.x == 0 && a.c.counted) {
        __threadfence_system();
        for (uint32_t r = 0; r < L.size; r++)
            red_release_add((uint64_t *)(a.c.p.base[r] + L.comb_arrive) + me, 1);
    }
}

struct finish_args {
    common_args c;
    const int32_t *ids;
    uint16_t *out;
    int64_t out_ld, m;
};

__global__ void __launch_bounds__(THREADS) finish_kernel(const finish_args a)
{
    const fmcu_ep_layout &L = a.c.L;
    const uint32_t H = L.hidden, k = L.top_k;
    const char *own = a.c.own;
    wait_all(a.c, (const uint64_t *)(own + L.comb_arrive), (*a.c.seq + 1) * COMBINE_BLOCKS, 2);
    __shared__ uint64_t s_mask;
    for (int64_t t = blockIdx.x; t < a.m; t += gridDim.x) {
        if (threadIdx.x == 0)
            s_mask = ranks_of(a.c, a.ids + t * k, k);
        __syncthreads();
        const uint64_t mask = s_mask;
        for (uint32_t c = threadIdx.x * VEC; c < H; c += blockDim.x * VEC) {
            float acc[VEC] = {};
            for (uint64_t mk = mask; mk; mk &= mk - 1) {
                const uint32_t r = (uint32_t)(__ffsll((long long)mk) - 1);
                const uint4 v =
                    *(const uint4 *)(own + L.comb + r * L.comb_chunk + (uint64_t)t * L.y_row_bytes + c * 2);
                const uint16_t *h = (const uint16_t *)&v;
                for (int q = 0; q < VEC; q++)
                    acc[q] = __fadd_rn(acc[q], to_f(L.act_dtype, h[q]));
            }
            uint4 o;
            uint16_t *oh = (uint16_t *)&o;
            for (int q = 0; q < VEC; q++)
                oh[q] = from_f(L.act_dtype, acc[q]);
            *(uint4 *)(a.out + t * a.out_ld + c) = o;
        }
        __syncthreads();
    }
}

/* NCCL's window handle is read on the device, where NCCL's own device
 * code reads it (a host copy of it was refused with "invalid argument"). */
__global__ void read_window_kernel(const uint64_t *win, uint64_t *out)
{
    if (threadIdx.x < 4)
        out[threadIdx.x] = win[threadIdx.x];
}

__global__ void advance_kernel(uint64_t *seq)
{
    *seq += 1;
}

} // namespace
} // namespace fmcu_ep_dev

using namespace fmcu_ep_dev;

cudaError_t fmcu_ep_launch_dispatch(const common_args &c, const void *x, int64_t x_ld, const int32_t *ids,
                                    const float *w, int64_t m, uint64_t *load, cudaStream_t st)
{
    dispatch_args a{c, (const uint16_t *)x, x_ld, ids, w, m, (unsigned long long *)load};
    dispatch_kernel<<<DISPATCH_BLOCKS, THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

cudaError_t fmcu_ep_launch_plan(const common_args &c, int32_t *pos, int64_t *rows_host, cudaStream_t st)
{
    plan_args a{c, pos, rows_host};
    plan_kernel<<<1, PLAN_THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

cudaError_t fmcu_ep_launch_unpack(const common_args &c, void *x_in, int32_t *ids_in, float *w_in, uint8_t *live,
                                  const int32_t *pos, cudaStream_t st)
{
    unpack_args a{c, (uint16_t *)x_in, ids_in, w_in, live, pos};
    unpack_kernel<<<UNPACK_BLOCKS, THREADS, 0, st>>>(a);
    return cudaGetLastError();
}

cudaError_t fmcu_ep_launch_combine_send(const common_args &c, const void *y, const uint8_t *live, const int32_t *pos,
                                        cudaStream_t st)
{
    combine_args ca{c, (const uint16_t *)y, live, pos};
    combine_send_kernel<<<COMBINE_BLOCKS, THREADS, 0, st>>>(ca);
    return cudaGetLastError();
}

cudaError_t fmcu_ep_launch_finish(const common_args &c, const int32_t *ids, void *out, int64_t out_ld, int64_t m,
                                  uint64_t *seq, cudaStream_t st)
{
    cudaError_t e;
    finish_args fa{c, ids, (uint16_t *)out, out_ld, m};
    finish_kernel<<<FINISH_BLOCKS, THREADS, 0, st>>>(fa);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    advance_kernel<<<1, 1, 0, st>>>(seq);
    return cudaGetLastError();
}

cudaError_t fmcu_ep_read_window(const void *win, void *head32, cudaStream_t st)
{
    uint64_t *d = nullptr;
    cudaError_t e = cudaMalloc(&d, 32);
    if (e != cudaSuccess)
        return e;
    read_window_kernel<<<1, 32, 0, st>>>((const uint64_t *)win, d);
    e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(head32, d, 32, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(st);
    cudaFree(d);
    return e;
}
