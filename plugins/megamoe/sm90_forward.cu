/*
 * plugins/megamoe/sm90_forward.cu - the SM90 path of MegaMoE (sm90.h,
 * docs/MEGAMOE.md "SM90 path"): ep_size 1, one forward = seven kernels on
 * the caller's stream, no allocation and no host sync:
 *
 *   quant_x   x bf16 -> e4m3 per 32, s = 2^ceil(log2(max(amax, 1e-4)/448))
 *             with the exponent byte clamped to [1, 254] (the reference's
 *             FMOE_FP8_SCALE_UE8M0 rule);
 *   route     each (token, slot) pair's local expert (-1: id out of range)
 *             and the pairs per expert; scan: each expert's first pair and
 *             first GEMM tile; scatter: the pairs grouped by expert;
 *   gemm      GEMM1 (xq . W13^T, stored bf16 as the epilogue reads it) and
 *             GEMM2 (aq . W2^T, stored bf16): FP8 mma.sync m16n8k32. K = 32
 *             per MMA is exactly one scale group, so every MMA starts from
 *             zero and its partial sum is added to the f32 accumulator times
 *             s_act * s_w (powers of two: exact). e2m1 -> e4m3 is exact for
 *             every e2m1 value, so the MXFP4 weights are decoded into e4m3
 *             as they are staged in shared memory and need no rebasing;
 *   swiglu    bf16 gate/up, the clamp compared in bf16, SiLU with expf and
 *             a true division, times the routing weight, requantized to
 *             e4m3 per 32 with sf from the bits of amax * (1/448) (all-zero
 *             group: sf 0), as plugins/reference/method_megamoe.c;
 *   combine   out_t = bf16(sum of the token's local slots in ascending slot
 *             order, f32).
 *
 * Each output row of an MMA tile depends on its own A row only, so the
 * order the scatter's atomics give the pairs within an expert does not
 * change any output bit: forwards are bitwise repeatable.
 *
 * Not fused yet (the later steps): one persistent kernel, TMA + wgmma with
 * the weights' scales rebased per 128-wide block, SwiGLU in GEMM1's
 * epilogue, the combine in GEMM2's.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <new>
#include <stdint.h>
#include <stdio.h>

#include "plugins/megamoe/sm90.h"

namespace {

constexpr int WARP = 32;
constexpr int GROUP = 32;                   /* elements per scale */
constexpr int BM = (int)MM90_BLOCK_M;       /* pair rows per tile */
constexpr int BN = 64;                      /* output columns per tile */
constexpr int KC = 128;                     /* K per shared-memory stage: 4 groups */
constexpr int GPS = KC / GROUP;             /* groups per stage */
constexpr int ROW = KC + 16;                /* smem row pitch: 36 words, so the 8 fragment rows hit distinct banks */
constexpr int GEMM_THREADS = 128;           /* 4 warps, 2 x 2 over the 64 x 64 tile */
constexpr int ROW_THREADS = 256;            /* the row kernels: 8 warps, one 32-group each */
constexpr unsigned MAX_GRID_Y = 65535;      /* the GEMM loops over tiles beyond it */
constexpr float FP8_MAX = 448.0f;

/* ---- numerics shared by the kernels ------------------------------------------ */

/* max(m, |v|); a NaN v never wins (the reference's amax skips NaN). */
__device__ __forceinline__ float amax_step(float m, float v)
{
    const float a = fabsf(v);
    return a > m ? a : m;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o; o >>= 1) {
        const float x = __shfl_xor_sync(0xffffffffu, v, o);
        v = x > v ? x : v;
    }
    return v;
}

/* DeepGEMM's input scale (formats.h FMOE_FP8_SCALE_UE8M0). */
__device__ __forceinline__ float scale_ue8m0(float amax)
{
    const float a = amax > 1e-4f ? amax : 1e-4f;
    const uint32_t u = __float_as_uint(a / FP8_MAX);
    uint32_t e = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    e = e < 1 ? 1 : e > 254 ? 254 : e;
    return __uint_as_float(e << 23);
}

__device__ __forceinline__ uint8_t e4m3_sat(float v)
{
    v = v > FP8_MAX ? FP8_MAX : v < -FP8_MAX ? -FP8_MAX : v;
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

/* A UE8M0 byte's value: 2^(b - 127); 0xFF is NaN, 0 is 2^-127 (subnormal). */
__device__ __forceinline__ float ue8m0(uint8_t b)
{
    if (b == 0xFF)
        return __uint_as_float(0x7FC00000u);
    return b ? __uint_as_float((uint32_t)b << 23) : __uint_as_float(0x00400000u);
}

/* Four e2m1 codes (the low 16 bits, element 0 in the low nibble) as four
 * e4m3 bytes (element 0 in byte 0). The magnitudes {0, .5, 1, 1.5, 2, 3, 4,
 * 6} are bytes of an 8-byte table that one byte permute indexes by the
 * nibbles' low 3 bits; the sign bits move from bit 3 of each nibble to bit
 * 7 of each byte. */
__device__ __forceinline__ uint32_t e2m1x4_to_e4m3x4(uint32_t p)
{
    constexpr uint32_t LO = 0x3C383000u, HI = 0x4C484440u;
    const uint32_t mag = __byte_perm(LO, HI, p & 0x7777u);
    const uint32_t sign = ((p & 0x8u) << 4) | ((p & 0x80u) << 8) | ((p & 0x800u) << 12) | ((p & 0x8000u) << 16);
    return mag | sign;
}

__device__ __forceinline__ void mma_e4m3(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- quantize x, one warp per (token, 32-group) ---------------------------------- */

__global__ void quant_x(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                        uint8_t *__restrict__ xq, float *__restrict__ xs)
{
    const uint64_t groups = H / GROUP;
    const uint64_t wi = (uint64_t)blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (wi >= (uint64_t)m * groups)
        return;
    const uint64_t t = wi / groups, g = wi % groups;
    const float v = __bfloat162float(x[(int64_t)t * x_ld + (int64_t)(g * GROUP + lane)]);
    const float s = scale_ue8m0(warp_max(amax_step(0.0f, v)));
    xq[t * H + g * GROUP + lane] = e4m3_sat(v / s);
    if (lane == 0)
        xs[wi] = s;
}

/* ---- group the pairs by expert --------------------------------------------------- */

__global__ void route(const int32_t *__restrict__ ids, int64_t ids_ld, uint32_t m, uint32_t k, uint32_t E,
                      int32_t *__restrict__ loc, uint32_t *__restrict__ count)
{
    const uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (uint64_t)m * k)
        return;
    const int32_t id = ids[(int64_t)(q / k) * ids_ld + (int64_t)(q % k)];
    const int32_t l = id >= 0 && (uint32_t)id < E ? id : -1;
    loc[q] = l;
    if (l >= 0)
        atomicAdd(&count[l], 1u);
}

/* One block: exclusive prefix sums of the pairs and of the GEMM tiles per
 * expert. Each thread sums a run of experts, thread 0 scans the runs. */
__global__ void scan(const uint32_t *__restrict__ count, uint32_t E, uint32_t *__restrict__ seg,
                     uint32_t *__restrict__ tiles, uint32_t *__restrict__ cursor)
{
    __shared__ uint32_t run_pairs[1024], run_tiles[1024];
    const uint32_t per = (E + blockDim.x - 1) / blockDim.x;
    const uint32_t e0 = threadIdx.x * per, e1 = e0 + per < E ? e0 + per : E;
    uint32_t p = 0, t = 0;
    for (uint32_t e = e0; e < e1; e++) {
        p += count[e];
        t += (count[e] + BM - 1) / BM;
    }
    run_pairs[threadIdx.x] = p;
    run_tiles[threadIdx.x] = t;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t sp = 0, st = 0;
        for (uint32_t i = 0; i < blockDim.x; i++) {
            const uint32_t a = run_pairs[i], b = run_tiles[i];
            run_pairs[i] = sp;
            run_tiles[i] = st;
            sp += a;
            st += b;
        }
        seg[E] = sp;
        tiles[E] = st;
    }
    __syncthreads();
    p = run_pairs[threadIdx.x];
    t = run_tiles[threadIdx.x];
    for (uint32_t e = e0; e < e1; e++) {
        seg[e] = cursor[e] = p;
        tiles[e] = t;
        p += count[e];
        t += (count[e] + BM - 1) / BM;
    }
}

__global__ void scatter(const int32_t *__restrict__ loc, uint64_t pairs, uint32_t *__restrict__ cursor,
                        int32_t *__restrict__ order)
{
    const uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= pairs || loc[q] < 0)
        return;
    order[atomicAdd(&cursor[loc[q]], 1u)] = (int32_t)q;
}

/* ---- the grouped FP8 x MXFP4 GEMM ------------------------------------------------ */

struct gemm_args {
    const uint8_t *a;    /* [rows, K] e4m3 */
    const float *a_sf;   /* [rows, K/32] */
    uint32_t a_div;      /* A row of pair q: q / a_div (GEMM1: the token) */
    const uint8_t *w;    /* [E, N, K/2] e2m1 pairs */
    const uint8_t *w_sf; /* [E, N, K/32] UE8M0 */
    const uint32_t *seg, *tiles;
    const int32_t *order;
    uint32_t E, N, K;
    __nv_bfloat16 *out; /* [pairs, N]: row q */
};

/* Expert of tile `tile`: the last e with tiles[e] <= tile (< tiles[E]). */
__device__ __forceinline__ uint32_t expert_of(const uint32_t *tiles, uint32_t E, uint32_t tile)
{
    uint32_t lo = 0, hi = E;
    while (lo < hi) {
        const uint32_t mid = (lo + hi + 1) / 2;
        if (tiles[mid] <= tile)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__global__ void __launch_bounds__(GEMM_THREADS) gemm(gemm_args g)
{
    __shared__ __align__(16) uint8_t As[BM * ROW], Bs[BN * ROW];
    __shared__ float sa[BM][GPS], sw[BN][GPS];
    __shared__ int32_t arow[BM], qrow[BM];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int gid = lane / 4, tg = lane % 4;
    const int wm = (warp & 1) * 32, wn = (warp >> 1) * 32;
    const uint32_t n0 = blockIdx.x * BN, kgroups = g.K / GROUP;
    const uint32_t total = g.tiles[g.E];
    for (uint32_t tile = blockIdx.y; tile < total; tile += gridDim.y) {
        const uint32_t e = expert_of(g.tiles, g.E, tile);
        const uint32_t row0 = g.seg[e] + (tile - g.tiles[e]) * BM;
        const uint32_t end = g.seg[e + 1], rows = end - row0 < (uint32_t)BM ? end - row0 : BM;
        if (tid < BM) {
            const int32_t q = (uint32_t)tid < rows ? g.order[row0 + tid] : -1;
            qrow[tid] = q;
            arow[tid] = q < 0 ? -1 : (int32_t)((uint32_t)q / g.a_div);
        }
        float acc[2][4][4] = {};
        const uint8_t *wbase = g.w + (size_t)e * g.N * (g.K / 2);
        const uint8_t *sbase = g.w_sf + (size_t)e * g.N * kgroups;
        __syncthreads();
        for (uint32_t k0 = 0; k0 < g.K; k0 += KC) {
            const uint32_t kg0 = k0 / GROUP;
            const int ng = kgroups - kg0 < (uint32_t)GPS ? (int)(kgroups - kg0) : GPS;
            /* A: 64 rows x 8 chunks of 16 bytes. */
            for (int s = tid; s < BM * (KC / 16); s += GEMM_THREADS) {
                const int r = s / (KC / 16), c = s % (KC / 16);
                uint4 v = make_uint4(0, 0, 0, 0);
                if (arow[r] >= 0 && c / 2 < ng)
                    v = *reinterpret_cast<const uint4 *>(g.a + (size_t)arow[r] * g.K + k0 + c * 16);
                *reinterpret_cast<uint4 *>(As + r * ROW + c * 16) = v;
            }
            /* B: 64 rows x 4 groups; 16 packed bytes -> 32 e4m3 bytes. */
            for (int s = tid; s < BN * GPS; s += GEMM_THREADS) {
                const int r = s / GPS, c = s % GPS;
                const uint32_t n = n0 + r;
                uint4 p = make_uint4(0, 0, 0, 0);
                if (n < g.N && c < ng)
                    p = *reinterpret_cast<const uint4 *>(wbase + (size_t)n * (g.K / 2) + k0 / 2 + c * 16);
                uint4 *dst = reinterpret_cast<uint4 *>(Bs + r * ROW + c * GROUP);
                dst[0] = make_uint4(e2m1x4_to_e4m3x4(p.x), e2m1x4_to_e4m3x4(p.x >> 16), e2m1x4_to_e4m3x4(p.y),
                                    e2m1x4_to_e4m3x4(p.y >> 16));
                dst[1] = make_uint4(e2m1x4_to_e4m3x4(p.z), e2m1x4_to_e4m3x4(p.z >> 16), e2m1x4_to_e4m3x4(p.w),
                                    e2m1x4_to_e4m3x4(p.w >> 16));
            }
            if (tid < BM) {
                for (int c = 0; c < GPS; c++)
                    sa[tid][c] = arow[tid] >= 0 && c < ng ? g.a_sf[(size_t)arow[tid] * kgroups + kg0 + c] : 0.0f;
            } else {
                const int r = tid - BM;
                const uint32_t n = n0 + r;
                for (int c = 0; c < GPS; c++)
                    sw[r][c] = n < g.N && c < ng ? ue8m0(sbase[(size_t)n * kgroups + kg0 + c]) : 0.0f;
            }
            __syncthreads();
            for (int c = 0; c < ng; c++) {
                uint32_t a[2][4], b[4][2];
                for (int mi = 0; mi < 2; mi++) {
                    const uint8_t *r0 = As + (wm + mi * 16 + gid) * ROW + c * GROUP + tg * 4;
                    a[mi][0] = *reinterpret_cast<const uint32_t *>(r0);
                    a[mi][1] = *reinterpret_cast<const uint32_t *>(r0 + 8 * ROW);
                    a[mi][2] = *reinterpret_cast<const uint32_t *>(r0 + 16);
                    a[mi][3] = *reinterpret_cast<const uint32_t *>(r0 + 8 * ROW + 16);
                }
                for (int ni = 0; ni < 4; ni++) {
                    const uint8_t *r0 = Bs + (wn + ni * 8 + gid) * ROW + c * GROUP + tg * 4;
                    b[ni][0] = *reinterpret_cast<const uint32_t *>(r0);
                    b[ni][1] = *reinterpret_cast<const uint32_t *>(r0 + 16);
                }
                for (int mi = 0; mi < 2; mi++) {
                    const int ra = wm + mi * 16 + gid;
                    const float s0 = sa[ra][c], s1 = sa[ra + 8][c];
                    for (int ni = 0; ni < 4; ni++) {
                        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        mma_e4m3(p, a[mi], b[ni]);
                        const int cb = wn + ni * 8 + tg * 2;
                        const float w0 = sw[cb][c], w1 = sw[cb + 1][c];
                        acc[mi][ni][0] += p[0] * s0 * w0;
                        acc[mi][ni][1] += p[1] * s0 * w1;
                        acc[mi][ni][2] += p[2] * s1 * w0;
                        acc[mi][ni][3] += p[3] * s1 * w1;
                    }
                }
            }
            __syncthreads();
        }
        for (int mi = 0; mi < 2; mi++)
            for (int half = 0; half < 2; half++) {
                const int r = wm + mi * 16 + gid + half * 8;
                if (qrow[r] < 0)
                    continue;
                __nv_bfloat16 *orow = g.out + (size_t)qrow[r] * g.N;
                for (int ni = 0; ni < 4; ni++) {
                    const uint32_t col = n0 + wn + ni * 8 + tg * 2;
                    if (col < g.N)
                        *reinterpret_cast<__nv_bfloat162 *>(orow + col) =
                            __floats2bfloat162_rn(acc[mi][ni][2 * half], acc[mi][ni][2 * half + 1]);
                }
            }
        __syncthreads(); /* qrow / arow are rewritten by the next tile */
    }
}

/* ---- SwiGLU, routing weight, requant: one warp per (pair, 32-group) ----------------- */

__global__ void swiglu(const __nv_bfloat16 *__restrict__ h, const int32_t *__restrict__ loc,
                       const float *__restrict__ w, int64_t w_ld, uint32_t k, uint64_t pairs, uint32_t I,
                       float limit, uint8_t *__restrict__ aq, float *__restrict__ as)
{
    const uint64_t groups = I / GROUP;
    const uint64_t wi = (uint64_t)blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (wi >= pairs * groups)
        return;
    const uint64_t q = wi / groups, gi = wi % groups;
    if (loc[q] < 0)
        return;
    const uint64_t i = gi * GROUP + lane;
    float gate = __bfloat162float(h[q * 2 * I + i]), up = __bfloat162float(h[q * 2 * I + I + i]);
    if (limit > 0.0f) {
        const float c = __bfloat162float(__float2bfloat16_rn(limit));
        gate = gate < c ? gate : c;
        up = up < -c ? -c : up > c ? c : up;
    }
    const float weight = w[(int64_t)(q / k) * w_ld + (int64_t)(q % k)];
    const float a = (gate / (1.0f + expf(-gate)) * up) * weight;
    const float amax = warp_max(amax_step(0.0f, a));
    uint8_t code;
    float sf;
    if (!isfinite(amax)) {
        code = 0x7F; /* NaN, as the reference makes the whole group */
        sf = __uint_as_float(0x7FC00000u);
    } else {
        const uint32_t bits = __float_as_uint(amax * (1.0f / FP8_MAX));
        const int32_t ex = (int32_t)(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0);
        sf = __uint_as_float((uint32_t)(ex + 127) << 23);
        code = e4m3_sat(a * __uint_as_float((uint32_t)(127 - ex) << 23));
    }
    aq[q * I + i] = code;
    if (lane == 0)
        as[wi] = sf;
}

/* ---- combine: one thread per output element ------------------------------------------ */

__global__ void combine(const __nv_bfloat16 *__restrict__ y, const int32_t *__restrict__ loc, uint32_t m, uint32_t k,
                        uint32_t H, __nv_bfloat16 *__restrict__ out, int64_t out_ld)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (uint64_t)m * H)
        return;
    const uint64_t t = i / H, n = i % H;
    float acc = 0.0f;
    for (uint32_t j = 0; j < k; j++) {
        const uint64_t q = t * k + j;
        if (loc[q] >= 0)
            acc += __bfloat162float(y[q * H + n]);
    }
    out[(int64_t)t * out_ld + (int64_t)n] = __float2bfloat16_rn(acc);
}

int fail(cudaError_t e, const char *what, char *why, size_t cap)
{
    snprintf(why, cap, "MegaMoE SM90: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

unsigned blocks_for(uint64_t threads, unsigned per_block)
{
    return (unsigned)((threads + per_block - 1) / per_block);
}

} // namespace

struct mm90_layer {
    int device;
    mm90_plan plan;
    uint8_t *weights, *work;
};

template <typename T> static T *view(uint8_t *base, const mm_view &v)
{
    return reinterpret_cast<T *>(base + v.offset);
}

extern "C" int mm90_create(int device, const mm90_plan *plan, const mm90_host_weights *w, mm90_layer **out,
                           char *why, size_t cap)
{
    *out = nullptr;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    mm90_layer *l = new (std::nothrow) mm90_layer{device, *plan, nullptr, nullptr};
    if (!l) {
        snprintf(why, cap, "MegaMoE SM90: out of host memory");
        return -1;
    }
    const uint8_t *src[MM90_WEIGHT_VIEWS] = {w->w13, w->w13_sf, w->w2, w->w2_sf};
    if ((e = cudaMalloc(&l->weights, plan->weight_bytes)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMalloc (weights)", why, cap);
    }
    if ((e = cudaMalloc(&l->work, plan->work_bytes)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMalloc (workspace)", why, cap);
    }
    for (int i = 0; i < MM90_WEIGHT_VIEWS; i++)
        if ((e = cudaMemcpy(l->weights + plan->weight[i].offset, src[i], plan->weight[i].bytes,
                            cudaMemcpyHostToDevice)) != cudaSuccess) {
            mm90_destroy(l);
            return fail(e, "cudaMemcpy (weights)", why, cap);
        }
    *out = l;
    return 0;
}

extern "C" void mm90_destroy(mm90_layer *l)
{
    if (!l)
        return;
    if (cudaSetDevice(l->device) == cudaSuccess) {
        cudaFree(l->weights);
        cudaFree(l->work);
    }
    delete l;
}

extern "C" int mm90_forward(mm90_layer *l, const mm90_call *c, char *why, size_t cap)
{
    if (c->m == 0)
        return 0;
    cudaError_t e = cudaSetDevice(l->device);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    const mm90_plan &p = l->plan;
    const uint32_t H = p.hidden, I = p.inter, k = p.topk, E = p.experts, m = c->m;
    const uint64_t pairs = (uint64_t)m * k;
    cudaStream_t s = static_cast<cudaStream_t>(c->stream);
    uint8_t *W = l->weights, *ws = l->work;
    uint8_t *xq = view<uint8_t>(ws, p.work[MM90_XQ]), *aq = view<uint8_t>(ws, p.work[MM90_AQ]);
    float *xs = view<float>(ws, p.work[MM90_XS]), *as = view<float>(ws, p.work[MM90_AS]);
    int32_t *loc = view<int32_t>(ws, p.work[MM90_LOC]), *order = view<int32_t>(ws, p.work[MM90_ORDER]);
    uint32_t *count = view<uint32_t>(ws, p.work[MM90_COUNT]), *seg = view<uint32_t>(ws, p.work[MM90_SEG]);
    uint32_t *tiles = view<uint32_t>(ws, p.work[MM90_TILES]), *cursor = view<uint32_t>(ws, p.work[MM90_CURSOR]);
    __nv_bfloat16 *hy = view<__nv_bfloat16>(ws, p.work[MM90_HY]);

    if ((e = cudaMemsetAsync(count, 0, (size_t)E * 4, s)) != cudaSuccess)
        return fail(e, "cudaMemsetAsync", why, cap);
    const unsigned warps_per_block = ROW_THREADS / WARP;
    quant_x<<<blocks_for((uint64_t)m * (H / GROUP), warps_per_block), ROW_THREADS, 0, s>>>(
        static_cast<const __nv_bfloat16 *>(c->x), c->x_ld, m, H, xq, xs);
    route<<<blocks_for(pairs, 256), 256, 0, s>>>(c->ids, c->ids_ld, m, k, E, loc, count);
    scan<<<1, 1024, 0, s>>>(count, E, seg, tiles, cursor);
    scatter<<<blocks_for(pairs, 256), 256, 0, s>>>(loc, pairs, cursor, order);

    const uint64_t max_tiles = mm90_max_tiles(pairs, E);
    const unsigned grid_y = max_tiles < MAX_GRID_Y ? (unsigned)max_tiles : MAX_GRID_Y;
    gemm_args g1 = {xq,  xs,    k,    W + p.weight[MM90_W13].offset, W + p.weight[MM90_W13_SF].offset,
                    seg, tiles, order, E, 2 * I, H, hy};
    gemm<<<dim3(blocks_for(2ull * I, BN), grid_y), GEMM_THREADS, 0, s>>>(g1);
    swiglu<<<blocks_for(pairs * (I / GROUP), warps_per_block), ROW_THREADS, 0, s>>>(
        hy, loc, c->weights, c->weights_ld, k, pairs, I, c->swiglu_limit, aq, as);
    gemm_args g2 = {aq,  as,    1,    W + p.weight[MM90_W2].offset, W + p.weight[MM90_W2_SF].offset,
                    seg, tiles, order, E, H, I, hy};
    gemm<<<dim3(blocks_for(H, BN), grid_y), GEMM_THREADS, 0, s>>>(g2);
    combine<<<blocks_for((uint64_t)m * H, 256), 256, 0, s>>>(hy, loc, m, k, H, static_cast<__nv_bfloat16 *>(c->out),
                                                             c->out_ld);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail(e, "kernel launch", why, cap);
    return 0;
}
