/*
 * plugins/megamoe/sm90_forward.cu - the SM90 path of MegaMoE (sm90.h,
 * docs/MEGAMOE.md "SM90 path"): ep_size 1, one forward = six kernels
 * (seven launches: gemm runs twice; four when the call is small, prep_small
 * doing the first four's work) on the caller's stream, no allocation and
 * no host sync:
 *
 *   quant_x   x bf16 -> e4m3 per 32, s = 2^ceil(log2(max(amax, 1e-4)/448))
 *             with the exponent byte clamped to [1, 254] (the reference's
 *             FMOE_FP8_SCALE_UE8M0 rule);
 *   route     each (token, slot) pair's local expert (-1: id out of range)
 *             and the pairs per expert; scan: each expert's first pair and
 *             first GEMM tile; scatter: the pairs grouped by expert;
 *   gemm      GEMM1 (xq . W13^T, into the SwiGLU epilogue below) and
 *             GEMM2 (aq . W2^T, stored bf16): per 32-group one wgmma
 *             m64nNk32 e4m3 per warp group, A (the weights) from
 *             registers, B (the activations) from shared memory, swap-AB
 *             (weight rows on M, a tile's <= 32 pairs on N = 8..32), the
 *             weights streamed through a 6-stage cp.async pipeline. One
 *             group is one scale group, so each group's wgmma starts from
 *             zero and its partial sum is added to the f32 accumulator
 *             times s_act * s_w (powers of two: exact). Every e2m1 value
 *             times 2^-6 is an exact e4m3 value, so the MXFP4 weights are
 *             decoded to e4m3 with shifts (sm90_plan.h) in registers as
 *             each fragment is read, the 2^6 folded into the stored
 *             activation scales;
 *   GEMM1's epilogue (w13 and its scales uploaded with gate/up rows
 *             interleaved by 8, so a channel's gate and up meet in one
 *             lane): bf16 gate/up, the clamp compared in bf16, SiLU with
 *             expf and a true division, times the routing weight,
 *             requantized to e4m3 per 32 with sf from the bits of amax *
 *             (1/448) (all-zero group: sf 0), as
 *             plugins/reference/method_megamoe.c;
 *   combine   out_t = bf16(sum of the token's local slots in ascending slot
 *             order, f32).
 *
 * The launches after the first are programmatic (griddepcontrol): each kernel
 * starts while its predecessor drains and waits for it before it touches
 * memory.
 *
 * Each output column of an MMA tile (a pair) depends on its own B column
 * only, so the order the scatter's atomics give the pairs within an expert
 * does not change any output bit: forwards are bitwise repeatable.
 *
 * Not fused yet (the later steps): the weights' scales rebased per
 * 128-wide block (one promotion a stage), the combine in GEMM2's epilogue,
 * one persistent kernel.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <new>
#include <stdint.h>
#include <stdio.h>

#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/megamoe/numerics.cuh"
#include "plugins/megamoe/sm90.h"
#include "plugins/megamoe/wgmma_rs_e4m3.cuh"

namespace {

constexpr int WARP = 32;
constexpr int GROUP = 32;                   /* elements per scale */
constexpr int BM = (int)MM90_BLOCK_M;       /* pairs per tile: the MMA's N side */
constexpr int BN = (int)MM90_BLOCK_N;       /* weight rows per block: the MMA's M side */
constexpr int KC = (int)MM90_STAGE_K;       /* K per shared-memory stage: 4 groups */
constexpr int GPS = KC / GROUP;             /* groups per stage */
constexpr int GEMM_THREADS = 256;           /* 8 warps, 16 weight rows each */
constexpr int ROW_THREADS = 256;            /* the row kernels: 8 warps, one 32-group each */
/* The GEMM's weights decode to their values times 2^-6 (sm90_plan.h), so
 * the activation scales are stored times 2^6: p * s_act is then the same
 * f32 product as before, bit for bit (both factors are powers of two
 * apart; no scale reaches 2^121, bf16's range and the requant rule keep
 * them below 2^120). */
constexpr float ACT_SCALE_FOLD = 64.0f;

/* ---- numerics shared by the kernels ------------------------------------------ */

using mm_num::amax_step;
using mm_num::e4m3_sat;
using mm_num::scale_ue8m0;
using mm_num::warp_max;

/* ---- quantize x, one warp per (token, 32-group) ---------------------------------- */

/* Warp wi's group: token wi / (H/32), group wi % (H/32); nothing past the end. */
__device__ __forceinline__ void quant_group(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                                            uint64_t wi, int lane, uint8_t *__restrict__ xq, float *__restrict__ xs)
{
    const uint64_t groups = H / GROUP;
    if (wi >= (uint64_t)m * groups)
        return;
    const uint64_t t = wi / groups, g = wi % groups;
    const float v = __bfloat162float(x[(int64_t)t * x_ld + (int64_t)(g * GROUP + lane)]);
    const float s = scale_ue8m0(warp_max(amax_step(0.0f, v)));
    xq[t * H + g * GROUP + lane] = e4m3_sat(v / s);
    if (lane == 0)
        xs[wi] = s * ACT_SCALE_FOLD;
}

__global__ void quant_x(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                        uint8_t *__restrict__ xq, float *__restrict__ xs)
{
    quant_group(x, x_ld, m, H, (uint64_t)blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP,
                (int)(threadIdx.x % WARP), xq, xs);
}

/* ---- group the pairs by expert --------------------------------------------------- */

/* A pair's local expert: id - base when this rank holds it (EP: the experts
 * [base, base + E) of a linear placement), else -1 (masked: another rank's
 * expert, or an empty slot of an EP receive buffer). */
__device__ __forceinline__ int32_t local_expert(int32_t id, int32_t base, uint32_t E)
{
    return id >= base && (uint32_t)(id - base) < E ? id - base : -1;
}

/* Each pair's local expert, and the pairs per expert. */
__global__ void route(const int32_t *__restrict__ ids, int64_t ids_ld, uint32_t m, uint32_t k, int32_t base,
                      uint32_t E, int32_t *__restrict__ loc, uint32_t *__restrict__ count)
{
    fmcu_dev::pdl_wait(); /* programmatic launches (mm90_forward): the earlier kernels first */
    fmcu_dev::pdl_trigger();
    const uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= (uint64_t)m * k)
        return;
    const int32_t l = local_expert(ids[(int64_t)(q / k) * ids_ld + (int64_t)(q % k)], base, E);
    loc[q] = l;
    if (l >= 0)
        atomicAdd(&count[l], 1u);
}

/* One block of 1024 threads: exclusive prefix sums of the pairs and of the
 * GEMM tiles per expert. Each thread sums a run of experts; the runs are
 * scanned with warp shuffles, then the warps' totals by warp 0. */
constexpr int SCAN_THREADS = 1024;

__device__ __forceinline__ void scan_block(const uint32_t *count, uint32_t E, uint32_t *__restrict__ seg,
                                           uint32_t *__restrict__ tiles, uint32_t *cursor)
{
    __shared__ uint32_t warp_pairs[SCAN_THREADS / WARP], warp_tiles[SCAN_THREADS / WARP];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const uint32_t per = (E + SCAN_THREADS - 1) / SCAN_THREADS;
    const uint32_t e0 = threadIdx.x * per < E ? threadIdx.x * per : E, e1 = e0 + per < E ? e0 + per : E;
    uint32_t p = 0, t = 0;
    for (uint32_t e = e0; e < e1; e++) {
        p += count[e];
        t += (count[e] + BM - 1) / BM;
    }
    uint32_t ip = p, it = t; /* inclusive scans within the warp */
    for (int o = 1; o < WARP; o <<= 1) {
        const uint32_t xp = __shfl_up_sync(0xffffffffu, ip, o), xt = __shfl_up_sync(0xffffffffu, it, o);
        if (lane >= o) {
            ip += xp;
            it += xt;
        }
    }
    if (lane == WARP - 1) {
        warp_pairs[warp] = ip;
        warp_tiles[warp] = it;
    }
    __syncthreads();
    if (warp == 0) {
        uint32_t vp = warp_pairs[lane], vt = warp_tiles[lane];
        for (int o = 1; o < WARP; o <<= 1) {
            const uint32_t xp = __shfl_up_sync(0xffffffffu, vp, o), xt = __shfl_up_sync(0xffffffffu, vt, o);
            if (lane >= o) {
                vp += xp;
                vt += xt;
            }
        }
        warp_pairs[lane] = vp;
        warp_tiles[lane] = vt;
    }
    __syncthreads();
    p = (warp ? warp_pairs[warp - 1] : 0) + ip - p;
    t = (warp ? warp_tiles[warp - 1] : 0) + it - t;
    if (threadIdx.x == SCAN_THREADS - 1) {
        seg[E] = warp_pairs[WARP - 1];
        tiles[E] = warp_tiles[WARP - 1];
    }
    for (uint32_t e = e0; e < e1; e++) {
        seg[e] = cursor[e] = p;
        tiles[e] = t;
        p += count[e];
        t += (count[e] + BM - 1) / BM;
    }
}

__global__ void __launch_bounds__(SCAN_THREADS) scan(const uint32_t *__restrict__ count, uint32_t E,
                                                     uint32_t *__restrict__ seg, uint32_t *__restrict__ tiles,
                                                     uint32_t *__restrict__ cursor)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    scan_block(count, E, seg, tiles, cursor);
}

__global__ void scatter(const int32_t *__restrict__ loc, uint64_t pairs, uint32_t *__restrict__ cursor,
                        int32_t *__restrict__ order)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    const uint64_t q = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= pairs || loc[q] < 0)
        return;
    order[atomicAdd(&cursor[loc[q]], 1u)] = (int32_t)q;
}

/* ---- small calls: the above in one launch ---------------------------------------------
 *
 * Up to PREP_MAX_PAIRS pairs over up to PREP_MAX_EXPERTS local experts
 * (mm90_forward decides from m and E on the host): block 0 routes, counts,
 * scans and scatters in shared memory (no memset, no count round trip),
 * blocks 1.. quantize x as quant_x does, 32 (token, group) warps each. The
 * outputs are route/scan/scatter's and quant_x's (the order within an
 * expert is the atomics' either way, which no output bit depends on). */
constexpr uint32_t PREP_MAX_PAIRS = 8192, PREP_MAX_EXPERTS = 4096;

__global__ void __launch_bounds__(SCAN_THREADS)
    prep_small(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H, uint8_t *__restrict__ xq,
               float *__restrict__ xs, const int32_t *__restrict__ ids, int64_t ids_ld, uint32_t k, int32_t base,
               uint32_t E, int32_t *__restrict__ loc, uint32_t *__restrict__ seg, uint32_t *__restrict__ tiles,
               int32_t *__restrict__ order)
{
    __shared__ uint32_t cnt[PREP_MAX_EXPERTS], cur[PREP_MAX_EXPERTS];
    const uint32_t tid = threadIdx.x;
    if (blockIdx.x > 0) {
        quant_group(x, x_ld, m, H, (uint64_t)(blockIdx.x - 1) * (SCAN_THREADS / WARP) + tid / WARP, (int)(tid % WARP),
                    xq, xs);
        return;
    }
    const uint32_t pairs = m * k;
    for (uint32_t e = tid; e < E; e += SCAN_THREADS)
        cnt[e] = 0;
    __syncthreads();
    for (uint32_t q = tid; q < pairs; q += SCAN_THREADS) {
        const int32_t l = local_expert(ids[(int64_t)(q / k) * ids_ld + (int64_t)(q % k)], base, E);
        loc[q] = l;
        if (l >= 0)
            atomicAdd(&cnt[l], 1u);
    }
    __syncthreads();
    scan_block(cnt, E, seg, tiles, cur);
    __syncthreads();
    for (uint32_t q = tid; q < pairs; q += SCAN_THREADS) {
        const int32_t l = loc[q]; /* this thread's own write above */
        if (l >= 0)
            order[atomicAdd(&cur[l], 1u)] = (int32_t)q;
    }
}

/* ---- the grouped FP8 x MXFP4 GEMM, streaming the weights ------------------------------
 *
 * Swap-AB: the weights' output rows are the MMA's M side (64 per warp
 * group, 16 per warp, two groups: 128 rows per block) and a tile's pairs
 * its N side (up to 32, in n8 slices; the wgmma's N is the live slices',
 * so a one-pair tile runs m64n8k32). K streams through STAGES
 * shared-memory stages of 128 (four scale groups) filled by cp.async,
 * STAGES - 1 of them in flight while the wgmmas consume the oldest. Per
 * stage: the packed e2m1 rows in the stage order of mm90_pack_stage_rows
 * (decoded in registers as each fragment is read), the pairs' e4m3 rows
 * (x_chunk), one 4-byte word of UE8M0 scales per weight row and the pairs'
 * f32 scales. Each group's wgmma starts from zero over one scale group in
 * K order and its partial goes into the f32 accumulator as (p * s_act) *
 * s_w, the order of the mma.sync kernel this one replaced; the partials
 * are the tensor core's sums of 32 exact products (docs/MEGAMOE.md,
 * "Numerics of the wgmma"). */

struct gemm_args {
    const uint8_t *a;    /* [rows, K] e4m3 */
    const float *a_sf;   /* [rows, K/32] */
    uint32_t a_div;      /* A row of pair q: q / a_div (GEMM1: the token) */
    const uint8_t *w;    /* [E, N, K/2] e2m1 pairs, stage order (mm90_pack_stage_rows) */
    const uint8_t *w_sf; /* [E, N, sf_pitch] UE8M0 (mm90_sf_pitch) */
    uint32_t sf_pitch;
    const uint32_t *seg, *tiles;
    const int32_t *order;
    uint32_t E, N, K;
    __nv_bfloat16 *out; /* [pairs, N]: row q (GEMM2) */
    /* GEMM1's fused epilogue (SwiGLU, routing weight, requant), on weights
     * whose gate/up rows are interleaved by 8 (mm90_create): */
    const float *tw; /* routing weights [tokens, tw_ld]: pair q's is tw[(q / k) * tw_ld + q % k] */
    int64_t tw_ld;
    uint32_t k;
    float limit;
    uint8_t *aq;  /* [pairs, N/2] e4m3 */
    float *as;   /* [pairs, N/64] */
};

constexpr int STAGES = 6;        /* 5 in flight: two blocks of 80 KB share an SM */
constexpr int WP = KC / 2;       /* packed weight row: a quarter warp's 16-byte loads cover 128 bytes */
constexpr int W_BYTES = BN * WP; /* 8192 */
constexpr int X_BYTES = BM * KC; /* 4096: the pairs' e4m3 rows */
constexpr int GROUP_X = 2 * BM * 16; /* bytes of one 32-group of the pairs' rows */

/* Byte offset of 16-byte chunk q (K 16q .. 16q + 15 of the stage) of pair
 * row r in a stage: the wgmma B operand's K-major layout without swizzle,
 * core matrices of 8 rows x 16 bytes (128 contiguous bytes), the 8-row
 * groups 128 bytes apart (stride offset) and the two chunks of a 32-group
 * BM * 16 bytes apart (leading offset). A warp's copies (one chunk of 32
 * rows) write 512 contiguous bytes. */
__device__ __forceinline__ int x_chunk(int r, int q)
{
    return (q * BM + r) * 16;
}

/* The matrix descriptor of a B operand (a group of a stage's pair rows) at
 * shared address `addr`: no swizzle, leading offset BM * 16, stride 128.
 * The address field is addr / 16 in bits 0..13 (shared memory ends below
 * 256 KB), so a descriptor moves by `bytes` when bytes / 16 is added. */
__device__ __forceinline__ uint64_t x_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((BM * 16) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
}
constexpr int SW_BYTES = BN * GPS;
constexpr int SX_BYTES = GPS * BM * 4; /* [group][pair] f32 */
constexpr int STAGE_BYTES = W_BYTES + X_BYTES + SW_BYTES + SX_BYTES;
constexpr int GEMM_SMEM = STAGES * STAGE_BYTES + 2 * BM * 4 /* + the tile's pair rows */
                          + (GEMM_THREADS / WARP) * BM * 4;  /* + the SwiGLU epilogue's amax per warp and pair */
static_assert(BN == 16 * (GEMM_THREADS / WARP), "one m16 slice of weight rows per warp");
static_assert(2 * GEMM_SMEM <= 227 * 1024, "two GEMM blocks an SM (__launch_bounds__(.., 2))");
static_assert(BN == GEMM_THREADS / 2 && BM * GPS == GEMM_THREADS / 2, "the scale copies: one per thread");
static_assert(GPS == (int)MM90_SF_ALIGN, "one 4-byte word of weight scales per row and stage");
static_assert(STAGE_BYTES % 16 == 0 && BM * (KC / 16) == GEMM_THREADS, "stage layout: one x copy a thread");
static_assert(GEMM_THREADS == 256 && BN == 128, "two warp groups of 64 weight rows: the wgmma's M side");

__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src));
}

__device__ __forceinline__ void cp_async4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* One thread's cp.async copies of every stage of a tile, their sources
 * set up once per tile (each stage advances them by its K): two 16-byte
 * chunks of packed weight rows, one of a pair's e4m3 row (chunk cx: group
 * cx/2), and a 4-byte scale word (threads < BN: a
 * weight row's four UE8M0 bytes; the others: one f32 pair scale). A copy is
 * made when its row is live and its group lies inside K; a stage of ng < 4
 * groups holds ng * 16 bytes of a weight row (mm90_pack_stage_rows), chunks
 * 0..ng-1. */
struct copier {
    const uint8_t *w0, *w1, *x, *s;
    uint32_t dw0, dw1, dx, ds, s_step;
    int gw, gx, gs; /* the copy's scale group within a stage */
    bool ok_w0, ok_w1, ok_x, ok_s;
};

__device__ __forceinline__ copier make_copier(const gemm_args &g, const uint8_t *wbase, const uint8_t *sbase,
                                              uint32_t n0, const int32_t *arow, int rows, int tid)
{
    copier c;
    const int rw = tid / GPS, cw = tid % GPS; /* weight rows rw and rw + BN/2 */
    c.w0 = wbase + (size_t)(n0 + rw) * (g.K / 2) + cw * 16;
    c.w1 = c.w0 + (size_t)(BN / 2) * (g.K / 2);
    c.dw0 = rw * WP + cw * 16;
    c.dw1 = c.dw0 + (BN / 2) * WP;
    c.gw = cw;
    c.ok_w0 = n0 + rw < g.N;
    c.ok_w1 = n0 + rw + BN / 2 < g.N;
    const int rx = tid % BM, cx = tid / BM;
    c.ok_x = rx < rows;
    c.x = g.a + (size_t)arow[rx] * g.K + cx * 16;
    c.dx = W_BYTES + x_chunk(rx, cx);
    c.gx = cx / 2;
    if (tid < BN) {
        c.ok_s = n0 + tid < g.N;
        c.s = sbase + (size_t)(n0 + tid) * g.sf_pitch;
        c.ds = W_BYTES + X_BYTES + tid * GPS;
        c.s_step = GPS; /* bytes: the padded row holds the word even in the last stage */
        c.gs = 0;
    } else {
        const int r = (tid - BN) / GPS, cs = (tid - BN) % GPS;
        c.ok_s = r < rows;
        c.s = reinterpret_cast<const uint8_t *>(g.a_sf + (size_t)arow[r] * (g.K / GROUP) + cs);
        c.ds = W_BYTES + X_BYTES + SW_BYTES + (cs * BM + r) * 4;
        c.s_step = GPS * 4;
        c.gs = cs;
    }
    return c;
}

/* Queue the next stage (ng of its groups inside K) into `st` and move the
 * sources on by one stage. */
__device__ __forceinline__ void issue_next(copier &c, uint8_t *st, int ng)
{
    if (c.ok_w0 && c.gw < ng)
        cp_async16(st + c.dw0, c.w0);
    if (c.ok_w1 && c.gw < ng)
        cp_async16(st + c.dw1, c.w1);
    if (c.ok_x && c.gx < ng)
        cp_async16(st + c.dx, c.x);
    if (c.ok_s && c.gs < ng)
        cp_async4(st + c.ds, c.s);
    c.w0 += KC / 2;
    c.w1 += KC / 2;
    c.x += KC;
    c.s += c.s_step;
}

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

/* A UE8M0 byte's value: 2^(b - 127); 0xFF is NaN, 0 is 2^-127 (subnormal). */
__device__ __forceinline__ float ue8m0(uint32_t b)
{
    const uint32_t bits = b == 0 ? 0x00400000u : b == 0xFFu ? 0x7FC00000u : b << 23;
    return __uint_as_float(bits);
}

/* Byte c of a row's word of UE8M0 weight scales as a float. FAST (every
 * byte in [1, 254], mm90_fast_scales): the byte moved into the exponent
 * field, two instructions; else through ue8m0 (0: 2^-127, 0xFF: NaN). */
template <bool FAST> __device__ __forceinline__ float wscale(uint32_t word, int c)
{
    if constexpr (FAST)
        return __uint_as_float((c < 3 ? word << (23 - 8 * c) : word >> 1) & 0x7F800000u);
    else
        return ue8m0((word >> (8 * c)) & 0xFFu);
}

/* One group's wgmma: the warp group's 64 weight rows (A, e4m3 decoded in
 * registers) x SL n8 slices of pairs (B, the stage's e4m3 rows) over one
 * 32-group, into p from zero. */
template <int SL> __device__ __forceinline__ void group_wgmma(float (&p)[SL * 4], const uint32_t (&a)[4], uint64_t desc)
{
    if constexpr (SL == 1)
        mm_wgmma::wgmma_m64n8k32_e4m3_rs(p, a, desc, 0);
    else if constexpr (SL == 2)
        mm_wgmma::wgmma_m64n16k32_e4m3_rs(p, a, desc, 0);
    else if constexpr (SL == 3)
        mm_wgmma::wgmma_m64n24k32_e4m3_rs(p, a, desc, 0);
    else
        mm_wgmma::wgmma_m64n32k32_e4m3_rs(p, a, desc, 0);
}

/* A group's partial sums into the accumulator: (p * s_act) * s_w, the
 * scales' f32 products in the unpipelined kernel's order. Thread (gid, tg)
 * holds p[4j + 0, 1]: weight row gid, pairs 8j + 2tg, +1; p[4j + 2, 3]:
 * row gid + 8 (the m16n8 accumulator layout, per warp of the group). */
template <int SL, bool FAST>
__device__ __forceinline__ void promote(float (&acc)[BM / 8][4], const float (&p)[SL * 4], const float *sx,
                                        uint32_t sw0, uint32_t sw1, int c, int tg)
{
    const float w0 = wscale<FAST>(sw0, c), w1 = wscale<FAST>(sw1, c);
#pragma unroll
    for (int j = 0; j < SL; j++) {
        const float2 s = *reinterpret_cast<const float2 *>(sx + c * BM + j * 8 + 2 * tg);
        acc[j][0] = fmaf(p[4 * j] * s.x, w0, acc[j][0]);
        acc[j][1] = fmaf(p[4 * j + 1] * s.y, w0, acc[j][1]);
        acc[j][2] = fmaf(p[4 * j + 2] * s.x, w1, acc[j][2]);
        acc[j][3] = fmaf(p[4 * j + 3] * s.y, w1, acc[j][3]);
    }
}

/* One warp group's wgmmas on one stage: its 64 weight rows x SL n8 slices
 * of pairs over the stage's groups (all GPS when FULL, else the first ng),
 * in K order, one wgmma per group from zero (one group is one scale group).
 * Thread (gid, tg) of warp w holds rows 16w + gid and + 8: per group one
 * packed word each (mm90_pack_stage_rows), a full stage's four in one
 * 16-byte load; the word's low nibbles decode to K 4tg..4tg+3 (A register
 * 0 or 1) and its high ones to 16+4tg.. (2 or 3), the 8-bit A fragment of
 * m64nNk32. In a full stage two groups are in flight: group c's wgmma is
 * issued before group c - 1's partial is waited for and promoted, so
 * p and a alternate between two sets. */
template <int SL, bool FULL, bool FAST>
__device__ __forceinline__ void stage_mma(float (&acc)[BM / 8][4], float (&p)[2][SL * 4], const uint8_t *st,
                                          uint64_t desc, int wr, int gid, int tg, int ng)
{
    using namespace fmcu_wgmma;
    const uint8_t *sw = st + W_BYTES + X_BYTES;
    const float *sx = reinterpret_cast<const float *>(sw + SW_BYTES);
    const uint32_t sw0 = *reinterpret_cast<const uint32_t *>(sw + (wr + gid) * GPS);
    const uint32_t sw1 = *reinterpret_cast<const uint32_t *>(sw + (wr + gid + 8) * GPS);
    const uint8_t *r0 = st + (wr + gid) * WP, *r1 = r0 + 8 * WP;
    uint32_t q0[GPS], q1[GPS];
    if constexpr (FULL) {
        const uint4 v0 = *reinterpret_cast<const uint4 *>(r0 + tg * 16);
        const uint4 v1 = *reinterpret_cast<const uint4 *>(r1 + tg * 16);
        q0[0] = v0.x, q0[1] = v0.y, q0[2] = v0.z, q0[3] = v0.w;
        q1[0] = v1.x, q1[1] = v1.y, q1[2] = v1.z, q1[3] = v1.w;
    } else {
#pragma unroll
        for (int c = 0; c < GPS; c++)
            if (c < ng) {
                q0[c] = *reinterpret_cast<const uint32_t *>(r0 + (tg * ng + c) * 4);
                q1[c] = *reinterpret_cast<const uint32_t *>(r1 + (tg * ng + c) * 4);
            }
    }
    uint32_t a[2][4];
#pragma unroll
    for (int c = 0; c < GPS; c++) {
        if (!FULL && c >= ng)
            break;
        uint32_t(&ac)[4] = a[c & 1];
        ac[0] = mm90_e2m1_lo_e4m3(q0[c]);
        ac[1] = mm90_e2m1_lo_e4m3(q1[c]);
        ac[2] = mm90_e2m1_hi_e4m3(q0[c]);
        ac[3] = mm90_e2m1_hi_e4m3(q1[c]);
        wgmma_fence();
        group_wgmma<SL>(p[c & 1], ac, desc + (uint64_t)(c * GROUP_X / 16));
        wgmma_commit();
        if constexpr (FULL) {
            if (c > 0) {
                wgmma_wait<1>();
                fence_regs(p[(c - 1) & 1]);
                fence_regs(a[(c - 1) & 1]);
                promote<SL, FAST>(acc, p[(c - 1) & 1], sx, sw0, sw1, c - 1, tg);
            }
        } else {
            wgmma_wait<0>();
            fence_regs(p[c & 1]);
            fence_regs(ac);
            promote<SL, FAST>(acc, p[c & 1], sx, sw0, sw1, c, tg);
        }
    }
    if constexpr (FULL) {
        wgmma_wait<0>();
        fence_regs(p[(GPS - 1) & 1]);
        fence_regs(a[(GPS - 1) & 1]);
        promote<SL, FAST>(acc, p[(GPS - 1) & 1], sx, sw0, sw1, GPS - 1, tg);
    }
}

/* A tile's K loop for SL live slices: STAGES - 1 stages are queued
 * before it; each step waits for the oldest, queues the one STAGES - 1 on
 * and runs the wgmmas on the oldest (complete before the step ends, so the
 * next step's barrier frees its slot). Only the last stage can hold fewer
 * than GPS groups (last_ng). The slots go round by running offsets. `live`
 * is the warp group's: wgmma is issued by all four of its warps. */
template <int SL, bool FAST>
__device__ __forceinline__ void k_loop(float (&acc)[BM / 8][4], copier &cp, uint8_t *smem, uint32_t nk, int last_ng,
                                       bool live, int wr, int gid, int tg)
{
    constexpr uint32_t RING = STAGES * STAGE_BYTES;
    const uint64_t desc0 = x_desc((uint32_t)__cvta_generic_to_shared(smem) + W_BYTES); /* slot 0's group 0 */
    float p[2][SL * 4] = {};
    uint32_t rd = 0, wt = (STAGES - 1) * STAGE_BYTES;
    for (uint32_t kt = 0; kt < nk; kt++) {
        cp_async_wait<STAGES - 2>();
        /* this thread's copies of stage kt are read by wgmma, through the async proxy */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* stage kt landed for all; stage kt - 1 consumed by all */
        if (kt + STAGES - 1 < nk)
            issue_next(cp, smem + wt, kt + STAGES == nk ? last_ng : GPS);
        cp_async_commit();
        wt = wt + STAGE_BYTES == RING ? 0 : wt + STAGE_BYTES;
        if (live) {
            if (kt + 1 < nk || last_ng == GPS)
                stage_mma<SL, true, FAST>(acc, p, smem + rd, desc0 + rd / 16, wr, gid, tg, GPS);
            else
                stage_mma<SL, false, FAST>(acc, p, smem + rd, desc0 + rd / 16, wr, gid, tg, last_ng);
        }
        rd = rd + STAGE_BYTES == RING ? 0 : rd + STAGE_BYTES;
    }
}

/* GEMM1's epilogue: the weights' rows are interleaved by 8 (gate rows 16j
 * .. 16j + 7, then the matching up rows), so a warp's m16 slice holds the
 * gate (fragment row gid: d0, d1) and up (row gid + 8: d2, d3) of one
 * channel, n0 / 2 + 8 warp + gid, in the same lane. Each pair's 64 channels
 * of the block form two requant groups of four warps; their amax meets in
 * shared memory. Numerics: the reference's, as the former swiglu kernel's
 * were (bf16 gate / up, the clamp in bf16, expf and a true division, times
 * the weight, the requant rule). */
__device__ __forceinline__ void swiglu_epilogue(const gemm_args &g, const float (&acc)[BM / 8][4], const int32_t *qrow,
                                                int rows, int slices, bool live, uint32_t n0, int warp, int gid,
                                                int tg, float *amax_smem)
{
    const float c = __bfloat162float(__float2bfloat16_rn(g.limit));
    float act[BM / 8][2];
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int r = j * 8 + 2 * tg + t;
            float a = 0.0f;
            if (live && j < slices && r < rows) {
                float gate = __bfloat162float(__float2bfloat16_rn(acc[j][t]));
                float up = __bfloat162float(__float2bfloat16_rn(acc[j][2 + t]));
                if (g.limit > 0.0f) {
                    gate = gate < c ? gate : c;
                    up = up < -c ? -c : up > c ? c : up;
                }
                const uint32_t q = (uint32_t)qrow[r];
                const float weight = g.tw[(int64_t)(q / g.k) * g.tw_ld + (int64_t)(q % g.k)];
                a = (gate / (1.0f + expf(-gate)) * up) * weight;
            }
            act[j][t] = a;
            /* amax over the warp's 8 channels (lanes of equal tg) */
            float m = amax_step(0.0f, a);
            for (int o = 4; o < WARP; o <<= 1) {
                const float x = __shfl_xor_sync(0xffffffffu, m, o);
                m = x > m ? x : m;
            }
            if (gid == 0)
                amax_smem[warp * BM + r] = m;
        }
    __syncthreads();
    const int grp = warp / 4; /* the block's group of this warp's channels */
    const uint32_t ch = n0 / 2 + 8 * warp + gid, I = g.N / 2;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int r = j * 8 + 2 * tg + t;
            if (!live || j >= slices || r >= rows)
                continue;
            float amax = 0.0f;
            for (int w = 4 * grp; w < 4 * grp + 4; w++) {
                const float x = amax_smem[w * BM + r];
                amax = x > amax ? x : amax;
            }
            uint8_t code;
            float sf;
            int32_t ex;
            if (!mm_num::act_exponent(amax, ex)) {
                code = 0x7F; /* NaN, as the reference makes the whole group */
                sf = __uint_as_float(0x7FC00000u);
            } else {
                sf = __uint_as_float((uint32_t)(ex + 127) << 23);
                code = mm_num::act_code(act[j][t], ex);
            }
            const uint32_t q = (uint32_t)qrow[r];
            g.aq[(size_t)q * I + ch] = code;
            if (warp % 4 == 0 && gid == 0)
                g.as[(size_t)q * (I / GROUP) + ch / GROUP] = sf * ACT_SCALE_FOLD;
        }
}

template <bool SWIGLU, bool FAST> __global__ void __launch_bounds__(GEMM_THREADS, 2) gemm(gemm_args g)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem[];
    int32_t *arow = reinterpret_cast<int32_t *>(smem + STAGES * STAGE_BYTES), *qrow = arow + BM;
    float *amax_smem = reinterpret_cast<float *>(qrow + BM);
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int gid = lane / 4, tg = lane % 4;
    const int wr = warp * 16;
    const uint32_t n0 = blockIdx.x * BN, kgroups = g.K / GROUP, nk = (g.K + KC - 1) / KC;
    const int last_ng = (int)(kgroups - (nk - 1) * GPS);
    const bool live = n0 + wr < g.N; /* N % 32 == 0: a warp's 16 rows are all in or all out */
    /* a warp group's wgmmas run when any of its 64 rows is in (the others'
     * weights are not copied, their results not stored) */
    const bool wg_live = n0 + (uint32_t)(warp / 4) * 64 < g.N;
    const uint32_t total = g.tiles[g.E];
    for (uint32_t tile = blockIdx.y; tile < total; tile += gridDim.y) {
        const uint32_t e = expert_of(g.tiles, g.E, tile);
        const uint32_t row0 = g.seg[e] + (tile - g.tiles[e]) * BM;
        const uint32_t end = g.seg[e + 1];
        const int rows = end - row0 < (uint32_t)BM ? (int)(end - row0) : BM;
        if (tid < BM) {
            const int32_t q = tid < rows ? g.order[row0 + tid] : -1;
            qrow[tid] = q;
            arow[tid] = q < 0 ? 0 : (int32_t)((uint32_t)q / g.a_div);
        }
        __syncthreads();
        copier cp = make_copier(g, g.w + (size_t)e * g.N * (g.K / 2), g.w_sf + (size_t)e * g.N * g.sf_pitch, n0,
                                arow, rows, tid);
        for (int s = 0; s < STAGES - 1; s++) {
            if ((uint32_t)s < nk)
                issue_next(cp, smem + s * STAGE_BYTES, (uint32_t)s + 1 == nk ? last_ng : GPS);
            cp_async_commit();
        }
        const int slices = (rows + 7) / 8;
        float acc[BM / 8][4] = {};
        static_assert(BM / 8 == 4, "four n8 slices per tile");
        switch (slices) {
        case 1:
            k_loop<1, FAST>(acc, cp, smem, nk, last_ng, wg_live, wr, gid, tg);
            break;
        case 2:
            k_loop<2, FAST>(acc, cp, smem, nk, last_ng, wg_live, wr, gid, tg);
            break;
        case 3:
            k_loop<3, FAST>(acc, cp, smem, nk, last_ng, wg_live, wr, gid, tg);
            break;
        default:
            k_loop<4, FAST>(acc, cp, smem, nk, last_ng, wg_live, wr, gid, tg);
            break;
        }
        if constexpr (SWIGLU)
            swiglu_epilogue(g, acc, qrow, rows, slices, live, n0, warp, gid, tg, amax_smem);
        else if (live) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                if (j >= slices)
                    break;
                const uint32_t col = n0 + wr + gid;
                for (int t = 0; t < 2; t++) {
                    const int r = j * 8 + 2 * tg + t;
                    if (r >= rows)
                        continue;
                    __nv_bfloat16 *orow = g.out + (size_t)qrow[r] * g.N;
                    orow[col] = __float2bfloat16_rn(acc[j][t]);
                    orow[col + 8] = __float2bfloat16_rn(acc[j][2 + t]);
                }
            }
        }
        cp_async_wait<0>();
        __syncthreads(); /* the stages, qrow and arow are rewritten by the next tile */
    }
}

/* ---- combine: one thread per output element ------------------------------------------ */

__global__ void combine(const __nv_bfloat16 *__restrict__ y, const int32_t *__restrict__ loc, uint32_t m, uint32_t k,
                        uint32_t H, __nv_bfloat16 *__restrict__ out, int64_t out_ld)
{
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
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
    bool fast_scales; /* mm90_fast_scales over both scale tensors: the GEMM's FAST form */
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
    mm90_layer *l = new (std::nothrow) mm90_layer{device, *plan, nullptr, nullptr, false};
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
    /* The scale rows are padded on the device (mm90_sf_pitch): zero the
     * padding, then copy each [rows, K/32] tensor at that pitch. */
    if ((e = cudaMemset(l->weights, 0, plan->weight_bytes)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMemset (weights)", why, cap);
    }
    const uint32_t K[MM90_WEIGHT_VIEWS] = {plan->hidden, plan->hidden, plan->inter, plan->inter};
    const uint64_t rows[MM90_WEIGHT_VIEWS] = {(uint64_t)plan->experts * 2 * plan->inter,
                                              (uint64_t)plan->experts * 2 * plan->inter,
                                              (uint64_t)plan->experts * plan->hidden,
                                              (uint64_t)plan->experts * plan->hidden};
    /* w13 and its scales go up with gate/up rows interleaved by 8 (host.h
     * mm_interleave_src), one expert at a time through a host buffer, so
     * GEMM1's epilogue finds a channel's gate and up in one lane; both
     * weight tensors' rows in the GEMM's stage order (mm90_pack_stage_rows) */
    const size_t rows13 = (size_t)2 * plan->inter;
    const size_t perm_bytes = rows13 * (plan->hidden / 2) > (size_t)plan->hidden * (plan->inter / 2)
                                  ? rows13 * (plan->hidden / 2)
                                  : (size_t)plan->hidden * (plan->inter / 2);
    uint8_t *perm = new (std::nothrow) uint8_t[2 * perm_bytes], *packed = perm + perm_bytes;
    if (!perm) {
        mm90_destroy(l);
        snprintf(why, cap, "MegaMoE SM90: out of host memory");
        return -1;
    }
    for (int i = 0; i < MM90_WEIGHT_VIEWS && e == cudaSuccess; i++) {
        const bool sf = i == MM90_W13_SF || i == MM90_W2_SF;
        const size_t width = sf ? K[i] / GROUP : K[i] / 2, pitch = sf ? mm90_sf_pitch(K[i]) : width;
        uint8_t *dst = l->weights + plan->weight[i].offset;
        if (i == MM90_W13 || i == MM90_W13_SF) {
            for (uint64_t x = 0; x < plan->experts && e == cudaSuccess; x++) {
                if (mm_interleave_rows(src[i] + x * rows13 * width, perm, 1, plan->inter, width, why, cap) != 0) {
                    delete[] perm;
                    mm90_destroy(l);
                    return -1;
                }
                const uint8_t *up = perm;
                if (i == MM90_W13) {
                    mm90_pack_stage_rows(perm, packed, rows13, K[i]);
                    up = packed;
                }
                e = cudaMemcpy2D(dst + x * rows13 * pitch, pitch, up, width, width, rows13, cudaMemcpyHostToDevice);
            }
        } else if (i == MM90_W2) {
            const size_t rows2 = plan->hidden; /* one expert's rows */
            for (uint64_t x = 0; x < plan->experts && e == cudaSuccess; x++) {
                mm90_pack_stage_rows(src[i] + x * rows2 * width, packed, rows2, K[i]);
                e = cudaMemcpy(dst + x * rows2 * width, packed, rows2 * width, cudaMemcpyHostToDevice);
            }
        } else {
            e = pitch == width ? cudaMemcpy(dst, src[i], width * rows[i], cudaMemcpyHostToDevice)
                               : cudaMemcpy2D(dst, pitch, src[i], width, width, rows[i], cudaMemcpyHostToDevice);
        }
    }
    delete[] perm;
    if (e != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMemcpy (weights)", why, cap);
    }
    l->fast_scales = mm90_fast_scales(w->w13_sf, rows[MM90_W13_SF] * (plan->hidden / GROUP)) &&
                     mm90_fast_scales(w->w2_sf, rows[MM90_W2_SF] * (plan->inter / GROUP));
    if ((e = fmcu_dev::allow_dynamic_smem(GEMM_SMEM, gemm<true, true>, gemm<false, true>, gemm<true, false>,
                                          gemm<false, false>)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaFuncSetAttribute (GEMM shared memory)", why, cap);
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

extern "C" int mm90_forward(mm90_layer *l, const mm_call *c, char *why, size_t cap)
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

    /* The kernels after the first start while their predecessor drains
     * (programmatic dependent launch): each waits for it before touching
     * memory, so each also completes after it, and the chain keeps the
     * stream's order. */
    using fmcu_dev::launch_overlapped;
    if (pairs <= PREP_MAX_PAIRS && E <= PREP_MAX_EXPERTS) {
        /* one launch for quant_x, route, scan and scatter (the first kernel: a plain launch) */
        prep_small<<<1 + blocks_for((uint64_t)m * (H / GROUP), SCAN_THREADS / WARP), SCAN_THREADS, 0, s>>>(
            static_cast<const __nv_bfloat16 *>(c->x), c->x_ld, m, H, xq, xs, c->ids, c->ids_ld, k, c->expert_base, E,
            loc, seg, tiles, order);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return fail(e, "kernel launch", why, cap);
    } else {
        if ((e = cudaMemsetAsync(count, 0, (size_t)E * 4, s)) != cudaSuccess)
            return fail(e, "cudaMemsetAsync", why, cap);
        const unsigned warps_per_block = ROW_THREADS / WARP;
        quant_x<<<blocks_for((uint64_t)m * (H / GROUP), warps_per_block), ROW_THREADS, 0, s>>>(
            static_cast<const __nv_bfloat16 *>(c->x), c->x_ld, m, H, xq, xs);
        if ((e = cudaGetLastError()) != cudaSuccess ||
            (e = launch_overlapped(route, dim3(blocks_for(pairs, 256)), dim3(256), 0, s, c->ids, c->ids_ld, m, k,
                                   c->expert_base, E, loc, count)) != cudaSuccess ||
            (e = launch_overlapped(scan, dim3(1), dim3(SCAN_THREADS), 0, s, (const uint32_t *)count, E, seg, tiles,
                                   cursor)) != cudaSuccess ||
            (e = launch_overlapped(scatter, dim3(blocks_for(pairs, 256)), dim3(256), 0, s, (const int32_t *)loc,
                                   pairs, cursor, order)) != cudaSuccess)
            return fail(e, "kernel launch", why, cap);
    }

    const mm90_grid grid1 = mm90_gemm_grid(2 * I, pairs, E), grid2 = mm90_gemm_grid(H, pairs, E);
    const gemm_args g1 = {xq, xs, k, W + p.weight[MM90_W13].offset, W + p.weight[MM90_W13_SF].offset,
                          mm90_sf_pitch(H), seg, tiles, order, E, 2 * I, H, nullptr, c->weights, c->weights_ld, k,
                          c->swiglu_limit, aq, as};
    if ((e = launch_overlapped(l->fast_scales ? gemm<true, true> : gemm<true, false>, dim3(grid1.x, grid1.y),
                               dim3(GEMM_THREADS), GEMM_SMEM, s, g1)) != cudaSuccess)
        return fail(e, "GEMM1 launch", why, cap);
    const gemm_args g2 = {aq, as, 1, W + p.weight[MM90_W2].offset, W + p.weight[MM90_W2_SF].offset,
                          mm90_sf_pitch(I), seg, tiles, order, E, H, I, hy, nullptr, 0, 0, 0.0f, nullptr, nullptr};
    if ((e = launch_overlapped(l->fast_scales ? gemm<false, true> : gemm<false, false>, dim3(grid2.x, grid2.y),
                               dim3(GEMM_THREADS), GEMM_SMEM, s, g2)) != cudaSuccess)
        return fail(e, "GEMM2 launch", why, cap);
    if ((e = launch_overlapped(combine, dim3(blocks_for((uint64_t)m * H, 256)), dim3(256), 0, s,
                               (const __nv_bfloat16 *)hy, (const int32_t *)loc, m, k, H,
                               static_cast<__nv_bfloat16 *>(c->out), c->out_ld)) != cudaSuccess)
        return fail(e, "combine launch", why, cap);
    return 0;
}
