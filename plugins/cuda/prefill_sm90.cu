/*
 * plugins/cuda/prefill_sm90.cu - the Hopper prefill path (contract and
 * stages in prefill.h): vLLM's cutlass_moe pipeline on CUTLASS 4.x sm90
 * grouped GEMMs.
 *
 * Data flow (P = m*k pairs, R = rows of local pairs = offsets[E], all
 * buffers in the layer's workspace):
 *   x [m, H] --gather--> pf_a1 [R, H] (+ pf_a1_scale)      sorted by expert
 *   --GEMM1--> pf_h [R, r*I] bf16 --act--> act/a2 [R, I] (+ a2_scale)
 *   --GEMM2--> y [R, H] bf16 --combine--> out [m, H]
 * Row i of every sorted buffer is the pair sorted[i]; pf_pos[p] = i.
 * Fused GEMM1 (gated SiLU; bf16 with FMCU_PF_FUSE=1, fp8 tensor/channel
 * too with FMCU_PF_FUSE=2; layer.pf_w13 set at finalize):
 *   pf_a1 --GEMM1 on pf_w13 (gate/up rows interleaved, act_column), epilogue
 *   GatedActStore--> act [R, I] bf16 (+ slow pairs: gate/up in pf_h, a bit
 *   in a mask over y) --fixup--> act (--quantize--> a2 + scales for fp8)
 *   --GEMM2--> ...
 * The epilogue evaluates SiLU in f32 without branches or calls and keeps
 * the values that provably round as act_bf16's double path does; the rest
 * (about 1 pair in 1000) fixup_kernel computes with act_bf16. An fp8 GEMM2
 * input is not quantized in the epilogue: its per-token or dynamic scale
 * needs an amax over all of I, and e4m3(a / s) needs IEEE division, whose
 * called slow path makes the kernel save its accumulators to the stack.
 * The fp8 block scheme is never fused (its 128-row weight scale blocks
 * would mix gate and up rows once interleaved).
 *
 * Our grouped GEMM (grouped_gemm.h: TMA + wgmma, one tensor map over all
 * sorted rows, no per-expert descriptors) runs both GEMMs of bf16 and of the
 * fp8 tensor/channel schemes (own_kinds; FMCU_PF_OWN=cc puts the CUTLASS
 * kernels below back); the fp8 block scheme and the fused GEMM1 stay on
 * CUTLASS.
 *
 * Grouped GEMMs (CUTLASS). One group per local expert; its problem (M_e, N, K), the
 * A/B/D pointers and strides, and the scale pointers (or block-scale
 * layouts) are written by a one-block setup kernel from the plan's offsets,
 * so the host never reads device data and the launch is graph capturable.
 * Experts with no rows are groups with M = 0 (no tiles). CUTLASS's
 * persistent group scheduler launches one CTA per SM, walks each expert's
 * tiles along M first (the CTAs working at once share the expert's weight
 * tiles in L2) and rewrites the TMA descriptors in its workspace
 * (pf_cutlass) when it moves to the next group. Tile shapes are chosen per
 * call from the average rows per local expert (m * k / E, host-known):
 * 64-row tiles below 128 rows, 128-row tiles from there (less operand
 * traffic per flop; FMCU_PF_LARGE_ROWS, bf16_large_rule):
 *   bf16       64x256x64 ping-pong or 128x256x64 cooperative, cluster 2x1
 *              (the two CTAs of a cluster take the same weight tile by TMA
 *              multicast), D = round(acc); GEMM1 (with the fused activation
 *              when gated SiLU) and GEMM2
 *   fp8        GEMM1: 64x128x128 ping-pong, 64x192x128 ping-pong (128 to
 *              511 rows) or 128x128x128 cooperative (from 512 rows),
 *              wgmma's accumulator promoted to f32 every 128 K; GEMM2:
 *              64x256x128 ping-pong or 128x256x128 cooperative, fast
 *              accumulation (see "FP8 accumulation" below); all cluster 2x1,
 *              epilogue D = round(acc * (s_row * s_col)) through an epilogue
 *              visitor tree: s_row = per-token activation scale (channel) or
 *              the per-tensor one, s_col = per-output-channel weight scale or
 *              the expert's (per-group pointer arrays; broadcast flags choose
 *              vector or scalar): gemm.cu's x *= sa * sw, same rounding.
 *   fp8 block  128x128x128 cooperative, cluster 1x2 (GEMM1 and GEMM2),
 *              1x128 activation and
 *              128x128 weight scales applied per 128-K block in the main loop
 *              (DeepGEMM's promotion), D = round(acc). Activation scales are
 *              M-major inside each expert's group: off_e*G + g*M_e + r.
 *
 * Accuracy. bf16 is bit-identical to the mma.sync path. FP8 wgmma keeps
 * fewer accumulator bits than f32 between promotions (DeepSeek-V3 3.3.2),
 * so GEMM1 differs slightly from the reference and a few GEMM2 inputs round
 * to the neighbouring e4m3 code: NMSE 1e-5..5e-5 against the reference
 * (a dynamic per-tensor GEMM2 scale reached 6e-4 where the largest
 * activation moved by a bf16 step, until amax_exact_kernel; bench/cuda/
 * amax-2026-11-23); the mma.sync path is within 1e-7.
 *
 * Small kernels (the activation stage's in prefill_act.cu, prefill_act.h;
 * their arithmetic in act_math.cuh and pf_vec.cuh). The quantization and
 * activation arithmetic is that of
 * kernels.cu (quant_kernel, amax_kernel) and gemm.cu (activate): amax as
 * max |v| ignoring NaN, s = max(amax / 448, 1 / (448 * 512)) or UE8M0
 * 2^ceil(log2(max(amax, 1e-4) / 448)), q = e4m3(satfinite(v / s)) with IEEE
 * division; activations in double rounded once to f32 then to bf16 (SiLU in
 * f32 where that provably gives the same bf16, act_bf16). The gather reads
 * and quantizes each token's row once and writes it to every sorted row of
 * its local pairs; the combine sums y[pos] * w in slot order with
 * __fmul_rn/__fadd_rn.
 *
 * Compiled for sm_90a only (meson.build); without CUTLASS headers
 * (FMCU_HAVE_CUTLASS undefined) only the refusal is compiled.
 */
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/grouped_gemm.h"
#include "plugins/cuda/prefill.h"
#include "plugins/cuda/prefill_act.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <type_traits>
#include <atomic>

#include "fusedmoe/common.h"

#if defined(FMCU_HAVE_CUTLASS)
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#endif

#if defined(FMCU_HAVE_CUTLASS) && defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#define PF_ENABLED 1
#else
#define PF_ENABLED 0
#endif

namespace {

int refuse(char *why, size_t cap, const char *text)
{
    if (why && cap)
        snprintf(why, cap, "%s", text);
    return 0;
}

} // namespace

#if PF_ENABLED

/* A named namespace: nvcc's kernel stubs cannot name an anonymous one next
 * to `using namespace cute` (cute has anonymous namespaces of its own). */
namespace fmcu_pf {


/* ------------------------------------------------------------------------ */
/* Per-tensor dynamic scale of x: amax over all m rows (kernels.cu)          */
/* ------------------------------------------------------------------------ */

__global__ void amax_rows_kernel(const bf16 *x, int64_t ld, uint32_t cols, uint32_t *amax)
{
    __shared__ float red[32];
    const bf16 *row = x + (int64_t)blockIdx.x * ld;
    float m = 0.0f;
    for (uint32_t c = threadIdx.x; c < cols; c += blockDim.x)
        m = amax_step(m, __bfloat162float(row[c]));
    m = block_max(m, red);
    if (threadIdx.x == 0)
        atomicMax(amax, __float_as_uint(m));
}

/* ------------------------------------------------------------------------ */
/* Gather + quantize: x rows -> A1 in sorted order                           */
/* ------------------------------------------------------------------------ */

/* pos[sorted[i]] = i for the R sorted rows. */
__global__ void pos_kernel(const int32_t *sorted, const int32_t *total, int32_t *pos)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *total)
        pos[sorted[i]] = i;
}

struct gather_args {
    const bf16 *x;
    int64_t x_ld;
    uint32_t H, k;
    int vec;                       /* x rows 16-byte aligned */
    const int32_t *offsets, *pair_local, *pos;
    int mode, ue8m0;
    const float *static_scale;     /* QM_TENSOR static */
    const uint32_t *amax;          /* QM_TENSOR dynamic */
    float *tensor_scale;           /* QM_TENSOR dynamic: the scale, written once */
    void *dst;                     /* [R, H] */
    float *scale;                  /* QM_TOKEN [R]; QM_GROUP grouped M-major */
};

/* One block per token: its row is read and quantized once and written to
 * the sorted row of each of its local pairs. */
__global__ void __launch_bounds__(256) gather_kernel(const gather_args a)
{
    __shared__ float red[32];
    __shared__ int s_row[32], s_off[32], s_rows[32];
    __shared__ int s_n;
    const int64_t t = blockIdx.x;
    if (threadIdx.x == 0) {
        int n = 0;
        for (uint32_t j = 0; j < a.k; j++) {
            int e = a.pair_local[t * a.k + j];
            if (e < 0)
                continue;
            s_row[n] = a.pos[t * a.k + j];
            s_off[n] = a.offsets[e];
            s_rows[n] = a.offsets[e + 1] - a.offsets[e];
            n++;
        }
        s_n = n;
    }
    __syncthreads();
    const int n = s_n;
    if (a.mode == QM_TENSOR && !a.static_scale && t == 0 && threadIdx.x == 0)
        *a.tensor_scale = scale_f32(__uint_as_float(*a.amax));
    if (n == 0)
        return;
    const uint32_t H = a.H;
    const bf16 *row = a.x + t * a.x_ld;
    const bool vec = a.vec != 0;
    if (a.mode == QM_BF16) {
        for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
            float v[8];
            load8(row + c, vec, v);
            for (int r = 0; r < n; r++)
                store8((bf16 *)a.dst + (int64_t)s_row[r] * H + c, true, v);
        }
        return;
    }
    uint8_t *q = (uint8_t *)a.dst;
    if (a.mode == QM_GROUP) {
        const uint32_t groups = H / GROUP;
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
        for (uint32_t g = warp; g < groups; g += warps) {
            const uint32_t c = g * GROUP + lane * 4;
            float v[4];
            load4(row + c, vec, v);
            float m = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++)
                m = amax_step(m, v[j]);
            m = warp_max(m);
            const float s = a.ue8m0 ? scale_ue8m0(m) : scale_f32(m);
            for (int r = 0; r < n; r++) {
                if (lane == 0)
                    a.scale[(int64_t)s_off[r] * groups + (int64_t)g * s_rows[r] + (s_row[r] - s_off[r])] = s;
                store_q4(q + (int64_t)s_row[r] * H + c, v, s);
            }
        }
        return;
    }
    float s;
    if (a.mode == QM_TOKEN) {
        float m = 0.0f;
        for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
            float v[8];
            load8(row + c, vec, v);
#pragma unroll
            for (int j = 0; j < 8; j++)
                m = amax_step(m, v[j]);
        }
        s = scale_f32(block_max(m, red));
        if (threadIdx.x < (unsigned)n)
            a.scale[s_row[threadIdx.x]] = s;
    } else if (a.static_scale) {
        s = *a.static_scale;
    } else {
        s = scale_f32(__uint_as_float(*a.amax));
    }
    for (uint32_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
        float v[8];
        load8(row + c, vec, v);
        for (int r = 0; r < n; r++)
            store_q8(q + (int64_t)s_row[r] * H + c, v, s);
    }
}


/* ------------------------------------------------------------------------ */
/* Interleaved W13 for the fused GEMM1 (finalize)                            */
/* ------------------------------------------------------------------------ */

/* The activation column j whose gate (n even) or up (n odd) is row n of an
 * expert's interleaved W13. Within each 64 rows, row 8b + 2c + s is column
 * 8c + b: GEMM1's accumulator gives a thread columns 2c and 2c + 1 of every
 * 8-column block b, so a thread holds gate and up of each of its columns,
 * and the 4 blocks of a 32-column epilogue subtile are 4 adjacent columns
 * (one 8-byte store per row). I must be a multiple of 32. */
__host__ __device__ constexpr int64_t act_column(int64_t n)
{
    return (n >> 6) * 32 + ((n >> 1) & 3) * 8 + ((n >> 3) & 7);
}

/* Row n of each expert's copy is gate or up row act_column(n): one block
 * per copied row, rows of `row_bytes` (a multiple of 16); per-row scales
 * (channel) follow the rows. */
__global__ void interleave_kernel(const uint8_t *w, const float *w_scale, uint32_t I, uint32_t row_bytes,
                                  uint8_t *dst, float *dst_scale)
{
    const int64_t R = 2 * (int64_t)I, r = blockIdx.x, e = r / R, n = r % R;
    const int64_t from = e * R + ((n & 1) ? I : 0) + act_column(n);
    const uint4 *src = (const uint4 *)(w + from * row_bytes);
    uint4 *d = (uint4 *)(dst + r * row_bytes);
    for (uint32_t c = threadIdx.x; c < row_bytes / 16; c += blockDim.x)
        d[c] = src[c];
    if (dst_scale && threadIdx.x == 0)
        dst_scale[r] = w_scale[from];
}

/* ------------------------------------------------------------------------ */
/* Combine                                                                   */
/* ------------------------------------------------------------------------ */

struct combine_args {
    const bf16 *y;                 /* [R, H] sorted */
    const float *w;
    const int32_t *pair_local, *pos;
    uint32_t k, H;
    int vec;                       /* out rows 16-byte aligned */
    bf16 *out;
    int64_t ldo;
};

__global__ void __launch_bounds__(256) combine_kernel(const combine_args a)
{
    const int64_t t = blockIdx.x;
    const bool vec = a.vec != 0;
    for (uint32_t c = threadIdx.x * 8; c < a.H; c += blockDim.x * 8) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (uint32_t j = 0; j < a.k; j++) {
            int64_t p = t * a.k + j;
            if (a.pair_local[p] < 0)
                continue;
            float y[8];
            load8(a.y + (int64_t)a.pos[p] * a.H + c, true, y);
            const float w = a.w[p];
#pragma unroll
            for (int q = 0; q < 8; q++)
                acc[q] = __fadd_rn(acc[q], __fmul_rn(y[q], w));
        }
#pragma unroll
        for (int q = 0; q < 8; q++)
            acc[q] = round_bf16(acc[q]);
        store8(a.out + t * a.ldo + c, vec, acc);
    }
}

/* ------------------------------------------------------------------------ */
/* CUTLASS grouped GEMMs                                                     */
/* ------------------------------------------------------------------------ */

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using ProblemMNK = ProblemShape::UnderlyingProblemShape;
using ElemBF16 = cutlass::bfloat16_t;
using ElemFP8 = cutlass::float_e4m3_t;
using LayoutA = cutlass::layout::RowMajor;    /* [M, K], K contiguous */
using LayoutB = cutlass::layout::ColumnMajor; /* W [N, K], K contiguous */
using LayoutD = cutlass::layout::RowMajor;    /* [M, N] */
/* Cluster along M: the CTAs of a cluster share the weight (B) tile through
 * TMA multicast, which halves weight traffic from L2 (the larger operand:
 * experts see few rows each). FMCU_PF_CLUSTER_M/N override it (tuning). */
#ifndef FMCU_PF_CLUSTER_M
#define FMCU_PF_CLUSTER_M 2
#endif
#ifndef FMCU_PF_CLUSTER_N
#define FMCU_PF_CLUSTER_N 1
#endif
using Cluster = Shape<Int<FMCU_PF_CLUSTER_M>, Int<FMCU_PF_CLUSTER_N>, _1>;
constexpr auto RN = cutlass::FloatRoundStyle::round_to_nearest;

using BlockScale = cutlass::detail::Sm90BlockwiseScaleConfig<1, GROUP, GROUP, cute::GMMA::Major::MN,
                                                             cute::GMMA::Major::K>;
using LayoutSFA = decltype(BlockScale::deduce_layoutSFA());
using LayoutSFB = decltype(BlockScale::deduce_layoutSFB());

/* The GEMM: A/B element, tile, main-loop schedule, fusion; void C, bf16 D
 * (void D: the fusion stores its own output, GEMM1's fused activation). */
template <class Elem, class LayoutPairA, class LayoutPairB, class Tile, class ClusterShape, class Schedule,
          class EpiSchedule, class Fusion, class ElemD = ElemBF16>
struct grouped {
    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD *, 8, ElemD, LayoutD *, 8,
        EpiSchedule, Fusion>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Elem, LayoutPairA, 16 / sizeof(Elem), Elem, LayoutPairB,
        16 / sizeof(Elem), float, Tile, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename Epilogue::SharedStorage))>,
        Schedule>::CollectiveOp;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using TileBlock = Shape<_64, _128, _128>;

using PlainOut = cutlass::epilogue::fusion::LinearCombination<ElemBF16, float>;

using PingpongEpi = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
using CoopEpi = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
using PtrPingpong = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
using PtrCoop = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;

/* ------------------------------------------------------------------------ */
/* GEMM1's fused epilogue: the gated activation from registers               */
/* ------------------------------------------------------------------------ */

namespace cef = cutlass::epilogue::fusion;

/* What the fused epilogue writes: a = act_bf16(round(gate), round(up)) of
 * each (gate, up) column pair (2m, 2m + 1) of the interleaved GEMM1 output,
 * stored in bf16 at [row, act_column(2m)] of an [R, I] buffer:
 * the GEMM2 input itself (bf16), or the activations a quantize pass reads
 * (fp8 tensor and channel). Quantizing here would take e4m3(a / s) with
 * IEEE division, whose called slow path costs what act_bf16_fast avoids;
 * per-token and dynamic scales need amaxes no tile sees anyway. */
struct act_epi {
    bf16 *out;                     /* [R, I] */
    const int32_t *offsets;        /* group (local expert) l's rows start at row offsets[l] */
    int64_t ld;                    /* I */
    act_fn fn;                     /* gated SiLU (limit optional) */
    uint32_t *amax;                /* non-NULL: atomicMax of max |a| (f32 bits, NaN ignored) */
    /* Pairs the f32 fast path cannot round exactly (act_bf16_fast): their
     * rounded gate and up go to gu [R, 2I] at (row, 2j), their bit to slow
     * (bit e of the [R * I] mask, e = row * I + j, zeroed before GEMM1);
     * fixup_kernel computes them as act_bf16 does. */
    bf16 *gu;
    uint32_t *slow;
};

/* An epilogue visitor node (the root of GEMM1's tree, D void): its child
 * gives GEMM1's output per accumulator element (f32 acc for bf16, already
 * rounded bf16 for fp8); the node rounds it to bf16, pairs gate and up and
 * stores the activation with plain global stores (about 1 pair in 1000
 * goes to fixup_kernel instead, see act_epi). The pairs lie in one
 * thread: wgmma's accumulator gives each thread columns 2c and 2c+1 of
 * every 8-column block, adjacent in the fragments the epilogue visits (it
 * retiles them for 32-bit stmatrix stores, a pair per register), which
 * visit checks on the coordinates (compile-time constants, folded). */
struct GatedActStore {
    /* With D void the builder still sizes its (unused) register-to-smem
     * atoms by the tree's aux element. */
    using ElementAux = ElemBF16;
    struct SharedStorage {};
    using Arguments = act_epi;
    using Params = act_epi;

    template <class PS> static constexpr Params to_underlying_arguments(PS const &, Arguments const &a, void *)
    {
        return a;
    }
    template <class PS> static bool can_implement(PS const &, Arguments const &)
    {
        return true;
    }
    template <class PS> static size_t get_workspace_size(PS const &, Arguments const &)
    {
        return 0;
    }
    template <class PS>
    static cutlass::Status initialize_workspace(PS const &, Arguments const &, void *, cudaStream_t,
                                                cutlass::CudaHostAdapter * = nullptr)
    {
        return cutlass::Status::kSuccess;
    }
    CUTLASS_DEVICE bool is_producer_load_needed() const
    {
        return false;
    }
    CUTLASS_DEVICE bool is_C_load_needed() const
    {
        return false;
    }
    CUTLASS_HOST_DEVICE GatedActStore() {}
    CUTLASS_HOST_DEVICE GatedActStore(Params const &p, SharedStorage const &) : params(p) {}

    Params params;

    template <class... Args> CUTLASS_DEVICE auto get_producer_load_callbacks(cef::ProducerLoadArgs<Args...> const &)
    {
        return cef::EmptyProducerLoadCallbacks{};
    }

    template <class CTensor> struct ConsumerStoreCallbacks : cef::EmptyConsumerStoreCallbacks {
        CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, int rows_, int cols_, Params const &p, int64_t row0_)
            : tCc(c), rows(rows_), cols(cols_), params(p), row0(row0_), want_amax(p.amax != nullptr),
              lim(p.fn.limit > 0.0f ? p.fn.limit : INFINITY)
        {
        }

        CTensor tCc;               /* (CPY,CPY_M,CPY_N,EPI_M,EPI_N): (row, column, group) of each element */
        int rows, cols;            /* the group's M and N (2I) */
        Params const &params;
        int64_t row0;              /* the group's first row */
        bool want_amax;
        float lim;                 /* SiLU limit, +inf for none */
        float vmax = 0.0f;         /* amax of this thread's outputs */

        /* A thread's fragment of a 32-column subtile: rows r0 and r0 + 8,
         * gate/up pairs in the 4 blocks of 8 columns, at compile-time offsets
         * (dr, dn) from its first element (the coordinate tensor's layout is
         * static; the checks below fold away). Their 4 activation columns
         * per row are adjacent (act_column), so each row is one 8-byte
         * store; the slow pairs' placeholders there are rewritten by
         * fixup_kernel. The arithmetic of all 8 pairs comes first, without
         * branches, for the scheduler to interleave. */
        template <class ElementAcc, class ElementIn, int F>
        CUTLASS_DEVICE cutlass::Array<float, F> visit(cutlass::Array<ElementAcc, F> const &, int epi_v, int epi_m,
                                                      int epi_n, cutlass::Array<ElementIn, F> const &in)
        {
            static_assert(F == 16, "a 32-column epilogue subtile per fragment (EpilogueTileAuto)");
            constexpr int P = F / 2;
            Tensor c = tCc(_, _, _, epi_m, epi_n);
            const auto c0 = c(epi_v * F);
            const int r0 = get<0>(c0), n0 = get<1>(c0);
            if ((n0 & 1) || ((n0 >> 3) & 3))
                __trap();
            float g[P], u[P], f[P];
            bool ok[P];
            int slot[P];
            unsigned seen = 0;
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < P; i++) {
                const auto cg = c(epi_v * F + 2 * i), cu = c(epi_v * F + 2 * i + 1);
                const int dr = get<0>(cg) - r0, dn = get<1>(cg) - n0;
                if (get<0>(cu) != get<0>(cg) || get<1>(cu) != get<1>(cg) + 1 || (dr != 0 && dr != 8) ||
                    (dn & 7) || dn < 0 || dn > 24)
                    __trap();
                slot[i] = (dr >> 3) * 4 + (dn >> 3); /* row (0, 1) x block (0..3) */
                seen |= 1u << slot[i];
                if constexpr (std::is_same_v<ElementIn, float>) {
                    const __nv_bfloat162 gu2 = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
                    g[i] = __low2float(gu2);
                    u[i] = __high2float(gu2);
                } else {
                    g[i] = float(in[2 * i]);
                    u[i] = float(in[2 * i + 1]);
                }
                f[i] = act_bf16_fast(lim, g[i], u[i], ok[i]);
            }
            if (seen != 0xFFu)
                __trap();
            /* The subtile's columns are all in or all out (N is a multiple of 64). */
            const bool cols_in = n0 < cols;
            const int64_t ld = params.ld;
            bf16 *const p0 = params.out + (row0 + r0) * ld + act_column(n0);
            bool any_slow = false;
            CUTLASS_PRAGMA_UNROLL
            for (int h = 0; h < 2; h++) {
                __nv_bfloat16 v[4];
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < P; i++) {
                    if (slot[i] / 4 != h)
                        continue;
                    v[slot[i] % 4] = __float2bfloat16_rn(f[i]);
                    const bool use = ok[i] && want_amax && cols_in && r0 + 8 * h < rows;
                    vmax = use ? amax_step(vmax, __bfloat162float(v[slot[i] % 4])) : vmax;
                    any_slow |= !ok[i] && cols_in && r0 + 8 * h < rows;
                }
                if (cols_in && r0 + 8 * h < rows) {
                    uint2 w;
                    w.x = (uint32_t)__bfloat16_as_ushort(v[0]) | (uint32_t)__bfloat16_as_ushort(v[1]) << 16;
                    w.y = (uint32_t)__bfloat16_as_ushort(v[2]) | (uint32_t)__bfloat16_as_ushort(v[3]) << 16;
                    *(uint2 *)(p0 + 8 * h * ld) = w;
                }
            }
            if (any_slow) {
                CUTLASS_PRAGMA_UNROLL
                for (int i = 0; i < P; i++) {
                    const int h = slot[i] / 4;
                    if (ok[i] || !cols_in || r0 + 8 * h >= rows)
                        continue;
                    const int64_t at = (p0 - params.out) + 8 * h * ld + slot[i] % 4;
                    __nv_bfloat162 pair;
                    pair.x = __float2bfloat16_rn(g[i]);
                    pair.y = __float2bfloat16_rn(u[i]);
                    *(__nv_bfloat162 *)(params.gu + 2 * at) = pair;
                    atomicOr(params.slow + (at >> 5), 1u << (at & 31));
                }
            }
            return cutlass::Array<float, F>{};
        }

        /* Every thread of the epilogue's warp groups runs end(). */
        CUTLASS_DEVICE void end()
        {
            if (!want_amax)
                return;
            const float w = warp_max(vmax);
            if ((threadIdx.x & 31) == 0)
                atomicMax(params.amax, __float_as_uint(w));
        }
    };

    template <bool RefSrc, class... Args>
    CUTLASS_DEVICE auto get_consumer_store_callbacks(cef::ConsumerStoreArgs<Args...> const &args)
    {
        auto [M, N, K, L] = args.problem_shape_mnkl;
        const int l = get<3>(args.tile_coord_mnkl);
        Tensor tCc = cef::sm90_partition_for_epilogue<RefSrc>(make_identity_tensor(make_shape(M, N, L)),
                                                               args.tile_shape_mnk, args.tile_coord_mnkl,
                                                               args.epi_tile, args.tiled_copy, args.thread_idx);
        return ConsumerStoreCallbacks<decltype(tCc)>(tCc, (int)M, (int)N, params, params.offsets[l]);
    }
};

using ActBF16 = cef::Sm90EVT<GatedActStore, cef::Sm90AccFetch>;

/* BF16 kernels, a pair per tile shape: Gemm (D = round(acc)) and GemmAct
 * (GEMM1 with the fused activation, D void). Both cluster 2x1.
 *   small  64x256x64 ping-pong: one warp group's epilogue runs under the
 *          other's main loop; a 64-row tile wastes little where experts
 *          see few rows;
 *   large  128x256x64 cooperative: both warp groups share each weight
 *          tile, half the operand traffic per flop of the 64-row tile.
 * bf16_large picks one per call from the average rows per local expert. */
template <class Tile, class Schedule, class EpiSchedule> struct bf16_kind {
    using Gemm = typename grouped<ElemBF16, LayoutA *, LayoutB *, Tile, Cluster, Schedule, EpiSchedule,
                                  PlainOut>::Gemm;
    using GemmAct = typename grouped<ElemBF16, LayoutA *, LayoutB *, Tile, Cluster, Schedule, EpiSchedule, ActBF16,
                                     void>::Gemm;
};
using BF16Small = bf16_kind<Shape<_64, _256, _64>, PtrPingpong, PingpongEpi>;
using BF16Large = bf16_kind<Shape<_128, _256, _64>, PtrCoop, CoopEpi>;
using GemmBF16 = BF16Small::Gemm;
using GemmBF16Act = BF16Small::GemmAct;

/* FP8 tensor/channel: D = round(acc * (s_row * s_col)) through an epilogue
 * visitor tree, per-group pointers, vector or scalar by the stride flags;
 * GemmAct: that tree under GatedActStore, D void (the fused GEMM1). */
template <class Tile, class ClusterShape, class Schedule, class EpiSchedule> struct scaled_fp8 {
    using RowScale = cutlass::epilogue::fusion::Sm90ColBroadcast<0, Tile, float *, float, Stride<bool, _0, int64_t>, 1>;
    using ColScale = cutlass::epilogue::fusion::Sm90RowBroadcast<0, Tile, float *, float, Stride<_0, bool, int64_t>, 1>;
    using ScaleProduct = cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, RN>, RowScale, ColScale>;
    using ScaledOut = cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, ElemBF16, float, RN>,
        cutlass::epilogue::fusion::Sm90AccFetch, ScaleProduct>;
    using Gemm = typename grouped<ElemFP8, LayoutA *, LayoutB *, Tile, ClusterShape, Schedule, EpiSchedule,
                                  ScaledOut>::Gemm;
    using GemmAct = typename grouped<ElemFP8, LayoutA *, LayoutB *, Tile, ClusterShape, Schedule, EpiSchedule,
                                     cef::Sm90EVT<GatedActStore, ScaledOut>, void>::Gemm;
};

/* FP8 accumulation. wgmma keeps fewer bits than f32 in its FP8 accumulator
 * (DeepSeek-V3 3.3.2). Accumulated over all of K ("fast accumulation") the
 * error grows with K: NMSE 5.5e-4 against the f32 tiled tier on Qwen3's
 * GEMM1 (K = 2048), past conformance's gate. The promoted schedule restarts
 * the wgmma accumulator every 128-K tile and adds it into f32 registers (as
 * the block kernel does with its scales): 3.5e-5. It doubles the
 * accumulator registers, so it uses 128x128 tiles (64 + 64 per thread of a
 * warp group; 64x256 would need 256 and spill). Only GEMM1 needs it: its
 * output is rounded to bf16, activated and quantized to e4m3, where a small
 * error moves an element to the neighbouring code; GEMM2's output is only
 * rounded to bf16 (its fast-accumulation error: NMSE ~1e-5 at K = 14336).
 * Kernels (cluster 2x1), chosen per call by the average rows per local
 * expert: GEMM1 FMCU_PF_FP8_G1_SMALL below FMCU_PF_LARGE_ROWS,
 * FMCU_PF_FP8_G1_MID from there below FMCU_PF_FP8_G1_LARGE_ROWS, else
 * FMCU_PF_FP8_G1 (fp8_g1_kind); GEMM2 FMCU_PF_FP8_G2 below
 * FMCU_PF_LARGE_ROWS, else FMCU_PF_FP8_G2_LARGE:
 *   0  64x256x128 ping-pong, fast accumulation           GEMM2, few rows
 *   1  64x128x128 ping-pong, promoted                     GEMM1, few rows
 *   2  128x128x128 cooperative, promoted                  GEMM1, many rows
 *   3  128x256x128 cooperative, fast accumulation         GEMM2, many rows
 *   4  64x192x128 ping-pong, promoted                     GEMM1, 128-511 rows
 * H100, M=8192 (bench/cuda/RESULTS.md): 2 for GEMM1 is 80-89% of 0's
 * TFLOP/s (1 is 70-73%), 2+0 for the pair 87-91% of 0+0. With 32-64 rows
 * per expert (M=1024 of Qwen3-30B-A3B, gpt-oss-120b, DeepSeek-V3) 1 takes
 * 64-70% of 2's time for GEMM1 and 0 76-88% of 3's for GEMM2; with 256 and
 * more 3 takes 86-96% of 0's (102% at gpt-oss-120b M=8192), 1 102-141% of
 * 2's (bench/cuda/prefill-2026-11-22). 4 (96 + 96 accumulator registers
 * per thread, no spills; the epilogue under the other warp group's main
 * loop) against 2 for GEMM1: 256 rows 94% at gpt-oss-120b M=8192 (graph
 * -5%), 94% at Mixtral M=1024, 100% at DeepSeek-V3 M=8192; 512 rows
 * (Qwen3-30B-A3B M=8192) 100%, 2048 rows (Mixtral M=8192) 117%
 * (bench/cuda/prefill-2026-11-22b). Even promoted,
 * wgmma's sum of 128 products is not f32's: at K = 128 it is the same as
 * fast accumulation, and conformance's per-element bound still misses an
 * element in some layers (promoting every 64 or 32 K, measured, is 1.3-2.3x
 * slower and not exact either), so kernels.cu takes this tier for fp8 only
 * when forced. Tuning builds (-DFMCU_PF_TUNING) compile all five and
 * read FMCU_PF_FP8 and FMCU_PF_FP8_PROMOTE at run time (fp8_variant). */
#ifndef FMCU_PF_FP8_G1
#define FMCU_PF_FP8_G1 2
#endif
#ifndef FMCU_PF_FP8_G1_SMALL
#define FMCU_PF_FP8_G1_SMALL 1
#endif
#ifndef FMCU_PF_FP8_G1_MID
#define FMCU_PF_FP8_G1_MID 4
#endif
#ifndef FMCU_PF_FP8_G1_LARGE_ROWS
#define FMCU_PF_FP8_G1_LARGE_ROWS 512
#endif
#ifndef FMCU_PF_FP8_G2
#define FMCU_PF_FP8_G2 0
#endif
#ifndef FMCU_PF_FP8_G2_LARGE
#define FMCU_PF_FP8_G2_LARGE 3
#endif
template <int V> struct fp8_variant_of;
template <> struct fp8_variant_of<0> {
    using Kind = scaled_fp8<Shape<_64, _256, _128>, Cluster,
                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8FastAccum, PingpongEpi>;
    using Gemm = Kind::Gemm;
};
template <> struct fp8_variant_of<1> {
    using Kind = scaled_fp8<Shape<_64, _128, _128>, Cluster, PtrPingpong, PingpongEpi>;
    using Gemm = Kind::Gemm;
};
template <> struct fp8_variant_of<2> {
    using Kind = scaled_fp8<Shape<_128, _128, _128>, Cluster, PtrCoop, CoopEpi>;
    using Gemm = Kind::Gemm;
};
template <> struct fp8_variant_of<3> {
    using Kind = scaled_fp8<Shape<_128, _256, _128>, Cluster,
                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum, CoopEpi>;
    using Gemm = Kind::Gemm;
};
template <> struct fp8_variant_of<4> {
    using Kind = scaled_fp8<Shape<_64, _192, _128>, Cluster, PtrPingpong, PingpongEpi>;
    using Gemm = Kind::Gemm;
};
constexpr int FP8_VARIANTS = 5;
static_assert(FMCU_PF_FP8_G1 >= 0 && FMCU_PF_FP8_G1 < FP8_VARIANTS && FMCU_PF_FP8_G1_SMALL >= 0 &&
                  FMCU_PF_FP8_G1_SMALL < FP8_VARIANTS && FMCU_PF_FP8_G1_MID >= 0 &&
                  FMCU_PF_FP8_G1_MID < FP8_VARIANTS && FMCU_PF_FP8_G2 >= 0 && FMCU_PF_FP8_G2 < FP8_VARIANTS &&
                  FMCU_PF_FP8_G2_LARGE >= 0 && FMCU_PF_FP8_G2_LARGE < FP8_VARIANTS,
              "FMCU_PF_FP8_G1/G2 variants: 0 to 4");
using GemmFP8G1 = fp8_variant_of<FMCU_PF_FP8_G1>::Gemm;
using GemmFP8G1Small = fp8_variant_of<FMCU_PF_FP8_G1_SMALL>::Gemm;
using GemmFP8G1Mid = fp8_variant_of<FMCU_PF_FP8_G1_MID>::Gemm;
using GemmFP8G2 = fp8_variant_of<FMCU_PF_FP8_G2>::Gemm;
using GemmFP8G2Large = fp8_variant_of<FMCU_PF_FP8_G2_LARGE>::Gemm;
/* GEMM1 with the fused activation (FMCU_PF_FUSE=2), by default the same
 * kernel as GEMM1's. Kernel 1 (ping-pong, the epilogue under the other
 * warp group's main loop) was faster at Qwen3-30B-A3B M=1024 (353 vs 424 us
 * forward, unfused) but slower at M=8192 and on Mixtral (H100,
 * bench/cuda/RESULTS.md "Fused GEMM1"); kernel 4 spills with the fused
 * epilogue (1.2 KB of spill stores) and was 2-4x slower than unfused
 * (bench/cuda/prefill-2026-11-22b). */
#ifndef FMCU_PF_FP8_G1_ACT
#define FMCU_PF_FP8_G1_ACT FMCU_PF_FP8_G1
#endif
using GemmFP8G1Act = fp8_variant_of<FMCU_PF_FP8_G1_ACT>::Kind::GemmAct;

/* Block scales: 128x128 cooperative with cluster 1x2 (vLLM's choice; each
 * warp group holds a 64x128 f32 accumulator and its per-block partial):
 * 1.2-1.35x the 64x128 ping-pong at M=8192 on an H200 (bench/cuda/RESULTS.md),
 * which FMCU_PF_BLOCK_COOP=0 selects. */
#ifndef FMCU_PF_BLOCK_COOP
#define FMCU_PF_BLOCK_COOP 1
#endif
#if FMCU_PF_BLOCK_COOP
using GemmBlock = grouped<ElemFP8, cute::tuple<LayoutA *, LayoutSFA *>, cute::tuple<LayoutB *, LayoutSFB *>,
                          Shape<_128, _128, _128>, Shape<_1, _2, _1>,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise, CoopEpi,
                          PlainOut>::Gemm;
#else
using GemmBlock = grouped<ElemFP8, cute::tuple<LayoutA *, LayoutSFA *>, cute::tuple<LayoutB *, LayoutSFB *>,
                          TileBlock, Cluster, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                          PingpongEpi, PlainOut>::Gemm;
#endif

/* Every kernel's A, B and D strides are (ld, 1, 0): one type for the setup kernel. */
using StrideRow = typename GemmBF16::GemmKernel::InternalStrideA;
static_assert(std::is_same_v<StrideRow, typename GemmBF16::GemmKernel::InternalStrideB> &&
                  std::is_same_v<StrideRow, typename GemmBF16::GemmKernel::InternalStrideD> &&
                  std::is_same_v<StrideRow, typename GemmFP8G1::GemmKernel::InternalStrideA> &&
                  std::is_same_v<StrideRow, typename GemmFP8G1::GemmKernel::InternalStrideB> &&
                  std::is_same_v<StrideRow, typename GemmFP8G1::GemmKernel::InternalStrideD> &&
                  std::is_same_v<StrideRow, typename GemmFP8G2::GemmKernel::InternalStrideA> &&
                  std::is_same_v<StrideRow, typename GemmFP8G2::GemmKernel::InternalStrideB> &&
                  std::is_same_v<StrideRow, typename GemmFP8G2::GemmKernel::InternalStrideD> &&
                  std::is_same_v<StrideRow, typename GemmBlock::GemmKernel::InternalStrideA> &&
                  std::is_same_v<StrideRow, typename GemmBlock::GemmKernel::InternalStrideB> &&
                  std::is_same_v<StrideRow, typename GemmBlock::GemmKernel::InternalStrideD>,
              "row-major strides expected");

/* Per-expert arrays of one GEMM, in the pf_args buffer. */
struct gemm_arrays {
    ProblemMNK *shape;
    const void **a, **b;
    void **d;
    StrideRow *sa, *sb, *sd;
    const float **s0, **s1;        /* row/column scale pointers (fp8), SFA/SFB (block) */
    LayoutSFA *lsfa;
    LayoutSFB *lsfb;
};

/* Carve the arrays of both GEMMs out of pf_args; the end offset (bytes). */
size_t carve(uint8_t *base, uint32_t E, gemm_arrays g[2])
{
    size_t at = 0;
    auto take = [&](size_t elem) {
        uint8_t *p = base + at;
        at += (elem * E + 15) & ~(size_t)15;
        return (void *)p;
    };
    for (int j = 0; j < 2; j++) {
        g[j].shape = (ProblemMNK *)take(sizeof(ProblemMNK));
        g[j].a = (const void **)take(sizeof(void *));
        g[j].b = (const void **)take(sizeof(void *));
        g[j].d = (void **)take(sizeof(void *));
        g[j].sa = (StrideRow *)take(sizeof(StrideRow));
        g[j].sb = (StrideRow *)take(sizeof(StrideRow));
        g[j].sd = (StrideRow *)take(sizeof(StrideRow));
        g[j].s0 = (const float **)take(sizeof(float *));
        g[j].s1 = (const float **)take(sizeof(float *));
        g[j].lsfa = (LayoutSFA *)take(sizeof(LayoutSFA));
        g[j].lsfb = (LayoutSFB *)take(sizeof(LayoutSFB));
    }
    return at;
}

/* What one GEMM of the setup kernel needs besides the arrays. */
struct gemm_setup {
    int N, K;
    const uint8_t *a;              /* sorted input rows [R, K] */
    const uint8_t *w;              /* [E, N, K] */
    bf16 *d;                       /* [R, N] */
    int esize;
    /* fp8: row scale base (per row when row_vec, else one value) and column scale base. */
    const float *row_scale;
    int row_vec;
    const float *col_scale;        /* [E, N] or [E] */
    int col_vec;
    /* block: activation scales (grouped M-major) and weight scales [E, N/128, K/128]. */
    const float *sfa, *sfb;
};

struct setup_args {
    uint32_t E;
    const int32_t *offsets, *sorted;
    int32_t *gg_sched; /* our grouped GEMM's tile counter (layout.h) */
    gemm_arrays g[2];
    gemm_setup s[2];
};

__global__ void setup_kernel(const setup_args a)
{
    for (uint32_t e = threadIdx.x; e < a.E; e += blockDim.x) {
        const int off = a.offsets[e], M = a.offsets[e + 1] - off;
        for (int j = 0; j < 2; j++) {
            const gemm_arrays &g = a.g[j];
            const gemm_setup &s = a.s[j];
            const int N = s.N, K = s.K;
            g.shape[e] = ProblemMNK(M, N, K);
            g.a[e] = s.a + (int64_t)off * K * s.esize;
            g.b[e] = s.w + (int64_t)e * N * K * s.esize;
            g.d[e] = s.d + (int64_t)off * N;
            StrideRow sa{}, sb{}, sd{};
            get<0>(sa) = K;
            get<0>(sb) = K;
            get<0>(sd) = N;
            g.sa[e] = sa;
            g.sb[e] = sb;
            g.sd[e] = sd;
            if (s.sfa) {
                g.s0[e] = s.sfa + (int64_t)off * (K / GROUP);
                g.s1[e] = s.sfb + (int64_t)e * (N / GROUP) * (K / GROUP);
                g.lsfa[e] = BlockScale::tile_atom_to_shape_SFA(make_shape(M, N, K, 1));
                g.lsfb[e] = BlockScale::tile_atom_to_shape_SFB(make_shape(M, N, K, 1));
            } else if (s.row_scale) {
                g.s0[e] = s.row_vec ? s.row_scale + off : s.row_scale;
                g.s1[e] = s.col_vec ? s.col_scale + (int64_t)e * N : s.col_scale + e;
            }
        }
    }
}

cudaError_t status_error(cutlass::Status s)
{
    if (s == cutlass::Status::kSuccess)
        return cudaSuccess;
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaErrorLaunchFailure;
}

template <class Gemm> size_t workspace_of(const typename Gemm::Arguments &args)
{
    return Gemm::get_workspace_size(args);
}

/* Host-side set-up of one GEMM (TMA descriptor templates, shared-memory
 * attribute); nothing is enqueued. */
template <class Gemm> cudaError_t init_gemm(Gemm &gemm, const typename Gemm::Arguments &args, void *workspace,
                                            cudaStream_t st)
{
    if (Gemm::get_workspace_size(args) > FMCU_PF_CUTLASS_WS)
        return cudaErrorInvalidValue;
    return status_error(gemm.initialize(args, workspace, st));
}

template <class Gemm> cudaError_t launch_gemm(Gemm &gemm, cudaStream_t st)
{
    cudaError_t e = status_error(gemm.run(st));
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* One GEMM of our own kernel (grouped_gemm.h) in the place of a CUTLASS one:
 * the same operands, scales and D as the setup kernel gives CUTLASS. */
struct OwnGemm {
    fmcu_gg_args a;
    fmcu_gg_kind kind;
    int sms;
};

OwnGemm own_gemm(const gemm_setup &s, const int32_t *offsets, int32_t *sched, uint32_t E, int64_t rows_cap,
                 fmcu_gg_kind kind, int sms)
{
    OwnGemm g = {};
    g.a.a = s.a;
    g.a.b = s.w;
    g.a.d = s.d;
    g.a.s_row = s.row_scale;
    g.a.s_col = s.col_scale;
    g.a.offsets = offsets;
    g.a.sched = sched;
    g.a.row_vec = s.row_vec;
    g.a.col_vec = s.col_vec;
    g.a.E = E;
    g.a.N = (uint32_t)s.N;
    g.a.K = (uint32_t)s.K;
    g.a.rows_cap = rows_cap;
    g.a.bf16 = s.esize == 2;
    /* For A/B timing, read once per process: FMCU_GG_HALF=0 whole tiles
     * only, FMCU_GG_ORDER=fixed|counter one tile order for every kind
     * (grouped_gemm.h; anything else: the kind's). */
    static const int whole = fmcu_gg_whole_tiles(getenv("FMCU_GG_HALF"));
    static const int order = fmcu_gg_order(getenv("FMCU_GG_ORDER"));
    g.a.whole_tiles = whole;
    g.a.order = order;
    if (g.a.bf16)
        g.a.s_row = g.a.s_col = nullptr;
    g.kind = kind;
    g.sms = sms;
    return g;
}

cudaError_t launch_gemm(OwnGemm &g, cudaStream_t st)
{
    return fmcu_gg_launch(&g.a, g.kind, g.sms, st);
}

cutlass::KernelHardwareInfo hw_of(int device, int sms)
{
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sms;
    return hw;
}

/* What the grouped GEMMs' arguments share: E problems whose shapes the
 * device wrote (g.shape), no C operand, this device's SMs. Each args_*
 * below adds its main loop, its epilogue's parameters and D. */
template <class Gemm>
typename Gemm::Arguments grouped_args(const gemm_arrays &g, uint32_t E, const cutlass::KernelHardwareInfo &hw)
{
    typename Gemm::Arguments a;
    a.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    a.problem_shape = {(int)E, g.shape, nullptr};
    a.epilogue.ptr_C = nullptr;
    a.epilogue.dC = nullptr;
    a.hw_info = hw;
    return a;
}

/* D: the bf16 rows of g, or none (the fused GEMM1's epilogue stores the
 * activation itself). */
template <class Args> void set_d(Args &a, const gemm_arrays &g)
{
    a.epilogue.ptr_D = (ElemBF16 **)g.d;
    a.epilogue.dD = g.sd;
}
template <class Args> void no_d(Args &a)
{
    a.epilogue.ptr_D = nullptr;
    a.epilogue.dD = nullptr;
}

template <class Gemm = GemmBF16>
typename Gemm::Arguments args_bf16(const gemm_arrays &g, uint32_t E, const cutlass::KernelHardwareInfo &hw)
{
    auto a = grouped_args<Gemm>(g, E, hw);
    a.mainloop = {(const ElemBF16 **)g.a, g.sa, (const ElemBF16 **)g.b, g.sb};
    a.epilogue.thread.alpha = 1.0f;
    a.epilogue.thread.beta = 0.0f;
    set_d(a, g);
    return a;
}

/* The fused GEMM1 (D void: GatedActStore writes the activation). */
template <class Gemm = GemmBF16Act>
typename Gemm::Arguments args_bf16_act(const gemm_arrays &g, uint32_t E, const cutlass::KernelHardwareInfo &hw,
                                       const act_epi &ae)
{
    auto a = grouped_args<Gemm>(g, E, hw);
    a.mainloop = {(const ElemBF16 **)g.a, g.sa, (const ElemBF16 **)g.b, g.sb};
    a.epilogue.thread = {{}, ae};
    no_d(a);
    return a;
}

/* The promoted FP8 main loop's interval, in wgmma instructions (K = 32
 * each): one K tile. Fast accumulation has no such field. */
template <class Mainloop>
auto set_promotion(Mainloop &m, uint32_t n, int) -> decltype(m.mma_promotion_interval = n, void())
{
    m.mma_promotion_interval = n;
}
template <class Mainloop> void set_promotion(Mainloop &, uint32_t, long) {}

template <class Gemm>
typename Gemm::Arguments args_fp8(const gemm_arrays &g, uint32_t E, bool vec, const cutlass::KernelHardwareInfo &hw,
                                  uint32_t promote = 0)
{
    auto a = grouped_args<Gemm>(g, E, hw);
    a.mainloop = {(const ElemFP8 **)g.a, g.sa, (const ElemFP8 **)g.b, g.sb};
    set_promotion(a.mainloop, promote ? promote : (uint32_t)size<2>(typename Gemm::GemmKernel::TileShape{}) / 32, 0);
    a.epilogue.thread = {
        {},                                                          /* accumulator */
        {{(const float *const *)g.s0, 0.0f, {vec, _0{}, 0}},         /* row (token) scale */
         {(const float *const *)g.s1, 0.0f, {_0{}, vec, 0}},         /* column (channel) scale */
         {}},
        {}};
    set_d(a, g);
    return a;
}

typename GemmFP8G1Act::Arguments args_fp8_act(const gemm_arrays &g, uint32_t E, bool vec,
                                              const cutlass::KernelHardwareInfo &hw, const act_epi &ae)
{
    auto a = grouped_args<GemmFP8G1Act>(g, E, hw);
    a.mainloop = {(const ElemFP8 **)g.a, g.sa, (const ElemFP8 **)g.b, g.sb};
    set_promotion(a.mainloop, (uint32_t)size<2>(typename GemmFP8G1Act::GemmKernel::TileShape{}) / 32, 0);
    a.epilogue.thread = {{{},                                                  /* accumulator */
                          {{(const float *const *)g.s0, 0.0f, {vec, _0{}, 0}}, /* row (token) scale */
                           {(const float *const *)g.s1, 0.0f, {_0{}, vec, 0}}, /* column (channel) scale */
                           {}},
                          {}},
                         ae};
    no_d(a);
    return a;
}

typename GemmBlock::Arguments args_block(const gemm_arrays &g, uint32_t E, const cutlass::KernelHardwareInfo &hw)
{
    auto a = grouped_args<GemmBlock>(g, E, hw);
    a.mainloop = {(const ElemFP8 **)g.a, g.sa,     (const ElemFP8 **)g.b, g.sb,
                  (const float **)g.s0,  g.lsfa, (const float **)g.s1,  g.lsfb};
    a.epilogue.thread.alpha = 1.0f;
    a.epilogue.thread.beta = 0.0f;
    set_d(a, g);
    return a;
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                 */
/* ------------------------------------------------------------------------ */

constexpr int MAX_DEVICES = 64;
std::atomic<int> g_major[MAX_DEVICES], g_sms[MAX_DEVICES]; /* 0: not read yet */

bool device_info(int device, int *major, int *sms)
{
    if (device < 0 || device >= MAX_DEVICES)
        return false;
    int mj = g_major[device].load(std::memory_order_relaxed), n = g_sms[device].load(std::memory_order_relaxed);
    if (mj == 0 || n == 0) {
        if (cudaDeviceGetAttribute(&mj, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        g_major[device].store(mj, std::memory_order_relaxed);
        g_sms[device].store(n, std::memory_order_relaxed);
    }
    *major = mj;
    *sms = n;
    return true;
}

template <typename T> T *ws_at(const fmcu_layer *L, size_t off)
{
    return (T *)((char *)L->workspace + off);
}

int quant_mode(int32_t quant)
{
    switch (quant) {
    case FMCU_Q_TENSOR: return QM_TENSOR;
    case FMCU_Q_CHANNEL: return QM_TOKEN;
    case FMCU_Q_BLOCK: return QM_GROUP;
    default: return QM_BF16;
    }
}

/* Scalars in pf_scalars: amax of the GEMM1 / GEMM2 inputs, their dynamic per-tensor scales. */
enum { SC_AMAX1, SC_AMAX2, SC_SCALE1, SC_SCALE2, SC_AMAX2_EXACT, SC_N_CAND, SC_COUNT };
static_assert(SC_COUNT * sizeof(float) <= FMCU_PF_SCALARS, "pf_scalars too small");

#define PF_CK(call)                                                                                                 \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess)                                                                                      \
            return e_;                                                                                              \
    } while (0)
#define PF_EVENT(n)                                                                                                 \
    do {                                                                                                            \
        if (ev)                                                                                                     \
            PF_CK(cudaEventRecord(ev[n], st));                                                                      \
    } while (0)

/* Enqueue the whole pipeline; both GEMMs are initialized already. fused
 * (NULL: act_kernel runs): GEMM1's epilogue writes the activations, the
 * GEMM2 input itself for bf16, bf16 in aa.stage for fp8 (quantized here),
 * and leaves the pairs of fused->slow for fixup_kernel. */
template <class Gemm1, class Gemm2>
cudaError_t launch(Gemm1 &g1, Gemm2 &g2, int64_t m, const void *x, int64_t x_ld, const setup_args &sa, const gather_args &ga,
                   const act_args &aa, const combine_args &cb, bool dyn_tensor,
                   const fixup_args *fused, cudaStream_t st, cudaEvent_t *ev)
{
    const int64_t mask_words = (m * (int64_t)ga.k * aa.I + 31) / 32;
    const unsigned grid = (unsigned)(m * (int64_t)ga.k);
    uint32_t *amax = (uint32_t *)ga.amax; /* the first of the SC_COUNT scalars */
    PF_EVENT(0);
    setup_kernel<<<1, 256, 0, st>>>(sa);
    PF_CK(cudaGetLastError());
    if (dyn_tensor) {
        PF_CK(cudaMemsetAsync(amax, 0, SC_COUNT * sizeof(uint32_t), st));
        amax_rows_kernel<<<(unsigned)m, 256, 0, st>>>((const bf16 *)x, x_ld, ga.H, amax);
        PF_CK(cudaGetLastError());
    }
    pos_kernel<<<(grid + 255) / 256, 256, 0, st>>>(sa.sorted, ga.offsets + sa.E, (int32_t *)ga.pos);
    PF_CK(cudaGetLastError());
    gather_kernel<<<(unsigned)m, 256, 0, st>>>(ga);
    PF_CK(cudaGetLastError());
    if (fused)
        PF_CK(cudaMemsetAsync((void *)fused->slow, 0, (size_t)mask_words * sizeof(uint32_t), st));
    PF_EVENT(1);
    PF_CK(launch_gemm(g1, st));
    PF_EVENT(2);
    PF_CK(act_stage(aa, fused, grid, dyn_tensor, st));
    PF_EVENT(3);
    PF_CK(launch_gemm(g2, st));
    PF_EVENT(4);
    combine_kernel<<<(unsigned)m, 256, 0, st>>>(cb);
    PF_CK(cudaGetLastError());
    PF_EVENT(5);
    return cudaSuccess;
}

#undef PF_CK
#undef PF_EVENT

/* The tensor/channel pipeline with FP8 kernels Gemm1 and Gemm2; promote:
 * the promotion interval in wgmma instructions (0: one K tile). */
template <class Gemm1, class Gemm2>
cudaError_t forward_fp8(int64_t m, const void *x, int64_t x_ld, const setup_args &sa, const gather_args &ga,
                        const act_args &aa, const combine_args &cb,
                        bool dyn_tensor, bool vec_scale, const cutlass::KernelHardwareInfo &hw, void *cws,
                        cudaStream_t st, cudaEvent_t *ev, uint32_t promote = 0)
{
    Gemm1 g1;
    Gemm2 g2;
    cudaError_t e = init_gemm(g1, args_fp8<Gemm1>(sa.g[0], sa.E, vec_scale, hw, promote), cws, st);
    if (e == cudaSuccess)
        e = init_gemm(g2, args_fp8<Gemm2>(sa.g[1], sa.E, vec_scale, hw, promote), cws, st);
    if (e != cudaSuccess)
        return e;
    return launch(g1, g2, m, x, x_ld, sa, ga, aa, cb, dyn_tensor, nullptr, st, ev);
}

/* The tensor/channel pipeline with our grouped FP8 GEMM (grouped_gemm.h) for
 * GEMM1 (kind k1) and/or GEMM2 (k2); a negative kind keeps that GEMM on
 * CUTLASS kernel Gemm1 / Gemm2. */
template <class Gemm1, class Gemm2>
cudaError_t forward_own(int k1, int k2, int sms, int64_t m, const void *x, int64_t x_ld, const setup_args &sa,
                        const gather_args &ga, const act_args &aa,
                        const combine_args &cb, bool dyn_tensor, bool vec_scale, const cutlass::KernelHardwareInfo &hw,
                        void *cws, cudaStream_t st, cudaEvent_t *ev)
{
    const int64_t rows_cap = m * (int64_t)ga.k;
    OwnGemm o1 = own_gemm(sa.s[0], sa.offsets, sa.gg_sched, sa.E, rows_cap, (fmcu_gg_kind)(k1 < 0 ? 0 : k1), sms);
    OwnGemm o2 = own_gemm(sa.s[1], sa.offsets, sa.gg_sched, sa.E, rows_cap, (fmcu_gg_kind)(k2 < 0 ? 0 : k2), sms);
    if (k1 >= 0 && k2 >= 0)
        return launch(o1, o2, m, x, x_ld, sa, ga, aa, cb, dyn_tensor, nullptr, st, ev);
    if (k1 >= 0) {
        Gemm2 g2;
        cudaError_t e = init_gemm(g2, args_fp8<Gemm2>(sa.g[1], sa.E, vec_scale, hw), cws, st);
        return e != cudaSuccess ? e
                                : launch(o1, g2, m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                         nullptr, st, ev);
    }
    Gemm1 g1;
    cudaError_t e = init_gemm(g1, args_fp8<Gemm1>(sa.g[0], sa.E, vec_scale, hw), cws, st);
    return e != cudaSuccess
               ? e
               : launch(g1, o2, m, x, x_ld, sa, ga, aa, cb, dyn_tensor, nullptr, st, ev);
}

/* Our grouped kernels' kinds for this call: fmcu_gg_kinds (launch_shape.h
 * has the rules), with FMCU_PF_OWN read once per process. Against
 * CUTLASS's kernels, H100, forward as a CUDA graph, the same output bits
 * (bench/cuda/own-fp8-2026-11-22): fp8 channel M=8192 -3% (Mixtral, 2048
 * rows) to -14% (DeepSeek-V3), M=1024 -5% (32-64 rows) to -12% (Mixtral,
 * 256 rows). 192-column GEMM2 tiles on the other models' H (multiples of
 * 256) gained nothing in the forward (bench/cuda/pingpong-2026-11-22). */
void own_kinds(bool bf16, int64_t rows, uint32_t H, int *k1, int *k2)
{
    static const char *const env = getenv("FMCU_PF_OWN");
    fmcu_gg_kinds(bf16, rows, H, env, k1, k2);
}

/* The bf16 pipeline with GEMM1 of kind K1 (its GemmAct when fused: the
 * activation in the epilogue, fx the fixup) and GEMM2 of kind K2. */
template <class K1, class K2>
cudaError_t forward_bf16(int64_t m, const void *x, int64_t x_ld, const setup_args &sa, const gather_args &ga,
                         const act_args &aa, const combine_args &cb,
                         const act_epi &ae, const fixup_args *fx, const cutlass::KernelHardwareInfo &hw, void *cws,
                         cudaStream_t st, cudaEvent_t *ev)
{
    typename K2::Gemm g2;
    cudaError_t e = init_gemm(g2, args_bf16<typename K2::Gemm>(sa.g[1], sa.E, hw), cws, st);
    if (e != cudaSuccess)
        return e;
    if (fx) {
        typename K1::GemmAct g1;
        e = init_gemm(g1, args_bf16_act<typename K1::GemmAct>(sa.g[0], sa.E, hw, ae), cws, st);
        if (e != cudaSuccess)
            return e;
        return launch(g1, g2, m, x, x_ld, sa, ga, aa, cb, false, fx, st, ev);
    }
    typename K1::Gemm g1;
    e = init_gemm(g1, args_bf16<typename K1::Gemm>(sa.g[0], sa.E, hw), cws, st);
    if (e != cudaSuccess)
        return e;
    return launch(g1, g2, m, x, x_ld, sa, ga, aa, cb, false, nullptr, st, ev);
}

/* Average rows per local expert from which the kernels with 128-row tiles
 * run (bf16 and fp8): below it most of their tiles would be half empty.
 * The bf16 GEMM1 (with the fused activation) also needs K = H of at least
 * FMCU_PF_BF16_G1_LARGE_K: the cooperative kernel's epilogue does not
 * overlap the main loop, so the K loop must be long. Forward as a CUDA
 * graph at M=8192 with the large GEMM1 (GEMM2 large either way): K = 2880
 * (gpt-oss-120b, 256 rows) +3%, 4096 (Mixtral, 2048 rows) -5%, 7168
 * (DeepSeek-V3, 256 rows) -9%; its GEMM1 alone at K = 2048 (Qwen3) +5%.
 * The GEMM2 won 5-19% wherever rows >= 256 and lost 11-13% at 32-64 rows
 * (H100, bench/cuda/prefill-2026-11-22). */
#ifndef FMCU_PF_LARGE_ROWS
#define FMCU_PF_LARGE_ROWS 128
#endif
#ifndef FMCU_PF_BF16_G1_LARGE_K
#define FMCU_PF_BF16_G1_LARGE_K 4096
#endif

bool bf16_large_rule(int gemm, int64_t rows, uint32_t H)
{
    return rows >= FMCU_PF_LARGE_ROWS && (gemm == 1 || H >= FMCU_PF_BF16_G1_LARGE_K);
}

#if defined(FMCU_PF_TUNING)
/* Tuning builds: FMCU_PF_BF16=AB picks the bf16 GEMM1's kind A and GEMM2's
 * kind B (0 small, 1 large; default bf16_large_rule). */
bool bf16_large(int gemm, int64_t rows, uint32_t H)
{
    const char *v = getenv("FMCU_PF_BF16");
    if (v && strlen(v) == 2 && (v[gemm] == '0' || v[gemm] == '1'))
        return v[gemm] == '1';
    return bf16_large_rule(gemm, rows, H);
}
#else
bool bf16_large(int gemm, int64_t rows, uint32_t H)
{
    return bf16_large_rule(gemm, rows, H);
}
#endif

/* The fp8 GEMM1 for an average of `rows` rows per local expert: 0 small
 * (FMCU_PF_FP8_G1_SMALL), 1 mid (FMCU_PF_FP8_G1_MID), 2 large (FMCU_PF_FP8_G1). */
int fp8_g1_kind(int64_t rows)
{
    return rows < FMCU_PF_LARGE_ROWS ? 0 : rows < FMCU_PF_FP8_G1_LARGE_ROWS ? 1 : 2;
}

#if defined(FMCU_PF_TUNING)
/* Tuning builds: FMCU_PF_FP8=AB picks GEMM1's kernel A and GEMM2's kernel B
 * (digits 0..4; default the production choice), FMCU_PF_FP8_PROMOTE=n the
 * promotion interval in wgmma instructions (a multiple of the K tile's). */
int fp8_variant(int gemm, int64_t rows)
{
    const char *v = getenv("FMCU_PF_FP8");
    if (v && strlen(v) == 2 && v[gemm] >= '0' && v[gemm] < '0' + FP8_VARIANTS)
        return v[gemm] - '0';
    if (gemm)
        return rows >= FMCU_PF_LARGE_ROWS ? FMCU_PF_FP8_G2_LARGE : FMCU_PF_FP8_G2;
    const int kind = fp8_g1_kind(rows);
    return kind == 0 ? FMCU_PF_FP8_G1_SMALL : kind == 1 ? FMCU_PF_FP8_G1_MID : FMCU_PF_FP8_G1;
}

template <int V1>
cudaError_t forward_fp8_v1(int v2, int64_t m, const void *x, int64_t x_ld, const setup_args &sa,
                           const gather_args &ga, const act_args &aa,
                           const combine_args &cb, bool dyn_tensor, bool vec_scale,
                           const cutlass::KernelHardwareInfo &hw, void *cws, cudaStream_t st, cudaEvent_t *ev)
{
    const char *p = getenv("FMCU_PF_FP8_PROMOTE");
    const uint32_t promote = p ? (uint32_t)atoi(p) : 0;
    using G1 = typename fp8_variant_of<V1>::Gemm;
    switch (v2) {
    case 0:
        return forward_fp8<G1, fp8_variant_of<0>::Gemm>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                        vec_scale, hw, cws, st, ev, promote);
    case 1:
        return forward_fp8<G1, fp8_variant_of<1>::Gemm>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                        vec_scale, hw, cws, st, ev, promote);
    case 3:
        return forward_fp8<G1, fp8_variant_of<3>::Gemm>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                        vec_scale, hw, cws, st, ev, promote);
    default:
        return forward_fp8<G1, fp8_variant_of<2>::Gemm>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                        vec_scale, hw, cws, st, ev, promote);
    }
}

template <int V = 0> size_t fp8_workspace_max(const gemm_arrays &g, uint32_t E, const cutlass::KernelHardwareInfo &hw)
{
    using Gemm = typename fp8_variant_of<V>::Gemm;
    size_t n = workspace_of<Gemm>(args_fp8<Gemm>(g, E, true, hw));
    if constexpr (V + 1 < FP8_VARIANTS)
        n = std::max(n, fp8_workspace_max<V + 1>(g, E, hw));
    return n;
}
#endif

cudaError_t forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                    const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted, void *out,
                    int64_t out_ld, cudaStream_t st, cudaEvent_t *ev)
{
    const uint32_t E = L->local_experts, H = L->hidden, I = L->inter, k = L->top_k;
    if (m <= 0)
        return cudaSuccess;
    int major = 0, sms = 0;
    if (!device_info(L->device, &major, &sms))
        return cudaErrorInvalidDevice;
    const int mode = quant_mode(L->quant);
    const bool fp8 = L->quant != FMCU_Q_NONE, block = L->quant == FMCU_Q_BLOCK;
    const bool dyn_tensor = L->quant == FMCU_Q_TENSOR && L->a_dynamic;
    const int esize = fp8 ? 1 : 2;
    /* GEMM1 with the activation in its epilogue, reading the interleaved
     * W13 (fmcu_prefill_interleave); the block scheme's 128-row weight
     * scales do not survive the interleave, and tuning builds time the
     * separate kernels. */
#if defined(FMCU_PF_TUNING)
    const bool fuse = L->pf_w13 && L->quant == FMCU_Q_NONE;
#else
    const bool fuse = L->pf_w13 && L->quant != FMCU_Q_BLOCK;
#endif
    uint32_t *scal = ws_at<uint32_t>(L, L->ws.pf_scalars);
    float *scal_f = (float *)scal;
    void *a1 = ws_at<void>(L, L->ws.pf_a1);
    float *a1_scale = ws_at<float>(L, L->ws.pf_a1_scale);
    bf16 *h = ws_at<bf16>(L, L->ws.pf_h);
    int32_t *pos = ws_at<int32_t>(L, L->ws.pf_pos);
    void *a2 = fp8 ? ws_at<void>(L, L->ws.a2) : ws_at<void>(L, L->ws.act);
    float *a2_scale = ws_at<float>(L, L->ws.a2_scale);
    bf16 *stage = ws_at<bf16>(L, L->ws.act);
    bf16 *y = ws_at<bf16>(L, L->ws.y);

    /* Host-side GEMM arguments first, so that nothing waits between launches. */
    setup_args sa = {};
    sa.E = E;
    sa.offsets = offsets;
    sa.sorted = sorted;
    sa.gg_sched = ws_at<int32_t>(L, L->ws.gg_sched);
    size_t used = carve(ws_at<uint8_t>(L, L->ws.pf_args), E, sa.g);
    if (used > (size_t)E * FMCU_PF_ARGS_PER_EXPERT + FMCU_PF_ARGS_FIXED)
        return cudaErrorInvalidValue;
    const float *in_scale[2] = {nullptr, nullptr};
    if (L->quant == FMCU_Q_TENSOR)
        for (int j = 0; j < 2; j++)
            in_scale[j] = L->a_dynamic ? scal_f + SC_SCALE1 + j : L->in_scales + j;
    for (int j = 0; j < 2; j++) {
        gemm_setup &s = sa.s[j];
        s.N = j ? (int)H : (int)L->rows13;
        s.K = j ? (int)I : (int)H;
        s.a = (const uint8_t *)(j ? a2 : a1);
        s.w = (const uint8_t *)(j ? L->w2 : fuse ? L->pf_w13 : L->w13);
        s.d = j ? y : h;
        s.esize = esize;
        const float *wscale = j ? L->w2_scale : fuse && L->quant == FMCU_Q_CHANNEL ? L->pf_w13_scale : L->w13_scale;
        if (L->quant == FMCU_Q_TENSOR) {
            s.row_scale = in_scale[j];
            s.col_scale = wscale;
        } else if (L->quant == FMCU_Q_CHANNEL) {
            s.row_scale = j ? a2_scale : a1_scale;
            s.row_vec = 1;
            s.col_scale = wscale;
            s.col_vec = 1;
        } else if (block) {
            s.sfa = j ? a2_scale : a1_scale;
            s.sfb = wscale;
        }
    }
    const cutlass::KernelHardwareInfo hw = hw_of(L->device, sms);
    void *cws = ws_at<void>(L, L->ws.pf_cutlass);
    const bool vec_scale = L->quant == FMCU_Q_CHANNEL;

    gather_args ga = {};
    ga.x = (const bf16 *)x;
    ga.x_ld = x_ld;
    ga.H = H;
    ga.k = k;
    ga.vec = ((uintptr_t)x % 16 == 0) && (x_ld % 8 == 0);
    ga.offsets = offsets;
    ga.pair_local = pair_local;
    ga.pos = pos;
    ga.mode = mode;
    ga.ue8m0 = L->ue8m0;
    ga.static_scale = L->quant == FMCU_Q_TENSOR && !L->a_dynamic ? L->in_scales : nullptr;
    ga.amax = scal + SC_AMAX1;
    ga.tensor_scale = scal_f + SC_SCALE1;
    ga.dst = a1;
    ga.scale = a1_scale;

    act_args aa = {};
    aa.h = h;
    aa.I = I;
    aa.rows13 = L->rows13;
    aa.E = E;
    aa.fn = {L->activation, L->gated, L->swiglu_alpha, L->swiglu_limit};
    aa.offsets = offsets;
    aa.mode = mode;
    aa.ue8m0 = L->ue8m0;
    aa.dynamic = dyn_tensor;
    aa.static_scale = L->quant == FMCU_Q_TENSOR && !L->a_dynamic ? L->in_scales + 1 : nullptr;
    aa.dst = a2;
    aa.scale = a2_scale;
    aa.stage = stage;
    aa.amax = scal + SC_AMAX2;
    aa.tensor_scale = scal_f + SC_SCALE2;
    if (dyn_tensor) {
        aa.row_max = a2_scale; /* per-token scales: unused by this scheme */
        aa.cand = (int32_t *)y; /* free until GEMM2 writes it (R ints <= R*H bf16) */
        aa.n_cand = scal + SC_N_CAND;
        aa.amax_exact = scal + SC_AMAX2_EXACT;
        aa.a1 = (const uint8_t *)a1;
        aa.w13 = (const uint8_t *)L->w13;
        aa.s_x = in_scale[0];
        aa.s_w = L->w13_scale;
        aa.H = H;
    }
    /* The fused epilogue's output: the GEMM2 input (bf16) or the bf16
     * activations a quantize pass reads (fp8). */
    act_epi ae = {};
    ae.offsets = offsets;
    ae.ld = I;
    ae.fn = aa.fn;
    ae.out = L->quant == FMCU_Q_NONE ? (bf16 *)a2 : stage;
    ae.amax = dyn_tensor ? aa.amax : nullptr;
    /* The slow pairs' gate and up take h's place (unused when fused), their
     * mask y's (free until GEMM2; R*I/8 <= 2*R*H bytes, checked by
     * fmcu_prefill_fused_bytes). */
    ae.gu = h;
    ae.slow = (uint32_t *)y;
    fixup_args fx = {};
    fx.slow = ae.slow;
    fx.gu = h;
    fx.I = I;
    fx.total = offsets + E;
    fx.fn = ae.fn;
    fx.out = ae.out;
    fx.amax = ae.amax;

    combine_args cb = {};
    cb.y = y;
    cb.w = topk_w;
    cb.pair_local = pair_local;
    cb.pos = pos;
    cb.k = k;
    cb.H = H;
    cb.vec = ((uintptr_t)out % 16 == 0) && (out_ld % 8 == 0);
    cb.out = (bf16 *)out;
    cb.ldo = out_ld;

    /* Tile kinds from the average rows per local expert (host-known: a
     * captured graph does not depend on the routing). */
    const int64_t rows = m * (int64_t)k / (E ? E : 1);
    const bool fp8_large = rows >= FMCU_PF_LARGE_ROWS;
    if (L->quant == FMCU_Q_NONE) {
        /* Ours for both GEMMs unless the interleaved W13 of CUTLASS's fused
         * GEMM1 was made (FMCU_PF_FUSE=1 at finalize) or FMCU_PF_OWN asks
         * for CUTLASS; the activation kernel runs between them. */
        int k1, k2;
        own_kinds(true, rows, H, &k1, &k2);
        if (!fuse && k1 >= 0 && k2 >= 0) {
            OwnGemm o1 = own_gemm(sa.s[0], offsets, sa.gg_sched, E, m * (int64_t)k, (fmcu_gg_kind)k1, sms);
            OwnGemm o2 = own_gemm(sa.s[1], offsets, sa.gg_sched, E, m * (int64_t)k, (fmcu_gg_kind)k2, sms);
            return launch(o1, o2, m, x, x_ld, sa, ga, aa, cb, false, nullptr, st, ev);
        }
        const fixup_args *f = fuse ? &fx : nullptr;
        const bool l1 = bf16_large(0, rows, H), l2 = bf16_large(1, rows, H);
        if (l1 && l2)
            return forward_bf16<BF16Large, BF16Large>(m, x, x_ld, sa, ga, aa, cb, ae, f, hw,
                                                      cws, st, ev);
        if (l1)
            return forward_bf16<BF16Large, BF16Small>(m, x, x_ld, sa, ga, aa, cb, ae, f, hw,
                                                      cws, st, ev);
        if (l2)
            return forward_bf16<BF16Small, BF16Large>(m, x, x_ld, sa, ga, aa, cb, ae, f, hw,
                                                      cws, st, ev);
        return forward_bf16<BF16Small, BF16Small>(m, x, x_ld, sa, ga, aa, cb, ae, f, hw, cws,
                                                  st, ev);
    }
#if !defined(FMCU_PF_TUNING)
    if (fuse) {
        GemmFP8G1Act g1;
        GemmFP8G2 g2;
        GemmFP8G2Large g2l;
        cudaError_t e = init_gemm(g1, args_fp8_act(sa.g[0], E, vec_scale, hw, ae), cws, st);
        if (e == cudaSuccess)
            e = fp8_large ? init_gemm(g2l, args_fp8<GemmFP8G2Large>(sa.g[1], E, vec_scale, hw), cws, st)
                          : init_gemm(g2, args_fp8<GemmFP8G2>(sa.g[1], E, vec_scale, hw), cws, st);
        if (e != cudaSuccess)
            return e;
        if (fp8_large)
            return launch(g1, g2l, m, x, x_ld, sa, ga, aa, cb, dyn_tensor, &fx, st, ev);
        return launch(g1, g2, m, x, x_ld, sa, ga, aa, cb, dyn_tensor, &fx, st, ev);
    }
#endif
    if (block) {
        GemmBlock g[2];
        for (int j = 0; j < 2; j++) {
            cudaError_t e = init_gemm(g[j], args_block(sa.g[j], E, hw), cws, st);
            if (e != cudaSuccess)
                return e;
        }
        return launch(g[0], g[1], m, x, x_ld, sa, ga, aa, cb, dyn_tensor, nullptr, st, ev);
    }
#if defined(FMCU_PF_TUNING)
    switch (fp8_variant(0, rows)) {
#define PF_VARIANT(v)                                                                                               \
    case v:                                                                                                         \
        return forward_fp8_v1<v>(fp8_variant(1, rows), m, x, x_ld, sa, ga, aa, cb, dyn_tensor,     \
                                 vec_scale, hw, cws, st, ev);
        PF_VARIANT(0)
        PF_VARIANT(1)
        PF_VARIANT(2)
        PF_VARIANT(3)
        PF_VARIANT(4)
#undef PF_VARIANT
    default: return cudaErrorInvalidValue;
    }
#else
    int k1, k2;
    own_kinds(false, rows, H, &k1, &k2);
    if (k1 >= 0 || k2 >= 0) {
        if (fp8_large && fp8_g1_kind(rows) == 1)
            return forward_own<GemmFP8G1Mid, GemmFP8G2Large>(k1, k2, sms, m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                             vec_scale, hw, cws, st, ev);
        if (fp8_large)
            return forward_own<GemmFP8G1, GemmFP8G2Large>(k1, k2, sms, m, x, x_ld, sa, ga, aa,
                                                          cb, dyn_tensor, vec_scale, hw, cws, st, ev);
        return forward_own<GemmFP8G1Small, GemmFP8G2>(k1, k2, sms, m, x, x_ld, sa, ga, aa,
                                                      cb, dyn_tensor, vec_scale, hw, cws, st, ev);
    }
    if (fp8_large && fp8_g1_kind(rows) == 1)
        return forward_fp8<GemmFP8G1Mid, GemmFP8G2Large>(m, x, x_ld, sa, ga, aa, cb,
                                                         dyn_tensor, vec_scale, hw, cws, st, ev);
    if (fp8_large)
        return forward_fp8<GemmFP8G1, GemmFP8G2Large>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                      vec_scale, hw, cws, st, ev);
    return forward_fp8<GemmFP8G1Small, GemmFP8G2>(m, x, x_ld, sa, ga, aa, cb, dyn_tensor,
                                                  vec_scale, hw, cws, st, ev);
#endif
}

/* The CUTLASS workspace of the layer's largest call fits pf_cutlass. */
bool cutlass_workspace_fits(const fmcu_layer *L, int sms)
{
    gemm_arrays g[2] = {};
    const cutlass::KernelHardwareInfo hw = hw_of(L->device, sms);
    size_t need;
    const uint32_t E = L->local_experts;
    if (L->quant == FMCU_Q_NONE)
        need = std::max({workspace_of<BF16Small::Gemm>(args_bf16<BF16Small::Gemm>(g[0], E, hw)),
                         workspace_of<BF16Small::GemmAct>(args_bf16_act<BF16Small::GemmAct>(g[0], E, hw, act_epi{})),
                         workspace_of<BF16Large::Gemm>(args_bf16<BF16Large::Gemm>(g[0], E, hw)),
                         workspace_of<BF16Large::GemmAct>(args_bf16_act<BF16Large::GemmAct>(g[0], E, hw, act_epi{}))});
    else if (L->quant == FMCU_Q_BLOCK)
        need = workspace_of<GemmBlock>(args_block(g[0], L->local_experts, hw));
    else
#if defined(FMCU_PF_TUNING)
        need = fp8_workspace_max(g[0], L->local_experts, hw);
#else
        need = std::max({workspace_of<GemmFP8G1>(args_fp8<GemmFP8G1>(g[0], L->local_experts, true, hw)),
                         workspace_of<GemmFP8G1Small>(args_fp8<GemmFP8G1Small>(g[0], L->local_experts, true, hw)),
                         workspace_of<GemmFP8G1Mid>(args_fp8<GemmFP8G1Mid>(g[0], L->local_experts, true, hw)),
                         workspace_of<GemmFP8G1Act>(args_fp8_act(g[0], L->local_experts, true, hw, act_epi{})),
                         workspace_of<GemmFP8G2>(args_fp8<GemmFP8G2>(g[0], L->local_experts, true, hw)),
                         workspace_of<GemmFP8G2Large>(args_fp8<GemmFP8G2Large>(g[0], L->local_experts, true, hw))});
#endif
    return need <= FMCU_PF_CUTLASS_WS;
}

} // namespace fmcu_pf

using namespace fmcu_pf;

bool fmcu_prefill_supported_why(const fmcu_layer *L, char *why, size_t cap)
{
    int major = 0, sms = 0;
    if (!device_info(L->device, &major, &sms))
        return refuse(why, cap, "cannot read the device's compute capability");
    if (major != 9)
        return refuse(why, cap, "sm_90a kernels only (this device is not compute capability 9.x)");
    if (L->act_dtype != FMOE_DTYPE_BF16)
        return refuse(why, cap, "bf16 activations only");
    if (L->on_input)
        return refuse(why, cap, "router weight on the input is not served");
    if (L->b13 || (L->add_b2 && L->b2))
        return refuse(why, cap, "biases are not served");
    if (L->hidden % 16 || L->inter % 16)
        return refuse(why, cap, "H and I must be multiples of 16");
    if (L->quant == FMCU_Q_BLOCK &&
        (L->block_n != GROUP || L->block_k != GROUP || L->hidden % GROUP || L->inter % GROUP))
        return refuse(why, cap, "fp8 block: 128x128 blocks with H and I multiples of 128 only");
    if (L->quant == FMCU_Q_CHANNEL && L->inter > TOKEN_MAX_I)
        return refuse(why, cap, "fp8 channel: I > 24576 (a row waits for its per-token scale in 48 KiB of smem)");
    if ((int64_t)L->max_tokens * L->top_k > INT32_MAX / 2)
        return refuse(why, cap, "max_num_tokens * top_k too large");
    if (L->ws.pf_cutlass == 0 || !cutlass_workspace_fits(L, sms))
        return refuse(why, cap, "the CUTLASS workspace does not fit pf_cutlass");
    return true;
}

bool fmcu_prefill_supported(const fmcu_layer *L)
{
    return fmcu_prefill_supported_why(L, nullptr, 0);
}

cudaError_t fmcu_prefill_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                                 const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted, void *out,
                                 int64_t out_ld, cudaStream_t st)
{
    return forward(L, m, x, x_ld, topk_w, pair_local, offsets, sorted, out, out_ld, st, nullptr);
}

cudaError_t fmcu_prefill_forward_events(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld,
                                        const float *topk_w, const int32_t *pair_local, const int32_t *offsets,
                                        const int32_t *sorted, void *out, int64_t out_ld, cudaStream_t st,
                                        cudaEvent_t events[FMCU_PREFILL_EVENTS])
{
    return forward(L, m, x, x_ld, topk_w, pair_local, offsets, sorted, out, out_ld, st, events);
}

/* The channel scales follow the weights, 256-byte aligned. */
static size_t fused_weight_bytes(const fmcu_layer *L)
{
    return ((size_t)L->local_experts * L->rows13 * L->hidden * (L->quant == FMCU_Q_NONE ? 2 : 1) + 255) &
           ~(size_t)255;
}

size_t fmcu_prefill_fused_bytes(const fmcu_layer *L)
{
    /* The epilogue's fast path is SiLU's; the slow-pair mask lives in y. */
    if (!L->gated || L->activation != FMOE_ACT_SILU || !L->w13 || L->quant == FMCU_Q_BLOCK || L->inter % 32 ||
        L->inter > 16 * L->hidden)
        return 0;
#if defined(FMCU_PF_TUNING)
    if (L->quant != FMCU_Q_NONE)
        return 0;
#endif
    /* FMCU_PF_FUSE: 0 (default) none, 1 bf16, 2 bf16 and fp8 tensor/channel:
     * CUTLASS's GEMM1 with the activation in its epilogue, on a second,
     * interleaved copy of W13. Off by default since our grouped GEMM
     * (grouped_gemm.h) with the activation kernel between the GEMMs is
     * faster without the copy: bf16 forward -3% to -13% on 7 of the 8
     * M=1024/8192 points, +3% at Mixtral M=8192 (H100,
     * bench/cuda/own-fp8-2026-11-22); the fp8 fused GEMM1 lost more than
     * the activation kernel cost (bench/cuda/RESULTS.md, 2026-11-22 "Fused
     * GEMM1"). */
    const char *v = getenv("FMCU_PF_FUSE");
    const int fuse = v && *v ? atoi(v) : 0;
    if (fuse <= 0 || (L->quant != FMCU_Q_NONE && fuse < 2))
        return 0;
    if (!fmcu_prefill_supported(L))
        return 0;
    size_t n = fused_weight_bytes(L);
    if (L->quant == FMCU_Q_CHANNEL)
        n += (size_t)L->local_experts * L->rows13 * sizeof(float);
    return n;
}

int fmcu_prefill_interleave(fmcu_layer *L, void *dst, char *err, size_t cap)
{
    const uint32_t row_bytes = L->hidden * (L->quant == FMCU_Q_NONE ? 2 : 1);
    const bool channel = L->quant == FMCU_Q_CHANNEL;
    uint8_t *w = (uint8_t *)dst;
    float *scale = channel ? (float *)(w + fused_weight_bytes(L)) : nullptr;
    const unsigned rows = L->local_experts * L->rows13;
    cudaError_t e = cudaSetDevice(L->device);
    if (e == cudaSuccess && rows) {
        interleave_kernel<<<rows, 128>>>((const uint8_t *)L->w13, channel ? L->w13_scale : nullptr, L->inter,
                                         row_bytes, w, scale);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
    }
    if (e != cudaSuccess) {
        if (err && cap)
            snprintf(err, cap, "interleaving W13 for the fused prefill GEMM1: %s (%s)", cudaGetErrorString(e),
                     cudaGetErrorName(e));
        return -1;
    }
    L->pf_w13 = w;
    L->pf_w13_scale = scale;
    return 0;
}

#else /* !PF_ENABLED */

bool fmcu_prefill_supported_why(const fmcu_layer *, char *why, size_t cap)
{
    return refuse(why, cap, "built without CUTLASS headers (the Hopper prefill path is compiled out)");
}

bool fmcu_prefill_supported(const fmcu_layer *L)
{
    return fmcu_prefill_supported_why(L, nullptr, 0);
}

cudaError_t fmcu_prefill_forward(const fmcu_layer *, int64_t, const void *, int64_t, const float *, const int32_t *,
                                 const int32_t *, const int32_t *, void *, int64_t, cudaStream_t)
{
    return cudaErrorNotSupported;
}

cudaError_t fmcu_prefill_forward_events(const fmcu_layer *, int64_t, const void *, int64_t, const float *,
                                        const int32_t *, const int32_t *, const int32_t *, void *, int64_t,
                                        cudaStream_t, cudaEvent_t *)
{
    return cudaErrorNotSupported;
}

size_t fmcu_prefill_fused_bytes(const fmcu_layer *)
{
    return 0;
}

int fmcu_prefill_interleave(fmcu_layer *, void *, char *err, size_t cap)
{
    refuse(err, cap, "built without CUTLASS headers (the Hopper prefill path is compiled out)");
    return -1;
}

#endif
