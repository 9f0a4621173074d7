/*
 * plugins/cuda/fp8_grouped_sm90.cu - our grouped FP8 GEMM for Hopper
 * (contract in fp8_grouped.h).
 *
 * One persistent CTA per SM, three warp groups:
 *   WG0  producer: one thread walks the CTA's tiles and issues two TMA
 *        loads per 128-K block (A: 128 rows x 128 B, B: BN rows x 128 B,
 *        128-byte swizzle) into a ring of STAGES shared-memory stages,
 *        each guarded by a full and an empty mbarrier;
 *   WG1, WG2  consumers: rows 0-63 and 64-127 of the tile, four wgmma
 *        m64nBNk32 per stage from shared memory, then release the stage.
 * The producer runs ahead by up to STAGES blocks, across tile boundaries,
 * so the next tile's operands arrive while the consumers store this one.
 *
 * Tiles. Expert e has mt_e = ceil(M_e / 128) row blocks and nt = ceil(N /
 * BN) column blocks (gated: ceil(I / (BN/2))); tiles are numbered expert by expert, and inside an
 * expert column block by column block, row block fastest: the CTAs that
 * run at the same time share each weight tile through L2. Every CTA builds
 * the prefix of tile counts from the offsets in shared memory and finds a
 * tile's expert by binary search, so the grid does not depend on the
 * routing (graph capture).
 *
 * Accumulation. Promoted kinds keep a second set of f32 registers: each
 * 128-K block's four wgmmas start from zero (scale-d = 0), and after the
 * warp group waits for them their sum is added to it, as CUTLASS's
 * promoted FP8 main loop does with an interval of one K tile, so the two
 * compute the same f32 additions. Fast kinds accumulate all of K in wgmma
 * and keep one wgmma batch in flight (wait_group 1).
 *
 * Epilogue. D = bf16_rn(acc * (s_row * s_col)), the CUTLASS epilogue
 * tree's arithmetic (outputs bit-identical to CUTLASS's kernels: H100, all
 * eight fp8 M=1024/8192 bench points, bench/cuda/own-fp8-2026-11-22), or
 * with a gated tile the SiLU of each gate/up pair. Each consumer warp
 * group writes its 64 rows to a staging buffer in shared memory, and each
 * valid row leaves as one bulk copy (rows past the expert's end are not
 * stored), which runs while the warp group starts the next tile. Storing
 * straight from registers (4-byte stores, 8 rows per warp instruction)
 * left the tensor cores idle so long that the GEMMs ran at half the speed
 * (Qwen3-30B-A3B GEMM2 at M=8192: 599 us, 273 us staged, 160 us without
 * stores).
 */
#include "plugins/cuda/fp8_grouped.h"
#include "plugins/cuda/act_fast.cuh"
#include "plugins/cuda/wgmma_fp8.cuh"

#include <cuda.h> /* CUtensorMap and the encoder's signature; the function comes from the runtime */
#include <cuda_bf16.h>

#include <atomic>
#include <stdlib.h>

namespace {

constexpr int BM = 128;          /* rows per tile: two warp groups of 64 */
constexpr int BK = 128;          /* K per stage: one 128-byte swizzle row of e4m3 */
constexpr int THREADS = 384;     /* producer + two consumer warp groups */
constexpr int A_BYTES = BM * BK; /* 16 KB */

template <int BN, bool PROMOTE> struct kind_cfg {
    /* Shared memory: STAGES operand stages, then per consumer warp group a
     * staging buffer of its 64 x BN bf16 outputs (rows padded by 16 B, so
     * the fragment stores of a warp's 8 rows hit distinct banks) and its
     * BN column scales. Stages are what is left of 227 KB. */
    static constexpr int STAGES = BN == 128 ? 5 : BN == 192 ? 4 : 3;
    static constexpr int B_BYTES = BN * BK;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int PITCH = BN * 2 + 16;  /* D rows: BN bf16 */
    static constexpr int APITCH = BN + 16;     /* gated rows: BN/2 bf16 */
    static constexpr int OUT_BYTES = 64 * PITCH;
    static constexpr int EPI_AT = STAGES * STAGE_BYTES;
    static constexpr int SCALE_AT = EPI_AT + 2 * OUT_BYTES;
    static constexpr size_t SMEM = (size_t)SCALE_AT + 2 * BN * sizeof(float) + 1024; /* + alignment of the swizzle atoms */
};

/* ---- PTX wrappers ---------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("{\n.reg .b64 s;\nmbarrier.arrive.shared::cta.b64 s, [%0];\n}\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("{\n.reg .b64 s;\nmbarrier.arrive.expect_tx.shared::cta.b64 s, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

/* 2-D tile load, completion counted in bytes on `bar`; c0 is the inner (K) coordinate. */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Barrier of one consumer warp group (ids 1, 2; 0 is __syncthreads). */
__device__ __forceinline__ void wg_sync(int id)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

/* Row store from shared to global memory by the copy engine (bulk_group
 * completion: the issuing thread waits before the buffer is reused). */
__device__ __forceinline__ void bulk_store(void *dst, uint32_t src, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
                 "cp.async.bulk.commit_group;\n" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

__device__ __forceinline__ void bulk_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

__device__ __forceinline__ float round_bf16(float v)
{
    return __bfloat162float(__float2bfloat16_rn(v));
}

/* Keep the compiler from moving accumulator reads or writes across the
 * asynchronous wgmma boundary. */
template <int R> __device__ __forceinline__ void fence_regs(float (&r)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}

/* Matrix descriptor of a K-major operand in 128-byte-swizzled rows of 128 B:
 * 8-row core-matrix groups 1024 B apart (stride byte offset); the leading
 * offset is unused with swizzling. Adding 32 B (2 in the address field)
 * steps K by 32 e4m3 inside the swizzle atom. */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

template <int BN> __device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t da, uint64_t db, int acc)
{
    if constexpr (BN == 128)
        fmcu_wgmma::wgmma_m64n128k32(d, da, db, acc);
    else if constexpr (BN == 192)
        fmcu_wgmma::wgmma_m64n192k32(d, da, db, acc);
    else
        fmcu_wgmma::wgmma_m64n256k32(d, da, db, acc);
}

/* ---- tiles ----------------------------------------------------------- */

struct kernel_params {
    __nv_bfloat16 *d;
    const float *s_row, *s_col;
    const int32_t *offsets;
    int row_vec, col_vec;
    uint32_t E, N, K;
    int gated;                 /* fmcu_fp8g_act given: tiles of BN/2 gate + BN/2 up rows */
    fmcu_fp8g_act act;
    int flags; /* tuning builds (FMCU_FP8G_TUNING, FP8G_FLAGS): 1 no stores, 2 columns fastest */
};

/* Tile column block nb covers weight rows c0 .. c0 + BN - 1 of its expert,
 * or with gated, gate rows j0 .. j0 + BN/2 - 1 and up rows I + j0 ... */
struct tile_at {
    int e, row0, row_end, nb;
};

/* Tile t's expert (the last e with pre[e] <= t: experts without tiles
 * repeat the prefix), its first and end rows and first column. */
__device__ __forceinline__ tile_at find_tile(int t, const int *pre, const int *off, int E, int nt, int flags)
{
    int lo = 0, hi = E;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (pre[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    const int local = t - pre[lo];
    const int rows = off[lo + 1] - off[lo];
    const int mt = (rows + BM - 1) / BM;
    tile_at at;
    at.e = lo;
    const bool cols_fastest = flags & 2;
    at.row0 = off[lo] + (cols_fastest ? local / nt : local % mt) * BM;
    at.row_end = off[lo + 1];
    at.nb = cols_fastest ? local % nt : local / mt;
    return at;
}

/* What a consumer thread loads for its tile's epilogue before the main
 * loop, so that the loads' latency hides under it: the scales of its two
 * rows and of tile columns tw and tw + 128 (0 where past the weight). */
template <int BN> struct epi_loads {
    float sr0, sr1, sc[(BN + 127) / 128];
};

/* The expert's weight row of tile column t (-1: past N, or past I for a gated tile). */
template <int BN> __device__ __forceinline__ int weight_row(const tile_at &at, const kernel_params &p, int t)
{
    if (!p.gated) {
        const int c = at.nb * BN + t;
        return c < (int)p.N ? c : -1;
    }
    const int I = (int)p.N / 2, j = at.nb * (BN / 2) + (t < BN / 2 ? t : t - BN / 2);
    return j < I ? (t < BN / 2 ? j : I + j) : -1;
}

template <int BN>
__device__ __forceinline__ epi_loads<BN> load_scales(const tile_at &at, const kernel_params &p, int w, int tw)
{
    epi_loads<BN> l;
    const int r0 = at.row0 + w * 64 + (tw / 32) * 16 + (tw % 32) / 4;
    l.sr0 = r0 < at.row_end ? p.s_row[p.row_vec ? r0 : 0] : 0.0f;
    l.sr1 = r0 + 8 < at.row_end ? p.s_row[p.row_vec ? r0 + 8 : 0] : 0.0f;
#pragma unroll
    for (int j = 0; j < (BN + 127) / 128; j++) {
        const int c = tw + 128 * j < BN ? weight_row<BN>(at, p, tw + 128 * j) : -1;
        l.sc[j] = c >= 0 ? p.s_col[p.col_vec ? (int64_t)at.e * p.N + c : at.e] : 0.0f;
    }
    return l;
}

/* Epilogue of one warp group (64 rows): D = bf16(v * (s_row * s_col)), or
 * with gated the activation of each gate/up pair, into the staging buffer;
 * then each valid row goes out as one bulk copy, which runs while the warp
 * group starts its next tile. Fragment i of the m64nBN accumulator is row
 * 16*warp + lane/4 (+8 for i%4 >= 2), column 8*(i/4) + 2*(lane%4) (+1 for
 * odd i); a gated tile's up column t + BN/2 is fragment i + BN/4 of the
 * same thread as gate column t. Returns the max |a| of the valid
 * activations the thread wrote (gated with amax), else 0. */
template <int BN, bool PROMOTE>
__device__ __forceinline__ float store_tile(const float (&v)[BN / 2], const epi_loads<BN> &l, const tile_at &at,
                                            const kernel_params &p, int w, int tw, uint32_t out, float *scale)
{
    using C = kind_cfg<BN, PROMOTE>;
    const int lane = tw % 32, rl = (tw / 32) * 16 + lane / 4;
    if (tw < 64)
        bulk_wait_read(); /* this thread's previous row copy has left the buffer */
#pragma unroll
    for (int j = 0; j < (BN + 127) / 128; j++)
        if (tw + 128 * j < BN)
            scale[tw + 128 * j] = l.sc[j];
    wg_sync(1 + w);
    const int row = at.row0 + w * 64 + tw;
    float vmax = 0.0f;
    if (!p.gated) {
        const uint32_t o0 = out + rl * C::PITCH + 4 * (lane % 4), o1 = o0 + 8 * C::PITCH;
#pragma unroll
        for (int b = 0; b < BN / 8; b++) {
            const float2 sc = *reinterpret_cast<const float2 *>(scale + 8 * b + 2 * (lane % 4));
            st_shared_b32(o0 + 16 * b, bf16x2_bits(__fmul_rn(v[4 * b], __fmul_rn(l.sr0, sc.x)),
                                                   __fmul_rn(v[4 * b + 1], __fmul_rn(l.sr0, sc.y))));
            st_shared_b32(o1 + 16 * b, bf16x2_bits(__fmul_rn(v[4 * b + 2], __fmul_rn(l.sr1, sc.x)),
                                                   __fmul_rn(v[4 * b + 3], __fmul_rn(l.sr1, sc.y))));
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        wg_sync(1 + w);
        if (tw < 64 && row < at.row_end) {
            const int c0 = at.nb * BN, cols = min(BN, (int)p.N - c0);
            bulk_store(p.d + (int64_t)row * p.N + c0, out + tw * C::PITCH, (uint32_t)cols * 2);
        }
        return 0.0f;
    }
    /* Gated: rows r0 = row0 + rl and r0 + 8, activation columns j0 + cc, cc + 1. */
    constexpr int HALF = BN / 2;
    const int I = (int)p.N / 2, j0 = at.nb * HALF, r0 = at.row0 + w * 64 + rl;
    const bool want_amax = p.act.amax != nullptr;
#pragma unroll
    for (int b = 0; b < HALF / 8; b++) {
        const int cc = 8 * b + 2 * (lane % 4);
        const bool col_ok = j0 + cc < I;
        const float2 sg = *reinterpret_cast<const float2 *>(scale + cc);
        const float2 su = *reinterpret_cast<const float2 *>(scale + HALF + cc);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float sr = h ? l.sr1 : l.sr0;
            const int ig = 4 * b + 2 * h, iu = ig + HALF / 2;
            const float g0 = round_bf16(__fmul_rn(v[ig], __fmul_rn(sr, sg.x)));
            const float g1 = round_bf16(__fmul_rn(v[ig + 1], __fmul_rn(sr, sg.y)));
            const float u0 = round_bf16(__fmul_rn(v[iu], __fmul_rn(sr, su.x)));
            const float u1 = round_bf16(__fmul_rn(v[iu + 1], __fmul_rn(sr, su.y)));
            bool ok0, ok1;
            const float f0 = fmcu_act::act_bf16_fast(p.act.limit, g0, u0, ok0);
            const float f1 = fmcu_act::act_bf16_fast(p.act.limit, g1, u1, ok1);
            const uint32_t bits = bf16x2_bits(f0, f1);
            st_shared_b32(out + (rl + 8 * h) * C::APITCH + 2 * cc, bits);
            const bool valid = col_ok && r0 + 8 * h < at.row_end;
            if (want_amax && valid) {
                const __nv_bfloat162 a2 = *reinterpret_cast<const __nv_bfloat162 *>(&bits);
                vmax = ok0 ? fmcu_act::amax_step(vmax, __low2float(a2)) : vmax;
                vmax = ok1 ? fmcu_act::amax_step(vmax, __high2float(a2)) : vmax;
            }
            if (valid && !(ok0 && ok1)) {
                const int64_t at0 = (int64_t)(r0 + 8 * h) * I + j0 + cc;
                const float gs[2] = {g0, g1}, us[2] = {u0, u1};
                const bool oks[2] = {ok0, ok1};
#pragma unroll
                for (int q = 0; q < 2; q++)
                    if (!oks[q]) {
                        *reinterpret_cast<__nv_bfloat162 *>(p.act.gu + 2 * (at0 + q)) =
                            __floats2bfloat162_rn(gs[q], us[q]);
                        atomicOr(p.act.slow + ((at0 + q) >> 5), 1u << ((at0 + q) & 31));
                    }
            }
        }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wg_sync(1 + w);
    if (tw < 64 && row < at.row_end) {
        const int cols = min(HALF, I - j0);
        bulk_store(p.act.out + (int64_t)row * I + j0, out + tw * C::APITCH, (uint32_t)cols * 2);
    }
    return vmax;
}

/* The four wgmmas of one 128-K stage into a (scale-d 0 on the first unless
 * `add`), committed as one group. */
template <int BN>
__device__ __forceinline__ void issue_stage(float (&a)[BN / 2], uint32_t stage_addr, int w, bool add)
{
    const uint64_t da = sw128_desc(stage_addr + w * 64 * BK), db = sw128_desc(stage_addr + A_BYTES);
    fence_regs(a);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 32; k++)
        wgmma_tile<BN>(a, da + 2 * k, db + 2 * k, add || k > 0);
    wgmma_commit();
}

template <int R> __device__ __forceinline__ void add_into(float (&f)[R], float (&a)[R])
{
    fence_regs(a);
#pragma unroll
    for (int i = 0; i < R; i++)
        f[i] += a[i];
}

/* The consumer's ring position. */
struct ring {
    int stage = 0;
    uint32_t phase = 0;
    __device__ __forceinline__ void next(int stages)
    {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1;
        }
    }
};

template <int BN, bool PROMOTE>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_grouped_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const kernel_params p)
{
    using C = kind_cfg<BN, PROMOTE>;
    constexpr int STAGES = C::STAGES;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    __shared__ int pre[FMCU_FP8G_MAX_EXPERTS + 1], off[FMCU_FP8G_MAX_EXPERTS + 1];

    /* Stage s: A at base + s * STAGE_BYTES, B after it; both 1024-aligned. */
    const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
    const int E = (int)p.E, KB = (int)((p.K + BK - 1) / BK);
    const int nt = p.gated ? (int)((p.N / 2 + BN / 2 - 1) / (BN / 2)) : (int)((p.N + BN - 1) / BN);

    for (int e = threadIdx.x; e <= E; e += THREADS)
        off[e] = p.offsets[e];
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), 8); /* lane 0 of each consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    /* Prefix of tile counts by warp 0: lane l scans a contiguous chunk. */
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x, chunk = (E + 31) / 32;
        const int lo = min(E, lane * chunk), hi = min(E, lo + chunk);
        int sum = 0;
        for (int e = lo; e < hi; e++)
            sum += (off[e + 1] - off[e] + BM - 1) / BM * nt;
        int incl = sum;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, incl, d);
            if (lane >= d)
                incl += v;
        }
        int run = incl - sum;
        for (int e = lo; e < hi; e++) {
            pre[e] = run;
            run += (off[e + 1] - off[e] + BM - 1) / BM * nt;
        }
        if (lane == 31)
            pre[E] = incl;
    }
    __syncthreads();
    const int total = pre[E];
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x != 0)
            return;
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_a) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_b) : "memory");
        int stage = 0;
        uint32_t phase = 0;
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            const tile_at at = find_tile(t, pre, off, E, nt, p.flags);
            /* B rows: BN from brow, or BN/2 gate rows from brow and BN/2 up rows from brow2. */
            const int brow = at.e * (int)p.N + at.nb * (p.gated ? BN / 2 : BN);
            const int brow2 = brow + (int)p.N / 2;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(smem_addr(&empty[stage]), phase ^ 1);
                const uint32_t fb = smem_addr(&full[stage]);
                const uint32_t sa = base + stage * C::STAGE_BYTES;
                mbar_expect_tx(fb, C::STAGE_BYTES);
                tma_load(sa, &map_a, kb * BK, at.row0, fb);
                tma_load(sa + A_BYTES, &map_b, kb * BK, brow, fb);
                if (p.gated)
                    tma_load(sa + A_BYTES + BN / 2 * BK, &map_b, kb * BK, brow2, fb);
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int w = wg - 1, tw = threadIdx.x % 128, lane = threadIdx.x % 32;
    const uint32_t out = base + C::EPI_AT + w * C::OUT_BYTES;
    float *scale = reinterpret_cast<float *>(smem_raw + (base - smem_addr(smem_raw)) + C::SCALE_AT) + w * BN;
    auto full_of = [&](int s) { return smem_addr(&full[s]); };
    auto release = [&](int s) {
        if (lane == 0)
            mbar_arrive(smem_addr(&empty[s]));
    };
    float acc[BN / 2];
    float fin[PROMOTE ? BN / 2 : 1];
    float vmax = 0.0f; /* gated with amax: max |a| of this thread's activations */
    ring r;
    for (int t = blockIdx.x; t < total; t += gridDim.x) {
        const tile_at at = find_tile(t, pre, off, E, nt, p.flags);
        const epi_loads<BN> l = load_scales<BN>(at, p, w, tw);
        if constexpr (PROMOTE) {
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                fin[i] = 0.0f;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(full_of(r.stage), r.phase);
                issue_stage<BN>(acc, base + r.stage * C::STAGE_BYTES, w, false);
                wgmma_wait<0>();
                release(r.stage);
                add_into(fin, acc);
                r.next(STAGES);
            }
        } else {
            int prev = -1; /* the stage whose wgmmas may still run */
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(full_of(r.stage), r.phase);
                issue_stage<BN>(acc, base + r.stage * C::STAGE_BYTES, w, kb > 0);
                wgmma_wait<1>();
                if (prev >= 0)
                    release(prev);
                prev = r.stage;
                r.next(STAGES);
            }
            wgmma_wait<0>();
            fence_regs(acc);
            if (prev >= 0)
                release(prev);
        }
        if (p.flags & 1)
            continue;
        float m;
        if constexpr (PROMOTE)
            m = store_tile<BN, PROMOTE>(fin, l, at, p, w, tw, out, scale);
        else
            m = store_tile<BN, PROMOTE>(acc, l, at, p, w, tw, out, scale);
        vmax = m > vmax ? m : vmax;
    }
    if (tw < 64)
        bulk_wait_all();
    if (p.gated && p.act.amax) {
        vmax = fmcu_act::warp_max(vmax);
        if (lane == 0 && vmax > 0.0f)
            atomicMax(p.act.amax, __float_as_uint(vmax));
    }
}

/* ---- host ------------------------------------------------------------ */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver's encoder through the runtime (the plugin links no libcuda). */
encode_tiled_fn encoder()
{
    static std::atomic<encode_tiled_fn> fn{nullptr};
    encode_tiled_fn f = fn.load(std::memory_order_acquire);
    if (!f) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !p) {
            cudaGetLastError();
            return nullptr;
        }
        f = (encode_tiled_fn)p;
        fn.store(f, std::memory_order_release);
    }
    return f;
}

/* A [rows, cols] e4m3 matrix, row-major, loaded in boxes of box_rows x 128 B. */
bool encode(CUtensorMap *map, const void *base, uint64_t rows, uint64_t cols, uint32_t box_rows)
{
    encode_tiled_fn f = encoder();
    if (!f)
        return false;
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {cols};
    const cuuint32_t box[2] = {(cuuint32_t)BK, box_rows};
    const cuuint32_t elem[2] = {1, 1};
    return f(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(base), dims, strides, box, elem,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BN, bool PROMOTE> cudaError_t launch_kind(const fmcu_fp8g_args *a, int sms, cudaStream_t st)
{
    using C = kind_cfg<BN, PROMOTE>;
    CUtensorMap map_a, map_b;
    if (!encode(&map_a, a->a, (uint64_t)a->rows_cap, a->K, BM) ||
        !encode(&map_b, a->b, (uint64_t)a->E * a->N, a->K, a->act ? BN / 2 : BN))
        return cudaErrorInvalidValue;
    kernel_params p;
    p.d = a->d;
    p.s_row = a->s_row;
    p.s_col = a->s_col;
    p.offsets = a->offsets;
    p.row_vec = a->row_vec;
    p.col_vec = a->col_vec;
    p.E = a->E;
    p.N = a->N;
    p.K = a->K;
    p.gated = a->act != nullptr;
    p.act = a->act ? *a->act : fmcu_fp8g_act{};
    p.flags = 0;
#if defined(FMCU_FP8G_TUNING)
    if (const char *f = getenv("FP8G_FLAGS"))
        p.flags = atoi(f);
#endif
    auto kernel = fp8_grouped_kernel<BN, PROMOTE>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
    if (e != cudaSuccess)
        return e;
    /* More CTAs than tiles would only wait: at most ceil(rows/128) + E row blocks. */
    const int64_t tiles = ((a->rows_cap + BM - 1) / BM + a->E) * (int64_t)((a->N + BN - 1) / BN + 1);
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    kernel<<<grid, THREADS, C::SMEM, st>>>(map_a, map_b, p);
    return cudaGetLastError();
}

} // namespace

cudaError_t fmcu_fp8g_launch(const fmcu_fp8g_args *a, fmcu_fp8g_kind kind, int sms, cudaStream_t st)
{
    if (!a || a->E == 0 || a->E > FMCU_FP8G_MAX_EXPERTS || a->K == 0 || a->K % 16 || a->N == 0 || a->N % 16 ||
        a->rows_cap <= 0 || a->rows_cap > INT32_MAX || (uint64_t)a->E * a->N > INT32_MAX || sms <= 0 ||
        ((uintptr_t)a->a | (uintptr_t)a->b) % 16 || (a->col_vec && (uintptr_t)a->s_col % 8) ||
        (a->act ? a->N % 32 || !a->act->out || !a->act->gu || !a->act->slow || (uintptr_t)a->act->out % 16
                : !a->d || (uintptr_t)a->d % 16))
        return cudaErrorInvalidValue;
    switch (kind) {
    case FMCU_FP8G_N128_PROMOTED: return launch_kind<128, true>(a, sms, st);
    case FMCU_FP8G_N192_PROMOTED: return launch_kind<192, true>(a, sms, st);
    case FMCU_FP8G_N256_FAST: return launch_kind<256, false>(a, sms, st);
    case FMCU_FP8G_N128_FAST: return launch_kind<128, false>(a, sms, st);
    default: return cudaErrorInvalidValue;
    }
}
