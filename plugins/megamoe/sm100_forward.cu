/*
 * plugins/megamoe/sm100_forward.cu - the SM100 MegaMoE kernel (sm100.h,
 * docs/MEGAMOE.md "The SM100 kernel"). Compiled for sm_100a; it has never
 * run (no SM100 device was at hand), which is why the method serves it
 * only behind the sm100_unverified option.
 *
 * A forward is two launches on the caller's stream:
 *
 *   prepare   x bf16 -> the buffer's x (e4m3 per 32, UE8M0 bytes packed 4
 *             per int32, K-major: the quant rule of the SM90 path and the
 *             reference), ids -> int64 (outside [0, E): -1), weights f32;
 *   layer     one persistent cooperative kernel, one CTA per SM, over the
 *             symmetric buffer of every rank (host.h's layout):
 *     count     each token slot routed to expert id reserves a place in the
 *               owner rank's pull list [local][src][T] (system atomics);
 *     (ranks)   barrier across ranks;
 *     pull      each rank copies the rows routed to its experts from the
 *               sources' x / x_sf / topk_weights into its L1 ring, expert
 *               by expert, each expert's rows padded to BLOCK_M; the scale
 *               words go M-major in the order tcgen05.cp needs;
 *     (grid)    barrier;
 *     GEMM1     tiles of 128 interleaved gate/up weight rows x BLOCK_M ring
 *               rows, K = H: tcgen05.mma kind::mxf8f6f4.block_scale (A =
 *               e2m1 weights, B = e4m3 tokens, UE8M0 per 32 on both),
 *               fp32 in TMEM; the epilogue pairs gate and up lanes (rows
 *               16j + r and 16j + 8 + r, 8 lanes apart in one warp), rounds
 *               them to bf16, clamps, SiLU(g) * u * routing weight,
 *               requantizes per 32 channels (amax over a warp pair) into
 *               the L2 ring;
 *     (grid)    barrier;
 *     GEMM2     tiles of 128 w2 rows x BLOCK_M ring rows, K = I; the
 *               epilogue writes each row's bf16 values into its source
 *               rank's combine buffer [slot][token];
 *     (ranks)   barrier;
 *     combine   each rank sums its tokens' valid slots in f32, ascending
 *               slot order, one bf16 rounding, into out.
 *
 * Inside the GEMM phases the warps specialize (sm100_plan.h): warps 0-3
 * copy operands with cp.async into 128-byte-swizzled stages (e2m1 rows as
 * 16-byte units of 8 packed bytes and 8 zero bytes, the layout the f8f6f4
 * kinds read: 8-byte copies into the low halves, the high halves zeroed
 * once at start), keeping two stages in flight, then fence the async
 * proxy and arrive on the stage's barrier; warp 8 copies the two scale
 * blocks into TMEM (tcgen05.cp .32x128b.warpx4; two column sets,
 * alternating by stage), issues the four MMAs of the stage with sf_id = k
 * and commits to the stage's empty barrier; warps 4-7 drain one of two
 * TMEM accumulators while the next tile accumulates in the other.
 *
 * Numerics are the reference's (plugins/reference/method_megamoe.c) except
 * where the hardware sums: the MMA accumulates the 32 products of one K
 * chunk, scales, and adds in an order of its own, so the f32 sums may
 * differ from the reference's in the last bits (as the SM90 path's differ
 * at K > 128).
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <new>
#include <stdint.h>
#include <stdio.h>

#include "plugins/megamoe/numerics.cuh"
#include "plugins/megamoe/sm100.h"
#include "plugins/megamoe/sm100_plan.h"

namespace {

constexpr int WARP = 32;
constexpr int GROUP = 32;
constexpr int LOADERS = 128;  /* warps 0-3 */
constexpr int EPI_WARP0 = 4;  /* warps 4-7: TMEM lane quadrants 0-3 */
constexpr int MMA_WARP = 8;
constexpr int EPI_THREADS = 128;
constexpr int LAG = 3;        /* a loader hands a stage over when LAG are issued: LAG - 1 stay in flight */
constexpr int EPI_COLS = 32;  /* accumulator columns per tcgen05.ld */
constexpr long long SPIN_LIMIT = 20000000000LL; /* ~10 s of clock64 at 2 GHz: a lost peer traps, never hangs */

/* ---- the kernel's parameters -------------------------------------------------- */

struct layer_args {
    uint8_t *const *peers; /* [ranks] the symmetric buffers (peers[rank] is this rank's) */
    uint32_t rank, ranks;
    uint32_t m; /* this rank's tokens */
    uint32_t T, E, L, k, H, I, ring, sf_ring;
    mm_view view[MM_VIEW_COUNT];
    const uint8_t *l1, *l2;        /* weights [L, 2I, H/2], [L, H, I/2] */
    const uint32_t *l1_sf, *l2_sf; /* [L][K/128][rows] words */
    float limit;
    __nv_bfloat16 *out;
    int64_t out_ld;
};

/* The workspace words of host.h's MM_WS_BARRIER (32 bytes). */
enum { BAR_COUNT = 0, BAR_GEN = 1, BAR_RANKS = 2, BAR_CALLS = 3 };

template <typename T> __device__ __forceinline__ T *at(uint8_t *base, const mm_view &v)
{
    return reinterpret_cast<T *>(base + v.offset);
}

/* ---- numerics (numerics.cuh: the SM90 path's and the reference's rules) ---- */

using mm_num::amax_step;
using mm_num::e4m3_sat;
using mm_num::input_sf_byte;
using mm_num::warp_max;

/* ---- synchronization ------------------------------------------------------------- */

__device__ __forceinline__ void spin_check(long long t0, const char *what)
{
    if (clock64() - t0 > SPIN_LIMIT) {
        printf("fusedmoe megamoe sm100: %s timed out (a rank or CTA did not arrive)\n", what);
        __trap();
    }
}

/* All CTAs of the cooperative grid. */
__device__ void grid_sync(uint32_t *bar)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile uint32_t *gen = bar + BAR_GEN;
        const uint32_t g = *gen;
        __threadfence();
        if (atomicAdd(bar + BAR_COUNT, 1u) == gridDim.x - 1) {
            bar[BAR_COUNT] = 0;
            __threadfence();
            atomicAdd(bar + BAR_GEN, 1u);
        } else {
            const long long t0 = clock64();
            while (*gen == g)
                spin_check(t0, "grid barrier");
        }
        __threadfence();
    }
    __syncthreads();
}

/* All CTAs of every rank: a grid barrier, then CTA 0 adds one to each
 * rank's arrival word and waits until its own has seen every rank's
 * `target`-th arrival (the words only grow, over calls too). */
__device__ void ranks_sync(const layer_args &a, uint32_t target)
{
    uint32_t *own = at<uint32_t>(a.peers[a.rank], a.view[MM_WS_BARRIER]);
    if (a.ranks > 1)
        __threadfence_system(); /* this thread's stores to peers, before CTA 0 announces them */
    grid_sync(own);
    if (a.ranks > 1 && blockIdx.x == 0 && threadIdx.x == 0) {
        __threadfence_system();
        for (uint32_t q = 0; q < a.ranks; q++)
            atomicAdd_system(at<uint32_t>(a.peers[q], a.view[MM_WS_BARRIER]) + BAR_RANKS, 1u);
        volatile uint32_t *w = own + BAR_RANKS;
        const long long t0 = clock64();
        while ((int32_t)(*w - target) < 0)
            spin_check(t0, "barrier across ranks");
        __threadfence_system();
    }
    grid_sync(own);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *b, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}

__device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity)
{
    const uint32_t addr = smem_u32(b);
    const long long t0 = clock64();
    for (;;) {
        uint32_t done;
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(addr), "r"(parity)
                     : "memory");
        if (done)
            return;
        spin_check(t0, "pipeline barrier");
    }
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

/* 8 bytes: an e2m1 chunk's packed codes (8-byte aligned in global memory;
 * a 16-byte copy would need 16-byte aligned sources). */
__device__ __forceinline__ void cp_async8(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* The loaders' writes, made by the generic proxy, seen by the tensor core's
 * async proxy. */
__device__ __forceinline__ void fence_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void tc_fence_before()
{
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void tc_fence_after()
{
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void tc_commit(uint64_t *b)
{
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_u32(b))
                 : "memory");
}

__device__ __forceinline__ void tc_copy_sf(uint32_t tmem, uint64_t desc)
{
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(tmem), "l"(desc));
}

__device__ __forceinline__ void tc_mma(uint32_t d, uint64_t a, uint64_t b, uint32_t idesc, uint32_t sfa, uint32_t sfb,
                                       uint32_t accumulate)
{
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "setp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%0], %1, %2, %3, [%5], [%6], p;\n\t}" ::"r"(d),
                 "l"(a), "l"(b), "r"(idesc), "r"(accumulate), "r"(sfa), "r"(sfb));
}

/* 32 consecutive accumulator columns of this warp's 32 lanes. */
__device__ __forceinline__ void tc_load32(uint32_t taddr, float (&v)[EPI_COLS])
{
    uint32_t r[EPI_COLS];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, [%32];\n\t"
                 "tcgen05.wait::ld.sync.aligned;"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
                   "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]),
                   "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]),
                   "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]),
                   "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
                 : "r"(taddr)
                 : "memory");
#pragma unroll
    for (int i = 0; i < EPI_COLS; i++)
        v[i] = __uint_as_float(r[i]);
}

/* ---- the per-expert tables (shared memory, rebuilt by every CTA) ------------------- */

struct tables {
    uint32_t *row0;  /* [L + 1] first ring row of each local expert (padded to BLOCK_M) */
    uint32_t *blk0;  /* [L + 1] first BLOCK_M block of each local expert */
};

template <int BM> __device__ void build_tables(const uint32_t *cnt, uint32_t L, uint32_t ranks, uint32_t ring, tables t)
{
    if (threadIdx.x == 0) {
        const uint32_t rows = mm100_tables(cnt, L, ranks, BM, t.row0, t.blk0);
        if (rows > ring) {
            /* cannot happen with distinct ids per token (layout.c sizes the
             * ring for every routed row plus padding): refuse loudly */
            printf("fusedmoe megamoe sm100: %u ring rows needed, the ring holds %u\n", rows, ring);
            __trap();
        }
    }
    __syncthreads();
}

/* ---- the GEMM phases ------------------------------------------------------------------ */

struct gemm_desc {
    const uint8_t *w;     /* [L, n_out, K/2] e2m1 pairs */
    const uint32_t *wsf;  /* [L][K/128][n_out] words, UTCCP order */
    const uint8_t *act;   /* ring [ring, K] e4m3 */
    const uint32_t *asf;  /* ring scales [K/128][sf_ring] words, UTCCP order per 128 */
    uint32_t n_out, K;
    bool l1;              /* the SwiGLU epilogue (else the combine push) */
};

/* Pipeline state a role carries from one GEMM phase to the next. */
struct pipe {
    uint32_t stage, phase;
    __device__ void next(uint32_t stages)
    {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1;
        }
    }
};

struct smem_layout {
    uint8_t *stages;       /* [stages][A | B | SFA | SFB], 1024-aligned */
    uint32_t stage_bytes, stages_n;
    uint64_t *full, *empty; /* [stages] */
    uint64_t *acc_full, *acc_empty; /* [2] */
    uint32_t *tmem_base;
    float *amax;          /* [4 warps][32 columns] */
};

template <int BM> struct stage_off {
    static constexpr uint32_t A = 0, B = MM100_BLOCK_N * MM100_BLOCK_K, SFA = B + BM * MM100_BLOCK_K, SFB = SFA + 512;
};

/* Loaders (threads 0..127): the tiles this CTA owns, stage by stage. */
template <int BM>
__device__ void load_phase(const smem_layout &S, const gemm_desc &g, const tables &t, uint32_t L, uint32_t sf_ring,
                           pipe &p)
{
    const uint32_t tid = threadIdx.x, nblk = g.n_out / MM100_BLOCK_N, kblocks = g.K / MM100_BLOCK_K;
    const uint64_t tiles = (uint64_t)t.blk0[L] * nblk;
    /* stages issued and not yet handed over: the n_held before p.stage */
    uint32_t n_held = 0;
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint32_t blk = (uint32_t)(tile / nblk), nb = (uint32_t)(tile % nblk);
        const uint32_t e = mm100_expert_of_block(t.blk0, L, blk);
        const uint32_t row0 = t.row0[e] + (blk - t.blk0[e]) * BM; /* first ring row of the tile */
        const uint8_t *wrow = g.w + ((uint64_t)e * g.n_out + (uint64_t)nb * MM100_BLOCK_N) * (g.K / 2);
        for (uint32_t kb = 0; kb < kblocks; kb++) {
            mbar_wait(&S.empty[p.stage], p.phase ^ 1);
            const uint32_t st = smem_u32(S.stages + (uint64_t)p.stage * S.stage_bytes);
            /* A: 128 rows x 8 chunks of 8 packed bytes (16 e2m1) into the low
             * half of each 16-byte unit; the high halves were zeroed once */
            for (uint32_t i = tid; i < MM100_BLOCK_N * 8; i += LOADERS) {
                const uint32_t r = i / 8, c = i % 8;
                cp_async8(st + stage_off<BM>::A + mm100_sw128_offset(r, c),
                          wrow + (uint64_t)r * (g.K / 2) + kb * 64 + c * 8);
            }
            /* B: BM ring rows x 8 chunks of 16 e4m3 */
            for (uint32_t i = tid; i < BM * 8; i += LOADERS) {
                const uint32_t r = i / 8, c = i % 8;
                cp_async16(st + stage_off<BM>::B + mm100_sw128_offset(r, c),
                           g.act + (uint64_t)(row0 + r) * g.K + kb * MM100_BLOCK_K + c * 16);
            }
            /* the two scale blocks: 128 words each, already in tcgen05.cp order */
            if (tid < 32)
                cp_async16(st + stage_off<BM>::SFA + tid * 16,
                           g.wsf + mm100_weight_sf_block(e, kb, kblocks, g.n_out, nb) + tid * 4);
            else if (tid < 64)
                cp_async16(st + stage_off<BM>::SFB + (tid - 32) * 16,
                           g.asf + mm100_ring_sf_block(kb, sf_ring, row0, BM) + (tid - 32) * 4);
            cp_async_commit();
            if (++n_held == LAG) {
                /* keep LAG - 1 groups in flight, hand the oldest over */
                cp_async_wait<LAG - 1>();
                fence_async_smem();
                mbar_arrive(&S.full[(p.stage + S.stages_n - (LAG - 1)) % S.stages_n]);
                n_held--;
            }
            p.next(S.stages_n);
        }
    }
    cp_async_wait<0>();
    fence_async_smem();
    for (uint32_t h = n_held; h > 0; h--)
        mbar_arrive(&S.full[(p.stage + S.stages_n - h) % S.stages_n]);
}

/* The MMA warp (lane 0 issues). Two sets of scale columns after the accumulators, alternating by stage
 * (`sf_set`, carried across tiles and phases): a stage's tcgen05.cp never
 * overwrites the scales the previous stage's MMAs read. PTX orders cp
 * before a later mma of the same thread, not mma before a later cp;
 * DeepGEMM and CUTLASS reuse one set, which the alternation makes moot. */
template <int BM>
__device__ void mma_phase(const smem_layout &S, const gemm_desc &g, const tables &t, uint32_t L, uint32_t tmem,
                          pipe &p, pipe &acc, uint32_t &sf_set)
{
    const uint32_t nblk = g.n_out / MM100_BLOCK_N, kblocks = g.K / MM100_BLOCK_K;
    const uint64_t tiles = (uint64_t)t.blk0[L] * nblk;
    const bool leader = (threadIdx.x % WARP) == 0;
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        if (leader)
            mbar_wait(&S.acc_empty[acc.stage], acc.phase ^ 1);
        __syncwarp();
        tc_fence_after();
        const uint32_t d = tmem + acc.stage * BM;
        for (uint32_t kb = 0; kb < kblocks; kb++) {
            if (leader)
                mbar_wait(&S.full[p.stage], p.phase);
            __syncwarp();
            tc_fence_after();
            if (leader) {
                const uint32_t st = smem_u32(S.stages + (uint64_t)p.stage * S.stage_bytes);
                const uint32_t sfa_col = tmem + 2 * BM + 8 * sf_set, sfb_col = sfa_col + 4;
                tc_copy_sf(sfa_col, mm100_sf_desc(st + stage_off<BM>::SFA));
                tc_copy_sf(sfb_col, mm100_sf_desc(st + stage_off<BM>::SFB));
                const uint64_t ad = mm100_sw128_desc(st + stage_off<BM>::A);
                const uint64_t bd = mm100_sw128_desc(st + stage_off<BM>::B);
#pragma unroll
                for (uint32_t k = 0; k < MM100_BLOCK_K / MM100_MMA_K; k++)
                    tc_mma(d, ad + 2 * k, bd + 2 * k, mm100_idesc(BM, k, k), sfa_col, sfb_col, kb | k);
                tc_commit(&S.empty[p.stage]);
                if (kb + 1 == kblocks)
                    tc_commit(&S.acc_full[acc.stage]);
            }
            __syncwarp();
            p.next(S.stages_n);
            sf_set ^= 1;
        }
        acc.next(2);
    }
}

template <int BM> __device__ __forceinline__ uint64_t ring_sf_word(uint32_t r, uint32_t kb, uint32_t sf_ring)
{
    return mm100_ring_sf_word(r, kb, BM, sf_ring);
}

/* Epilogue warps 4-7: quadrant q reads TMEM lanes 32q..32q+31 (weight rows). */
template <int BM>
__device__ void epilogue_phase(const layer_args &a, const smem_layout &S, const gemm_desc &g, const tables &t,
                               uint32_t tmem, pipe &acc)
{
    const uint32_t L = a.L, nblk = g.n_out / MM100_BLOCK_N;
    const uint64_t tiles = (uint64_t)t.blk0[L] * nblk;
    const uint32_t q = threadIdx.x / WARP - EPI_WARP0, lane = threadIdx.x % WARP;
    uint8_t *own = a.peers[a.rank];
    const float *ring_w = at<float>(own, a.view[MM_L1_W]);
    const uint32_t *meta = at<uint32_t>(own, a.view[MM_WS_SRC_META]);
    uint8_t *l2 = at<uint8_t>(own, a.view[MM_L2_ACTS]);
    uint8_t *l2sf = at<uint8_t>(own, a.view[MM_L2_SF]);
    for (uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint32_t blk = (uint32_t)(tile / nblk), nb = (uint32_t)(tile % nblk);
        const uint32_t e = mm100_expert_of_block(t.blk0, L, blk);
        const uint32_t row0 = t.row0[e] + (blk - t.blk0[e]) * BM;
        mbar_wait(&S.acc_full[acc.stage], acc.phase);
        tc_fence_after();
        const uint32_t base = tmem + ((32 * q) << 16) + acc.stage * BM;
        for (uint32_t c0 = 0; c0 < (uint32_t)BM; c0 += EPI_COLS) {
            float v[EPI_COLS];
            tc_load32(base + c0, v);
            if (g.l1) {
                /* lane i holds row 32q + i: gate of channel 8j + r when bit 3
                 * of i is clear (j = 2q + i / 16, r = i % 8), else up */
                const bool is_gate = mm100_l1_is_gate(32 * q + lane);
                const float c = a.limit > 0.0f ? __bfloat162float(__float2bfloat16_rn(a.limit)) : 0.0f;
                float act[EPI_COLS];
#pragma unroll
                for (int i = 0; i < EPI_COLS; i++) {
                    const float mine = __bfloat162float(__float2bfloat16_rn(v[i]));
                    const float other = __shfl_xor_sync(0xffffffffu, mine, 8);
                    float gate = is_gate ? mine : other, up = is_gate ? other : mine;
                    if (a.limit > 0.0f) {
                        gate = gate < c ? gate : c;
                        up = up < -c ? -c : up > c ? c : up;
                    }
                    const uint32_t r = row0 + c0 + i;
                    act[i] = (gate / (1.0f + expf(-gate)) * up) * ring_w[r];
                }
                /* amax per column over this warp's 16 channels (a NaN never
                 * wins, an inf does: the reference's amax), then with the
                 * partner warp q ^ 1: channels 32 apart form one group */
#pragma unroll
                for (int i = 0; i < EPI_COLS; i++) {
                    const float m = warp_max(amax_step(0.0f, act[i]));
                    if (lane == (uint32_t)i)
                        S.amax[q * 32 + i] = m;
                }
                asm volatile("bar.sync 1, %0;" ::"n"(EPI_THREADS) : "memory");
                const uint32_t ch = mm100_l1_channel(nb, 32 * q + lane); /* this lane's channel */
                const uint32_t group = ch / GROUP;
#pragma unroll
                for (int i = 0; i < EPI_COLS; i++) {
                    const uint32_t r = row0 + c0 + i;
                    const float m0 = S.amax[q * 32 + i], m1 = S.amax[(q ^ 1) * 32 + i];
                    const float amax = m0 > m1 ? m0 : m1;
                    uint8_t code, sf;
                    int32_t ex;
                    if (!mm_num::act_exponent(amax, ex)) {
                        code = 0x7F; /* NaN, as the reference makes the whole group */
                        sf = 0xFF;
                    } else {
                        code = mm_num::act_code(act[i], ex);
                        sf = (uint8_t)(ex + 127);
                    }
                    /* padding rows are written too: their columns are their own */
                    if (is_gate)
                        l2[(uint64_t)r * a.I + ch] = code;
                    if (lane == 0 && (q & 1) == 0) /* one scale byte per (row, group) */
                        l2sf[ring_sf_word<BM>(r, group / 4, a.sf_ring) * 4 + group % 4] = sf;
                }
                asm volatile("bar.sync 1, %0;" ::"n"(EPI_THREADS) : "memory");
            } else {
                /* GEMM2: row 32q + lane of the tile is output channel h */
                const uint32_t h = nb * MM100_BLOCK_N + 32 * q + lane;
#pragma unroll
                for (int i = 0; i < EPI_COLS; i++) {
                    const uint32_t r = row0 + c0 + i;
                    const uint32_t src = meta[3 * r], tok = meta[3 * r + 1], slot = meta[3 * r + 2];
                    if (src >= a.ranks)
                        continue; /* a padding row */
                    __nv_bfloat16 *comb = at<__nv_bfloat16>(a.peers[src], a.view[MM_COMBINE]);
                    comb[((uint64_t)slot * a.T + tok) * a.H + h] = __float2bfloat16_rn(v[i]);
                }
            }
        }
        tc_fence_before();
        mbar_arrive(&S.acc_empty[acc.stage]);
        acc.next(2);
    }
}

/* ---- dispatch: count, then pull ------------------------------------------------------ */

/* The pull list and counters of parity `par` (host.h: COUNTS is 2E x 8
 * bytes; each parity uses E = L x R u32 of it). */
__device__ __forceinline__ uint32_t *counts_of(uint8_t *buf, const layer_args &a, uint32_t par)
{
    return at<uint32_t>(buf, a.view[MM_WS_COUNTS]) + (uint64_t)par * a.E;
}

__device__ void count_phase(const layer_args &a, uint32_t par)
{
    uint8_t *own = a.peers[a.rank];
    const int64_t *ids = at<int64_t>(own, a.view[MM_TOPK_IDX]);
    const uint64_t n = (uint64_t)a.m * a.k;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const int64_t id = ids[i];
        if (id < 0 || id >= (int64_t)a.E)
            continue;
        const uint32_t dst = (uint32_t)(id / a.L), e = (uint32_t)(id % a.L);
        uint32_t *cnt = counts_of(a.peers[dst], a, par) + e * a.ranks + a.rank;
        const uint32_t pos = a.ranks > 1 ? atomicAdd_system(cnt, 1u) : atomicAdd(cnt, 1u);
        if (pos >= a.T) {
            printf("fusedmoe megamoe sm100: expert %lld got more than %u rows from rank %u (a token routed to it "
                   "twice?)\n",
                   (long long)id, a.T, a.rank);
            __trap();
        }
        uint32_t *pull = at<uint32_t>(a.peers[dst], a.view[MM_WS_PULL_IDX]);
        pull[mm100_pull_index(e, a.rank, pos, a.ranks, a.T)] = (uint32_t)i;
    }
}

/* One warp per ring row: x row, its scale words, the routing weight and
 * where it came from. */
template <int BM> __device__ void pull_phase(const layer_args &a, const tables &t, uint32_t par)
{
    uint8_t *own = a.peers[a.rank];
    const uint32_t *cnt = counts_of(own, a, par);
    const uint32_t *pull = at<uint32_t>(own, a.view[MM_WS_PULL_IDX]);
    uint8_t *ring = at<uint8_t>(own, a.view[MM_L1_ACTS]);
    uint32_t *ring_sf = at<uint32_t>(own, a.view[MM_L1_SF]);
    float *ring_w = at<float>(own, a.view[MM_L1_W]);
    uint32_t *meta = at<uint32_t>(own, a.view[MM_WS_SRC_META]);
    const uint32_t warps = gridDim.x * (blockDim.x / WARP), lane = threadIdx.x % WARP;
    const uint32_t rows = t.row0[a.L], kw = a.H / MM100_BLOCK_K;
    for (uint32_t r = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP; r < rows; r += warps) {
        const uint32_t e = mm100_expert_of_block(t.blk0, a.L, r / BM);
        uint32_t off = r - t.row0[e], src = 0;
        while (src < a.ranks && off >= cnt[e * a.ranks + src])
            off -= cnt[e * a.ranks + src++];
        if (src == a.ranks) {
            /* padding: marked so GEMM2's epilogue skips it; its GEMM columns
             * are computed on stale rows but never mix with others, and a
             * zero routing weight keeps its L2 values small */
            if (lane == 0) {
                meta[3 * r] = 0xFFFFFFFFu;
                ring_w[r] = 0.0f;
            }
            continue;
        }
        const uint32_t ti = pull[mm100_pull_index(e, src, off, a.ranks, a.T)];
        const uint32_t tok = ti / a.k, slot = ti % a.k;
        uint8_t *peer = a.peers[src];
        const uint4 *xs = reinterpret_cast<const uint4 *>(at<uint8_t>(peer, a.view[MM_X]) + (uint64_t)tok * a.H);
        uint4 *xd = reinterpret_cast<uint4 *>(ring + (uint64_t)r * a.H);
        for (uint32_t i = lane; i < a.H / 16; i += WARP)
            xd[i] = xs[i];
        const uint32_t *sfs = at<uint32_t>(peer, a.view[MM_X_SF]) + (uint64_t)tok * kw;
        for (uint32_t w = lane; w < kw; w += WARP)
            ring_sf[ring_sf_word<BM>(r, w, a.sf_ring)] = sfs[w];
        if (lane == 0) {
            ring_w[r] = at<float>(peer, a.view[MM_TOPK_W])[ti];
            meta[3 * r] = src;
            meta[3 * r + 1] = tok;
            meta[3 * r + 2] = slot;
        }
    }
}

__device__ void combine_phase(const layer_args &a)
{
    uint8_t *own = a.peers[a.rank];
    const int64_t *ids = at<int64_t>(own, a.view[MM_TOPK_IDX]);
    const __nv_bfloat16 *comb = at<__nv_bfloat16>(own, a.view[MM_COMBINE]);
    const uint64_t n = (uint64_t)a.m * a.H;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t tok = i / a.H, h = i % a.H;
        float s = 0.0f;
        for (uint32_t j = 0; j < a.k; j++) {
            const int64_t id = ids[tok * a.k + j];
            if (id >= 0 && id < (int64_t)a.E)
                s += __bfloat162float(comb[((uint64_t)j * a.T + tok) * a.H + h]);
        }
        a.out[(int64_t)tok * a.out_ld + (int64_t)h] = __float2bfloat16_rn(s);
    }
}

/* ---- the layer kernel ----------------------------------------------------------------------- */

template <int BM> __global__ void __launch_bounds__(MM100_THREADS, 1) layer_kernel(layer_args a, mm100_shape shape)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *base = reinterpret_cast<uint8_t *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    /* the host's plan (sm100_plan.c): stages, their size, TMEM columns */
    const uint32_t stages = shape.stages, stage_bytes = shape.stage_bytes;
    smem_layout S;
    S.stages = base;
    S.stage_bytes = stage_bytes;
    S.stages_n = stages;
    uint8_t *tail = base + (uint64_t)stages * stage_bytes;
    S.full = reinterpret_cast<uint64_t *>(tail);
    S.empty = S.full + MM100_MAX_STAGES;
    S.acc_full = S.empty + MM100_MAX_STAGES;
    S.acc_empty = S.acc_full + 2;
    S.tmem_base = reinterpret_cast<uint32_t *>(S.acc_empty + 2);
    S.amax = reinterpret_cast<float *>(tail + 256);
    tables t;
    t.row0 = reinterpret_cast<uint32_t *>(tail + 256 + 4 * 32 * 4);
    t.blk0 = t.row0 + a.L + 1;

    const uint32_t warp = threadIdx.x / WARP;
    uint8_t *own = a.peers[a.rank];
    uint32_t *bar = at<uint32_t>(own, a.view[MM_WS_BARRIER]);
    /* this call's index on this rank: every CTA reads it before CTA 0 adds
     * one at the end (after the last grid barrier) */
    const uint32_t call = *reinterpret_cast<volatile uint32_t *>(bar + BAR_CALLS), par = call & 1;

    /* the high 8 bytes of every 16-byte unit of each stage's A tile: e2m1
     * padding, never written by the loaders (cp_async8 fills the low 8) */
    for (uint32_t i = threadIdx.x; i < stages * MM100_BLOCK_N * 8; i += blockDim.x)
        *reinterpret_cast<uint2 *>(base + (uint64_t)(i / (MM100_BLOCK_N * 8)) * stage_bytes +
                                   16 * (i % (MM100_BLOCK_N * 8)) + 8) = make_uint2(0, 0);
    fence_async_smem();
    if (threadIdx.x == 0) {
        for (uint32_t s = 0; s < stages; s++) {
            mbar_init(&S.full[s], LOADERS);
            mbar_init(&S.empty[s], 1);
        }
        for (int s = 0; s < 2; s++) {
            mbar_init(&S.acc_full[s], 1);
            mbar_init(&S.acc_empty[s], EPI_THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (warp == MMA_WARP) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(smem_u32(S.tmem_base)),
                     "r"(shape.tmem_cols));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const uint32_t tmem = *S.tmem_base;

    /* count, then every rank's pull lists are complete */
    count_phase(a, par);
    ranks_sync(a, (2 * call + 1) * a.ranks);
    const uint32_t *cnt = counts_of(own, a, par);
    build_tables<BM>(cnt, a.L, a.ranks, a.ring, t);
    pull_phase<BM>(a, t, par);
    grid_sync(bar);

    pipe ld = {0, 0}, mm = {0, 0}, acc = {0, 0};
    uint32_t sf_set = 0;
    const gemm_desc g1 = {a.l1,       a.l1_sf,   at<uint8_t>(own, a.view[MM_L1_ACTS]),
                          at<uint32_t>(own, a.view[MM_L1_SF]), 2 * a.I, a.H, true};
    const gemm_desc g2 = {a.l2,       a.l2_sf,   at<uint8_t>(own, a.view[MM_L2_ACTS]),
                          at<uint32_t>(own, a.view[MM_L2_SF]), a.H,     a.I, false};
    for (int phase = 0; phase < 2; phase++) {
        const gemm_desc &g = phase == 0 ? g1 : g2;
        if (warp < EPI_WARP0)
            load_phase<BM>(S, g, t, a.L, a.sf_ring, ld);
        else if (warp < MMA_WARP)
            epilogue_phase<BM>(a, S, g, t, tmem, acc);
        else
            mma_phase<BM>(S, g, t, a.L, tmem, mm, acc, sf_set);
        if (phase == 0)
            grid_sync(bar); /* GEMM2 reads whole L2 rows, written by several tiles */
    }
    /* every rank's rows are in its combine buffer */
    ranks_sync(a, (2 * call + 2) * a.ranks);
    combine_phase(a);
    /* this parity's counters zeroed for the call after next (peers write
     * the other parity in the next call, after the barrier above) */
    uint32_t *zc = counts_of(own, a, par);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.E; i += gridDim.x * blockDim.x)
        zc[i] = 0;
    tc_fence_before();
    grid_sync(bar);
    if (warp == MMA_WARP) {
        tc_fence_after();
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(tmem), "r"(shape.tmem_cols));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        bar[BAR_CALLS] = call + 1;
}

/* ---- prepare: the inputs into this rank's buffer ------------------------------------------ */

/* One warp per (token, 128-wide K block): four groups, one scale word. */
__global__ void prepare_x(const __nv_bfloat16 *__restrict__ x, int64_t x_ld, uint32_t m, uint32_t H,
                          uint8_t *__restrict__ xq, uint32_t *__restrict__ xsf)
{
    const uint32_t kw = H / MM100_BLOCK_K;
    const uint64_t wi = (uint64_t)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    const uint32_t lane = threadIdx.x % WARP;
    if (wi >= (uint64_t)m * kw)
        return;
    const uint64_t tok = wi / kw, w = wi % kw;
    uint32_t word = 0;
    for (uint32_t g = 0; g < 4; g++) {
        const uint64_t col = w * MM100_BLOCK_K + g * GROUP + lane;
        const float v = __bfloat162float(x[(int64_t)tok * x_ld + (int64_t)col]);
        const uint32_t b = input_sf_byte(warp_max(amax_step(0.0f, v)));
        xq[tok * H + col] = e4m3_sat(v / __uint_as_float(b << 23));
        word |= b << (8 * g);
    }
    if (lane == 0)
        xsf[wi] = word;
}

__global__ void prepare_routing(const int32_t *__restrict__ ids, int64_t ids_ld, const float *__restrict__ w,
                                int64_t w_ld, uint32_t m, uint32_t k, uint32_t E, int64_t *__restrict__ idx,
                                float *__restrict__ tw)
{
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (uint64_t)m * k)
        return;
    const uint64_t tok = i / k, j = i % k;
    const int32_t id = ids[(int64_t)tok * ids_ld + (int64_t)j];
    idx[i] = id >= 0 && (uint32_t)id < E ? id : -1;
    tw[i] = w[(int64_t)tok * w_ld + (int64_t)j];
}

int fail(cudaError_t e, const char *what, char *why, size_t cap)
{
    snprintf(why, cap, "MegaMoE SM100: %s: %s", what, cudaGetErrorString(e));
    return -1;
}

} // namespace

struct mm100_layer {
    int device;
    mm_layout layout;
    uint8_t *buffer;   /* the symmetric buffer (ranks 1: a plain allocation) */
    uint8_t *weights;  /* l1, l1_sf, l2, l2_sf */
    uint8_t **peers;   /* device array [ranks] */
    uint64_t off[4];
    int sms;
    mm100_shape shape[3]; /* BLOCK_M 32, 64, 128: set up at create */
};

/* The three instantiations, by BLOCK_M. */
static const void *kernel_of(uint32_t bm)
{
    return bm == 32 ? (const void *)layer_kernel<32> : bm == 64 ? (const void *)layer_kernel<64>
                                                                : (const void *)layer_kernel<128>;
}

static int shape_index(uint32_t bm)
{
    return bm == 32 ? 0 : bm == 64 ? 1 : 2;
}

/* Each instantiation's shared memory, once, and what the cooperative
 * launch needs: the device supports it and one CTA an SM fits, so the
 * grid's barriers cannot wait on a CTA that never starts. */
static int prepare_kernels(mm100_layer *l, char *why, size_t cap)
{
    int coop = 0;
    cudaError_t e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, l->device);
    if (e != cudaSuccess)
        return fail(e, "cudaDeviceGetAttribute (cooperative launch)", why, cap);
    if (!coop) {
        snprintf(why, cap, "MegaMoE SM100: device %d does not support cooperative launches", l->device);
        return -1;
    }
    for (uint32_t bm = 32; bm <= 128; bm *= 2) {
        mm100_shape &s = l->shape[shape_index(bm)];
        if (mm100_shape_make(bm, l->layout.local, &s, why, cap) != 0)
            return -1;
        if ((e = cudaFuncSetAttribute(kernel_of(bm), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      (int)s.smem_bytes)) != cudaSuccess)
            return fail(e, "cudaFuncSetAttribute (shared memory)", why, cap);
        int per_sm = 0;
        if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_of(bm), MM100_THREADS,
                                                               s.smem_bytes)) != cudaSuccess)
            return fail(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor", why, cap);
        if (per_sm < 1) {
            snprintf(why, cap, "MegaMoE SM100: the layer kernel (BLOCK_M %u, %u bytes of shared memory) does not fit an SM",
                     bm, s.smem_bytes);
            return -1;
        }
    }
    return 0;
}

extern "C" void mm100_destroy(mm100_layer *l)
{
    if (!l)
        return;
    if (cudaSetDevice(l->device) == cudaSuccess) {
        cudaFree(l->buffer);
        cudaFree(l->weights);
        cudaFree(l->peers);
    }
    delete l;
}

extern "C" int mm100_create(int device, const mm_layout *layout, const mm100_host_weights *w, mm100_layer **out,
                            char *why, size_t cap)
{
    *out = nullptr;
    if (layout->dims.ranks != 1) {
        snprintf(why, cap, "MegaMoE SM100: an EP group's symmetric buffer (peer windows) is not wired yet; ep_size 1 only");
        return -1;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    mm100_layer *l = new (std::nothrow) mm100_layer{};
    if (!l) {
        snprintf(why, cap, "MegaMoE SM100: out of host memory");
        return -1;
    }
    l->device = device;
    l->layout = *layout;
    const mm_dims &d = layout->dims;
    const uint64_t L = layout->local, H = d.hidden, I = d.inter;
    const uint64_t bytes[4] = {L * 2 * I * (H / 2), mm_sf_words((uint32_t)L, 2 * (uint32_t)I, (uint32_t)H) * 4,
                               L * H * (I / 2), mm_sf_words((uint32_t)L, (uint32_t)H, (uint32_t)I) * 4};
    const void *src[4] = {w->l1, w->l1_sf, w->l2, w->l2_sf};
    uint64_t total = 0;
    for (int i = 0; i < 4; i++) {
        l->off[i] = total;
        total += (bytes[i] + 255) / 256 * 256;
    }
    int sms = 0;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
        (e = cudaMalloc(&l->buffer, layout->total)) != cudaSuccess ||
        (e = cudaMemset(l->buffer, 0, layout->total)) != cudaSuccess ||
        (e = cudaMalloc(&l->weights, total)) != cudaSuccess || (e = cudaMalloc(&l->peers, sizeof(uint8_t *))) != cudaSuccess ||
        (e = cudaMemcpy(l->peers, &l->buffer, sizeof(uint8_t *), cudaMemcpyHostToDevice)) != cudaSuccess) {
        mm100_destroy(l);
        return fail(e, "allocating the symmetric buffer and weights", why, cap);
    }
    for (int i = 0; i < 4; i++)
        if ((e = cudaMemcpy(l->weights + l->off[i], src[i], bytes[i], cudaMemcpyHostToDevice)) != cudaSuccess) {
            mm100_destroy(l);
            return fail(e, "cudaMemcpy (weights)", why, cap);
        }
    l->sms = sms;
    if (prepare_kernels(l, why, cap) != 0) {
        mm100_destroy(l);
        return -1;
    }
    *out = l;
    return 0;
}

static int launch(mm100_layer *l, uint32_t bm, layer_args &a, cudaStream_t s, char *why, size_t cap)
{
    mm100_shape shape = l->shape[shape_index(bm)];
    void *args[] = {&a, &shape};
    cudaError_t e = cudaLaunchCooperativeKernel(kernel_of(bm), dim3((unsigned)l->sms), dim3(MM100_THREADS), args,
                                                shape.smem_bytes, s);
    if (e != cudaSuccess)
        return fail(e, "cudaLaunchCooperativeKernel (the layer kernel)", why, cap);
    return 0;
}

extern "C" int mm100_forward(mm100_layer *l, const mm_call *c, char *why, size_t cap)
{
    cudaError_t e = cudaSetDevice(l->device);
    if (e != cudaSuccess)
        return fail(e, "cudaSetDevice", why, cap);
    const mm_layout &y = l->layout;
    const mm_dims &d = y.dims;
    cudaStream_t s = static_cast<cudaStream_t>(c->stream);
    uint8_t *buf = l->buffer;
    /* every rank of a group runs the layer kernel, m = 0 too: it takes
     * part in the barriers and serves its experts; alone, nothing to do */
    if (c->m == 0 && y.dims.ranks == 1)
        return 0;
    if (c->m) {
        const uint64_t warps = (uint64_t)c->m * (d.hidden / MM100_BLOCK_K);
        prepare_x<<<(unsigned)((warps + 7) / 8), 256, 0, s>>>(static_cast<const __nv_bfloat16 *>(c->x), c->x_ld, c->m,
                                                             d.hidden, buf + y.view[MM_X].offset,
                                                             reinterpret_cast<uint32_t *>(buf + y.view[MM_X_SF].offset));
        const uint64_t pairs = (uint64_t)c->m * d.topk;
        prepare_routing<<<(unsigned)((pairs + 255) / 256), 256, 0, s>>>(
            c->ids, c->ids_ld, c->weights, c->weights_ld, c->m, d.topk, d.experts,
            reinterpret_cast<int64_t *>(buf + y.view[MM_TOPK_IDX].offset),
            reinterpret_cast<float *>(buf + y.view[MM_TOPK_W].offset));
    }
    layer_args a;
    a.peers = l->peers;
    a.rank = 0;
    a.ranks = d.ranks;
    a.m = c->m;
    a.T = y.tokens;
    a.E = d.experts;
    a.L = y.local;
    a.k = d.topk;
    a.H = d.hidden;
    a.I = d.inter;
    a.ring = y.ring;
    a.sf_ring = y.sf_ring;
    for (int i = 0; i < MM_VIEW_COUNT; i++)
        a.view[i] = y.view[i];
    a.l1 = l->weights + l->off[0];
    a.l1_sf = reinterpret_cast<const uint32_t *>(l->weights + l->off[1]);
    a.l2 = l->weights + l->off[2];
    a.l2_sf = reinterpret_cast<const uint32_t *>(l->weights + l->off[3]);
    a.limit = c->swiglu_limit;
    a.out = static_cast<__nv_bfloat16 *>(c->out);
    a.out_ld = c->out_ld;
    const uint32_t bm = mm100_pick_block_m(c->m, d.topk, d.ranks, d.experts);
    if (launch(l, bm, a, s, why, cap) != 0)
        return -1;
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail(e, "kernel launch", why, cap);
    return 0;
}
