/*
 * plugins/cuda/prefill_sm90.cu - the Hopper prefill tier (contract and
 * stages in prefill.h): the forward of a call above 16 rows per local
 * expert on wgmma grouped GEMMs, after the plan has sorted the pairs by
 * expert.
 *
 * Data flow (P = m*k pairs, R = rows of local pairs = offsets[E], all
 * buffers in the layer's workspace):
 *   x [m, H] --gather--> pf_a1 [R, H] (+ pf_a1_scale)      sorted by expert
 *   --GEMM1--> pf_h [R, r*I] bf16 --act--> act/a2 [R, I] (+ a2_scale)
 *   --GEMM2--> y [R, H] bf16 --combine--> out [m, H]
 * Row i of every sorted buffer is the pair sorted[i]; pf_pos[p] = i.
 * gather, combine and their helpers: prefill_rows.cu; act: prefill_act.cu.
 *
 * GEMMs. bf16, e2m1 (launch_dq) and the fp8 tensor and channel schemes
 * run both GEMMs on our own grouped GEMM (grouped_gemm.h: TMA + wgmma, one
 * tensor map over all sorted rows, no per-expert descriptors), its tile
 * kinds chosen per call from the average rows per local expert
 * (launch_shape.h fmcu_gg_kinds) and its half tiles and tile order from the
 * layer's options. The fp8 block
 * scheme runs CUTLASS 4.x's sm90 grouped GEMM with blockwise scales:
 * 128x128x128 cooperative, cluster 1x2 (vLLM's choice; each warp group
 * holds a 64x128 f32 accumulator and its per-block partial; 1.2-1.35x the
 * 64x128 ping-pong at M=8192 on an H200, bench/cuda/RESULTS.md at 5ddad69, "First
 * measurements (H200): the prefill tier"), 1x128
 * activation and 128x128 weight scales applied per 128-K block in the main
 * loop (DeepGEMM's promotion), D = round(acc). One group per local expert:
 * its problem (M_e, N, K), A/B/D pointers and strides and block-scale
 * layouts are written by a one-block setup kernel from the plan's offsets
 * (activation scales M-major inside each expert's group: off_e*G + g*M_e +
 * r), so the host never reads device data and the launch is graph
 * capturable; experts with no rows are groups with M = 0. CUTLASS's
 * persistent group scheduler launches one CTA per SM and rewrites the TMA
 * descriptors in its workspace (pf_cutlass) when it moves to the next
 * group. The option prefill_block_gemm = ours runs both GEMMs on our
 * grouped GEMM's block kind instead (grouped_gemm.h: 128 x 128 tiles, the
 * same scale layouts, promotion per 128-K group); the two measured on par
 * (bench/cuda/RESULTS.md at 7426a60, "Our grouped GEMM's block kind"), so CUTLASS
 * stays the default.
 *
 * Accuracy. bf16 is bit-identical to the mma.sync path. FP8 wgmma keeps
 * fewer accumulator bits than f32 between promotions (DeepSeek-V3 3.3.2),
 * so GEMM1 (promoted to f32 every 128 K) differs slightly from the
 * reference and a few GEMM2 inputs round to the neighbouring e4m3 code:
 * NMSE 1e-5..5e-5 against the reference (a dynamic per-tensor GEMM2 scale
 * reached 6e-4 where the largest activation moved by a bf16 step, until
 * amax_exact_kernel; bench/cuda/RESULTS.md at 5ddad69, "Prefill: the exact dynamic
 * amax"); the mma.sync path is within 1e-7.
 *
 * Small kernels. Their quantization and activation arithmetic is that of
 * quantize.cu (quant_kernel, amax_kernel) and gemm.cu (activate): amax as
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
#include "plugins/cuda/prefill_dequant.h"
#include "plugins/cuda/prefill_rows.h"
#include "plugins/cuda/tier.h"
#include "plugins/cuda/wq_gemm.h"

#include <cuda_bf16.h>
#include <stdio.h>

#include <atomic>
#include <type_traits>

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
/* The fp8 block scheme's GEMMs (CUTLASS)                                    */
/* ------------------------------------------------------------------------ */

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using ProblemMNK = ProblemShape::UnderlyingProblemShape;
using ElemBF16 = cutlass::bfloat16_t;
using ElemFP8 = cutlass::float_e4m3_t;
using LayoutA = cutlass::layout::RowMajor;    /* [M, K], K contiguous */
using LayoutB = cutlass::layout::ColumnMajor; /* W [N, K], K contiguous */
using LayoutD = cutlass::layout::RowMajor;    /* [M, N] */

using BlockScale = cutlass::detail::Sm90BlockwiseScaleConfig<1, GROUP, GROUP, cute::GMMA::Major::MN,
                                                             cute::GMMA::Major::K>;
using LayoutSFA = decltype(BlockScale::deduce_layoutSFA());
using LayoutSFB = decltype(BlockScale::deduce_layoutSFB());

/* The GEMM: A/B element, tile, main-loop schedule, fusion; void C, bf16 D. */
template <class Elem, class LayoutPairA, class LayoutPairB, class Tile, class ClusterShape, class Schedule,
          class EpiSchedule, class Fusion>
struct grouped {
    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD *, 8, ElemBF16, LayoutD *, 8,
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

using PlainOut = cutlass::epilogue::fusion::LinearCombination<ElemBF16, float>;
using GemmBlock = grouped<ElemFP8, cute::tuple<LayoutA *, LayoutSFA *>, cute::tuple<LayoutB *, LayoutSFB *>,
                          Shape<_128, _128, _128>, Shape<_1, _2, _1>,
                          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                          cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, PlainOut>::Gemm;

/* The A, B and D strides are (ld, 1, 0): one type for the setup kernel. */
using StrideRow = typename GemmBlock::GemmKernel::InternalStrideA;
static_assert(std::is_same_v<StrideRow, typename GemmBlock::GemmKernel::InternalStrideB> &&
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
    const bf16 *bias;              /* [E, N] (bf16 operands only) or NULL */
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

cutlass::KernelHardwareInfo hw_of(int device, int sms)
{
    cutlass::KernelHardwareInfo hw;
    hw.device_id = device;
    hw.sm_count = sms;
    return hw;
}

/* What the grouped GEMMs' arguments share: E problems whose shapes the
 * device wrote (g.shape), no C operand, this device's SMs; args_block
 * adds the main loop, the epilogue's parameters and D. */
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

/* D: the bf16 rows of g. */
template <class Args> void set_d(Args &a, const gemm_arrays &g)
{
    a.epilogue.ptr_D = (ElemBF16 **)g.d;
    a.epilogue.dD = g.sd;
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

/* The CUTLASS workspace of the layer's block-scheme GEMMs fits pf_cutlass
 * (the other schemes run no CUTLASS kernel). */
bool cutlass_workspace_fits(const fmcu_layer *L, int sms)
{
    if (L->quant != FMCU_Q_BLOCK)
        return true;
    gemm_arrays g[2] = {};
    const cutlass::KernelHardwareInfo hw = hw_of(L->device, sms);
    return workspace_of<GemmBlock>(args_block(g[0], L->local_experts, hw)) <= FMCU_PF_CUTLASS_WS;
}

/* ------------------------------------------------------------------------ */
/* Our grouped GEMM (bf16, fp8 tensor and channel)                           */
/* ------------------------------------------------------------------------ */

/* One GEMM of our own kernel (grouped_gemm.h): the same operands, scales
 * and D as the setup kernel writes for CUTLASS; half tiles and the tile
 * order from the layer's options. */
struct OwnGemm {
    fmcu_gg_args a;
    fmcu_gg_kind kind;
    int sms;
};

OwnGemm own_gemm(const gemm_setup &s, const int32_t *offsets, int32_t *sched, uint32_t E, int64_t rows_cap,
                 fmcu_gg_kind kind, int sms, const fmcu_options &opt)
{
    OwnGemm g = {};
    g.a.a = s.a;
    g.a.b = s.w;
    g.a.d = s.d;
    g.a.s_row = s.row_scale;
    g.a.s_col = s.col_scale;
    g.a.bias = s.bias;
    g.a.offsets = offsets;
    g.a.sched = sched;
    g.a.row_vec = s.row_vec;
    g.a.col_vec = s.col_vec;
    g.a.E = E;
    g.a.N = (uint32_t)s.N;
    g.a.K = (uint32_t)s.K;
    g.a.rows_cap = rows_cap;
    g.a.bf16 = s.esize == 2;
    g.a.whole_tiles = !opt.prefill_half_tiles;
    g.a.order = opt.prefill_tile_order;
    g.kind = kind;
    g.sms = sms;
    return g;
}

cudaError_t launch_gemm(OwnGemm &g, cudaStream_t st)
{
    return fmcu_gg_launch(&g.a, g.kind, g.sms, st);
}

/* ------------------------------------------------------------------------ */
/* The forward                                                               */
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

/* Enqueue the whole pipeline; both GEMMs are initialized already.
 * warp_rows: the option prefill_warp_rows (the activation stage's shape). */
template <class Gemm1, class Gemm2>
cudaError_t launch(Gemm1 &g1, Gemm2 &g2, int64_t m, const void *x, int64_t x_ld, const setup_args &sa,
                   const gather_args &ga, const act_args &aa, const combine_args &cb, bool dyn_tensor, bool warp_rows,
                   cudaStream_t st, cudaEvent_t *ev)
{
    const unsigned grid = (unsigned)(m * (int64_t)ga.k);
    uint32_t *amax = (uint32_t *)ga.amax; /* the first of the SC_COUNT scalars */
    PF_EVENT(0);
    setup_kernel<<<1, 256, 0, st>>>(sa);
    PF_CK(cudaGetLastError());
    if (dyn_tensor) {
        PF_CK(cudaMemsetAsync(amax, 0, SC_COUNT * sizeof(uint32_t), st));
        PF_CK(amax_rows_launch((const bf16 *)x, x_ld, ga.H, amax, m, st));
    }
    PF_CK(pos_launch(sa.sorted, ga.offsets + sa.E, (int32_t *)ga.pos, grid, st));
    PF_CK(gather_launch(ga, m, st));
    PF_EVENT(1);
    PF_CK(launch_gemm(g1, st));
    PF_EVENT(2);
    PF_CK(act_stage(aa, grid, dyn_tensor, warp_rows, st));
    PF_EVENT(3);
    PF_CK(launch_gemm(g2, st));
    PF_EVENT(4);
    PF_CK(combine_launch(cb, m, st));
    PF_EVENT(5);
    return cudaSuccess;
}

/* The e2m1 weights' pipeline (prefill_dequant.h): the same stages, each
 * GEMM run a chunk of dq_experts experts at a time on their weights
 * dequantized into the layer's bf16 scratch (experts without rows are not
 * dequantized and have no tiles). W4A4 quantizes the GEMM inputs as the
 * 4-bit kernels do (wq_gemm.h staging): NVFP4's x in the gather, each
 * pair's copy with its expert's global (aligned rows), else x per pair
 * into wq.a1, which the gather then sorts (a token row per pair: m*k rows,
 * k = 1); NVFP4's GEMM2 input as the activation writes it, MXFP4 W4A4's
 * in place in its sorted rows after it. With the fused form
 * (fmcu_wq_prefill_fused: by the option, or by the rows an expert) each
 * GEMM converts the e2m1 codes itself, all experts in one launch. */
static_assert(FMCU_WQ_FUSED_MAX_EXPERTS == FMCU_GG_MAX_EXPERTS && FMCU_WQ_DQ_MAX_EXPERTS == FMCU_GG_MAX_EXPERTS,
              "tier.h's and wq_pack.h's bounds are one launch's");
cudaError_t launch_dq(const fmcu_layer *L, OwnGemm g[2], int64_t m, const setup_args &sa, gather_args ga,
                      const act_args &aa, const combine_args &cb, bool warp_rows, cudaStream_t st, cudaEvent_t *ev)
{
    const fmcu_wq &wq = L->wq;
    const bool a4 = FMCU_Q_IS_A4(L->quant), mx_a4 = L->quant == FMCU_Q_MXFP4_A4;
    const int64_t pairs = m * (int64_t)ga.k;
    const unsigned grid = (unsigned)pairs;
    /* int4 (128-column groups: fmcu_prefill_supported) is always converted
     * inside the GEMM on this tier; e2m1 there or through the scratch. */
    const bool int4 = L->wq.format == FMCU_WQ_INT4;
    const bool fused = fmcu_prefill_e2m1_fused(L, m);
    PF_EVENT(0);
    PF_CK(pos_launch(sa.sorted, ga.offsets + sa.E, (int32_t *)ga.pos, grid, st));
    int64_t rows = m;
    if (a4 && !mx_a4 && ga.vec && ga.H % 16 == 0) {
        ga.in_glob = wq.w13.in_glob; /* quantized per pair in the gather (prefill_rows.h) */
    } else if (a4) {
        fmcu_wq_stage_args q = {};
        q.src = ga.x;
        q.ld = ga.x_ld;
        q.row_div = (int)ga.k;
        q.dtype = FMOE_DTYPE_BF16;
        q.pair_local = ga.pair_local;
        q.in_glob = wq.w13.in_glob; /* NVFP4's only: NULL for MXFP4 */
        q.mx_a4 = mx_a4;
        q.k = q.kp = ga.H;
        q.dst = wq.a1;
        PF_CK(fmcu_wq_stage_launch(q, pairs, st));
        ga.x = (const bf16 *)wq.a1;
        ga.x_ld = ga.H;
        ga.k = 1;
        ga.vec = 1;
        rows = pairs;
    }
    PF_CK(gather_launch(ga, rows, st));
    PF_EVENT(1);
    const fmcu_wq_proj *proj[2] = {&wq.w13, &wq.w2};
    auto gemm = [&](int j) -> cudaError_t {
        const fmcu_wq_proj &w = *proj[j];
        OwnGemm o = g[j];
        const bf16 *bias = o.a.bias;
        if (int4) { /* converted inside the GEMM, group scales promoted there */
            o.a.b = (const uint8_t *)w.w;
            o.a.w4 = FMCU_GG_W4_INT4;
            o.a.gscale = w.scale;
            o.a.zero = w.zero;
            o.a.groups = w.groups;
            o.a.kp = w.kp;
            o.a.s_col = nullptr;
            if (fmcu_prefill_w4_swapped(L, &w))
                return fmcu_gg_w4_swap_launch(&o.a, o.sms, st);
            return launch_gemm(o, st);
        }
        if (fused) { /* converted inside the GEMM, all experts at once */
            o.a.b = (const uint8_t *)w.w;
            o.a.w4 = (int)wq.fp4_block;
            o.a.sf8 = w.sf8;
            o.a.kp = w.kp;
            o.a.mx_fold = (int)w.mx_fold;
            o.a.s_col = w.out_mul;
            if (fmcu_prefill_w4_swapped(L, &w))
                return fmcu_gg_w4_swap_launch(&o.a, o.sms, st);
            return launch_gemm(o, st);
        }
        for (uint32_t e0 = 0; e0 < sa.E; e0 += wq.dq_experts) {
            const uint32_t n = sa.E - e0 < wq.dq_experts ? sa.E - e0 : wq.dq_experts;
            dequant_args d = {};
            d.w = (const uint8_t *)w.w;
            d.sf8 = w.sf8;
            d.block = wq.fp4_block;
            d.N = o.a.N;
            d.K = o.a.K;
            d.kp = w.kp;
            d.e0 = e0;
            d.count = n;
            d.offsets = sa.offsets;
            d.dst = (bf16 *)wq.dq;
            PF_CK(dequant_launch(d, st));
            o.a.b = (const uint8_t *)wq.dq;
            o.a.E = n;
            o.a.offsets = sa.offsets + e0;
            o.a.s_col = w.out_mul ? w.out_mul + e0 : nullptr;
            o.a.bias = bias ? bias + (int64_t)e0 * o.a.N : nullptr;
            PF_CK(launch_gemm(o, st));
        }
        return cudaSuccess;
    };
    PF_CK(gemm(0));
    PF_EVENT(2);
    act_args act = aa;
    if (a4 && !mx_a4 && aa.I % 16 == 0)
        act.in_glob = wq.w2.in_glob; /* quantized as it is written (prefill_act.h) */
    PF_CK(act_stage(act, grid, false, warp_rows, st));
    if (a4 && !act.in_glob) {
        fmcu_wq_stage_args q = {};
        q.src = q.dst = (void *)aa.stage;
        q.ld = aa.I;
        q.row_div = 1;
        q.dtype = FMOE_DTYPE_BF16;
        q.pair_local = ga.pair_local;
        q.sorted = sa.sorted;
        q.n_sorted = sa.offsets + sa.E;
        q.in_glob = wq.w2.in_glob;
        q.mx_a4 = mx_a4;
        q.k = q.kp = aa.I;
        PF_CK(fmcu_wq_stage_launch(q, pairs, st));
    }
    PF_EVENT(3);
    PF_CK(gemm(1));
    PF_EVENT(4);
    PF_CK(combine_launch(cb, m, st));
    PF_EVENT(5);
    return cudaSuccess;
}

#undef PF_CK
#undef PF_EVENT

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
    const bool wq = FMCU_Q_IS_WQ(L->quant); /* e2m1 weights dequantized to bf16 (launch_dq) */
    const bool fp8 = FMCU_Q_IS_FP8(L->quant);
    const bool block = L->quant == FMCU_Q_BLOCK;
    const bool dyn_tensor = L->quant == FMCU_Q_TENSOR && L->a_dynamic;
    const int esize = fp8 ? 1 : 2;
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
        s.w = (const uint8_t *)(j ? L->w2 : L->w13);
        s.d = j ? y : h;
        s.bias = (const bf16 *)(j ? (L->add_b2 ? L->b2 : nullptr) : L->b13);
        s.esize = esize;
        const float *wscale = j ? L->w2_scale : L->w13_scale;
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
        } /* e2m1: launch_dq sets the weights and out_mul per run of experts */
    }
    const cutlass::KernelHardwareInfo hw = hw_of(L->device, sms);
    void *cws = ws_at<void>(L, L->ws.pf_cutlass);

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

    const bool warp_rows = L->opt.prefill_warp_rows != 0;
    if (block && L->opt.prefill_block_gemm == FMCU_BLOCK_GEMM_CUTLASS) {
        GemmBlock g[2];
        for (int j = 0; j < 2; j++) {
            cudaError_t e = init_gemm(g[j], args_block(sa.g[j], E, hw), cws, st);
            if (e != cudaSuccess)
                return e;
        }
        return launch(g[0], g[1], m, x, x_ld, sa, ga, aa, cb, dyn_tensor, warp_rows, st, ev);
    }
    /* Tile kinds from the average rows per local expert (host-known: a
     * captured graph does not depend on the routing). Against CUTLASS's
     * grouped kernels, H100, forward as a CUDA graph, the same output bits
     * (bench/cuda/RESULTS.md at 5ddad69, "Prefill: our grouped GEMM"): fp8 channel
     * M=8192 -3% (Mixtral, 2048 rows) to -14% (DeepSeek-V3), M=1024 -5%
     * (32-64 rows) to -12% (Mixtral, 256 rows); bf16 -3% to -13% at 7 of 8
     * M=1024/8192 points. */
    const int64_t rows = m * (int64_t)k / (E ? E : 1);
    int k1, k2;
    fmcu_gg_kinds(!fp8, rows, H, &k1, &k2);
    OwnGemm o[2] = {own_gemm(sa.s[0], offsets, sa.gg_sched, E, m * (int64_t)k, (fmcu_gg_kind)k1, sms, L->opt),
                    own_gemm(sa.s[1], offsets, sa.gg_sched, E, m * (int64_t)k, (fmcu_gg_kind)k2, sms, L->opt)};
    if (block) /* option prefill_block_gemm = ours: the block kind (the tile kinds above are not used) */
        for (int j = 0; j < 2; j++) {
            o[j].a.a_sf = sa.s[j].sfa;
            o[j].a.b_sf = sa.s[j].sfb;
        }
    if (wq)
        return launch_dq(L, o, m, sa, ga, aa, cb, warp_rows, st, ev);
    return launch(o[0], o[1], m, x, x_ld, sa, ga, aa, cb, dyn_tensor, warp_rows, st, ev);
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
    if (FMCU_Q_IS_FP8(L->quant) && (L->b13 || (L->add_b2 && L->b2)))
        return refuse(why, cap, "biases are served with bf16 operands only (bf16 and e2m1 weights)");
    if (FMCU_Q_IS_WQ(L->quant) && !FMCU_Q_IS_E2M1(L->quant)) {
        /* int4: 128-column groups promoted inside the grouped GEMM. */
        const fmcu_wq_proj *pj[2] = {&L->wq.w13, &L->wq.w2};
        if (L->quant != FMCU_Q_WNA16 || L->wq.format != FMCU_WQ_INT4)
            return refuse(why, cap,
                          "4-bit and int weights: e2m1 (MXFP4, NVFP4) and int4 with 128-column groups only (int8 "
                          "is not served here; MXFP4 x FP8 quantizes its GEMM inputs to e4m3)");
        for (int j = 0; j < 2; j++)
            if (pj[j]->kgrp || pj[j]->group != 128 || pj[j]->groups != (pj[j]->k + 127) / 128)
                return refuse(why, cap, "int4: 128-column scale groups without act-order only");
        if (!fmcu_wq_fused_serves(L->opt.prefill_dequant_fused, L->local_experts))
            return refuse(why, cap,
                          "int4 weights are converted in the GEMM only (prefill_dequant_fused = off, or more than "
                          "1024 local experts)");
    } else if (FMCU_Q_IS_WQ(L->quant)) {
        if (L->wq.format != FMCU_WQ_FP4)
            return refuse(why, cap, "e2m1 weights expected");
        if (L->opt.prefill_dequant_fused == FMCU_FUSED_ON && L->local_experts > FMCU_GG_MAX_EXPERTS)
            return refuse(why, cap,
                          "e2m1 weights converted in the GEMM (prefill_dequant_fused = on): more than 1024 local "
                          "experts (one launch serves them all)");
        if (!fmcu_wq_fused_serves(L->opt.prefill_dequant_fused, L->local_experts) &&
            (!L->wq.dq || L->wq.dq_experts == 0))
            return refuse(why, cap,
                          "e2m1 weights: neither converted in the GEMM (prefill_dequant_fused = off, or more than "
                          "1024 local experts) nor a bf16 scratch (option prefill_dequant_mib is 0 or smaller than "
                          "one expert, or max_num_tokens never reaches 150 rows an expert)");
    }
    if (L->hidden % 16 || L->inter % 16)
        return refuse(why, cap, "H and I must be multiples of 16");
    if (L->quant == FMCU_Q_BLOCK &&
        (L->block_n != GROUP || L->block_k != GROUP || L->hidden % GROUP || L->inter % GROUP))
        return refuse(why, cap, "fp8 block: 128x128 blocks with H and I multiples of 128 only");
    if (L->quant == FMCU_Q_BLOCK && L->opt.prefill_block_gemm == FMCU_BLOCK_GEMM_OURS &&
        L->local_experts > FMCU_GG_MAX_EXPERTS)
        return refuse(why, cap, "fp8 block on our grouped GEMM (prefill_block_gemm = ours): more than 1024 local experts");
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

#endif
