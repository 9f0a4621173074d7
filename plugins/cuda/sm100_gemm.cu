/*
 * plugins/cuda/sm100_gemm.cu - the native SM100 block-scaled expert GEMMs
 * (contract in sm100_gemm.h). Compiled for sm_100a only; never run by this
 * project (no SM100 GPU): docs/CUDA.md, "Native SM100 block-scaled path".
 *
 * A forward after the plan (offsets[e] .. offsets[e+1]: expert e's sorted
 * rows, sorted[p]: the pair at sorted row p):
 *
 *   1. stage<GEMM1>: a block per sorted row quantizes the pair's token row
 *      of x into packed e2m1 codes (row p) and swizzled scales (expert e's
 *      matrix, sm100_layout.h) with the emulated method's rules: NVFP4 with
 *      the expert's input global (fmoe_nvfp4_quantize, QUANT), MXFP4 with
 *      the OCP scale (fmoe_mxfp4_quantize, OCP). The padding scale columns
 *      of the row are written 0 (a K tail past the last scale multiplies
 *      TMA's zero codes by them: 0, not NaN).
 *   2. group_args: a thread per expert writes the grouped GEMM's per-group
 *      arrays from offsets (sizes, operand pointers, strides, scale layouts,
 *      alpha pointers): the routing is only known on the device, and the
 *      GEMM reads these arrays there (no host copy of the problem shapes).
 *   3. CUTLASS's sm100 block-scaled grouped GEMM (one per format, 1-SM
 *      128x128x256 tiles, cluster 1x1): D_e = alpha_e * A_e W_e^T in f32.
 *      alpha_e is NVFP4's 1/(g_w g_in) (the sm_90a kernels multiply the
 *      accumulator by the same f32), 1 for MXFP4.
 *   4. epilogue1: a block per sorted row: (D + bias) rounded to the act
 *      dtype, the activation, rounded again, into ws.act[pair], exactly as
 *      wq_gemm.cu's epilogue.
 *   5-7. stage<GEMM2> of ws.act, group_args, the GEMM over W2, epilogue2:
 *      (D + b2) rounded into ws.y[pair]; then the combine (combine.cu).
 *
 * The products of e2m1 codes and their scales are exact in the tensor core
 * as in the emulation; the sums differ from it only in the order of the f32
 * roundings.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include <type_traits>

#include "fusedmoe/common.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/device_math.cuh"
#include "plugins/cuda/forward_steps.h"
#include "plugins/cuda/sm100_gemm.h"

#if defined(FMCU_HAVE_CUTLASS)
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/sm100_blockscaled_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/float_subbyte.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#endif

#if defined(FMCU_HAVE_CUTLASS) && defined(CUTLASS_ARCH_MMA_SM100_SUPPORTED)
#define SM100_ENABLED 1
#else
#define SM100_ENABLED 0
#endif

#define CK(call, what) \
    do { \
        cudaError_t e_ = (call); \
        if (e_ != cudaSuccess) { \
            snprintf(err, cap, "%s: %s", what, cudaGetErrorString(e_)); \
            return -1; \
        } \
    } while (0)

#if SM100_ENABLED

/* A named namespace: nvcc's kernel stubs cannot name an anonymous one next
 * to `using namespace cute`. */
namespace fmcu_sm100 {

using namespace cute;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using ProblemMNK = ProblemShape::UnderlyingProblemShape;
using LayoutA = cutlass::layout::RowMajor;    /* activation codes [M, K], K contiguous */
using LayoutB = cutlass::layout::ColumnMajor; /* weight codes [N, K], K contiguous */
using LayoutD = cutlass::layout::RowMajor;    /* [M, N] f32 */

/* One grouped GEMM: both operands `Elem` (nv_float4_t / mx_float4_t of
 * e2m1), f32 D = alpha * acc, no C. One tile shape: 128 x 128 x 256 on one
 * SM (the smallest M the block-scaled MMA has; 256 K = 128 bytes of codes,
 * one 128-byte swizzle row). The epilogue is the same for both formats and
 * lives outside the template (nvcc's host pass cannot name a member alias
 * of the template in the main loop's carve-out). */
using Tile = Shape<_128, _128, _256>;
using Cluster = Shape<_1, _1, _1>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp, Tile, Cluster,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD *, 4, float, LayoutD *, 4,
    cutlass::epilogue::PtrArrayTmaWarpSpecialized1Sm,
    cutlass::epilogue::fusion::LinearCombination<float, float>>::CollectiveOp;
constexpr int EPILOGUE_SMEM = static_cast<int>(sizeof(typename Epilogue::SharedStorage));

template <class Elem, class Schedule> struct grouped {
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp, Elem, LayoutA *, 32, Elem, LayoutB *, 32,
        float, Tile, Cluster, cutlass::gemm::collective::StageCountAutoCarveout<EPILOGUE_SMEM>,
        Schedule>::CollectiveOp;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using GemmNv = grouped<cutlass::nv_float4_t<cutlass::float_e2m1_t>,
                       cutlass::gemm::KernelPtrArrayTmaWarpSpecialized1SmNvf4Sm100>::Gemm;
using GemmMx = grouped<cutlass::mx_float4_t<cutlass::float_e2m1_t>,
                       cutlass::gemm::KernelPtrArrayTmaWarpSpecialized1SmMxf4Sm100>::Gemm;

/* The two GEMMs differ in the scale type and vector only: one set of
 * stride and scale-layout types serves both (checked here). */
using StrideA = typename GemmNv::GemmKernel::InternalStrideA;
using StrideB = typename GemmNv::GemmKernel::InternalStrideB;
using StrideD = typename GemmNv::GemmKernel::InternalStrideD;
using LayoutSFNv = typename GemmNv::GemmKernel::CollectiveMainloop::InternalLayoutSFA;
using LayoutSFMx = typename GemmMx::GemmKernel::CollectiveMainloop::InternalLayoutSFA;
using ConfigNv = typename GemmNv::GemmKernel::CollectiveMainloop::Sm1xxBlkScaledConfig;
using ConfigMx = typename GemmMx::GemmKernel::CollectiveMainloop::Sm1xxBlkScaledConfig;
static_assert(std::is_same_v<StrideA, typename GemmMx::GemmKernel::InternalStrideA> &&
                  std::is_same_v<StrideB, typename GemmMx::GemmKernel::InternalStrideB> &&
                  std::is_same_v<StrideD, typename GemmMx::GemmKernel::InternalStrideD>,
              "one stride type for both formats");
static_assert(std::is_same_v<LayoutSFNv, typename GemmNv::GemmKernel::CollectiveMainloop::InternalLayoutSFB> &&
                  std::is_same_v<LayoutSFMx, typename GemmMx::GemmKernel::CollectiveMainloop::InternalLayoutSFB>,
              "one scale layout type for A and B");
/* Room for either format's scale layout (they differ in the vector size). */
constexpr size_t LAYOUT_SF_BYTES = sizeof(LayoutSFNv) > sizeof(LayoutSFMx) ? sizeof(LayoutSFNv) : sizeof(LayoutSFMx);
/* The configurations tests/cuda/test_sm100_cutlass_layout.cu checks our
 * layouts against, and the scale types our bytes are. */
static_assert(std::is_same_v<ConfigNv, cutlass::detail::Sm1xxBlockScaledConfig<16>> &&
                  std::is_same_v<ConfigMx, cutlass::detail::Sm1xxBlockScaledConfig<32>>,
              "NVFP4 scales per 16, MXFP4 per 32, in the layouts the unit test checks");
static_assert(std::is_same_v<typename GemmNv::GemmKernel::CollectiveMainloop::ElementSF, cutlass::float_ue4m3_t> &&
                  std::is_same_v<typename GemmMx::GemmKernel::CollectiveMainloop::ElementSF, cutlass::float_ue8m0_t>,
              "e4m3 (NVFP4) and ue8m0 (MXFP4) scale bytes");

/* Per-expert arrays of one GEMM, carved from the args buffer. */
struct arrays {
    ProblemMNK *shape;
    const void **a, **b, **sfa, **sfb;
    void **d;
    float **alpha;
    StrideA *sa;
    StrideB *sb;
    StrideD *sd;
    void *lsfa, *lsfb; /* LayoutSFNv or LayoutSFMx */
};

size_t carve(uint8_t *base, uint32_t E, arrays *g)
{
    size_t at = 0;
    auto take = [&](size_t elem) {
        uint8_t *p = base ? base + at : nullptr;
        at += (elem * E + 15) & ~(size_t)15;
        return (void *)p;
    };
    g->shape = (ProblemMNK *)take(sizeof(ProblemMNK));
    g->a = (const void **)take(sizeof(void *));
    g->b = (const void **)take(sizeof(void *));
    g->sfa = (const void **)take(sizeof(void *));
    g->sfb = (const void **)take(sizeof(void *));
    g->d = (void **)take(sizeof(void *));
    g->alpha = (float **)take(sizeof(float *));
    g->sa = (StrideA *)take(sizeof(StrideA));
    g->sb = (StrideB *)take(sizeof(StrideB));
    g->sd = (StrideD *)take(sizeof(StrideD));
    g->lsfa = take(LAYOUT_SF_BYTES);
    g->lsfb = take(LAYOUT_SF_BYTES);
    return at;
}

/* Row-major strides (ld, 1, batch): the leading dimension is all a group
 * needs (one batch per group). */
template <class S> __device__ S row_stride(int64_t ld)
{
    static_assert(cute::is_static<std::remove_cv_t<std::remove_reference_t<decltype(get<1>(S{}))>>>::value,
                  "unit stride along K / N expected");
    S s{};
    get<0>(s) = ld;
    return s;
}

struct group_args_in {
    arrays g;
    const int32_t *offsets;
    uint32_t experts, n, k, vec;
    int mx;
    const uint8_t *a_codes, *a_sf, *w, *w_sf;
    float *d;
    const float *alpha;
};

__global__ void group_args_kernel(const group_args_in p)
{
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= p.experts)
        return;
    const int32_t row0 = p.offsets[e], rows = p.offsets[e + 1] - row0;
    const fmcu_sm100_group q = fmcu_sm100_group_at(p.n, p.k, p.vec, e, row0, rows);
    p.g.shape[e] = ProblemMNK{q.m, q.n, q.k};
    p.g.a[e] = p.a_codes + q.a_off;
    p.g.b[e] = p.w + q.b_off;
    p.g.sfa[e] = p.a_sf + q.sfa_off;
    p.g.sfb[e] = p.w_sf + q.sfb_off;
    p.g.d[e] = p.d + q.d_off;
    p.g.alpha[e] = const_cast<float *>(p.alpha + e);
    p.g.sa[e] = row_stride<StrideA>(q.k);
    p.g.sb[e] = row_stride<StrideB>(q.k);
    p.g.sd[e] = row_stride<StrideD>(q.n);
    const auto mnkl = make_shape(q.m, q.n, q.k, 1);
    if (p.mx) {
        ((LayoutSFMx *)p.g.lsfa)[e] = ConfigMx::tile_atom_to_shape_SFA(mnkl);
        ((LayoutSFMx *)p.g.lsfb)[e] = ConfigMx::tile_atom_to_shape_SFB(mnkl);
    } else {
        ((LayoutSFNv *)p.g.lsfa)[e] = ConfigNv::tile_atom_to_shape_SFA(mnkl);
        ((LayoutSFNv *)p.g.lsfb)[e] = ConfigNv::tile_atom_to_shape_SFB(mnkl);
    }
}

/* Step 1 / 5: quantize the GEMM input rows (sorted order). */
struct stage_in {
    const void *src;
    int64_t ld;
    int row_div; /* source row = pair / row_div */
    int32_t dtype;
    const int32_t *pair_local, *offsets, *sorted;
    uint32_t experts, k;
    const float *in_glob; /* NVFP4 */
    uint8_t *codes, *sf;
};

template <int VEC> __global__ void stage_kernel(const stage_in a)
{
    const int64_t p = blockIdx.x;
    if (p >= a.offsets[a.experts])
        return;
    const int32_t pair = a.sorted[p], e = a.pair_local[pair];
    const int64_t row0 = a.offsets[e];
    const int64_t src_row = pair / a.row_div;
    const uint32_t sf_cols = a.k / VEC, sf_pad = (sf_cols + 3) / 4 * 4;
    uint8_t *sf = a.sf + fmcu_sm100_group_sf_row(row0, (uint32_t)e) * sf_pad;
    const float gq = VEC == 16 ? a.in_glob[e] : 0.0f;
    for (uint32_t b = threadIdx.x; b < sf_pad; b += blockDim.x) {
        uint32_t s = 0;
        if (b < sf_cols) {
            float x[VEC];
            uint8_t packed[VEC / 2];
#pragma unroll
            for (int i = 0; i < VEC; i++)
                x[i] = fmcu_dev::load_act(a.dtype, a.src, src_row * a.ld + (int64_t)b * VEC + i);
            s = VEC == 16 ? fmcu_sm100_nvfp4_block(x, gq, packed) : fmcu_sm100_mxfp4_block(x, packed);
            uint2 *dst = (uint2 *)(a.codes + p * (a.k / 2) + (size_t)b * (VEC / 2));
#pragma unroll
            for (int i = 0; i < VEC / 16; i++)
                dst[i] = make_uint2(packed[8 * i] | packed[8 * i + 1] << 8 | packed[8 * i + 2] << 16 |
                                        (uint32_t)packed[8 * i + 3] << 24,
                                    packed[8 * i + 4] | packed[8 * i + 5] << 8 | packed[8 * i + 6] << 16 |
                                        (uint32_t)packed[8 * i + 7] << 24);
        }
        sf[fmcu_sm100_sf_offset(p - row0, b, sf_cols)] = (uint8_t)s;
    }
}

/* Steps 4 and 7: D (f32, sorted rows) + bias, rounded; GEMM1 also the
 * activation. Output rows by pair, as wq_gemm.cu writes them. */
struct epilogue_in {
    const float *d;
    const int32_t *pair_local, *offsets, *sorted;
    uint32_t experts, n_rows, n_out; /* D row length; outputs per row */
    int gemm1;
    fmcu_dev::act_params ap;
    int32_t dtype;
    const void *bias; /* [E, n_rows] act dtype, or NULL */
    void *out;        /* [pairs, n_out] act dtype */
};

__global__ void epilogue_kernel(const epilogue_in a)
{
    const int64_t p = blockIdx.x;
    if (p >= a.offsets[a.experts])
        return;
    const int32_t pair = a.sorted[p], e = a.pair_local[pair];
    const float *d = a.d + p * a.n_rows;
    const int32_t dt = a.dtype;
    for (uint32_t c = threadIdx.x; c < a.n_out; c += blockDim.x) {
        float x = d[c];
        if (a.bias)
            x += fmcu_dev::load_act(dt, a.bias, (int64_t)e * a.n_rows + c);
        float v = fmcu_dev::round_act(dt, x);
        if (a.gemm1) {
            float u = 0.0f;
            if (a.ap.gated) {
                float y = d[a.n_out + c];
                if (a.bias)
                    y += fmcu_dev::load_act(dt, a.bias, (int64_t)e * a.n_rows + a.n_out + c);
                u = fmcu_dev::round_act(dt, y);
            }
            v = fmcu_dev::round_act(dt, fmcu_dev::activate(a.ap, v, u));
        }
        fmcu_dev::store_act(dt, a.out, (int64_t)pair * a.n_out + c, v);
    }
}

cudaError_t status_error(cutlass::Status s)
{
    if (s == cutlass::Status::kSuccess)
        return cudaSuccess;
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaErrorLaunchFailure;
}

template <class Gemm> typename Gemm::Arguments gemm_args(const arrays &g, uint32_t E, int device, int sms)
{
    typename Gemm::Arguments a;
    a.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    a.problem_shape = {(int)E, g.shape, nullptr};
    using ElemA = typename Gemm::GemmKernel::CollectiveMainloop::ArrayElementA;
    using ElemB = typename Gemm::GemmKernel::CollectiveMainloop::ArrayElementB;
    using ElemSF = typename Gemm::GemmKernel::CollectiveMainloop::ElementSF;
    using LayoutSF = typename Gemm::GemmKernel::CollectiveMainloop::InternalLayoutSFA;
    a.mainloop.ptr_A = (const ElemA **)g.a;
    a.mainloop.dA = g.sa;
    a.mainloop.ptr_B = (const ElemB **)g.b;
    a.mainloop.dB = g.sb;
    a.mainloop.ptr_SFA = (const ElemSF **)g.sfa;
    a.mainloop.layout_SFA = (LayoutSF *)g.lsfa;
    a.mainloop.ptr_SFB = (const ElemSF **)g.sfb;
    a.mainloop.layout_SFB = (LayoutSF *)g.lsfb;
    a.epilogue.thread.alpha = 0.0f;
    a.epilogue.thread.alpha_ptr = nullptr;
    a.epilogue.thread.alpha_ptr_array = g.alpha; /* one alpha per group */
    a.epilogue.thread.dAlpha = {_0{}, _0{}, 1};
    a.epilogue.thread.beta = 0.0f;
    a.epilogue.thread.beta_ptr = nullptr;
    a.epilogue.thread.beta_ptr_array = nullptr;
    a.epilogue.thread.dBeta = {_0{}, _0{}, 0};
    a.epilogue.ptr_C = nullptr;
    a.epilogue.dC = nullptr;
    a.epilogue.ptr_D = (float **)g.d;
    a.epilogue.dD = g.sd;
    a.hw_info.device_id = device;
    a.hw_info.sm_count = sms;
    return a;
}

template <class Gemm> cudaError_t run_gemm(const arrays &g, uint32_t E, int device, int sms, void *workspace,
                                           size_t ws_bytes, cudaStream_t st)
{
    const typename Gemm::Arguments args = gemm_args<Gemm>(g, E, device, sms);
    if (Gemm::get_workspace_size(args) > ws_bytes)
        return cudaErrorInvalidValue;
    Gemm gemm;
    cudaError_t e = status_error(gemm.can_implement(args));
    if (e == cudaSuccess)
        e = status_error(gemm.initialize(args, workspace, st));
    if (e == cudaSuccess)
        e = status_error(gemm.run(st));
    return e != cudaSuccess ? e : cudaGetLastError();
}

int multiprocessors(int device)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return 0;
    return sms;
}

/* One projection: stage, arguments, GEMM, epilogue. */
struct proj_in {
    stage_in s;
    uint32_t n;
    const uint8_t *w, *w_sf;
    const float *alpha;
    uint8_t *args;
    size_t gemm_ws_off, gemm_ws_bytes;
    epilogue_in ep;
};

int run_proj(const fmcu_layer *L, const fmcu_sm100_layer *S, const proj_in &p, int64_t pairs, int sms,
             cudaStream_t st, const char *what, char *err, size_t cap)
{
    const uint32_t E = L->local_experts;
    uint8_t *ws = (uint8_t *)S->workspace;
    if (S->vec == 16)
        stage_kernel<16><<<(unsigned)pairs, 128, 0, st>>>(p.s);
    else
        stage_kernel<32><<<(unsigned)pairs, 128, 0, st>>>(p.s);
    CK(cudaGetLastError(), what);
    group_args_in ga = {};
    carve(p.args, E, &ga.g);
    ga.offsets = p.s.offsets;
    ga.experts = E;
    ga.n = p.n;
    ga.k = p.s.k;
    ga.vec = S->vec;
    ga.mx = S->format == FMCU_SM100_MXFP4;
    ga.a_codes = p.s.codes;
    ga.a_sf = p.s.sf;
    ga.w = p.w;
    ga.w_sf = p.w_sf;
    ga.d = (float *)(ws + S->ws.d);
    ga.alpha = p.alpha;
    group_args_kernel<<<(E + 127) / 128, 128, 0, st>>>(ga);
    CK(cudaGetLastError(), what);
    void *gws = ws + p.gemm_ws_off;
    CK(ga.mx ? run_gemm<GemmMx>(ga.g, E, L->device, sms, gws, p.gemm_ws_bytes, st)
             : run_gemm<GemmNv>(ga.g, E, L->device, sms, gws, p.gemm_ws_bytes, st),
       what);
    epilogue_kernel<<<(unsigned)pairs, 256, 0, st>>>(p.ep);
    CK(cudaGetLastError(), what);
    return 0;
}

} // namespace fmcu_sm100

using namespace fmcu_sm100;

extern "C" int fmcu_sm100_compiled(void)
{
    return 1;
}

extern "C" size_t fmcu_sm100_args_bytes(uint32_t experts)
{
    arrays g;
    return carve(nullptr, experts, &g);
}

extern "C" int fmcu_sm100_gemm_workspace(int32_t format, int device, uint32_t experts, size_t *bytes, char *err,
                                         size_t cap)
{
    const int sms = multiprocessors(device);
    if (sms <= 0) {
        snprintf(err, cap, "SM100 GEMM: cannot read device %d's multiprocessor count", device);
        return -1;
    }
    arrays g = {};
    *bytes = format == FMCU_SM100_MXFP4 ? GemmMx::get_workspace_size(gemm_args<GemmMx>(g, experts, device, sms))
                                        : GemmNv::get_workspace_size(gemm_args<GemmNv>(g, experts, device, sms));
    return 0;
}

extern "C" int fmcu_sm100_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                                  const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted,
                                  void *out, int64_t ldo, void *stream, char *err, size_t cap)
{
    const fmcu_sm100_layer *S = L->sm100;
    cudaStream_t st = (cudaStream_t)stream;
    const int64_t pairs = m * L->top_k;
    if (!S || m > (int64_t)L->max_tokens) {
        snprintf(err, cap, "SM100 path: %s",
                 !S ? "the layer was not finalized for it" : "more tokens than max_num_tokens");
        return -1;
    }
    if (pairs <= 0)
        return 0;
    const int sms = multiprocessors(L->device);
    if (sms <= 0) {
        snprintf(err, cap, "SM100 path: cannot read the multiprocessor count");
        return -1;
    }
    uint8_t *ws = (uint8_t *)S->workspace;
    uint8_t *lw = (uint8_t *)L->workspace;
    const uint32_t E = L->local_experts, H = L->hidden, I = L->inter;
    const fmcu_dev::act_params ap = {L->activation, L->gated, L->swiglu_alpha, L->swiglu_limit};

    proj_in p = {};
    p.s.dtype = L->act_dtype;
    p.s.pair_local = pair_local;
    p.s.offsets = offsets;
    p.s.sorted = sorted;
    p.s.experts = E;
    p.s.codes = ws + S->ws.a_codes;
    p.s.sf = ws + S->ws.a_sf;
    p.ep.d = (const float *)(ws + S->ws.d);
    p.ep.pair_local = pair_local;
    p.ep.offsets = offsets;
    p.ep.sorted = sorted;
    p.ep.experts = E;
    p.ep.ap = ap;
    p.ep.dtype = L->act_dtype;

    /* GEMM1: x rows (pair / top_k) -> act [pairs, I]. */
    p.s.src = x;
    p.s.ld = x_ld;
    p.s.row_div = (int)L->top_k;
    p.s.k = H;
    p.s.in_glob = S->in_glob13;
    p.n = L->rows13;
    p.w = S->w13;
    p.w_sf = S->sf13;
    p.alpha = S->alpha13;
    p.args = ws + S->ws.args13;
    p.gemm_ws_off = S->ws.gemm13;
    p.gemm_ws_bytes = S->ws.gemm2 - S->ws.gemm13;
    p.ep.n_rows = L->rows13;
    p.ep.n_out = I;
    p.ep.gemm1 = 1;
    p.ep.bias = L->b13;
    p.ep.out = lw + L->ws.act;
    if (run_proj(L, S, p, pairs, sms, st, "SM100 GEMM1 (block-scaled)", err, cap) != 0)
        return -1;

    /* GEMM2: act rows (pair) -> y [pairs, H]. */
    p.s.src = lw + L->ws.act;
    p.s.ld = I;
    p.s.row_div = 1;
    p.s.k = I;
    p.s.in_glob = S->in_glob2;
    p.n = H;
    p.w = S->w2;
    p.w_sf = S->sf2;
    p.alpha = S->alpha2;
    p.args = ws + S->ws.args2;
    p.gemm_ws_off = S->ws.gemm2;
    p.gemm_ws_bytes = S->ws.total - S->ws.gemm2;
    p.ep.n_rows = H;
    p.ep.n_out = H;
    p.ep.gemm1 = 0;
    p.ep.bias = L->add_b2 ? L->b2 : nullptr;
    p.ep.out = lw + L->ws.y;
    if (run_proj(L, S, p, pairs, sms, st, "SM100 GEMM2 (block-scaled)", err, cap) != 0)
        return -1;

    fmcu_fwd::combine_args cb = {};
    cb.y = lw + L->ws.y;
    cb.w = topk_w;
    cb.pair_local = pair_local;
    cb.k = L->top_k;
    cb.hidden = H;
    cb.on_input = L->on_input;
    cb.dtype = L->act_dtype;
    cb.out = out;
    cb.ldo = ldo;
    CK(fmcu_fwd::combine_launch(cb, m, st), "SM100 path: combine kernel");
    return 0;
}

#else /* !SM100_ENABLED: no CUTLASS headers; the native methods are never chosen */

extern "C" int fmcu_sm100_compiled(void)
{
    return 0;
}

extern "C" size_t fmcu_sm100_args_bytes(uint32_t experts)
{
    (void)experts;
    return 0;
}

extern "C" int fmcu_sm100_gemm_workspace(int32_t format, int device, uint32_t experts, size_t *bytes, char *err,
                                         size_t cap)
{
    (void)format;
    (void)device;
    (void)experts;
    *bytes = 0;
    snprintf(err, cap, "the SM100 block-scaled path is not built (no CUTLASS headers)");
    return -1;
}

extern "C" int fmcu_sm100_forward(const fmcu_layer *L, int64_t m, const void *x, int64_t x_ld, const float *topk_w,
                                  const int32_t *pair_local, const int32_t *offsets, const int32_t *sorted,
                                  void *out, int64_t ldo, void *stream, char *err, size_t cap)
{
    (void)L, (void)m, (void)x, (void)x_ld, (void)topk_w, (void)pair_local, (void)offsets, (void)sorted, (void)out;
    (void)ldo, (void)stream;
    snprintf(err, cap, "the SM100 block-scaled path is not built (no CUTLASS headers)");
    return -1;
}

#endif
