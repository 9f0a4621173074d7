/*
 * plugins/cuda/decode_fused.cu - the one-launch decode (decode_fused.h):
 * the plan, the GEMM1 input quantization, GEMM1, and the fused tail
 * (GEMM2-input quantization, GEMM2, combine) of a call of at most
 * FMCU_TAIL_MAX_PAIRS pairs, as one persistent kernel.
 *
 * Why. With the fused tail the decode chain was three launches (plan,
 * stream GEMM1, tail) of which each pays about 4 us of launch and ramp, and
 * the tail's W2 copies could start only when GEMM1's CTAs, six an SM, left
 * room: Qwen3-30B-A3B fp8 at M=1 took 33.8 us for 38 MB of weights whose
 * floor is 12.7 us (bench/cuda/RESULTS.md at 5ddad69, "Decode: the fused tail").
 * Here one CTA per SM does
 * everything, so every SM has its share of W13 and its W2 rows in flight
 * from the start.
 *
 * Schedule of a CTA (one per SM; all resident, the launch is cooperative):
 *   1. map the pairs' expert ids through the expert map (each CTA does the
 *      plan of its <= 8 pairs itself: no plan launch, nothing written);
 *   2. the copy warp issues W13's bulk copies (below) and, in W2-owning
 *      CTAs (b < ceil(H/16)), their W2 rows' bulk copies, as the tail does;
 *   3. quantize x into shared memory (stage_rows.cuh: quant_row's codes);
 *   4. GEMM1: units of 16 weight rows of one active expert, K split over 4
 *      warps (stream_gemm.cu's split-K CTA: fragment trick, batches of 4
 *      64-byte chunks, partial sums met in warp order), the tokens of the
 *      expert's pairs as the 8-column B operand read from shared memory;
 *      the epilogue writes act[pair] to global memory;
 *      W13 comes either (BULK, where cfg.w13_piece says the slots fit) by
 *      bulk copies of whole 8-row pieces into a slot per group, issued by
 *      the copy warp from the moment the plan is known and refilled as
 *      each group releases its slot (full/empty mbarriers), or by the
 *      GEMM1 warps' own register loads, which go out only after x is
 *      quantized and with one batch in flight per warp;
 *   5. grid barrier (arrival count in the workspace; the last CTA to leave
 *      resets it, so the next call finds zeros);
 *   6. W2-owning CTAs: the tail (decode_tail.cu) over their 16 output
 *      columns of every pair, with the pair's K split over the CTA's warps.
 * The rounding points are the stream tier's and the tail's; only the f32
 * summation order over K differs (as between the tiers).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/decode_fused.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/stage_rows.cuh"
#include "plugins/cuda/tail_ops.cuh"

namespace {

using namespace fmcu_async;
using fmcu_dev::lds128;
using fmcu_dev::load_stream;

constexpr int U = 4;          /* 64-byte K chunks in flight per warp and batch (stream_gemm.cu) */
constexpr int CHUNK = 64;
constexpr int UNIT = fmcu_tail_ops::UNIT; /* GEMM2: K bytes a warp takes at a time */
constexpr int R = FMCU_TAIL_ROWS;
constexpr int MAXP = FMCU_TAIL_MAX_PAIRS;
constexpr uint32_t SMEM_LIMIT = FMCU_TAIL_SMEM_MAX;

template <bool BLOCK, bool BULK> __host__ __device__ constexpr int groups_of()
{
    return BULK ? FMCU_FUSED_GROUPS_BULK : BLOCK ? FMCU_FUSED_GROUPS_BLOCK : FMCU_FUSED_GROUPS;
}

/* The active experts of the call and their pairs, in order of first use. */
struct local_plan {
    int e[MAXP];          /* local expert of pair p, or -1 */
    int n_exp;            /* distinct active experts */
    int exp[MAXP];        /* their ids */
    int cnt[MAXP];        /* their pairs */
    int pair[MAXP][MAXP]; /* pair ids, ascending */
};

/* A group's 4 warps meet here (named barrier 1 + group; 0 is __syncthreads). */
__device__ __forceinline__ void group_sync(int group)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(group + 1) : "memory");
}

/* One batch of this thread's two weight rows (zeros past K). */
__device__ __forceinline__ void load_batch(uint4 (&wl)[U], uint4 (&wh)[U], const uint8_t *w_lo, const uint8_t *w_hi,
                                           int kc, int nk, int64_t kbytes, int c4)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int64_t off = (int64_t)(kc + u) * CHUNK;
        const bool ok = kc + u < nk && off + c4 * 16 < kbytes;
        wl[u] = ok ? load_stream(w_lo + off) : make_uint4(0, 0, 0, 0);
        wh[u] = ok ? load_stream(w_hi + off) : make_uint4(0, 0, 0, 0);
    }
}

/* One batch of this thread's two weight rows from its group's W13 slot
 * (bulk W13): `lo`/`hi` the shared addresses of its bytes c4 * 16 of
 * chunk 0 of its rows; zeros past K (the next row's bytes are there). */
__device__ __forceinline__ void load_batch_smem(uint4 (&wl)[U], uint4 (&wh)[U], uint32_t lo, uint32_t hi, int kc,
                                                int nk, int64_t kbytes, int c4)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int64_t off = (int64_t)(kc + u) * CHUNK;
        const bool ok = kc + u < nk && off + c4 * 16 < kbytes;
        wl[u] = ok ? lds128(lo + (uint32_t)off) : make_uint4(0, 0, 0, 0);
        wh[u] = ok ? lds128(hi + (uint32_t)off) : make_uint4(0, 0, 0, 0);
    }
}

/* The two weight rows of this thread in unit `u`'s slab. */
struct unit_rows {
    int ei, slab, r_lo, r_hi;
    const uint8_t *w_lo, *w_hi;
};

__device__ __forceinline__ unit_rows rows_of(const fmcu_gemm_args &g, const local_plan &pl, int u, int slabs,
                                             int64_t kbytes, int gl, int c4)
{
    unit_rows w;
    w.ei = u / slabs;
    w.slab = u % slabs;
    const bool gated = g.gated;
    w.r_lo = gated ? w.slab * 8 + gl : w.slab * 16 + gl;
    w.r_hi = gated ? (int)g.n_out + w.slab * 8 + gl : w.r_lo + 8;
    const uint8_t *W = (const uint8_t *)g.w + (size_t)pl.exp[w.ei] * g.n_rows * (size_t)kbytes;
    w.w_lo = W + (int64_t)w.r_lo * kbytes + c4 * 16;
    w.w_hi = W + (int64_t)w.r_hi * kbytes + c4 * 16;
    return w;
}

/* Bulk W13: the first row of piece `half` (0: the rows r_lo of the
 * unit's threads, 1: r_hi) of unit `u`, as rows_of places them. */
__device__ __forceinline__ const uint8_t *piece_of(const fmcu_gemm_args &g, const local_plan &pl, int u, int slabs,
                                                   int64_t kbytes, int half)
{
    const int slab = u % slabs;
    const int row = g.gated ? (half ? (int)g.n_out : 0) + slab * 8 : slab * 16 + half * 8;
    return (const uint8_t *)g.w + ((size_t)pl.exp[u / slabs] * g.n_rows + (size_t)row) * (size_t)kbytes;
}

/* Bulk W13: the copy warp's lane 0 fills group j % GROUPS's slot with the
 * CTA's j-th unit once the group has released its previous one. */
template <int GROUPS>
__device__ __forceinline__ void fill_w13(const fmcu_gemm_args &g, const local_plan &pl, uint32_t ring, uint32_t bars,
                                         uint32_t piece, int slabs, int64_t kbytes, int n_units, int j0, int j1)
{
    for (int j = j0; j < j1; j++) {
        const int unit = (int)blockIdx.x + (int)gridDim.x * j;
        if (unit >= n_units)
            break;
        const int grp = j % GROUPS, round = j / GROUPS;
        const uint32_t full = bars + 8u * grp, empty = bars + 8u * (GROUPS + grp);
        if (round > 0)
            mbar_wait(empty, (uint32_t)(round - 1) & 1u);
        mbar_expect_tx(full, 2u * piece);
        for (int h = 0; h < 2; h++)
            bulk_load(ring + (uint32_t)(2 * grp + h) * piece, piece_of(g, pl, unit, slabs, kbytes, h), piece, full);
    }
}

/* Grid barrier: every CTA arrives; those that go on wait for all. The last
 * CTA to depart resets both counters (every waiter has departed by then). */
__device__ __forceinline__ void grid_arrive(uint32_t *sync)
{
    __threadfence();
    atomicAdd(sync, 1u);
}

__device__ __forceinline__ void grid_wait(const uint32_t *sync, uint32_t ctas)
{
    uint32_t n;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(n) : "l"(sync) : "memory");
    } while (n < ctas);
}

__device__ __forceinline__ void grid_depart(uint32_t *sync, uint32_t ctas)
{
    if (atomicAdd(sync + 1, 1u) == ctas - 1) {
        sync[0] = 0;
        sync[1] = 0;
        __threadfence();
    }
}

/* Warp 0 plans the call's pairs (plan.cu's plan_kernel rules) with
 * shuffles: lane p holds pair p's local expert. */
__device__ __forceinline__ void plan_pairs(const fmcu_fused_args &a, local_plan &pl)
{
    const int lane = threadIdx.x & 31, P = (int)a.pairs;
    int l = -1;
    if (lane < P) {
        const int32_t id = a.topk_ids[lane];
        if (id >= 0 && (uint32_t)id < a.global_experts) {
            l = a.expert_map ? a.expert_map[id] : id;
            if (l < 0 || l >= (int)a.local_experts)
                l = -1;
        }
    }
    int first = lane, cnt = 0, pos = 0;
    for (int q = 0; q < MAXP; q++) {
        const int lq = __shfl_sync(0xffffffffu, l, q);
        if (q < P && l >= 0 && lq == l) {
            first = min(first, q);
            cnt++;
            pos += q < lane;
        }
    }
    const bool is_first = l >= 0 && first == lane;
    const uint32_t firsts = __ballot_sync(0xffffffffu, is_first);
    const int u = __popc(firsts & ((1u << first) - 1u)); /* the unit of this pair's expert */
    if (lane < P)
        pl.e[lane] = l;
    if (is_first) {
        pl.exp[u] = l;
        pl.cnt[u] = cnt;
    }
    if (l >= 0)
        pl.pair[u][pos] = lane;
    if (lane == 0)
        pl.n_exp = __popc(firsts);
}

/* GEMM2's epilogue operands and the router weights, fetched by the copy
 * warp while GEMM1 streams (a global load each would otherwise sit on the
 * critical path after the grid barrier). */
struct tail_operands {
    float w_scale[MAXP][R]; /* non-block schemes */
    float bias[MAXP][R];
    float topk_w[MAXP];
};

template <bool BLOCK>
__device__ __forceinline__ void fetch_tail_operands(const fmcu_fused_args &a, const local_plan &pl, int c0,
                                                    tail_operands &t)
{
    const fmcu_gemm_args &g2 = a.g2;
    const int P = (int)a.pairs, H = (int)g2.n_rows;
    for (int i = threadIdx.x & 31; i < P * R; i += 32) {
        const int p = i / R, r = i % R, e = pl.e[p], row = c0 + r;
        float ws = 1.0f, b = 0.0f;
        if (e >= 0 && row < H) {
            if (!BLOCK && g2.w_scale)
                ws = g2.w_scale[(int64_t)e * g2.w_scale_e + (int64_t)row * g2.w_scale_n];
            if (g2.bias)
                b = fmcu_dev::load_act(a.act_dtype, g2.bias, (int64_t)e * H + row);
        }
        t.w_scale[p][r] = ws;
        t.bias[p][r] = b;
    }
    if ((int)(threadIdx.x & 31) < P)
        t.topk_w[threadIdx.x & 31] = a.topk_w[threadIdx.x & 31];
}

template <bool FP8, bool BLOCK, bool BULK>
__global__ void __launch_bounds__(groups_of<BLOCK, BULK>() * 128 + 32, 1) fused_kernel(const fmcu_fused_args a)
{
    /* GROUPS x 4 GEMM1 warps, then the copy warp. */
    constexpr int GROUPS = groups_of<BLOCK, BULK>(), WARPS_G = GROUPS * 4, THREADS_G = WARPS_G * 32;
    constexpr int THREADS = THREADS_G + 32, WARPS = THREADS / 32;
    constexpr int X_BAR = 15; /* named barrier of the GEMM1 warps (1..GROUPS: each group's) */
    constexpr int HOLD_X = 2; /* x pieces a GEMM1 thread holds: 2 x 704 x 8 values */
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ local_plan pl;
    __shared__ tail_operands to;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gl = lane >> 2, c4 = lane & 3;
    const int P = (int)a.pairs, k = (int)a.top_k;
    const uint32_t H = a.g1.k, I = a.g1.n_out;
    const fmcu_fused_layout &L = a.cfg.layout;
    const fmcu_gemm_args &g1 = a.g1;
    const int32_t dt = a.act_dtype;
    const uint32_t bar = smem_addr(smem + L.tail.bar);
    const bool owner = blockIdx.x < a.cfg.tail_ctas;
    const int c0 = (int)blockIdx.x * R, nrows = owner ? min(R, (int)H - c0) : 0;
    const uint32_t Ib2 = I * (FP8 ? 1 : 2), rowb = Ib2 + FMCU_TAIL_ROW_PAD;
    const int64_t kbytes = (int64_t)H * (FP8 ? 1 : 2);
    const uint32_t T = a.cfg.tokens;
    const uint32_t kg1 = BLOCK ? (H + g1.block_k - 1) / g1.block_k : 1;
    const uint32_t xrow = (uint32_t)kbytes + FMCU_FUSED_X_PAD;
    float *x_scale = reinterpret_cast<float *>(smem + L.x_scale);
    const fmcu_stage::rows_in x_in = {a.x, a.ldx, dt, T, H, nullptr};

    /* 1. The pairs' experts and x, in flight together (x first: behind the
     * weight streams its loads would wait for them). */
    const uint32_t w13_bars = smem_addr(smem + L.w13_bar), ring = smem_addr(smem + L.w13);
    if (tid == 0) {
        mbar_init(bar, 1);
        if constexpr (BULK)
            for (int g = 0; g < GROUPS; g++) {
                mbar_init(w13_bars + 8u * g, 1);                /* full: the copy warp's expect_tx */
                mbar_init(w13_bars + 8u * (GROUPS + g), 4);     /* empty: the group's 4 warps */
            }
        mbar_init_fence();
    }
    fmcu_dev::pdl_wait();
    fmcu_dev::pdl_trigger();
    uint4 x_raw[HOLD_X];
    if (warp < WARPS_G)
        fmcu_stage::stage_load<THREADS_G, HOLD_X>(x_in, x_raw);
    if (warp == 0)
        plan_pairs(a, pl);
    __syncthreads(); /* pl complete */

    const int slabs = g1.gated ? (int)I / 8 : (int)g1.n_rows / 16;
    const int n_units = pl.n_exp * slabs;
    if (warp == WARPS_G) {
        /* 2. The copy warp: (bulk W13) every group's first unit, this CTA's
         * W2 rows (the tail's copies; a full bulk-copy queue stalls the
         * issuing thread, so no GEMM1 warp issues them), then GEMM2's
         * epilogue operands, then (bulk W13) the other units as the groups
         * release their slots. */
        if (BULK && lane == 0)
            fill_w13<GROUPS>(g1, pl, ring, w13_bars, a.cfg.w13_piece, slabs, kbytes, n_units, 0, GROUPS);
        if (owner) {
            if (lane == 0) {
                int valid = 0;
                for (int p = 0; p < P; p++)
                    valid += pl.e[p] >= 0;
                mbar_expect_tx(bar, (uint32_t)(valid * nrows) * Ib2);
            }
            for (int i = lane; i < P * R; i += 32) {
                const int p = i / R, r = i % R, e = pl.e[p];
                if (e >= 0 && r < nrows)
                    bulk_load(smem_addr(smem + L.tail.weights) + (uint32_t)(p * R + r) * rowb,
                              (const uint8_t *)a.g2.w + ((int64_t)e * H + c0 + r) * Ib2, Ib2, bar);
            }
            fetch_tail_operands<BLOCK>(a, pl, c0, to);
        }
        if (BULK && lane == 0)
            fill_w13<GROUPS>(g1, pl, ring, w13_bars, a.cfg.w13_piece, slabs, kbytes, n_units, GROUPS, 1 << 30);
        __syncwarp();
    } else {
        /* 3. GEMM1: x quantized first (its loads are in registers already;
         * a GEMM1 warp whose weight loads fill the memory pipeline stalls at
         * issue, and the quantization's barriers would wait for it), then
         * a unit per group at a time. */
        const int grp = warp / 4, wg = warp % 4;
        const int nk = (int)((kbytes + CHUNK - 1) / CHUNK);
        const int kc0 = wg * U, kstep = 4 * U;
        float s1;
        {
            const fmcu_stage::rows_quant q = {a.quant, a.a_dynamic, a.in_scales, a.ue8m0, g1.block_k};
            s1 = fmcu_stage::stage_finish<THREADS_G, HOLD_X>(q, x_in, x_raw, smem + L.x, xrow, x_scale, kg1,
                                                             reinterpret_cast<uint32_t *>(smem + L.x_amax),
                                                             fmcu_stage::named_sync{X_BAR, THREADS_G});
        }
        fmcu_stage::named_sync{X_BAR, THREADS_G}();
        int unit = (int)blockIdx.x + (int)gridDim.x * grp;
        uint4 wl[U], wh[U];
        unit_rows w = {};
        /* Bulk W13: this thread's bytes in its group's slot, and the
         * rounds of the slot's full barrier it has waited for. */
        const uint32_t s_lo = ring + (uint32_t)(2 * grp) * a.cfg.w13_piece + (uint32_t)(gl * kbytes + c4 * 16);
        const uint32_t s_hi = s_lo + a.cfg.w13_piece;
        const uint32_t full = w13_bars + 8u * grp, empty = w13_bars + 8u * (GROUPS + grp);
        uint32_t round = 0;
        if (unit < n_units) {
            w = rows_of(g1, pl, unit, slabs, kbytes, gl, c4);
            if constexpr (BULK) {
                mbar_wait(full, 0);
                load_batch_smem(wl, wh, s_lo, s_hi, kc0, nk, kbytes, c4);
            } else {
                load_batch(wl, wh, w.w_lo, w.w_hi, kc0, nk, kbytes, c4);
            }
        }

        float(*red)[4][32] = reinterpret_cast<float(*)[4][32]>(smem + L.red) + grp * 3;
        const uint32_t x_sm = smem_addr(smem + L.x);
        const fmcu_dev::act_params ap = {g1.activation, g1.gated, g1.swiglu_alpha, g1.swiglu_limit};
        const int group_chunks = BLOCK ? (int)(g1.block_k / CHUNK) : 1;
        for (; unit < n_units; unit += (int)gridDim.x * GROUPS) {
            const int n = pl.cnt[w.ei], e = pl.exp[w.ei];
            /* The epilogue's weight scales and biases, early. */
            float ws[2] = {1.0f, 1.0f}, bs[2] = {0.0f, 0.0f};
            if (wg == 0) {
                const int wrow[2] = {w.r_lo, w.r_hi};
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (!BLOCK && g1.w_scale)
                        ws[h] = g1.w_scale[(int64_t)e * g1.w_scale_e + (int64_t)wrow[h] * g1.w_scale_n];
                    if (g1.bias)
                        bs[h] = fmcu_dev::load_act(dt, g1.bias, (int64_t)e * g1.n_rows + wrow[h]);
                }
            }
            /* B column gl: the token of the expert's pair gl; accumulator
             * columns 2*c4 and 2*c4 + 1: their pairs. */
            const bool b_on = gl < n;
            const uint32_t b_row = x_sm + (uint32_t)(b_on ? pl.pair[w.ei][gl] / k : 0) * xrow + c4 * 16;
            int c_pair[2];
            for (int q = 0; q < 2; q++)
                c_pair[q] = 2 * c4 + q < n ? pl.pair[w.ei][2 * c4 + q] : -1;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int kc = kc0;;) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int ck = kc + u;
                    if (ck >= nk)
                        break;
                    const int64_t off = (int64_t)ck * CHUNK;
                    const bool in_k = off + c4 * 16 < kbytes;
                    const uint32_t a0[4] = {wl[u].x, wh[u].x, wl[u].y, wh[u].y};
                    const uint32_t a1[4] = {wl[u].z, wh[u].z, wl[u].w, wh[u].w};
                    const uint4 b = b_on && in_k ? lds128(b_row + (uint32_t)off) : make_uint4(0, 0, 0, 0);
                    const uint32_t b0[2] = {b.x, b.y}, b1[2] = {b.z, b.w};
                    fmcu_dev::mma<FP8>(BLOCK ? part : acc, a0, b0);
                    fmcu_dev::mma<FP8>(BLOCK ? part : acc, a1, b1);
                    if constexpr (BLOCK) {
                        /* Promote at the end of a K group and of this warp's batch. */
                        if ((ck + 1) % group_chunks == 0 || ck == nk - 1 || u == U - 1) {
                            const int kg = ck / group_chunks;
                            const int64_t we = (int64_t)e * g1.w_scale_e;
                            const float sw_lo = g1.w_scale[we + (int64_t)(w.r_lo / (int)g1.block_n) * kg1 + kg];
                            const float sw_hi = g1.w_scale[we + (int64_t)(w.r_hi / (int)g1.block_n) * kg1 + kg];
#pragma unroll
                            for (int q = 0; q < 2; q++) {
                                const float sa = c_pair[q] < 0 ? 0.0f : x_scale[(c_pair[q] / k) * kg1 + kg];
                                acc[q] += part[q] * (sa * sw_lo);
                                acc[2 + q] += part[2 + q] * (sa * sw_hi);
                                part[q] = part[2 + q] = 0.0f;
                            }
                        }
                    }
                }
                kc += kstep;
                if (kc >= nk)
                    break;
                if constexpr (BULK)
                    load_batch_smem(wl, wh, s_lo, s_hi, kc, nk, kbytes, c4);
                else
                    load_batch(wl, wh, w.w_lo, w.w_hi, kc, nk, kbytes, c4);
            }
            if constexpr (BULK) { /* this warp has read its share of the slot */
                __syncwarp();
                if (lane == 0)
                    mbar_arrive(empty);
            }
            /* The group's partial sums meet in warp 0, in warp order. */
            if (wg > 0)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    red[wg - 1][q][lane] = acc[q];
            group_sync(grp);
            if (wg == 0) {
#pragma unroll
                for (int v = 0; v < 3; v++)
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        acc[q] += red[v][q][lane];
                /* Epilogue (stream_gemm.cu's): accumulator q is (row r_lo or r_hi, column 2*c4 + q % 2). */
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int pair = c_pair[q];
                    if (pair < 0)
                        continue;
                    float v[2];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float x = acc[2 * h + q];
                        if constexpr (!BLOCK) {
                            const float sa = a.quant == FMCU_Q_CHANNEL ? x_scale[pair / k] : s1;
                            x *= g1.w_scale ? sa * ws[h] : sa;
                        }
                        if (g1.bias)
                            x += bs[h];
                        v[h] = fmcu_dev::round_act(dt, x);
                    }
                    const int64_t orow = (int64_t)pair * I;
                    if (g1.gated) {
                        fmcu_dev::store_act(dt, a.act, orow + w.slab * 8 + gl,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], v[1])));
                    } else {
                        fmcu_dev::store_act(dt, a.act, orow + w.r_lo,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[0], 0.0f)));
                        fmcu_dev::store_act(dt, a.act, orow + w.r_hi,
                                            fmcu_dev::round_act(dt, fmcu_dev::activate(ap, v[1], 0.0f)));
                    }
                }
            }
            const int next = unit + (int)gridDim.x * GROUPS;
            if (next < n_units) {
                group_sync(grp); /* warp 0 has read red */
                w = rows_of(g1, pl, next, slabs, kbytes, gl, c4);
                if constexpr (BULK) {
                    mbar_wait(full, ++round & 1u);
                    load_batch_smem(wl, wh, s_lo, s_hi, kc0, nk, kbytes, c4);
                } else {
                    load_batch(wl, wh, w.w_lo, w.w_hi, kc0, nk, kbytes, c4);
                }
            }
        }
    }

    /* 4. Every CTA's act rows are written before any is read. */
    __syncthreads();
    if (tid == 0) {
        grid_arrive(a.sync);
        if (owner)
            grid_wait(a.sync, gridDim.x);
        grid_depart(a.sync, gridDim.x);
    }
    if (!owner)
        return;
    __syncthreads();

    /* 5. The tail: GEMM2 input, GEMM2 over this CTA's 16 columns, combine. */
    const uint32_t kg2 = BLOCK ? (I + g1.block_k - 1) / g1.block_k : 1;
    uint8_t *act = smem + L.tail.act;
    float *a_scale = reinterpret_cast<float *>(smem + L.tail.a_scale);
    float *ybuf = reinterpret_cast<float *>(smem + L.tail.y);
    float s2;
    {
        const fmcu_stage::rows_quant q = {a.quant, a.a_dynamic, a.in_scales ? a.in_scales + 1 : nullptr, a.ue8m0,
                                          g1.block_k};
        const fmcu_stage::rows_in in = {a.act, I, dt, (uint32_t)P, I, pl.e};
        s2 = fmcu_stage::stage_rows<THREADS, 1>(q, in, act, Ib2, a_scale, kg2,
                                                reinterpret_cast<uint32_t *>(smem + L.tail.amax));
    }
    __syncthreads();

    /* Warp -> (pair, K share): P pairs over WARPS warps. */
    const int units2 = (int)((Ib2 + UNIT - 1) / UNIT);
    const int split = max(1, min(WARPS / P, units2));
    const int pi = warp / split, part2 = warp % split;
    const bool on = pi < P && pl.e[pi] >= 0;
    const int rlo = c0 + gl, rhi = c0 + gl + 8;
    const fmcu_gemm_args &g2 = a.g2;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, prt[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mbar_wait(bar, 0);
    if (on) {
        const int e = pl.e[pi];
        const uint32_t wrow = smem_addr(smem + L.tail.weights) + (uint32_t)(pi * R + gl) * rowb;
        const uint32_t arow = smem_addr(act) + (uint32_t)pi * Ib2;
        for (uint32_t u0 = part2 * UNIT; u0 < Ib2; u0 += split * UNIT) {
            fmcu_tail_ops::unit_mma<FP8>(wrow, rowb, arow, u0, Ib2, c4, BLOCK ? prt : acc);
            if constexpr (BLOCK) { /* a 128-byte unit lies in one K group */
                const uint32_t kg = u0 / g2.block_k;
                const int64_t we = (int64_t)e * g2.w_scale_e;
                const float slo = rlo < (int)H ? g2.w_scale[we + (int64_t)(rlo / (int)g2.block_n) * kg2 + kg] : 0.0f;
                const float shi = rhi < (int)H ? g2.w_scale[we + (int64_t)(rhi / (int)g2.block_n) * kg2 + kg] : 0.0f;
                fmcu_tail_ops::promote(acc, prt, a_scale[pi * kg2 + kg], slo, shi);
            }
        }
    }

    /* A pair's warps meet in warp order (rows gl and gl + 8 of column 0). */
    float(*red2)[2][32] = reinterpret_cast<float(*)[2][32]>(smem + L.red);
    if (split > 1) {
        if (part2 > 0) {
            red2[warp][0][lane] = acc[0];
            red2[warp][1][lane] = acc[2];
        }
        __syncthreads();
        if (part2 == 0 && on)
            for (int v = warp + 1; v < warp + split; v++) {
                acc[0] += red2[v][0][lane];
                acc[2] += red2[v][1][lane];
            }
    }

    /* GEMM2 epilogue of column 0 (every column holds the same sums). */
    if (on && part2 == 0 && c4 == 0) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = gl + 8 * h;
            if (c0 + r >= (int)H)
                continue;
            float x = acc[2 * h];
            if constexpr (!BLOCK) {
                const float sa = a.quant == FMCU_Q_CHANNEL ? a_scale[pi] : s2;
                x *= g2.w_scale ? sa * to.w_scale[pi][r] : sa;
            }
            if (g2.bias)
                x += to.bias[pi][r];
            ybuf[pi * R + r] = fmcu_dev::round_act(dt, x);
        }
    }
    __syncthreads();

    /* Combine. */
    fmcu_tail_ops::combine_rows(THREADS, P / k, k, nrows, pl.e, ybuf, [&](int p) { return to.topk_w[p]; }, dt, a.out,
                                a.ldo, c0);
}

template <bool FP8, bool BLOCK, bool BULK> cudaError_t launch(const fmcu_fused_args &a, cudaStream_t st)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(a.cfg.ctas);
    cfg.blockDim = dim3(groups_of<BLOCK, BULK>() * 128 + 32);
    cfg.dynamicSmemBytes = a.cfg.layout.total;
    cfg.stream = st;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeCooperative;
    attr[1].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    return cudaLaunchKernelEx(&cfg, fused_kernel<FP8, BLOCK, BULK>, a);
}

} // namespace

cudaError_t fmcu_fused_launch(const fmcu_fused_args &a, cudaStream_t st)
{
    /* What the kernel assumes; fmcu_fused_plan and forward.cu guarantee it. */
    const bool block = a.quant == FMCU_Q_BLOCK, bulk = a.cfg.w13_piece != 0;
    if (a.pairs == 0 || a.pairs > FMCU_TAIL_MAX_PAIRS || a.top_k == 0 || a.pairs % a.top_k || a.g1.n_out % 16 ||
        a.g1.k % 16 || a.g1.n_out != (a.g1.gated ? a.g1.n_rows / 2 : a.g1.n_rows) ||
        a.cfg.layout.total > SMEM_LIMIT || a.cfg.tail_ctas > a.cfg.ctas ||
        a.cfg.groups != (uint32_t)(bulk ? FMCU_FUSED_GROUPS_BULK : block ? FMCU_FUSED_GROUPS_BLOCK : FMCU_FUSED_GROUPS) ||
        (bulk && (a.cfg.w13_piece != 8u * a.g1.k * (a.quant == FMCU_Q_NONE ? 2u : 1u) || a.cfg.layout.w13 % 128 ||
                  a.cfg.layout.w13_bar % 8 || (uintptr_t)a.g1.w % 16)) ||
        (block && (a.g1.block_k == 0 || a.g1.block_k % UNIT || a.g1.block_n == 0 || a.g1.block_k != a.g2.block_k ||
                   a.g1.block_n != a.g2.block_n)) ||
        ((uintptr_t)a.g2.w | (uintptr_t)a.act | (uintptr_t)a.x | (uintptr_t)(a.ldx * 2)) % 16)
        return cudaErrorInvalidValue;
    if (bulk) {
        if (a.quant == FMCU_Q_NONE)
            return launch<false, false, true>(a, st);
        return block ? launch<true, true, true>(a, st) : launch<true, false, true>(a, st);
    }
    if (a.quant == FMCU_Q_NONE)
        return launch<false, false, false>(a, st);
    return block ? launch<true, true, false>(a, st) : launch<true, false, false>(a, st);
}

cudaError_t fmcu_fused_prepare(void)
{
    return fmcu_dev::allow_dynamic_smem((int)SMEM_LIMIT, fused_kernel<false, false, false>,
                                        fused_kernel<true, false, false>, fused_kernel<true, true, false>,
                                        fused_kernel<false, false, true>, fused_kernel<true, false, true>,
                                        fused_kernel<true, true, true>);
}
