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
 *             weights streamed through a 6-stage ring that a producer warp
 *             fills (warp specialized: bulk copies for the weights,
 *             cp.async for the pairs' rows). One
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
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/megamoe/numerics.cuh"
#include "plugins/megamoe/sm90.h"
#include "plugins/megamoe/sm90_quant.cuh"
#include "plugins/megamoe/wgmma_rs_e4m3.cuh"

namespace {

constexpr int WARP = 32;
constexpr int GROUP = 32;                   /* elements per scale */
constexpr int BM = (int)MM90_BLOCK_M;       /* pairs per tile: the MMA's N side */
constexpr int BN = (int)MM90_BLOCK_N;       /* weight rows per block: the MMA's M side */
constexpr int KC = (int)MM90_STAGE_K;       /* K per shared-memory stage: 4 groups */
constexpr int GPS = KC / GROUP;             /* groups per stage */
constexpr int ROW_THREADS = 256;            /* the row kernels: 8 warps, one 32-group each */
using mm90_dev::ACT_SCALE_FOLD;

/* ---- numerics shared by the kernels ------------------------------------------ */

using mm_num::amax_step;
using mm_num::e4m3_sat;
using mm_num::scale_ue8m0;
using mm_num::warp_max;

/* ---- quantize x, one warp per (token, 32-group) ---------------------------------- */

using mm90_dev::quant_group;

__global__ void quant_x(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                        uint32_t xs_pitch, uint8_t *__restrict__ xq, float *__restrict__ xs)
{
    quant_group(x, x_ld, m, H, xs_pitch, (uint64_t)blockIdx.x * (ROW_THREADS / WARP) + threadIdx.x / WARP,
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
    prep_small(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H, uint32_t xs_pitch,
               uint8_t *__restrict__ xq, float *__restrict__ xs, const int32_t *__restrict__ ids, int64_t ids_ld, uint32_t k, int32_t base,
               uint32_t E, int32_t *__restrict__ loc, uint32_t *__restrict__ seg, uint32_t *__restrict__ tiles,
               int32_t *__restrict__ order)
{
    __shared__ uint32_t cnt[PREP_MAX_EXPERTS], cur[PREP_MAX_EXPERTS];
    fmcu_dev::pdl_wait(); /* launched programmatically after the fused EP gather; else a no-op */
    fmcu_dev::pdl_trigger();
    const uint32_t tid = threadIdx.x;
    if (blockIdx.x > 0) {
        quant_group(x, x_ld, m, H, xs_pitch, (uint64_t)(blockIdx.x - 1) * (SCAN_THREADS / WARP) + tid / WARP,
                    (int)(tid % WARP), xq, xs);
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
 * Swap-AB: the weights' output rows are the MMA's M side (64 per consumer
 * warp group, 16 per warp, four groups: 256 rows per block) and a tile's
 * pairs its N side (up to 32, in n8 slices; the wgmma's N is the live
 * slices', so a one-pair tile runs m64n8k32). Warp specialized: one
 * producer warp fills a ring of STAGES shared-memory stages of 128 K (four
 * scale groups), the consumer warps wait for a stage on its mbarrier and
 * release it on another; no block-wide barrier. The grid is persistent (at
 * most one block an SM): block b takes the items (tile, row block) b, b +
 * grid, ... and the ring runs on across them. Per stage: the block's 256
 * rows of packed e2m1 (tile-major at finalize: one 16 KB bulk copy), their
 * UE8M0 scale words (one 1 KB bulk copy), the pairs' e4m3 rows (cp.async,
 * 16 bytes at a time, into the wgmma's K-major layout without swizzle:
 * x_chunk) and their four f32 scales (one 16-byte cp.async per row). Each
 * group's wgmma starts from zero over one scale group in K order and its
 * partial goes into the f32 accumulator as (p *
 * s_act) * s_w (docs/MEGAMOE.md, "Numerics of the wgmma"). */

struct gemm_args {
    const uint8_t *a;    /* [rows, K] e4m3 */
    const float *a_sf;   /* [rows, a_sf_pitch] (mm90_xs_pitch) */
    uint32_t a_sf_pitch; /* floats per row */
    uint32_t a_div;      /* A row of pair q: q / a_div (GEMM1: the token) */
    const uint8_t *w;    /* [E] x mm90_tile_bytes(N, K): tile-major e2m1 codes */
    const uint8_t *w_sf; /* [E] x mm90_tile_sf_bytes(N, K): tile-major UE8M0 words */
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
    uint8_t *aq;          /* [pairs, N/2] e4m3 */
    float *as;            /* [pairs, as_pitch] */
    uint32_t as_pitch;    /* floats per row (mm90_xs_pitch(N/2)) */
    /* GEMM2 of the fused EP forward (sm90_ep.cu): each pair's row goes to
     * its token's rank instead of `out`: pair q = (s T + t) k + j is written
     * at comb + s * comb_stride + ((j T + t) N) * 2 bytes (every rank's comb
     * view, NCCL's flat window range: ep_fused.c). NULL: `out`. */
    uint8_t *comb;
    uint64_t comb_stride;
    uint32_t comb_T, comb_k;
};

constexpr int CONSUMER_GROUPS = BN / 64;                  /* warp groups of 64 weight rows */
constexpr int CONSUMER_WARPS = 4 * CONSUMER_GROUPS;       /* 16 */
/* + a producer warp group, one warp of which works: with setmaxnreg the
 * group gives registers to the consumers. setmaxnreg.inc waits for
 * registers that a dec gave back to the block's pool, so the totals must
 * fit what the block was launched with: 640 threads at LAUNCH_REGS (ptxas
 * allocates 65536 / 640 rounded down to a multiple of 8). At 112 / 56 the
 * consumers would wait forever; at 104 / 56 they spill. */
constexpr int GEMM_THREADS = (CONSUMER_WARPS + 4) * WARP;
constexpr int LAUNCH_REGS = 65536 / GEMM_THREADS / 8 * 8;
constexpr int CONSUMER_REGS = 112, PRODUCER_REGS = 32;
static_assert(CONSUMER_WARPS * CONSUMER_REGS + 4 * PRODUCER_REGS <= (CONSUMER_WARPS + 4) * LAUNCH_REGS,
              "setmaxnreg's totals within the block's launch allocation");
constexpr int STAGES = 6;
constexpr int WP = KC / 2;         /* a weight row's bytes in a stage */
constexpr int X_BYTES = BM * KC;   /* 4096: the pairs' e4m3 rows (x_chunk) */
constexpr int W_BYTES = BN * WP;   /* 16384 */
constexpr int SW_BYTES = BN * GPS; /* 1024 */
constexpr int SX_BYTES = BM * GPS * 4; /* [pair][group] f32 */
constexpr int X_AT = 0, W_AT = X_AT + X_BYTES, SW_AT = W_AT + W_BYTES, SX_AT = SW_AT + SW_BYTES;
constexpr int STAGE_BYTES = SX_AT + SX_BYTES;
constexpr int BAR_AT = STAGES * STAGE_BYTES; /* full[STAGES], empty[STAGES] */
constexpr int AMAX_AT = BAR_AT + 2 * STAGES * 8;
constexpr int GEMM_SMEM = AMAX_AT + CONSUMER_WARPS * BM * 4 + 128; /* + aligning the base to 128 */
static_assert(GEMM_SMEM <= 227 * 1024, "one GEMM block an SM");
static_assert(STAGE_BYTES % 128 == 0 && KC == 128, "stages stay aligned for the bulk copies");

/* Byte offset of 16-byte chunk q (K 16q .. 16q + 15 of the stage) of pair
 * row r in a stage's pair rows: the wgmma B operand's K-major layout
 * without swizzle, core matrices of 8 rows x 16 bytes (128 contiguous
 * bytes), the 8-row groups 128 bytes apart (stride offset) and a group's
 * two chunks BM * 16 bytes apart (leading offset). */
__device__ __forceinline__ uint32_t x_chunk(int r, int q)
{
    return (uint32_t)((q * BM + r) * 16);
}

/* The matrix descriptor of group c's B operand at shared address `addr`
 * (chunk 2c of row 0): no swizzle, leading offset BM * 16, stride 128. A
 * descriptor moves by `bytes` when bytes / 16 is added (shared memory ends
 * below 256 KB, so the 14-bit address field does not carry). */
__device__ __forceinline__ uint64_t x_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((BM * 16) >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

/* Barrier of consumer warp group `wg` (ids 1..4; 0 is __syncthreads). */
__device__ __forceinline__ void wg_sync(int wg)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
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
 * scales' f32 products in the order of the earlier kernels. Thread (gid,
 * tg) holds p[4j + 0, 1]: weight row gid, pairs 8j + 2tg, +1; p[4j + 2, 3]:
 * row gid + 8 (the m16n8 accumulator layout, per warp of the group); s
 * holds slice j's two pairs' four scales (sx, [pair][group]). */
template <int SL, bool FAST>
__device__ __forceinline__ void promote(float (&acc)[BM / 8][4], const float (&p)[SL * 4], const float4 (&s)[SL][2],
                                        uint32_t sw0, uint32_t sw1, int c)
{
    const float w0 = wscale<FAST>(sw0, c), w1 = wscale<FAST>(sw1, c);
#pragma unroll
    for (int j = 0; j < SL; j++) {
        const float s0 = c == 0 ? s[j][0].x : c == 1 ? s[j][0].y : c == 2 ? s[j][0].z : s[j][0].w;
        const float s1 = c == 0 ? s[j][1].x : c == 1 ? s[j][1].y : c == 2 ? s[j][1].z : s[j][1].w;
        acc[j][0] = fmaf(p[4 * j] * s0, w0, acc[j][0]);
        acc[j][1] = fmaf(p[4 * j + 1] * s1, w0, acc[j][1]);
        acc[j][2] = fmaf(p[4 * j + 2] * s0, w1, acc[j][2]);
        acc[j][3] = fmaf(p[4 * j + 3] * s1, w1, acc[j][3]);
    }
}

/* One warp group's wgmmas on one stage: its 64 weight rows x SL n8 slices
 * of pairs over the stage's groups (all GPS when FULL, else the first ng),
 * in K order, one wgmma per group from zero. Thread (gid, tg) of warp w
 * holds rows 16w + gid and + 8: per group one packed word each
 * (mm90_pack_stage_rows), a full stage's four in one 16-byte load; the
 * word's low nibbles decode to K 4tg..4tg+3 (A register 0 or 1) and its
 * high ones to 16+4tg.. (2 or 3), the 8-bit A fragment of m64nNk32. In a
 * full stage two groups are in flight. */
template <int SL, bool FULL, bool FAST>
__device__ __forceinline__ void stage_mma(float (&acc)[BM / 8][4], float (&p)[2][SL * 4], const uint8_t *st,
                                          uint64_t desc, int wr, int gid, int tg, int ng)
{
    using namespace fmcu_wgmma;
    const uint32_t sw0 = *reinterpret_cast<const uint32_t *>(st + SW_AT + (wr + gid) * GPS);
    const uint32_t sw1 = *reinterpret_cast<const uint32_t *>(st + SW_AT + (wr + gid + 8) * GPS);
    const float4 *sx = reinterpret_cast<const float4 *>(st + SX_AT);
    float4 s[SL][2];
#pragma unroll
    for (int j = 0; j < SL; j++) {
        s[j][0] = sx[j * 8 + 2 * tg];
        s[j][1] = sx[j * 8 + 2 * tg + 1];
    }
    const uint8_t *r0 = st + W_AT + (wr + gid) * WP, *r1 = r0 + 8 * WP;
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
        group_wgmma<SL>(p[c & 1], ac, desc + (uint64_t)(c * 2 * BM));
        wgmma_commit();
        if constexpr (FULL) {
            if (c > 0) {
                wgmma_wait<1>();
                fence_regs(p[(c - 1) & 1]);
                fence_regs(a[(c - 1) & 1]);
                promote<SL, FAST>(acc, p[(c - 1) & 1], s, sw0, sw1, c - 1);
            }
        } else {
            wgmma_wait<0>();
            fence_regs(p[c & 1]);
            fence_regs(ac);
            promote<SL, FAST>(acc, p[c & 1], s, sw0, sw1, c);
        }
    }
    if constexpr (FULL) {
        wgmma_wait<0>();
        fence_regs(p[(GPS - 1) & 1]);
        fence_regs(a[(GPS - 1) & 1]);
        promote<SL, FAST>(acc, p[(GPS - 1) & 1], s, sw0, sw1, GPS - 1);
    }
}

/* The ring's position: the it-th stage a block handles (across tiles) is
 * in slot it % STAGES, in that slot's (it / STAGES)-th use. */
struct ring {
    uint32_t slot, phase;
    __device__ __forceinline__ void next()
    {
        if (++slot == STAGES) {
            slot = 0;
            phase ^= 1u;
        }
    }
};

/* A consumer warp's K loop over one tile for SL live slices: each stage
 * waited for on its full barrier, its wgmmas complete before the warp
 * releases it (one arrival a warp on the empty barrier). Only the last
 * stage can hold fewer than GPS groups (last_ng). */
template <int SL, bool FAST>
__device__ __forceinline__ void k_loop(float (&acc)[BM / 8][4], ring &rg, uint32_t smem, const uint8_t *sbase,
                                       uint32_t nk, int last_ng, int wr, int gid, int tg)
{
    using namespace fmcu_async;
    float p[2][SL * 4] = {};
    for (uint32_t kt = 0; kt < nk; kt++) {
        const uint32_t off = rg.slot * STAGE_BYTES;
        mbar_wait(smem + BAR_AT + rg.slot * 8, rg.phase);
        fence_async_shared(); /* the producer's cp.async rows, for the wgmma's async proxy */
        const uint64_t desc = x_desc(smem + off + X_AT);
        if (kt + 1 < nk || last_ng == GPS)
            stage_mma<SL, true, FAST>(acc, p, sbase + off, desc, wr, gid, tg, GPS);
        else
            stage_mma<SL, false, FAST>(acc, p, sbase + off, desc, wr, gid, tg, last_ng);
        __syncwarp();
        if ((gid | tg) == 0) /* lane 0 */
            mbar_arrive(smem + BAR_AT + (STAGES + rg.slot) * 8);
        rg.next();
    }
}

/* The producer warp: for every tile and stage, in the consumers' order,
 * wait for the slot's release; lane 0 expects the weights' bytes and
 * bulk-copies them and their scale words (async proxy: counted on the full
 * barrier), and lane r < rows copies pair r's e4m3 row chunks and its four
 * scales with cp.async. Every lane then makes an arrival on the full
 * barrier that happens when its copies have completed
 * (cp.async.mbarrier.arrive), so the warp never waits for its copies and
 * runs as far ahead as the ring's free slots allow. (Waiting for them in
 * the warp, a few stages behind, tied each stage's readiness to the
 * consumers' release of an older slot: ncu had the consumers waiting on
 * full barriers in 31 % of their samples.) The copies land through the
 * generic proxy and the wgmma reads through the async proxy, which the
 * PTX ISA orders only with a proxy fence: each consumer warp makes it
 * after its wait (k_loop). Measured (bench/megamoe/RESULTS.md): without
 * the fence 3-6 % faster (CUTLASS's cp.async GMMA mainloop has none, the
 * ISA asks for it); a separate warp fencing each stage once, 15 % slower. */
constexpr int FULL_ARRIVALS = 1 + WARP; /* the weights' expect_tx, and each producer lane's copies */

__device__ __forceinline__ void produce(const gemm_args &g, uint32_t smem, uint32_t nb_count, uint32_t nk, int lane)
{
    using namespace fmcu_async;
    ring rg{0, 0};
    const uint32_t total = g.tiles[g.E];
    const int last_ng = (int)(g.K / GROUP - (nk - 1) * GPS);
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        const uint32_t tile = (uint32_t)(item / nb_count), nb = (uint32_t)(item % nb_count);
        if (tile >= total)
            break;
        const uint32_t e = expert_of(g.tiles, g.E, tile);
        const uint32_t row0 = g.seg[e] + (tile - g.tiles[e]) * BM, end = g.seg[e + 1];
        const int rows = end - row0 < (uint32_t)BM ? (int)(end - row0) : BM;
        const uint32_t arow = lane < rows ? (uint32_t)g.order[row0 + lane] / g.a_div : 0;
        /* the tile-major stage index of the row block's first stage */
        const uint64_t stage0 = ((uint64_t)e * nb_count + nb) * nk;
        const uint8_t *xrow = g.a + (size_t)arow * g.K;
        const float *xs = g.a_sf + (size_t)arow * g.a_sf_pitch;
        for (uint32_t kt = 0; kt < nk; kt++) {
            const uint32_t st = smem + rg.slot * STAGE_BYTES, full = smem + BAR_AT + rg.slot * 8;
            const int ng = kt + 1 < nk ? GPS : last_ng;
            if (lane == 0) {
                mbar_wait(smem + BAR_AT + (STAGES + rg.slot) * 8, rg.phase ^ 1u); /* a fresh slot passes */
                mbar_expect_tx(full, W_BYTES + SW_BYTES);
                bulk_load(st + W_AT, g.w + (stage0 + kt) * W_BYTES, W_BYTES, full);
                bulk_load(st + SW_AT, g.w_sf + (stage0 + kt) * SW_BYTES, SW_BYTES, full);
            }
            __syncwarp();
            if (lane < rows) {
                for (int q = 0; q < 2 * ng; q++)
                    cp_async16(st + X_AT + x_chunk(lane, q), xrow + (size_t)kt * KC + q * 16);
                cp_async16(st + SX_AT + lane * GPS * 4, xs + kt * GPS);
            }
            mbar_arrive_on_cp_async(full);
            rg.next();
        }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* GEMM1's epilogue: the weights' rows are interleaved by 8 (gate rows 16j
 * .. 16j + 7, then the matching up rows), so a warp's m16 slice holds the
 * gate (fragment row gid: d0, d1) and up (row gid + 8: d2, d3) of one
 * channel, n0 / 2 + 8 warp + gid, in the same lane. Each pair's 128
 * channels of the block form four requant groups, one per warp group;
 * their amax meets in shared memory. Numerics: the reference's, as the former swiglu kernel's
 * were (bf16 gate / up, the clamp in bf16, expf and a true division, times
 * the weight, the requant rule). */
__device__ __forceinline__ void swiglu_epilogue(const gemm_args &g, const float (&acc)[BM / 8][4], uint32_t row0,
                                                int rows, int slices, bool live, uint32_t n0, int warp, int wg, int gid,
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
                const uint32_t q = (uint32_t)g.order[row0 + r];
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
    wg_sync(wg); /* a requant group's 32 channels are one warp group's */
    const uint32_t ch = n0 / 2 + 8 * warp + gid, I = g.N / 2;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int r = j * 8 + 2 * tg + t;
            if (!live || j >= slices || r >= rows)
                continue;
            float amax = 0.0f;
            for (int w = 4 * wg; w < 4 * wg + 4; w++) {
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
            const uint32_t q = (uint32_t)g.order[row0 + r];
            g.aq[(size_t)q * I + ch] = code;
            if (warp % 4 == 0 && gid == 0)
                g.as[(size_t)q * g.as_pitch + ch / GROUP] = sf * ACT_SCALE_FOLD;
        }
    wg_sync(wg); /* amax_smem is rewritten by the next tile's epilogue */
}

template <bool SWIGLU, bool FAST>
__global__ void __launch_bounds__(GEMM_THREADS, 1) gemm(gemm_args g)
{
    using namespace fmcu_async;
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t raw = smem_addr(smem_raw), smem = (raw + 127) & ~127u;
    uint8_t *sbase = smem_raw + (smem - raw);
    float *amax_smem = reinterpret_cast<float *>(sbase + AMAX_AT);
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const uint32_t nb_count = (g.N + BN - 1) / BN, nk = (g.K + KC - 1) / KC, kgroups = g.K / GROUP;
    const int last_ng = (int)(kgroups - (nk - 1) * GPS);
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(smem + BAR_AT + s * 8, FULL_ARRIVALS);
            mbar_init(smem + BAR_AT + (STAGES + s) * 8, CONSUMER_WARPS); /* empty: one arrival a warp */
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (warp >= CONSUMER_WARPS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
        if (warp == CONSUMER_WARPS)
            produce(g, smem, nb_count, nk, lane);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
    const int gid = lane / 4, tg = lane % 4, wg = warp / 4;
    const int wr = warp * 16;
    ring rg{0, 0};
    const uint32_t total = g.tiles[g.E];
    for (uint64_t item = blockIdx.x;; item += gridDim.x) {
        const uint32_t tile = (uint32_t)(item / nb_count), n0 = (uint32_t)(item % nb_count) * BN;
        if (tile >= total)
            break;
        /* N % 32 == 0: a warp's 16 rows are all in or all out (the rest are zero) */
        const bool live = n0 + wr < g.N;
        const uint32_t e = expert_of(g.tiles, g.E, tile);
        const uint32_t row0 = g.seg[e] + (tile - g.tiles[e]) * BM;
        const uint32_t end = g.seg[e + 1];
        const int rows = end - row0 < (uint32_t)BM ? (int)(end - row0) : BM;
        const int slices = (rows + 7) / 8;
        float acc[BM / 8][4] = {};
        static_assert(BM / 8 == 4, "four n8 slices per tile");
        switch (slices) {
        case 1:
            k_loop<1, FAST>(acc, rg, smem, sbase, nk, last_ng, wr, gid, tg);
            break;
        case 2:
            k_loop<2, FAST>(acc, rg, smem, sbase, nk, last_ng, wr, gid, tg);
            break;
        case 3:
            k_loop<3, FAST>(acc, rg, smem, sbase, nk, last_ng, wr, gid, tg);
            break;
        default:
            k_loop<4, FAST>(acc, rg, smem, sbase, nk, last_ng, wr, gid, tg);
            break;
        }
        if constexpr (SWIGLU)
            swiglu_epilogue(g, acc, row0, rows, slices, live, n0, warp, wg, gid, tg, amax_smem);
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
                    const uint32_t q = (uint32_t)g.order[row0 + r];
                    __nv_bfloat16 *orow;
                    if (g.comb) {
                        const uint32_t row = q / g.comb_k, slot = q % g.comb_k;
                        const uint32_t rank = row / g.comb_T, tok = row % g.comb_T;
                        orow = reinterpret_cast<__nv_bfloat16 *>(g.comb + rank * g.comb_stride) +
                               ((size_t)slot * g.comb_T + tok) * g.N;
                    } else {
                        orow = g.out + (size_t)q * g.N;
                    }
                    orow[col] = __float2bfloat16_rn(acc[j][t]);
                    orow[col + 8] = __float2bfloat16_rn(acc[j][2 + t]);
                }
            }
        }
    }
    /* fused EP: this thread's stores to peers' windows are performed before
     * the grid ends, so the next kernel's release covers them */
    if (!SWIGLU && g.comb)
        __threadfence_system();
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
    uint32_t sms;     /* the device's SMs: the GEMMs' persistent grid */
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
    mm90_layer *l = new (std::nothrow) mm90_layer{device, *plan, nullptr, nullptr, false, 0};
    if (!l) {
        snprintf(why, cap, "MegaMoE SM90: out of host memory");
        return -1;
    }
    int sms = 0;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess || sms <= 0) {
        mm90_destroy(l);
        return fail(e == cudaSuccess ? cudaErrorInvalidDevice : e, "cudaDeviceGetAttribute (SMs)", why, cap);
    }
    l->sms = (uint32_t)sms;
    if ((e = cudaMalloc(&l->weights, plan->weight_bytes)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMalloc (weights)", why, cap);
    }
    if ((e = cudaMalloc(&l->work, plan->work_bytes)) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMalloc (workspace)", why, cap);
    }
    /* Per expert, through host buffers: w13 and its scales with gate/up rows
     * interleaved by 8 (host.h mm_interleave_rows, so GEMM1's epilogue finds
     * a channel's gate and up in one lane), each row's nibbles in the GEMM's
     * stage order (mm90_pack_stage_rows), then both tile-major
     * (mm90_tile_expert: a block's stage is one bulk copy of each). */
    const uint32_t H = plan->hidden, I = plan->inter;
    const uint64_t rows13 = (uint64_t)2 * I, rows2 = H;
    const uint64_t code_max = rows13 * (H / 2) > rows2 * (I / 2) ? rows13 * (H / 2) : rows2 * (I / 2);
    const uint64_t sf_max = rows13 * (H / GROUP) > rows2 * (I / GROUP) ? rows13 * (H / GROUP) : rows2 * (I / GROUP);
    const uint64_t tile_max = mm90_tile_bytes(rows13, H) > mm90_tile_bytes(rows2, I) ? mm90_tile_bytes(rows13, H)
                                                                                        : mm90_tile_bytes(rows2, I);
    const uint64_t tsf_max = mm90_tile_sf_bytes(rows13, H) > mm90_tile_sf_bytes(rows2, I)
                                 ? mm90_tile_sf_bytes(rows13, H)
                                 : mm90_tile_sf_bytes(rows2, I);
    uint8_t *buf = new (std::nothrow) uint8_t[2 * code_max + sf_max + tile_max + tsf_max];
    if (!buf) {
        mm90_destroy(l);
        snprintf(why, cap, "MegaMoE SM90: out of host memory");
        return -1;
    }
    uint8_t *perm = buf, *packed = perm + code_max, *perm_sf = packed + code_max, *tiles = perm_sf + sf_max,
            *tiles_sf = tiles + tile_max;
    for (int m = 0; m < 2 && e == cudaSuccess; m++) {
        const uint8_t *codes = m == 0 ? w->w13 : w->w2, *scales = m == 0 ? w->w13_sf : w->w2_sf;
        const uint64_t rows = m == 0 ? rows13 : rows2;
        const uint32_t K = m == 0 ? H : I;
        uint8_t *dw = l->weights + plan->weight[m == 0 ? MM90_W13 : MM90_W2].offset;
        uint8_t *dsf = l->weights + plan->weight[m == 0 ? MM90_W13_SF : MM90_W2_SF].offset;
        const uint64_t tb = mm90_tile_bytes(rows, K), tsb = mm90_tile_sf_bytes(rows, K);
        for (uint64_t x = 0; x < plan->experts && e == cudaSuccess; x++) {
            const uint8_t *c = codes + x * rows * (K / 2), *sfx = scales + x * rows * (K / GROUP);
            if (m == 0) {
                if (mm_interleave_rows(c, perm, 1, I, H / 2, why, cap) != 0 ||
                    mm_interleave_rows(sfx, perm_sf, 1, I, H / GROUP, why, cap) != 0) {
                    delete[] buf;
                    mm90_destroy(l);
                    return -1;
                }
                c = perm;
                sfx = perm_sf;
            }
            mm90_pack_stage_rows(c, packed, rows, K);
            mm90_tile_expert(packed, sfx, rows, K, tiles, tiles_sf);
            if ((e = cudaMemcpy(dw + x * tb, tiles, tb, cudaMemcpyHostToDevice)) == cudaSuccess)
                e = cudaMemcpy(dsf + x * tsb, tiles_sf, tsb, cudaMemcpyHostToDevice);
        }
    }
    delete[] buf;
    if (e != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaMemcpy (weights)", why, cap);
    }
    const uint64_t rows_sf13 = (uint64_t)plan->experts * rows13, rows_sf2 = (uint64_t)plan->experts * rows2;
    l->fast_scales = mm90_fast_scales(w->w13_sf, rows_sf13 * (H / GROUP)) &&
                     mm90_fast_scales(w->w2_sf, rows_sf2 * (I / GROUP));
    void (*const gemms[4])(gemm_args) = {gemm<true, true>, gemm<false, true>, gemm<true, false>, gemm<false, false>};
    if ((e = fmcu_dev::allow_dynamic_smem(GEMM_SMEM, gemms[0], gemms[1], gemms[2], gemms[3])) != cudaSuccess) {
        mm90_destroy(l);
        return fail(e, "cudaFuncSetAttribute (GEMM shared memory)", why, cap);
    }
    /* setmaxnreg.inc would wait forever if the block were launched with
     * fewer registers than the consumers and producer share (LAUNCH_REGS) */
    for (int i = 0; i < 4; i++) {
        cudaFuncAttributes fa;
        if ((e = cudaFuncGetAttributes(&fa, gemms[i])) != cudaSuccess) {
            mm90_destroy(l);
            return fail(e, "cudaFuncGetAttributes (GEMM)", why, cap);
        }
        if (fa.numRegs < LAUNCH_REGS) {
            mm90_destroy(l);
            snprintf(why, cap, "MegaMoE SM90: the GEMM was built with %d registers a thread; its register hand-over "
                               "needs %d", fa.numRegs, LAUNCH_REGS);
            return -1;
        }
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

/* Group the pairs by expert and run both GEMMs (GEMM2's rows into HY, or
 * with `ep` into every rank's combine slots). quantize: x is c->x (bf16),
 * quantized into XQ/XS first; otherwise XQ/XS already hold the rows (the
 * fused EP gather wrote them) and c->x is not read. */
static int route_and_gemms(mm90_layer *l, const mm_call *c, bool quantize, const mm90_ep_call *ep, char *why,
                           size_t cap)
{
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
        /* one launch for quant_x, route, scan and scatter (the first kernel:
         * a plain launch); block 0 alone routes when x is quantized already */
        const unsigned qblocks = quantize ? blocks_for((uint64_t)m * (H / GROUP), SCAN_THREADS / WARP) : 0;
        const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(c->x);
        if (quantize) {
            prep_small<<<1 + qblocks, SCAN_THREADS, 0, s>>>(x, c->x_ld, m, H, mm90_xs_pitch(H), xq, xs, c->ids,
                                                            c->ids_ld, k, c->expert_base, E, loc, seg, tiles, order);
            e = cudaGetLastError();
        } else {
            e = launch_overlapped(prep_small, dim3(1), dim3(SCAN_THREADS), 0, s, x, c->x_ld, m, H, mm90_xs_pitch(H),
                                  xq, xs, c->ids, c->ids_ld, k, c->expert_base, E, loc, seg, tiles, order);
        }
        if (e != cudaSuccess)
            return fail(e, "kernel launch", why, cap);
    } else {
        if ((e = cudaMemsetAsync(count, 0, (size_t)E * 4, s)) != cudaSuccess)
            return fail(e, "cudaMemsetAsync", why, cap);
        const unsigned warps_per_block = ROW_THREADS / WARP;
        if (quantize) {
            quant_x<<<blocks_for((uint64_t)m * (H / GROUP), warps_per_block), ROW_THREADS, 0, s>>>(
                static_cast<const __nv_bfloat16 *>(c->x), c->x_ld, m, H, mm90_xs_pitch(H), xq, xs);
            e = cudaGetLastError();
            if (e == cudaSuccess)
                e = launch_overlapped(route, dim3(blocks_for(pairs, 256)), dim3(256), 0, s, c->ids, c->ids_ld, m, k,
                                      c->expert_base, E, loc, count);
        } else {
            /* after the memset: a plain launch (its pdl_wait is a no-op) */
            route<<<blocks_for(pairs, 256), 256, 0, s>>>(c->ids, c->ids_ld, m, k, c->expert_base, E, loc, count);
            e = cudaGetLastError();
        }
        if (e != cudaSuccess ||
            (e = launch_overlapped(scan, dim3(1), dim3(SCAN_THREADS), 0, s, (const uint32_t *)count, E, seg, tiles,
                                   cursor)) != cudaSuccess ||
            (e = launch_overlapped(scatter, dim3(blocks_for(pairs, 256)), dim3(256), 0, s, (const int32_t *)loc,
                                   pairs, cursor, order)) != cudaSuccess)
            return fail(e, "kernel launch", why, cap);
    }

    /* Persistent GEMM grids: one block an SM at most, each taking (tile, row
     * block) items in turn, the items of one tile adjacent (its pair rows
     * read from L2 by several blocks at once). */
    const mm90_grid grid1 = mm90_gemm_grid(2 * I, pairs, E), grid2 = mm90_gemm_grid(H, pairs, E);
    const uint64_t items1 = (uint64_t)grid1.x * grid1.y, items2 = (uint64_t)grid2.x * grid2.y;
    const unsigned blocks1 = (unsigned)(items1 < l->sms ? items1 : l->sms);
    const unsigned blocks2 = (unsigned)(items2 < l->sms ? items2 : l->sms);
    const gemm_args g1 = {xq, xs, mm90_xs_pitch(H), k, W + p.weight[MM90_W13].offset, W + p.weight[MM90_W13_SF].offset,
                          seg, tiles, order, E, 2 * I, H, nullptr, c->weights, c->weights_ld, k, c->swiglu_limit, aq,
                          as, mm90_xs_pitch(I), nullptr, 0, 0, 0};
    if ((e = launch_overlapped(l->fast_scales ? gemm<true, true> : gemm<true, false>, dim3(blocks1),
                               dim3(GEMM_THREADS), GEMM_SMEM, s, g1)) != cudaSuccess)
        return fail(e, "GEMM1 launch", why, cap);
    uint8_t *comb = nullptr;
    uint64_t comb_stride = 0;
    if (ep) {
        comb = reinterpret_cast<uint8_t *>(ep->base[0]) + ep->L.comb;
        comb_stride = ep->L.size > 1 ? (uint64_t)(ep->base[1] - ep->base[0]) : 0;
    }
    const gemm_args g2 = {aq, as, mm90_xs_pitch(I), 1, W + p.weight[MM90_W2].offset, W + p.weight[MM90_W2_SF].offset,
                          seg, tiles, order, E, H, I, hy, nullptr, 0, 0, 0.0f, nullptr, nullptr, 0, comb,
                          comb_stride, ep ? ep->L.max_tokens : 0u, ep ? ep->L.top_k : 0u};
    if ((e = launch_overlapped(l->fast_scales ? gemm<false, true> : gemm<false, false>, dim3(blocks2),
                               dim3(GEMM_THREADS), GEMM_SMEM, s, g2)) != cudaSuccess)
        return fail(e, "GEMM2 launch", why, cap);
    return 0;
}

extern "C" int mm90_forward(mm90_layer *l, const mm_call *c, char *why, size_t cap)
{
    if (c->m == 0)
        return 0;
    if (route_and_gemms(l, c, true, nullptr, why, cap) != 0)
        return -1;
    const mm90_plan &p = l->plan;
    const uint32_t H = p.hidden, k = p.topk, m = c->m;
    const int32_t *loc = view<int32_t>(l->work, p.work[MM90_LOC]);
    const __nv_bfloat16 *hy = view<__nv_bfloat16>(l->work, p.work[MM90_HY]);
    const cudaError_t e =
        fmcu_dev::launch_overlapped(combine, dim3(blocks_for((uint64_t)m * H, 256)), dim3(256), 0,
                                    static_cast<cudaStream_t>(c->stream), hy, loc, m, k, H,
                                    static_cast<__nv_bfloat16 *>(c->out), c->out_ld);
    if (e != cudaSuccess)
        return fail(e, "combine launch", why, cap);
    return 0;
}

extern "C" int mm90_ep_experts(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap)
{
    const mm_epf_layout &L = c->L;
    const uint64_t rows = (uint64_t)L.size * L.max_tokens;
    if (rows > l->plan.max_tokens || L.top_k != l->plan.topk || L.hidden != l->plan.hidden) {
        snprintf(why, cap,
                 "MegaMoE SM90: the fused EP region holds %llu rows of hidden %u, top_k %u; the layer's workspace "
                 "%u rows of hidden %u, top_k %u",
                 (unsigned long long)rows, L.hidden, L.top_k, l->plan.max_tokens, l->plan.hidden, l->plan.topk);
        return -1;
    }
    char *own = c->base[c->rank];
    mm_call r = c->c;
    r.x = nullptr;
    r.x_ld = 0;
    r.ids = reinterpret_cast<const int32_t *>(own + L.ids_in);
    r.ids_ld = L.top_k;
    r.weights = reinterpret_cast<const float *>(own + L.w_in);
    r.weights_ld = L.top_k;
    r.m = (uint32_t)rows;
    return route_and_gemms(l, &r, false, c, why, cap);
}

extern "C" void mm90_work_of(const mm90_layer *l, mm90_work_ptrs *out)
{
    const mm90_plan &p = l->plan;
    *out = mm90_work_ptrs{view<uint8_t>(l->work, p.work[MM90_XQ]), view<float>(l->work, p.work[MM90_XS]), p.experts,
                          l->device};
}
