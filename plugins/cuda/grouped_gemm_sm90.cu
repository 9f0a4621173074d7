/*
 * plugins/cuda/grouped_gemm_sm90.cu - our grouped GEMM for Hopper, e4m3 or
 * bf16 operands (contract in grouped_gemm.h).
 *
 * One persistent CTA per SM, three warp groups:
 *   WG0  producer: one thread walks the CTA's tiles and issues two TMA
 *        loads per 128-K block (A: 128 rows x 128 B, B: BN rows x 128 B,
 *        128-byte swizzle) into a ring of STAGES shared-memory stages,
 *        each guarded by a full and an empty mbarrier;
 *   WG1, WG2  consumers: rows 0-63 and 64-127 of the tile, four wgmma
 *        m64nBNk32 (e4m3) or m64nBNk16 (bf16) per stage from shared
 *        memory, then release the stage.
 * The e2m1 kinds (w4, prefill_dequant_fused) add WG3 and WG4: the
 * converters, which turn each stage's TMA-loaded e2m1 codes and block
 * scales into the bf16 B stage (half of its rows each) and arrive on the
 * stage's `conv` barrier, which the consumers wait on instead of the
 * TMA's (640 threads).
 * The int4 kind (w4 = FMCU_GG_W4_INT4: int4 codes with f32 scales per
 * 128-column group, and zero points) converts the same way, q - 8 - zp as
 * bf16 (exact), and writes the stage's group scales beside it; its
 * consumers restart the accumulator at each group's first stage and add
 * the group's sum times its column scales into a second f32 set once the
 * group's wgmmas complete (a dequantized int4 weight times its scale is
 * not a bf16 value, so the scale cannot go into the operand). It has the
 * e2m1 kinds' 640 threads and five stages, and releases a group's first
 * stage as soon as that stage's wgmmas complete (H200, GEMM1 at M = 8192,
 * against one converter group, four stages and both released after the
 * promotion: Qwen3-30B-A3B 1117 -> 968 us, Mixtral 8734 -> 7851,
 * DeepSeek-V3 8781 -> 8025; bench/cuda/RESULTS.md).
 * The producer runs ahead by up to STAGES blocks, across tile boundaries,
 * so the next tile's operands arrive while the consumers store this one.
 *
 * Tiles. Expert e has mt_e = ceil(M_e / 128) row blocks and nt = ceil(N /
 * BN) column blocks; tiles are numbered expert by expert, and inside an
 * expert column block by column block, row block fastest: the CTAs that
 * run at the same time share each weight tile through L2. Every CTA builds
 * the prefix of tile counts from the offsets in shared memory and finds a
 * tile's expert by binary search, so the grid does not depend on the
 * routing (graph capture). An expert's last row block of at most 64 rows
 * is a half tile: 64 rows, each consumer warp group half of the columns
 * (m64n(BN/2) wgmmas), half the work of a whole tile. CTA b takes tile b,
 * then tiles b + grid, b + 2 grid, ... (fast kinds) or the next untaken
 * one from a counter in global memory (promoted kinds, so that the tiles
 * in flight stay consecutive however their costs differ); either way the
 * producer passes the tile's number to the consumers with its first stage.
 *
 * Accumulation. Promoted kinds keep a second set of f32 registers: each
 * 128-K block's four wgmmas start from zero (scale-d = 0), and after the
 * warp group waits for them their sum is added to it, as CUTLASS's
 * promoted FP8 main loop does with an interval of one K tile, so the two
 * compute the same f32 additions. Fast kinds accumulate all of K in wgmma
 * and keep one wgmma batch in flight (wait_group 1). The fp8 block kind
 * (128 x 128 weight blocks, 1 x 128 activation groups: DeepSeek-V3's
 * scheme) promotes each stage's sum times a_scale x w_scale, fused into
 * the add (fin = fma(acc, s, fin)), from two accumulators in turn so that
 * a stage's promotion overlaps the next stage's wgmmas; its 128-column
 * tiles keep each warp group's columns inside one weight block (a half
 * tile's 64 as well), so a thread needs three scales a stage.
 *
 * Epilogue. D = bf16_rn(acc * (s_row * s_col)), the CUTLASS epilogue tree's
 * arithmetic, plus the bias where there is one (bf16_rn(acc * s + b), two
 * roundings, as the mma.sync kernels' x *= s; x += b) (outputs
 * bit-identical to CUTLASS's kernels: H100, all eight
 * fp8 and eight bf16 M=1024/8192 bench points, bench/cuda/RESULTS.md at 5ddad69,
 * "Prefill: our grouped GEMM"). Each consumer warp group writes its 64 rows
 * to a swizzled staging buffer in shared memory, which leaves by tensor
 * stores that run while the warp group starts the next tile (an expert's
 * partial last row block is copied out by the threads: rows past the
 * expert's end are never stored). Storing straight from registers (4-byte
 * stores, 8 rows per warp instruction) ran the GEMMs at half speed, and one
 * bulk copy per row was still the bottleneck of short-K GEMMs (Qwen3-30B-A3B
 * GEMM2 at M=8192: 599 us from registers, 273 us by rows, 160 us without
 * stores).
 */
#include "plugins/cuda/grouped_gemm.h"
#include "plugins/cuda/gg_tiles.cuh"
#include "plugins/cuda/mbarrier.cuh"
#include "plugins/cuda/tensor_map.h"
#include "plugins/cuda/wgmma_ops.cuh"
#include "plugins/cuda/wgmma_sync.cuh"
#include "plugins/cuda/wq_dev.cuh"

#include <cuda.h> /* CUtensorMap and the encoder's signature; the function comes from the runtime */
#include <cuda_bf16.h>

#include <type_traits>

namespace {

using fmcu_async::mbar_arrive;
using fmcu_gg::find_tile;
using fmcu_gg::ring;
using fmcu_gg::tile_at;
using fmcu_gg::tile_prefix;
using fmcu_gg::wg_sync;
using fmcu_gg::bf16x2_bits;
using fmcu_async::mbar_expect_tx;
using fmcu_async::mbar_init;
using fmcu_async::mbar_wait;
using fmcu_async::smem_addr;
using fmcu_async::tma_load;
using fmcu_wgmma::fence_regs;
using fmcu_wgmma::sw128_desc;
using fmcu_wgmma::wgmma_commit;
using fmcu_wgmma::wgmma_fence;
using fmcu_wgmma::wgmma_wait;

constexpr int BM = fmcu_gg::TILE_ROWS; /* rows per tile: two warp groups of 64 */
constexpr int BK = 128;          /* bytes of K per stage: one 128-byte swizzle row (128 e4m3 or 64 bf16) */
constexpr int THREADS = 384;     /* producer + two consumer warp groups */
constexpr int A_BYTES = BM * BK; /* 16 KB */
/* e2m1 kinds (W4 = the block size): two more warp groups convert each
 * stage's codes into the bf16 B operand in shared memory. Two, not one:
 * a lone converter warp per scheduler issued on about a quarter of its
 * cycles (ncu at
 * Qwen3-30B-A3B MXFP4 M = 1024: fixed-latency and L1TEX waits), about
 * 1400 cycles a stage against 256 for the half tile's wgmmas. */
constexpr int THREADS_W4 = 640;
constexpr int W4_THREADS = 256;
/* Registers per thread by role (setmaxnreg). A CTA's pool is what its
 * launch allocated, threads x the kernel's count (the 64K file over the
 * threads, in steps of 8: 168 at 384, 96 at 640, as ptxas -v reports),
 * not the SM's 64K: a setmaxnreg.inc that the pool cannot grant waits
 * forever. ptxas allocates each role's code within its count (spills show
 * in -v: none at these). */
constexpr int launch_regs(int threads)
{
    return (65536 / threads) & ~7;
}
constexpr int REGS_PRODUCER = 40, REGS_CONSUMER = 232, REGS_CONSUMER_W4 = 168, REGS_CONVERTER = 48;
static_assert(REGS_PRODUCER * 128 + REGS_CONSUMER * 256 <= launch_regs(THREADS) * THREADS,
              "pool of the 384-thread kinds");
static_assert(REGS_PRODUCER * 128 + REGS_CONSUMER_W4 * 256 + REGS_CONVERTER * W4_THREADS <=
                  launch_regs(THREADS_W4) * THREADS_W4,
              "pool of the e2m1 kinds");
constexpr int W4_INT4 = FMCU_GG_W4_INT4; /* the int4 kind's W4 (not a block size) */
/* Threads of a launch by kind (the int4 kind's converters: W4_THREADS). */
template <int W4> constexpr int KIND_THREADS = W4 ? THREADS_W4 : THREADS;
constexpr int INT4_GROUP = 128;           /* its scale group: two 64-column stages */
constexpr int W4_CHUNK = 16;              /* bytes of codes per 32 columns (wq_pack.h) */
constexpr int W4_ROW = 2 * W4_CHUNK; /* bytes of codes per row and stage (64 columns) */

template <int BN, int W4 = 0> struct kind_cfg {
    /* Shared memory: STAGES operand stages, then per consumer warp group a
     * staging buffer of its 64 output rows (BN/64 boxes of 64 rows x 128 B,
     * 128-byte swizzled: the tensor store's layout, and the fragment
     * stores of a warp's 8 rows hit distinct banks) and its BN column
     * scales and biases. Stages are what is left of 227 KB (int4: 5 x
     * 36 KB with its codes, + 32 KB staging + 4.5 KB scales = 217.5 KB). */
    static constexpr int STAGES = W4 == W4_INT4 ? 5 : W4 ? 4 : BN == 128 ? 5 : BN == 192 ? 4 : 3;
    static constexpr int B_BYTES = BN * BK;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int OUT_BYTES = 64 * BN * 2; /* BN/64 boxes of 64 rows x 128 B */
    /* e2m1: each stage's codes (BN rows x 32 bytes, by TMA) after the stages. */
    static constexpr int CODE_BYTES = W4 ? BN * W4_ROW : 0;
    static constexpr int CODE_AT = STAGES * STAGE_BYTES;
    static constexpr int EPI_AT = CODE_AT + STAGES * CODE_BYTES;
    static constexpr int SCALE_AT = EPI_AT + 2 * OUT_BYTES;
    static constexpr int BIAS_AT = SCALE_AT + 2 * BN * (int)sizeof(float);
    /* int4: each stage's BN group scales, written by the converters. */
    static constexpr int GSCALE_AT = BIAS_AT + 2 * BN * (int)sizeof(float);
    static constexpr int GSCALE_BYTES = W4 == W4_INT4 ? STAGES * BN * (int)sizeof(float) : 0;
    static constexpr size_t SMEM = (size_t)GSCALE_AT + GSCALE_BYTES + 1024; /* + alignment of the swizzle atoms */
    static_assert(SMEM <= 227 * 1024, "a kind's shared memory fits an SM's 227 KB");
};

/* ---- PTX wrappers ---------------------------------------------------- */

/* 2-D tile store from shared memory (bulk_group completion). */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, int c0, int c1, uint32_t src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     (uint64_t)map),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
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


/* One wgmma of 32 bytes of K (k32 e4m3 or k16 bf16) over NW columns: a
 * tile's BN, or half of it where the warp groups split a half tile's
 * columns. */
template <int NW, bool BF16>
__device__ __forceinline__ void wgmma_tile(float (&d)[NW / 2], uint64_t da, uint64_t db, int acc)
{
    static_assert(NW == 64 || NW == 96 || NW == 128 || NW == 192 || NW == 256, "no wgmma wrapper of this width");
    if constexpr (BF16) {
        if constexpr (NW == 64)
            fmcu_wgmma::wgmma_m64n64k16_bf16(d, da, db, acc);
        else if constexpr (NW == 96)
            fmcu_wgmma::wgmma_m64n96k16_bf16(d, da, db, acc);
        else if constexpr (NW == 128)
            fmcu_wgmma::wgmma_m64n128k16_bf16(d, da, db, acc);
        else if constexpr (NW == 192)
            fmcu_wgmma::wgmma_m64n192k16_bf16(d, da, db, acc);
        else
            fmcu_wgmma::wgmma_m64n256k16_bf16(d, da, db, acc);
    } else {
        if constexpr (NW == 64)
            fmcu_wgmma::wgmma_m64n64k32_e4m3(d, da, db, acc);
        else if constexpr (NW == 96)
            fmcu_wgmma::wgmma_m64n96k32_e4m3(d, da, db, acc);
        else if constexpr (NW == 128)
            fmcu_wgmma::wgmma_m64n128k32_e4m3(d, da, db, acc);
        else if constexpr (NW == 192)
            fmcu_wgmma::wgmma_m64n192k32_e4m3(d, da, db, acc);
        else
            fmcu_wgmma::wgmma_m64n256k32_e4m3(d, da, db, acc);
    }
}

/* ---- tiles ----------------------------------------------------------- */

struct kernel_params {
    __nv_bfloat16 *d;
    const float *s_row, *s_col;
    const __nv_bfloat16 *bias; /* [E, N] or NULL */
    const int32_t *offsets;
    int row_vec, col_vec;
    uint32_t E, N, K;
    int *sched; /* [2] the next tile past the first wave, CTAs done (zero between launches) */
    int halves; /* an expert's last row block of at most 64 rows is a half tile */
    const uint8_t *sf8; /* e2m1: block scale codes [E, N, kp / W4] */
    uint32_t kp;        /* e2m1: padded K of the codes (wq_pack.h) */
    int sf16;           /* e2m1: every row's block scale codes start 16-byte aligned (load_sf) */
    const float *gscale; /* int4: scales [E, N, groups] */
    const int8_t *zero;  /* int4: zero points [E, N, groups] (bias removed), or NULL */
    uint32_t groups;     /* int4: scale groups a row */
    const float *a_sf, *b_sf; /* fp8 block scales (grouped_gemm.h), or NULL */
    int fixed_order; /* tiles b, b + grid, ... instead of the counter's (grouped_gemm.h, FMCU_GG_ORDER_*) */
};

/* What a consumer thread loads for its epilogue before the main loop, so
 * that the loads' latency hides under it: the scales of its two rows and of
 * its warp group's columns tw and tw + 128 (0 where past the weight). The
 * warp group's 64 rows start at r_base, its NW columns at c0. */
template <int NW> struct epi_loads {
    float sr0, sr1, sc[(NW + 127) / 128], sb[(NW + 127) / 128];
};

template <int NW>
__device__ __forceinline__ epi_loads<NW> load_scales(const tile_at &at, const kernel_params &p, int r_base, int c0,
                                                     int tw)
{
    epi_loads<NW> l;
    const int r0 = r_base + (tw / 32) * 16 + (tw % 32) / 4;
    l.sr0 = !p.s_row ? 1.0f : r0 < at.row_end ? p.s_row[p.row_vec ? r0 : 0] : 0.0f;
    l.sr1 = !p.s_row ? 1.0f : r0 + 8 < at.row_end ? p.s_row[p.row_vec ? r0 + 8 : 0] : 0.0f;
#pragma unroll
    for (int j = 0; j < (NW + 127) / 128; j++) {
        const int c = c0 + tw + 128 * j;
        const bool in = tw + 128 * j < NW && c < (int)p.N;
        l.sc[j] = !p.s_col ? 1.0f : in ? p.s_col[p.col_vec ? (int64_t)at.e * p.N + c : at.e] : 0.0f;
        l.sb[j] = p.bias && in ? __bfloat162float(p.bias[(int64_t)at.e * p.N + c]) : 0.0f;
    }
    return l;
}

/* Epilogue of one warp group (64 rows from r0, NW columns from c0): D =
 * bf16(v * (s_row * s_col) (+ bias)) into the staging buffer; when all 64 rows
 * belong to the tile's expert and the columns are whole 64-column boxes,
 * one thread sends the NW/64 boxes with tensor stores that run while the
 * warp group starts its next tile (the map clips columns past N), else the
 * warp group copies the expert's rows out itself (an expert's last, partial
 * row block; a half tile's 96-column halves). Fragment i of the m64nBN accumulator is row 16*warp + lane/4
 * (+8 for i%4 >= 2), column 8*(i/4) + 2*(lane%4) (+1 for odd i). One bulk
 * copy per row (64 per warp group and tile) was 5-7% slower at short K
 * (GEMM2 of Qwen3-30B-A3B at M=8192: 273 us against 258; 160 us without
 * stores: the rest is both warp groups converting while the tensor cores
 * wait; bench/cuda/RESULTS.md at 5ddad69, "Prefill: our grouped GEMM"). */
template <int NW>
__device__ __forceinline__ void store_tile(const float (&v)[NW / 2], const epi_loads<NW> &l, int r0, int row_end,
                                           int c0, const kernel_params &p, const CUtensorMap *map_d, int w, int tw,
                                           uint32_t out, float *scale, float *bias)
{
    const int lane = tw % 32, rl = (tw / 32) * 16 + lane / 4;
    if (tw == 0)
        bulk_wait_read(); /* the previous tile's tensor stores have left the buffer */
#pragma unroll
    for (int j = 0; j < (NW + 127) / 128; j++)
        if (tw + 128 * j < NW) {
            scale[tw + 128 * j] = l.sc[j];
            bias[tw + 128 * j] = l.sb[j];
        }
    wg_sync(1 + w);
    /* Rows rl and rl + 8 have the same swizzle (row % 8 = lane / 4). */
    const uint32_t o0 = out + rl * 128 + 4 * (lane % 4), o1 = o0 + 8 * 128, sw = lane / 4;
    /* Two loops rather than a test per value: the common case adds nothing. */
    auto convert = [&](auto with_bias) {
#pragma unroll
        for (int b = 0; b < NW / 8; b++) {
            const int c = 8 * b + 2 * (lane % 4);
            const float2 sc = *reinterpret_cast<const float2 *>(scale + c);
            float x[4] = {__fmul_rn(v[4 * b], __fmul_rn(l.sr0, sc.x)), __fmul_rn(v[4 * b + 1], __fmul_rn(l.sr0, sc.y)),
                          __fmul_rn(v[4 * b + 2], __fmul_rn(l.sr1, sc.x)),
                          __fmul_rn(v[4 * b + 3], __fmul_rn(l.sr1, sc.y))};
            if constexpr (decltype(with_bias)::value) {
                const float2 bb = *reinterpret_cast<const float2 *>(bias + c);
                x[0] = __fadd_rn(x[0], bb.x);
                x[1] = __fadd_rn(x[1], bb.y);
                x[2] = __fadd_rn(x[2], bb.x);
                x[3] = __fadd_rn(x[3], bb.y);
            }
            const uint32_t at_b = (b / 8) * 8192 + (((b % 8) ^ sw) << 4);
            st_shared_b32(o0 + at_b, bf16x2_bits(x[0], x[1]));
            st_shared_b32(o1 + at_b, bf16x2_bits(x[2], x[3]));
        }
    };
    if (p.bias)
        convert(std::true_type{});
    else
        convert(std::false_type{});
    fmcu_async::fence_async_shared();
    wg_sync(1 + w);
    const int rows = min(64, row_end - r0);
    if (rows == 64 && NW % 64 == 0) {
        if (tw == 0) {
#pragma unroll
            for (int q = 0; q < NW / 64; q++)
                if (c0 + 64 * q < (int)p.N)
                    tma_store(map_d, c0 + 64 * q, r0, out + q * 8192);
            bulk_commit();
        }
        return;
    }
    /* 16-byte chunks of the valid rows, read back through the swizzle. */
    for (int i = tw; i < rows * (NW / 8); i += 128) {
        const int r = i / (NW / 8), cb = i % (NW / 8), c = c0 + 8 * cb;
        if (c >= (int)p.N)
            continue;
        uint4 x;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
                     : "r"(out + (cb / 8) * 8192 + r * 128 + (((cb % 8) ^ (r % 8)) << 4)));
        *reinterpret_cast<uint4 *>(p.d + (int64_t)(r0 + r) * p.N + c) = x;
    }
}

/* The four wgmmas of one 128-K stage into a (scale-d 0 on the first unless
 * `add`), committed as one group: the warp group's 64 A rows at a_addr,
 * its NW B rows at b_addr. */
template <int NW, bool BF16>
__device__ __forceinline__ void issue_stage(float (&a)[NW / 2], uint32_t a_addr, uint32_t b_addr, bool add)
{
    const uint64_t da = sw128_desc(a_addr), db = sw128_desc(b_addr);
    fence_regs(a);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 32; k++)
        wgmma_tile<NW, BF16>(a, da + 2 * k, db + 2 * k, add || k > 0);
    wgmma_commit();
}

template <int R> __device__ __forceinline__ void add_into(float (&f)[R], float (&a)[R])
{
    fence_regs(a);
#pragma unroll
    for (int i = 0; i < R; i++)
        f[i] += a[i];
}

/* Where a consumer thread reads its block scales (fp8 block kind): its two
 * rows' activation scales (grouped M-major: a_step floats from one K group
 * to the next; rows past the expert's end read its last row's, never
 * stored) and its columns' weight block's scales, K group by K group. */
struct blk_scales {
    const float *a0, *a1, *b;
    int a_step;
};

template <bool BLK>
__device__ __forceinline__ blk_scales block_scales_of(const tile_at &at, const kernel_params &p, int r_base, int c0,
                                                      int tw)
{
    blk_scales bs = {};
    if constexpr (BLK) {
        const int64_t kg = p.K / 128;
        const int r0 = r_base + (tw / 32) * 16 + (tw % 32) / 4;
        const int l0 = min(r0, at.row_end - 1) - at.start, l1 = min(r0 + 8, at.row_end - 1) - at.start;
        bs.a0 = p.a_sf + at.start * kg + l0;
        bs.a1 = p.a_sf + at.start * kg + l1;
        bs.a_step = at.row_end - at.start;
        bs.b = p.b_sf + ((int64_t)at.e * (p.N / 128) + c0 / 128) * kg;
    }
    return bs;
}

/* One warp group's main loop over a tile's KB stages: its 64 A rows at
 * a_off and NW B rows at b_off inside each stage. Promoted and scaled
 * kinds leave the sum in fin, fast kinds in acc. `full` says a stage's
 * operands are ready (e2m1 and int4 kinds: the converter's barrier, which
 * follows the TMA's). Scaled (int4): each 128-column group's two stages
 * accumulate from zero, then fin += acc x the group's column scales, which
 * the converters left for the stage at gs + stage x BN (the warp group's
 * first column; read before the stage is released). */
template <int NW, bool PROMOTE, bool BF16, int STAGES, int STAGE_BYTES, bool SCALED = false, int BN = 0,
          bool BLK = false>
__device__ __forceinline__ void main_loop(float (&acc)[NW / 2], float (&fin)[PROMOTE || SCALED ? NW / 2 : 1],
                                          ring &r, int KB, uint32_t base, uint32_t a_off, uint32_t b_off,
                                          uint64_t *full, uint64_t *empty, int lane, const float *gs,
                                          const blk_scales &bs)
{
    auto release = [&](int s) {
        if (lane == 0)
            mbar_arrive(smem_addr(&empty[s]));
    };
    if constexpr (SCALED) {
#pragma unroll
        for (int i = 0; i < NW / 2; i++)
            fin[i] = 0.0f;
        /* A group's second stage is issued behind its first without a
         * wait (the same accumulator); the first stage is released once its
         * batch completes, then the group's wait, its promotion and the
         * second stage's release follow. Straight-line: a wgmma batch in flight
         * across a branch makes ptxas serialize them (C7518). */
        auto promote = [&](int stage) {
            const float *g = gs + stage * BN;
            fence_regs(acc);
#pragma unroll
            for (int b = 0; b < NW / 8; b++) {
                const float2 sc = *reinterpret_cast<const float2 *>(g + 8 * b + 2 * (lane % 4));
                fin[4 * b] = __fmaf_rn(acc[4 * b], sc.x, fin[4 * b]);
                fin[4 * b + 1] = __fmaf_rn(acc[4 * b + 1], sc.y, fin[4 * b + 1]);
                fin[4 * b + 2] = __fmaf_rn(acc[4 * b + 2], sc.x, fin[4 * b + 2]);
                fin[4 * b + 3] = __fmaf_rn(acc[4 * b + 3], sc.y, fin[4 * b + 3]);
            }
        };
        for (int kb = 0; kb + 1 < KB; kb += 2) {
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            const int s0 = r.stage;
            issue_stage<NW, BF16>(acc, base + s0 * STAGE_BYTES + a_off, base + s0 * STAGE_BYTES + A_BYTES + b_off,
                                  false);
            r.next(STAGES);
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            const int s1 = r.stage;
            issue_stage<NW, BF16>(acc, base + s1 * STAGE_BYTES + a_off, base + s1 * STAGE_BYTES + A_BYTES + b_off,
                                  true);
            wgmma_wait<1>(); /* the first stage's batch: its operands are free */
            release(s0);
            wgmma_wait<0>();
            promote(s1);
            release(s1);
            r.next(STAGES);
        }
        if (KB % 2) { /* a last group of one stage */
            const int s0 = r.stage;
            mbar_wait(smem_addr(&full[s0]), r.phase);
            issue_stage<NW, BF16>(acc, base + s0 * STAGE_BYTES + a_off, base + s0 * STAGE_BYTES + A_BYTES + b_off,
                                  false);
            wgmma_wait<0>();
            promote(s0);
            release(s0);
            r.next(STAGES);
        }
    } else if constexpr (PROMOTE && BLK) {
        /* fp8 block scales: each stage is one 128-K group, its sum times
         * s = a_scale x w_scale (one product per row, as CUTLASS's
         * blockwise promotion) added into fin. Two accumulators in turn:
         * stage j's wgmmas are issued before stage j - 1's sum is promoted,
         * so the promotion (and the wait for its batch) overlaps the next
         * MMAs, DeepGEMM's point, instead of draining the tensor cores each
         * stage (11 % off Qwen3-30B-A3B's GEMM1 at M = 8192, 2-3 % at the
         * others: bench/cuda/RESULTS.md at 7426a60, "FP8 block"). A stage's three
         * scales load as it is issued, a batch ahead of their use (two
         * ahead measured the same). Even stages run in acc, odd ones in
         * acc2; the loop goes two stages a turn so that each is a fixed
         * register array, with a batch in flight across its back edge as
         * in the fast kinds. */
        float acc2[NW / 2];
#pragma unroll
        for (int i = 0; i < NW / 2; i++)
            fin[i] = 0.0f;
        float sp0, sp1, ca0, ca1, cb; /* the promoted stage's scales; the issued one's */
        int prev;                      /* the ring stage whose batch is oldest in flight */
        auto issue = [&](float(&a)[NW / 2], int kb) {
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            const uint32_t st = base + r.stage * STAGE_BYTES;
            issue_stage<NW, BF16>(a, st + a_off, st + A_BYTES + b_off, false);
            ca0 = bs.a0[(int64_t)kb * bs.a_step];
            ca1 = bs.a1[(int64_t)kb * bs.a_step];
            cb = bs.b[kb];
        };
        auto promote = [&](float(&a)[NW / 2]) { /* rows lane / 4 (sp0) and + 8 (sp1) */
            fence_regs(a);
#pragma unroll
            for (int b = 0; b < NW / 8; b++) {
                fin[4 * b] = __fmaf_rn(a[4 * b], sp0, fin[4 * b]);
                fin[4 * b + 1] = __fmaf_rn(a[4 * b + 1], sp0, fin[4 * b + 1]);
                fin[4 * b + 2] = __fmaf_rn(a[4 * b + 2], sp1, fin[4 * b + 2]);
                fin[4 * b + 3] = __fmaf_rn(a[4 * b + 3], sp1, fin[4 * b + 3]);
            }
        };
        /* After issuing a stage: the older batch done, its ring stage
         * released, its sum (in `a`) promoted; the issued stage becomes
         * the older. */
        auto retire = [&](float(&a)[NW / 2]) {
            wgmma_wait<1>();
            release(prev);
            promote(a);
            sp0 = __fmul_rn(ca0, cb);
            sp1 = __fmul_rn(ca1, cb);
            prev = r.stage;
            r.next(STAGES);
        };
        issue(acc, 0);
        sp0 = __fmul_rn(ca0, cb);
        sp1 = __fmul_rn(ca1, cb);
        prev = r.stage;
        r.next(STAGES);
        int kb = 1;
        for (; kb + 1 < KB; kb += 2) { /* in flight on entry: acc's stage kb - 1 */
            issue(acc2, kb);
            retire(acc);
            issue(acc, kb + 1);
            retire(acc2);
        }
        if (kb < KB) { /* one stage left, into acc2 */
            issue(acc2, kb);
            retire(acc);
            wgmma_wait<0>();
            release(prev);
            promote(acc2);
        } else {
            wgmma_wait<0>();
            release(prev);
            promote(acc);
        }
    } else if constexpr (PROMOTE) {
#pragma unroll
        for (int i = 0; i < NW / 2; i++)
            fin[i] = 0.0f;
        for (int kb = 0; kb < KB; kb++) {
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            const uint32_t st = base + r.stage * STAGE_BYTES;
            issue_stage<NW, BF16>(acc, st + a_off, st + A_BYTES + b_off, false);
            wgmma_wait<0>();
            release(r.stage);
            add_into(fin, acc);
            r.next(STAGES);
        }
    } else {
        int prev = -1; /* the stage whose wgmmas may still run */
        for (int kb = 0; kb < KB; kb++) {
            mbar_wait(smem_addr(&full[r.stage]), r.phase);
            const uint32_t st = base + r.stage * STAGE_BYTES;
            issue_stage<NW, BF16>(acc, st + a_off, st + A_BYTES + b_off, kb > 0);
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
}

/* One warp group's tile: rows r_base.., columns c0.. (NW of them) from the
 * stage offsets a_off, b_off, then its epilogue. */
template <int NW, bool PROMOTE, bool BF16, int STAGES, int STAGE_BYTES, bool SCALED = false, int BN = 0,
          bool BLK = false>
__device__ __forceinline__ void run_tile(float (&acc)[NW / 2], float (&fin)[PROMOTE || SCALED ? NW / 2 : 1], ring &r,
                                         const tile_at &at, const kernel_params &p, const CUtensorMap *map_d,
                                         int KB, uint32_t base, int r_base, int c0, uint32_t a_off, uint32_t b_off,
                                         uint64_t *full, uint64_t *empty, int w, int tw, uint32_t out, float *scale,
                                         float *bias, const float *gs)
{
    const epi_loads<NW> l = load_scales<NW>(at, p, r_base, c0, tw);
    const blk_scales bs = block_scales_of<BLK>(at, p, r_base, c0, tw);
    main_loop<NW, PROMOTE, BF16, STAGES, STAGE_BYTES, SCALED, BN, BLK>(acc, fin, r, KB, base, a_off, b_off, full,
                                                                      empty, tw % 32, gs, bs);
    if constexpr (PROMOTE || SCALED)
        store_tile<NW>(fin, l, r_base, at.row_end, c0, p, map_d, w, tw, out, scale, bias);
    else
        store_tile<NW>(acc, l, r_base, at.row_end, c0, p, map_d, w, tw, out, scale, bias);
}

/* The e2m1 kinds' converter warp groups. Thread tw (0..255) takes items
 * tw + 256 j of a stage: weight row i / 2, chunk (32 columns) i % 2, so a
 * warp's code reads are contiguous and each 8-thread phase of its stores
 * hits 8 distinct units. */
template <int BN> constexpr int W4_ITEMS = 2 * BN / W4_THREADS;
static_assert(2 * 128 % W4_THREADS == 0 && W4_ITEMS<128> >= 1, "the e2m1 kinds' items split evenly");

/* The block scale codes of a thread's items for W4_SF_GROUP stages from
 * kb0 (MXFP4: one byte a stage, 8 stages; NVFP4: two, for columns 0-15
 * and 16-31, 4 stages), packed into one 64-bit word per item, stage kb0
 * in the low bits: read from global memory (L2-resident) all at once, so
 * that their latency is paid once per group. The group's codes of both
 * chunks of a row are 16 contiguous bytes: one 16-byte load and two byte
 * permutes where every row's codes start 16-byte aligned (`sf16`: the
 * launch checks), else byte by byte (ncu counted 88% of this kernel's L2
 * sectors as excess with byte loads only). 0 past K or the last row, so
 * that TMA's zero codes stay zeros (UE8M0 code 0 is 2^-127, not NaN). */
template <int W4> constexpr int W4_SF_GROUP = W4 == 32 ? 8 : 4;

template <int BN, int W4>
__device__ __forceinline__ void load_sf(uint64_t (&sc)[W4_ITEMS<BN>], const kernel_params &p, int64_t row0, int kb0,
                                        int tw)
{
    constexpr int BYTES = W4 == 32 ? 1 : 2; /* per stage and item */
    const uint32_t spr = p.kp / W4;
    const int64_t rows = (int64_t)p.E * p.N;
#pragma unroll
    for (int j = 0; j < W4_ITEMS<BN>; j++) {
        const int i = tw + W4_THREADS * j, c = i & 1;
        const int64_t row = row0 + (i >> 1);
        const uint8_t *sf = p.sf8 + row * spr;
        uint64_t v = 0;
        if (p.sf16) {
            /* Stage s of chunk c: byte 2 s + c (MXFP4), bytes 4 s + 2 c and
             * the next (NVFP4), of the group's 16 (kb0 * 64 / W4 is a
             * multiple of 16, kp a multiple of the group's columns: launch). */
            if (row < rows) {
                const uint4 q = *reinterpret_cast<const uint4 *>(sf + (uint32_t)kb0 * 64 / W4);
                const uint32_t sel = W4 == 32 ? (uint32_t)(c | (2 + c) << 4 | (4 + c) << 8 | (6 + c) << 12)
                                              : (uint32_t)(2 * c | (2 * c + 1) << 4 | (2 * c + 4) << 8 |
                                                           (2 * c + 5) << 12);
                v = (uint64_t)__byte_perm(q.z, q.w, sel) << 32 | __byte_perm(q.x, q.y, sel);
            }
        } else {
#pragma unroll
            for (int s = 0; s < W4_SF_GROUP<W4>; s++) {
                const uint32_t col = (uint32_t)(kb0 + s) * 64 + (uint32_t)c * 32;
                if (row < rows && col < p.kp)
#pragma unroll
                    for (int b = 0; b < BYTES; b++)
                        v |= (uint64_t)sf[col / W4 + b] << (8 * (BYTES * s + b));
            }
        }
        sc[j] = v;
    }
}

/* One stage: the codes of BN weight rows x 64 columns (TMA, `codes`: row r
 * at 32 r, chunk c at 16 c, in wq_pack.h's fragment order) times their
 * block scales into the bf16 B operand at `b`, laid out as TMA's 128-byte
 * swizzle writes it (row r at 128 r, 16-byte unit u at u ^ (r % 8)); the
 * values as the scratch form makes them (wq_dev.cuh dq_chunk_bf16). */
template <int BN, int W4>
__device__ __forceinline__ void convert_stage(uint32_t codes, uint32_t b, const uint32_t (&sc)[W4_ITEMS<BN>], int tw)
{
    constexpr bool MX = W4 == 32;
#pragma unroll
    for (int j = 0; j < W4_ITEMS<BN>; j++) {
        const int i = tw + W4_THREADS * j, r = i >> 1, c = i & 1;
        uint32_t w[4];
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "r"(codes + r * W4_ROW + c * W4_CHUNK));
        uint32_t s2[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float v = fmcu_wq_dev::scale_code(MX ? sc[j] : (sc[j] >> (8 * h)) & 0xFFu, MX);
            s2[h] = fmcu_wq_dev::bits_of(__floats2bfloat162_rn(v, v));
        }
        uint32_t v[16];
        fmcu_wq_dev::dq_chunk_bf16(w, s2, v);
#pragma unroll
        for (int q = 0; q < 4; q++)
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(b + r * 128 + (((4 * c + q) ^ (r & 7)) << 4)),
                         "r"(v[4 * q]), "r"(v[4 * q + 1]), "r"(v[4 * q + 2]), "r"(v[4 * q + 3])
                         : "memory");
    }
}

/* The int4 kind's stage: codes as convert_stage reads them, each value
 * q - 8 - zp as bf16 (exact: sub[j] = 136 + zp of item j's row and group
 * in both halves, wq_dev.cuh's dq_int4), no scale. */
template <int BN> constexpr int INT4_ITEMS = 2 * BN / W4_THREADS;

template <int BN>
__device__ __forceinline__ void convert_stage_int4(uint32_t codes, uint32_t b, const uint32_t (&sub)[INT4_ITEMS<BN>],
                                                   int tw)
{
#pragma unroll
    for (int j = 0; j < INT4_ITEMS<BN>; j++) {
        const int i = tw + W4_THREADS * j, r = i >> 1, c = i & 1;
        uint32_t w[4];
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                     : "r"(codes + r * W4_ROW + c * W4_CHUNK));
        uint32_t v[16];
        /* Register jj of word c4 holds columns 16 (jj >> 1) + 8 (jj & 1) +
         * 2 c4 and the one after: pair 8 (jj >> 1) + 4 (jj & 1) + c4. */
#pragma unroll
        for (int c4 = 0; c4 < 4; c4++)
#pragma unroll
            for (int jj = 0; jj < 4; jj++)
                v[8 * (jj >> 1) + 4 * (jj & 1) + c4] = fmcu_wq_dev::dq_int4<false>(w[c4], jj, sub[j]);
#pragma unroll
        for (int q = 0; q < 4; q++)
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(b + r * 128 + (((4 * c + q) ^ (r & 7)) << 4)),
                         "r"(v[4 * q]), "r"(v[4 * q + 1]), "r"(v[4 * q + 2]), "r"(v[4 * q + 3])
                         : "memory");
    }
}

/* The int4 kind's group g of a thread's items: sub (136 + zp as a bf16
 * pair) and the row's scale (0 past the last row, whose codes TMA
 * zero-fills: those columns are never stored). */
template <int BN>
__device__ __forceinline__ void load_group_int4(uint32_t (&sub)[INT4_ITEMS<BN>], float (&scale)[INT4_ITEMS<BN>],
                                                const kernel_params &p, int64_t row0, int g, int tw)
{
    const int64_t rows = (int64_t)p.E * p.N;
#pragma unroll
    for (int j = 0; j < INT4_ITEMS<BN>; j++) {
        const int64_t row = row0 + ((tw + W4_THREADS * j) >> 1);
        const bool in = row < rows;
        const int64_t at = row * p.groups + g;
        const float z = p.zero && in ? (float)p.zero[at] : 0.0f;
        sub[j] = bf16x2_bits(136.0f + z, 136.0f + z);
        scale[j] = in ? p.gscale[at] : 0.0f;
    }
}

template <int BN, bool PROMOTE, bool BF16, int W4 = 0, bool BLK = false>
__global__ void __launch_bounds__(KIND_THREADS<W4>, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_a64,
                        const __grid_constant__ CUtensorMap map_b, const __grid_constant__ CUtensorMap map_d,
                        const kernel_params p)
{
    using C = kind_cfg<BN, W4>;
    constexpr int STAGES = C::STAGES;
    constexpr int NTHREADS = KIND_THREADS<W4>;
    static_assert(!W4 || (BF16 && !PROMOTE), "e2m1 and int4 kinds: bf16 operands, no fp8 promotion");
    static_assert(!BLK || (BN == 128 && PROMOTE && !BF16 && !W4),
                  "fp8 block kind: promoted e4m3, 128 columns (a warp group's columns in one weight block)");
    constexpr bool SCALED = W4 == W4_INT4; /* int4: group scales promoted into fin */
    extern __shared__ uint8_t smem_raw[];
    /* conv: the converter's stage barriers (e2m1 kinds), after full. */
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES], conv[W4 ? STAGES : 1];
    __shared__ int pre[FMCU_GG_MAX_EXPERTS + 1], off[FMCU_GG_MAX_EXPERTS + 1];
    __shared__ int tile_of[STAGES]; /* the tile whose first stage this is, or -1: no more tiles */

    /* Stage s: A at base + s * STAGE_BYTES, B after it; both 1024-aligned. */
    const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
    constexpr int KE = BF16 ? BK / 2 : BK; /* K elements per stage */
    const int E = (int)p.E, KB = (int)((p.K + KE - 1) / KE);
    const int nt = (int)((p.N + BN - 1) / BN);

    for (int e = threadIdx.x; e <= E; e += NTHREADS)
        off[e] = p.offsets[e];
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), 8); /* lane 0 of each consumer warp */
            if constexpr (W4 != 0)
                mbar_init(smem_addr(&conv[s]), W4_THREADS / 32); /* lane 0 of each converter warp (publish) */
        }
        fmcu_async::mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x < 32) /* prefix of tile counts by warp 0 */
        tile_prefix(pre, off, E, nt, threadIdx.x);
    __syncthreads();
    const int total = pre[E];
    const int wg = threadIdx.x / 128;

    if (wg == 0) {
        /* What the producer gives back the consumers take (REGS_*). */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS_PRODUCER));
        if (threadIdx.x != 0)
            return;
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_a) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_a64) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&map_b) : "memory");
        /* Tile blockIdx.x first, then t + grid (fixed order) or the next
         * from the counter (tiles gridDim.x.. in order), fetched as a tile's
         * first stage goes out so that the atomic's latency passes under
         * its loads. */
        ring r;
        int t = blockIdx.x;
        while (t < total) {
            const tile_at at = find_tile(t, pre, off, E, p.halves);
            const int brow = at.e * (int)p.N + at.nb * BN;
            int next = total;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(smem_addr(&empty[r.stage]), r.phase ^ 1);
                if (kb == 0) {
                    tile_of[r.stage] = t; /* published by the arrive below */
                    next = p.fixed_order ? t + (int)gridDim.x : (int)gridDim.x + atomicAdd(p.sched, 1);
                }
                const uint32_t fb = smem_addr(&full[r.stage]);
                const uint32_t sa = base + r.stage * C::STAGE_BYTES;
                /* A half tile needs 64 A rows: rows 64-127 of its stage stay unread. */
                if constexpr (W4 != 0) { /* B: the codes, which the converter turns into bf16 */
                    mbar_expect_tx(fb, (at.half ? A_BYTES / 2 : A_BYTES) + C::CODE_BYTES);
                    tma_load(sa, at.half ? &map_a64 : &map_a, kb * KE, at.row0, fb);
                    tma_load(base + C::CODE_AT + r.stage * C::CODE_BYTES, &map_b, kb * W4_ROW, brow, fb);
                } else {
                    mbar_expect_tx(fb, at.half ? C::STAGE_BYTES - A_BYTES / 2 : C::STAGE_BYTES);
                    tma_load(sa, at.half ? &map_a64 : &map_a, kb * KE, at.row0, fb);
                    tma_load(sa + A_BYTES, &map_b, kb * KE, brow, fb);
                }
                r.next(STAGES);
            }
            t = next;
        }
        fmcu_gg::no_more_tiles(r, full, empty, tile_of, p.sched);
        return;
    }

    if constexpr (W4 != 0) {
        if (wg >= 3) {
            /* 96 registers a thread at launch: the producer gives back
             * (96 - 40) x 128 and these groups (96 - 48) x 256, of which the
             * consumers take (168 - 96) x 256 (REGS_*). */
            asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS_CONVERTER));
            const int tw = threadIdx.x - 384;
            /* A converted stage's stores (generic proxy) are read by wgmma
             * (async proxy): each thread fences its own, the warp syncs
             * (ordering its lanes' stores before lane 0's), and lane 0's
             * arrive releases them. One arrive a warp, not one a thread:
             * 256 arrives a stage on one barrier cost the int4 GEMMs 1-12 %
             * (H200: Qwen3-30B-A3B M = 8192 GEMM1 917 -> 843 us, the
             * int4 and MXFP4 layers 3-7 %; bench/cuda/RESULTS.md at 7426a60, "One
             * arrive a converter warp"). */
            auto publish = [&](int stage) {
                fmcu_async::fence_async_shared();
                __syncwarp();
                if (tw % 32 == 0)
                    mbar_arrive(smem_addr(&conv[stage]));
            };
            ring r;
            for (;;) {
                mbar_wait(smem_addr(&full[r.stage]), r.phase);
                const int t = tile_of[r.stage];
                if (t < 0)
                    break;
                const tile_at at = find_tile(t, pre, off, E, p.halves);
                const int64_t row0 = (int64_t)at.e * p.N + at.nb * BN;
                if constexpr (W4 == W4_INT4) {
                    float *gs = reinterpret_cast<float *>(smem_raw + (base - smem_addr(smem_raw)) + C::GSCALE_AT);
                    /* A group's zero points and scales are loaded a group
                     * ahead (the first as soon as the tile is known), issued
                     * after the arrive of the group's first stage: the
                     * fence before an arrive (MEMBAR) waits for every load
                     * in flight, so a load issued before a stage's
                     * conversion would stall that stage's release. */
                    uint32_t sub[INT4_ITEMS<BN>], nsub[INT4_ITEMS<BN>];
                    float sc[INT4_ITEMS<BN>], nsc[INT4_ITEMS<BN>];
                    load_group_int4<BN>(nsub, nsc, p, row0, 0, tw);
                    for (int kb = 0; kb < KB; kb++) {
                        if (kb > 0)
                            mbar_wait(smem_addr(&full[r.stage]), r.phase);
                        if (kb % 2 == 0) { /* a group is two 64-column stages */
#pragma unroll
                            for (int j = 0; j < INT4_ITEMS<BN>; j++) {
                                sub[j] = nsub[j];
                                sc[j] = nsc[j];
                            }
                        }
                        convert_stage_int4<BN>(base + C::CODE_AT + r.stage * C::CODE_BYTES,
                                               base + r.stage * C::STAGE_BYTES + A_BYTES, sub, tw);
#pragma unroll
                        for (int j = 0; j < INT4_ITEMS<BN>; j++) { /* the row's scale, once (chunk 0) */
                            const int i = tw + W4_THREADS * j;
                            if ((i & 1) == 0)
                                gs[r.stage * BN + (i >> 1)] = sc[j];
                        }
                        /* The B stage for wgmma (async proxy), published as
                         * above; the scales are read by generic loads after
                         * the consumers' wait on that arrive (release). */
                        publish(r.stage);
                        if (kb % 2 == 0 && kb / 2 + 1 < (int)p.groups)
                            load_group_int4<BN>(nsub, nsc, p, row0, kb / 2 + 1, tw);
                        r.next(STAGES);
                    }
                } else {
                    uint64_t group[W4_ITEMS<BN>];
                    for (int kb = 0; kb < KB; kb++) {
                        if (kb > 0)
                            mbar_wait(smem_addr(&full[r.stage]), r.phase);
                        if (kb % W4_SF_GROUP<W4> == 0)
                            load_sf<BN, W4>(group, p, row0, kb, tw);
                        uint32_t sc[W4_ITEMS<BN>];
#pragma unroll
                        for (int j = 0; j < W4_ITEMS<BN>; j++) { /* this stage's codes, then the next stage's down */
                            sc[j] = (uint32_t)group[j] & (W4 == 32 ? 0xFFu : 0xFFFFu);
                            group[j] >>= W4 == 32 ? 8 : 16;
                        }
                        convert_stage<BN, W4>(base + C::CODE_AT + r.stage * C::CODE_BYTES,
                                              base + r.stage * C::STAGE_BYTES + A_BYTES, sc, tw);
                        publish(r.stage);
                        r.next(STAGES);
                    }
                }
            }
            return;
        }
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS_CONSUMER_W4));
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS_CONSUMER));
    }
    uint64_t *ready = W4 ? conv : full; /* the consumers' stage barrier */
    const int w = wg - 1, tw = threadIdx.x % 128;
    const uint32_t out = base + C::EPI_AT + w * C::OUT_BYTES;
    float *scale = reinterpret_cast<float *>(smem_raw + (base - smem_addr(smem_raw)) + C::SCALE_AT) + w * BN;
    float *bias = reinterpret_cast<float *>(smem_raw + (base - smem_addr(smem_raw)) + C::BIAS_AT) + w * BN;
    constexpr int HN = BN / 2; /* a half tile's columns per warp group */
    float acc[BN / 2];
    float fin[PROMOTE || SCALED ? BN / 2 : 1];
    float hacc[HN / 2];
    float hfin[PROMOTE || SCALED ? HN / 2 : 1];
    const float *gs = reinterpret_cast<const float *>(smem_raw + (base - smem_addr(smem_raw)) + C::GSCALE_AT);
    ring r;
    for (;;) {
        mbar_wait(smem_addr(&full[r.stage]), r.phase); /* again in main_loop: already complete there */
        const int t = tile_of[r.stage];
        if (t < 0)
            break;
        const tile_at at = find_tile(t, pre, off, E, p.halves);
        if (!at.half) /* rows 64w.. of the tile, all its columns */
            run_tile<BN, PROMOTE, BF16, STAGES, C::STAGE_BYTES, SCALED, BN, BLK>(
                acc, fin, r, at, p, &map_d, KB, base, at.row0 + 64 * w, at.nb * BN, w * 64 * BK, 0, ready, empty, w,
                tw, out, scale, bias, gs);
        else /* the tile's 64 rows, columns HN w.. */
            run_tile<HN, PROMOTE, BF16, STAGES, C::STAGE_BYTES, SCALED, BN, BLK>(
                hacc, hfin, r, at, p, &map_d, KB, base, at.row0, at.nb * BN + HN * w, 0, w * HN * BK, ready, empty, w,
                tw, out, scale, bias, gs + HN * w);
    }
    if (tw == 0)
        bulk_wait_all();
}

/* ---- host ------------------------------------------------------------ */

/* A [rows, cols] matrix of e4m3 or bf16, row-major, moved in boxes of
 * box_rows x 128 B. */
bool encode(CUtensorMap *map, const void *base, uint64_t rows, uint64_t cols, uint32_t box_rows, bool bf16)
{
    const uint32_t es = bf16 ? 2 : 1;
    return fmcu_tensor_map_2d(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rows,
                              cols, es, (uint32_t)BK / es, box_rows, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* e2m1 codes [rows, kp / 2 bytes] (wq_pack.h chunks), moved in boxes of
 * box_rows x 32 bytes (64 columns), unswizzled: the converter reads them. */
bool encode_codes(CUtensorMap *map, const void *base, uint64_t rows, uint64_t kp, uint32_t box_rows)
{
    return fmcu_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, rows, kp / 2, 1, (uint32_t)W4_ROW, box_rows,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
}

template <int BN, bool PROMOTE, bool BF16, int W4 = 0, bool BLK = false>
cudaError_t launch_kind(const fmcu_gg_args *a, int sms, cudaStream_t st)
{
    using C = kind_cfg<BN, W4>;
    CUtensorMap map_a, map_a64, map_b, map_d;
    const bool b_ok = W4 ? encode_codes(&map_b, a->b, (uint64_t)a->E * a->N, a->kp, BN)
                         : encode(&map_b, a->b, (uint64_t)a->E * a->N, a->K, BN, BF16);
    if (!encode(&map_a, a->a, (uint64_t)a->rows_cap, a->K, BM, BF16) ||
        !encode(&map_a64, a->a, (uint64_t)a->rows_cap, a->K, BM / 2, BF16) || !b_ok ||
        !encode(&map_d, a->d, (uint64_t)a->rows_cap, a->N, 64, true))
        return cudaErrorInvalidValue;
    kernel_params p;
    p.d = a->d;
    p.s_row = a->s_row;
    p.s_col = a->s_col;
    p.bias = a->bias;
    p.offsets = a->offsets;
    p.row_vec = a->row_vec;
    p.col_vec = a->col_vec;
    p.E = a->E;
    p.N = a->N;
    p.K = a->K;
    p.halves = !a->whole_tiles;
    p.sf8 = a->sf8;
    p.kp = a->kp;
    p.sf16 = W4 != 0 && W4 != W4_INT4 && (a->kp / (W4 ? W4 : 1)) % 16 == 0 && (uintptr_t)a->sf8 % 16 == 0;
    p.gscale = a->gscale;
    p.zero = a->zero;
    p.groups = a->groups;
    p.a_sf = a->a_sf;
    p.b_sf = a->b_sf;
    p.sched = a->sched;
    p.fixed_order = a->order == FMCU_GG_ORDER_FIXED || (a->order == FMCU_GG_ORDER_AUTO && !PROMOTE);
    auto kernel = grouped_gemm_kernel<BN, PROMOTE, BF16, W4, BLK>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
    if (e != cudaSuccess)
        return e;
    /* More CTAs than tiles would only wait: at most ceil(rows/128) + E row blocks. */
    const int64_t tiles = ((a->rows_cap + BM - 1) / BM + a->E) * (int64_t)((a->N + BN - 1) / BN);
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    kernel<<<grid, KIND_THREADS<W4>, C::SMEM, st>>>(map_a, map_a64, map_b, map_d, p);
    return cudaGetLastError();
}

} // namespace

cudaError_t fmcu_gg_launch(const fmcu_gg_args *a, fmcu_gg_kind kind, int sms, cudaStream_t st)
{
    if (!a || a->E == 0 || a->E > FMCU_GG_MAX_EXPERTS || a->K == 0 || a->K % 16 || a->N == 0 || a->N % 16 ||
        a->rows_cap <= 0 || a->rows_cap > INT32_MAX || (uint64_t)a->E * a->N > INT32_MAX || sms <= 0 ||
        ((uintptr_t)a->a | (uintptr_t)a->b | (uintptr_t)a->d) % 16 || !a->d || !a->sched || (uintptr_t)a->bias % 2 ||
        (uintptr_t)a->sched % 4 || a->order < FMCU_GG_ORDER_AUTO || a->order > FMCU_GG_ORDER_COUNTER ||
        (a->col_vec && (uintptr_t)a->s_col % 8))
        return cudaErrorInvalidValue;
    if (a->a_sf || a->b_sf) { /* fp8 block scales: one kind */
        if (!a->a_sf || !a->b_sf || a->bf16 || a->w4 || a->K % 128 || a->N % 128 || a->s_row || a->s_col ||
            a->bias || (uintptr_t)a->a_sf % 4 || (uintptr_t)a->b_sf % 4)
            return cudaErrorInvalidValue;
        return launch_kind<128, true, false, 0, true>(a, sms, st);
    }
    if (a->w4 == FMCU_GG_W4_INT4) { /* int4 codes and group scales: one kind */
        if (!a->bf16 || !a->gscale || a->kp % 32 || a->kp < a->K || a->groups != (a->K + INT4_GROUP - 1) / INT4_GROUP)
            return cudaErrorInvalidValue;
        return launch_kind<128, false, true, W4_INT4>(a, sms, st);
    }
    if (a->w4) { /* e2m1 codes converted in the kernel: one kind */
        if (!a->bf16 || !a->sf8 || a->kp % 32 || a->kp < a->K)
            return cudaErrorInvalidValue;
        return a->w4 == 32 ? launch_kind<128, false, true, 32>(a, sms, st)
               : a->w4 == 16 ? launch_kind<128, false, true, 16>(a, sms, st)
                             : cudaErrorInvalidValue;
    }
    if (a->bf16)
        switch (kind) { /* f32 accumulation: nothing to promote */
        case FMCU_GG_N256_FAST: return launch_kind<256, false, true>(a, sms, st);
        case FMCU_GG_N128_FAST: return launch_kind<128, false, true>(a, sms, st);
        case FMCU_GG_N192_FAST: return launch_kind<192, false, true>(a, sms, st);
        default: return cudaErrorInvalidValue;
        }
    switch (kind) {
    case FMCU_GG_N192_PROMOTED: return launch_kind<192, true, false>(a, sms, st);
    case FMCU_GG_N256_FAST: return launch_kind<256, false, false>(a, sms, st);
    case FMCU_GG_N128_FAST: return launch_kind<128, false, false>(a, sms, st);
    case FMCU_GG_N192_FAST: return launch_kind<192, false, false>(a, sms, st);
    default: return cudaErrorInvalidValue;
    }
}
