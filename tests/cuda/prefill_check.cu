/*
 * tests/cuda/prefill_check.cu - the Hopper prefill path (plugins/cuda/
 * prefill.h) on a GPU, called directly (before forward.cu dispatches to it):
 *
 *   check mode (default): per case, a reference layer (CPU, through the
 *   public API) and an fmcu_layer built here from the same random
 *   parameters, finalized as plugins/cuda/method.c does (gated per-tensor
 *   W13 requantized to one scale per expert, static input scales maxed over
 *   experts, UE8M0 block scales widened). The reference routes; the GPU gets
 *   its top-k (device memory), a plan kernel with plan.cu's contract,
 *   then fmcu_prefill_forward, and for comparison fmcu_forward (the mma.sync
 *   path). Output NaN-poisoned before each forward; compared by NMSE and the
 *   conformance bound (cuda_check's; for FP8 up to 1 element in 1000 may
 *   miss the per-element bound: wgmma's FP8 accumulation, see check_case).
 *
 *   --bench: model shapes with device-filled random weights: the stage times
 *   of the prefill path (CUDA events, median of eager runs) with each GEMM's
 *   TFLOP/s, the whole forward as a CUDA graph replay (which also proves it
 *   capturable), fmcu_forward's time on the same layer, the NMSE
 *   between the two paths and a hash of the prefill output's bits (equal
 *   hashes: two builds or settings computed the same bits from the same
 *   random data). --m M1[,M2] picks the token counts (default 4096,8192),
 *   --schemes bf16,channel the schemes (parts of their keys).
 *
 * Random data: a fixed seed (--seed N to change it), printed on failure.
 * Exit 0 all pass, 1 a failure, 77 no sm_90 device or the path compiled out.
 * Usage: prefill_check REFERENCE_TOML EMPTY_TOML [--check NAME_PART] [--seed N]
 *        prefill_check REFERENCE_TOML EMPTY_TOML --bench [SHAPE] [--m M1[,M2]] [--schemes PARTS]
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "fusedmoe/kit/refq.h" /* C, no C++ guards of its own */
}
#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/layout.h"
#include "plugins/cuda/prefill.h"
#include "plugins/cuda/tier.h"

#include "cuda_ok.h" /* tests/cuda */

/* ------------------------------------------------------------------------ */
/* Host random numbers and bf16                                              */
/* ------------------------------------------------------------------------ */

#define DEFAULT_SEED 0x2545F4914F6CDD1Dull
static uint64_t rng_state = DEFAULT_SEED;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(void)
{
    return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------------------ */
/* Plan (plan.cu plan_kernel's contract, without the row tiles)              */
/* ------------------------------------------------------------------------ */

__global__ void plan_kernel(const int32_t *ids, int64_t pairs, uint32_t global, uint32_t E, const int32_t *map,
                            int32_t *pair_local, int32_t *offsets, int32_t *sorted)
{
    extern __shared__ int cnt[];
    int *off = cnt + E;
    for (uint32_t i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    __syncthreads();
    for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
        int32_t id = ids[p];
        int l = -1;
        if (id >= 0 && (uint32_t)id < global) {
            l = map ? map[id] : id;
            if (l < 0 || l >= (int)E)
                l = -1;
        }
        pair_local[p] = l;
        if (l >= 0)
            atomicAdd(&cnt[l], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        off[0] = 0;
        for (uint32_t l = 0; l < E; l++)
            off[l + 1] = off[l] + cnt[l];
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i <= E; i += blockDim.x)
        offsets[i] = off[i];
    for (uint32_t i = threadIdx.x; i < E; i += blockDim.x)
        cnt[i] = 0;
    __syncthreads();
    for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
        int l = pair_local[p];
        if (l >= 0)
            sorted[off[l] + atomicAdd(&cnt[l], 1)] = (int32_t)p;
    }
}

/* ------------------------------------------------------------------------ */
/* Device fill (bench weights)                                               */
/* ------------------------------------------------------------------------ */

__device__ uint64_t hash64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* bf16 uniform in [-a, a), or fp8 e4m3 codes (random bytes, NaN codes avoided). */
__global__ void fill_kernel(void *p, size_t n, int fp8, float a, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = hash64(seed + i * 0x9E3779B97F4A7C15ull);
        if (fp8) {
            uint8_t b = (uint8_t)(r >> 56);
            if ((b & 0x7f) == 0x7f)
                b ^= 1;
            ((uint8_t *)p)[i] = b;
        } else {
            float u = (float)((r >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
            ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(u * a);
        }
    }
}

__global__ void fill_scale_kernel(float *p, size_t n, float base, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = hash64(seed + i * 0x9E3779B97F4A7C15ull);
        p[i] = base * (0.5f + (float)((r >> 40) * (1.0 / 16777216.0)));
    }
}

static void fill(void *p, size_t n, int fp8, float a)
{
    fill_kernel<<<1024, 256>>>(p, n, fp8, a, rng_next());
    CUDA_OK(cudaGetLastError());
}

static void fill_scales(float *p, size_t n, float base)
{
    fill_scale_kernel<<<256, 256>>>(p, n, base, rng_next());
    CUDA_OK(cudaGetLastError());
}

/* ------------------------------------------------------------------------ */
/* A GPU layer built here                                                    */
/* ------------------------------------------------------------------------ */

typedef struct shape {
    const char *name;
    const char *scheme;
    uint32_t E, k, H, I, M;
    int32_t activation;
    uint32_t gated;
    uint32_t ep_size, ep_rank;
    int dead_experts;        /* logits of experts >= E/2 pushed down: those get no rows */
    int x_pad, out_pad;      /* row padding of x / out (elements): misaligned rows */
    int tail_permille;       /* FP8: elements allowed past the per-element bound, per 1000 (0: 1) */
    float limit;             /* swiglu_limit (0: none; swigluoai takes 7) */
} shape;

struct glayer {
    fmcu_layer L;
    std::vector<void *> bufs;
    int32_t *map = nullptr;
};

static void *dalloc(glayer &g, size_t bytes)
{
    void *p = nullptr;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    g.bufs.push_back(p);
    return p;
}

static void *dupload(glayer &g, const void *src, size_t bytes)
{
    void *p = dalloc(g, bytes);
    CUDA_OK(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice));
    return p;
}

static void glayer_free(glayer &g)
{
    for (void *p : g.bufs)
        cudaFree(p);
    g.bufs.clear();
}

static float swiglu_limit_of(const shape &s)
{
    return s.limit > 0.0f ? s.limit : s.activation == FMOE_ACT_SWIGLUOAI ? 7.0f : 0.0f;
}

/* Everything but the weights (sizes, function, quantization, workspace). */
static int glayer_init(glayer &g, const shape &s, const fmoe_scheme &sc, uint32_t local, uint32_t max_tokens)
{
    char why[256];
    fmcu_layer &L = g.L;
    memset(&L, 0, sizeof L);
    /* The plugin's defaults, but fmcu_forward here is the comparison with
     * the mma.sync path: the tiled tier. */
    fmcu_options_default(&L.opt);
    L.opt.tier = FMCU_TIER_TILED;
    L.device = 0;
    L.hidden = s.H;
    L.inter = s.I;
    L.rows13 = (s.gated ? 2 : 1) * s.I;
    L.local_experts = local;
    L.global_experts = s.E;
    L.logical_experts = s.E;
    L.top_k = s.k;
    L.max_tokens = max_tokens;
    L.act_dtype = FMOE_DTYPE_BF16;
    L.activation = s.activation;
    L.gated = (int)s.gated;
    L.swiglu_alpha = 1.702f;
    L.swiglu_limit = swiglu_limit_of(s);
    L.quant = fmcu_scheme_quant(&sc, why, sizeof why);
    if (L.quant < 0) {
        printf("FAIL %s: %s\n", s.name, why);
        return 0;
    }
    L.a_dynamic = (int)sc.a_dynamic;
    L.ue8m0 = sc.w_scale_dtype == FMOE_DTYPE_UE8M0;
    L.block_n = sc.w_block_n;
    L.block_k = sc.w_block_k;
    L.renormalize = 1;
    L.routed_scaling_factor = 1.0f;
    fmcu_workspace_layout(max_tokens, s.k, s.H, s.I, local, s.E, L.quant, L.block_k, &L.ws);
    L.workspace = dalloc(g, L.ws.total);
    /* Its counters start from zero, as method.c uploads them (the grouped GEMM's tile counter among them). */
    CUDA_OK(cudaMemset(L.workspace, 0, L.ws.total));
    L.in_scales = (float *)dalloc(g, 2 * sizeof(float));
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Check mode                                                                */
/* ------------------------------------------------------------------------ */

static void *make_param(const fmoe_param_info *p, const fmoe_layer_config *c, size_t *bytes_out)
{
    size_t n = 1;
    for (uint32_t d = 0; d < p->ndim; d++)
        n *= (size_t)p->shape[d];
    size_t es = fmoe_dtype_size(p->dtype);
    void *buf = malloc(n * es + 1);
    double fan_in = p->projection == FMOE_PROJ_W2 ? c->intermediate_size : c->hidden_size;
    for (size_t i = 0; i < n; i++) {
        float v;
        switch (p->role) {
        case FMOE_ROLE_WEIGHT:
            v = p->dtype == FMOE_DTYPE_FP8_E4M3FN ? normal() * 2.0f : normal() / (float)sqrt(fan_in);
            break;
        case FMOE_ROLE_WEIGHT_SCALE: v = (float)((0.5 + uniform()) * 0.5 / sqrt(fan_in)); break;
        case FMOE_ROLE_INPUT_SCALE: v = (float)((0.8 + 0.4 * uniform()) * 4.5 / 448.0); break;
        default: v = normal() * 0.1f; break;
        }
        switch (p->dtype) {
        case FMOE_DTYPE_F32: ((float *)buf)[i] = v; break;
        case FMOE_DTYPE_BF16: ((uint16_t *)buf)[i] = to_bf16(v); break;
        case FMOE_DTYPE_FP8_E4M3FN: ((uint8_t *)buf)[i] = fmoe_fp8_e4m3fn_encode(v); break;
        case FMOE_DTYPE_UE8M0: ((uint8_t *)buf)[i] = (uint8_t)(127 - 8 + (rng_next() % 3)); break;
        default: break;
        }
    }
    *bytes_out = n * es;
    return buf;
}

struct host_param {
    fmoe_param_info info;
    void *data;
    size_t bytes;
};

static const host_param *named(const std::vector<host_param> &ps, const char *name)
{
    for (const host_param &p : ps)
        if (!strcmp(p.info.name, name))
            return &p;
    return nullptr;
}

static size_t numel(const fmoe_param_info &i)
{
    size_t n = 1;
    for (uint32_t d = 0; d < i.ndim; d++)
        n *= (size_t)i.shape[d];
    return n;
}

/* The weights as method.c's finalize leaves them. */
static int glayer_weights(glayer &g, const std::vector<host_param> &ps)
{
    fmcu_layer &L = g.L;
    const host_param *w13 = named(ps, "w13_weight"), *w2 = named(ps, "w2_weight");
    const host_param *s13 = named(ps, "w13_weight_scale"), *s2 = named(ps, "w2_weight_scale");
    uint32_t E = L.local_experts;
    if (L.quant == FMCU_Q_TENSOR) {
        std::vector<uint8_t> q((uint8_t *)w13->data, (uint8_t *)w13->data + w13->bytes);
        std::vector<float> one(E);
        if (L.gated) {
            if (refq_fp8_requant_w13(q.data(), E, L.inter, L.hidden, (const float *)s13->data, one.data()) != 0)
                return 0;
        } else {
            memcpy(one.data(), s13->data, E * 4);
        }
        L.w13 = dupload(g, q.data(), q.size());
        L.w13_scale = (const float *)dupload(g, one.data(), E * 4);
        L.w2_scale = (const float *)dupload(g, s2->data, E * 4);
        if (!L.a_dynamic) {
            float in[2];
            int unequal = 0;
            const host_param *i13 = named(ps, "w13_input_scale"), *i2 = named(ps, "w2_input_scale");
            if (refq_max_scale((const float *)i13->data, numel(i13->info), &in[0], &unequal) != 0 ||
                refq_max_scale((const float *)i2->data, numel(i2->info), &in[1], &unequal) != 0)
                return 0;
            CUDA_OK(cudaMemcpy(L.in_scales, in, sizeof in, cudaMemcpyHostToDevice));
        }
    } else {
        L.w13 = dupload(g, w13->data, w13->bytes);
        if (L.quant != FMCU_Q_NONE) {
            const host_param *s[2] = {s13, s2};
            const float *d[2];
            for (int j = 0; j < 2; j++) {
                if (s[j]->info.dtype == FMOE_DTYPE_UE8M0) {
                    float *f = refq_ue8m0_to_f32((const uint8_t *)s[j]->data, numel(s[j]->info));
                    d[j] = (const float *)dupload(g, f, numel(s[j]->info) * 4);
                    free(f);
                } else {
                    d[j] = (const float *)dupload(g, s[j]->data, s[j]->bytes);
                }
            }
            L.w13_scale = d[0];
            L.w2_scale = d[1];
        }
    }
    L.w2 = dupload(g, w2->data, w2->bytes);
    return 1;
}

typedef struct cmp {
    double nmse, worst;
    int64_t bad, unwritten;
} cmp;

static cmp compare(const float *got, const float *ref, size_t n, double atol, double rtol)
{
    cmp r = {0, 0, 0, 0};
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) && !isnan(ref[i])) {
            r.unwritten++;
            continue;
        }
        double d = fabs((double)got[i] - ref[i]);
        se += d * d;
        sr += (double)ref[i] * ref[i];
        if (d - (atol + rtol * fabs(ref[i])) > 0)
            r.bad++;
        if (d > r.worst)
            r.worst = d;
    }
    r.nmse = sr > 0 ? se / sr : se;
    return r;
}

static void config_of(const shape &s, fmoe_layer_config *c)
{
    fmoe_layer_config_init(c);
    c->num_experts = s.E;
    c->top_k = s.k;
    c->hidden_size = s.H;
    c->intermediate_size = s.I;
    c->activation = s.activation;
    c->gated = s.gated;
    c->act_dtype = FMOE_DTYPE_BF16;
    c->scoring = FMOE_SCORING_SOFTMAX;
    c->renormalize = 1;
    c->routed_scaling_factor = 1.0f;
    c->ep_size = s.ep_size ? s.ep_size : 1;
    c->ep_rank = s.ep_rank;
    c->max_num_tokens = s.M;
    c->swiglu_limit = swiglu_limit_of(s);
}

/* Plan + prefill forward of m tokens (device top-k) into out. */
static cudaError_t prefill_run(const fmcu_layer &L, int64_t m, const void *x, int64_t x_ld, const float *tw,
                               const int32_t *tid, void *out, int64_t out_ld, cudaStream_t st, cudaEvent_t *ev)
{
    char *ws = (char *)L.workspace;
    int32_t *pl = (int32_t *)(ws + L.ws.pair_local), *off = (int32_t *)(ws + L.ws.offsets),
            *sorted = (int32_t *)(ws + L.ws.sorted);
    plan_kernel<<<1, 1024, (2 * L.local_experts + 1) * sizeof(int), st>>>(tid, m * L.top_k, L.global_experts,
                                                                           L.local_experts, L.expert_map, pl, off,
                                                                           sorted);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    if (ev)
        return fmcu_prefill_forward_events(&L, m, x, x_ld, tw, pl, off, sorted, out, out_ld, st, ev);
    return fmcu_prefill_forward(&L, m, x, x_ld, tw, pl, off, sorted, out, out_ld, st);
}

static int mma_run(const fmcu_layer &L, int64_t m, const void *x, int64_t x_ld, const float *tw, const int32_t *tid,
                   void *out, int64_t out_ld, cudaStream_t st)
{
    fmcu_call c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.x = x;
    c.x_ld = x_ld;
    c.out = out;
    c.out_ld = out_ld;
    c.topk_w = tw;
    c.topk_ids = tid;
    c.stream = st;
    char err[256];
    if (fmcu_forward(&L, &c, err, sizeof err) != 0) {
        printf("fmcu_forward: %s\n", err);
        return 0;
    }
    return 1;
}

static int check_case(fmoe_context *ctx, const shape &s)
{
    fmoe_layer_config c;
    config_of(s, &c);
    fmoe_scheme sc;
    if (fmoe_scheme_parse(s.scheme, &sc) != FMOE_STATUS_OK) {
        printf("FAIL %-36s scheme: %s\n", s.name, fmoe_last_error());
        return 0;
    }
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    lo.device_kind = FMOE_DEVICE_CPU;
    fmoe_layer *ref = NULL;
    if (fmoe_layer_create(ctx, &c, &sc, &lo, &ref) != FMOE_STATUS_OK) {
        printf("FAIL %-36s reference create: %s\n", s.name, fmoe_last_error());
        return 0;
    }
    std::vector<host_param> ps;
    for (uint32_t i = 0; i < fmoe_layer_param_count(ref); i++) {
        host_param hp;
        memset(&hp.info, 0, sizeof hp.info);
        hp.info.struct_size = sizeof hp.info;
        fmoe_layer_param(ref, i, &hp.info);
        hp.data = make_param(&hp.info, &c, &hp.bytes);
        fmoe_tensor t;
        fmoe_tensor_init(&t, hp.info.dtype, hp.info.ndim, hp.info.shape, hp.data);
        if (fmoe_layer_load(ref, hp.info.name, FMOE_ALL_LOCAL_EXPERTS, FMOE_SHARD_FULL, &t, NULL) != FMOE_STATUS_OK) {
            printf("FAIL %-36s load %s: %s\n", s.name, hp.info.name, fmoe_last_error());
            return 0;
        }
        ps.push_back(hp);
    }
    if (fmoe_layer_finalize(ref) != FMOE_STATUS_OK) {
        printf("FAIL %-36s finalize: %s\n", s.name, fmoe_last_error());
        return 0;
    }
    const uint32_t local = (uint32_t)ps[0].info.shape[0];
    glayer g;
    int ok = glayer_init(g, s, sc, local, s.M) && glayer_weights(g, ps);
    for (host_param &hp : ps)
        free(hp.data);
    char why[256] = "";
    if (ok && !fmcu_prefill_supported_why(&g.L, why, sizeof why)) {
        printf("FAIL %-36s not supported: %s\n", s.name, why);
        ok = 0;
    }
    if (ok && (s.ep_size > 1)) {
        std::vector<int32_t> map(s.E);
        fmoe_layer_config_expert_map(&c, map.data(), s.E);
        g.L.expert_map = (const int32_t *)dupload(g, map.data(), s.E * 4);
    }
    if (!ok) {
        glayer_free(g);
        fmoe_layer_destroy(ref);
        return 0;
    }

    const size_t M = s.M, H = s.H, E = s.E, K = s.k;
    const size_t xld = H + s.x_pad, old = H + s.out_pad;
    std::vector<uint16_t> x(M * xld), out_ref(M * H), out_gpu(M * old);
    std::vector<float> logits(M * E), tw(M * K), fr(M * H), fg(M * H), fm(M * H);
    std::vector<int32_t> tid(M * K);
    for (size_t i = 0; i < M * xld; i++)
        x[i] = to_bf16(normal());
    for (size_t i = 0; i < M * E; i++)
        logits[i] = normal() - (s.dead_experts && (i % E) >= E / 2 ? 60.0f : 0.0f);
    std::vector<uint16_t> xd(M * H);
    for (size_t t = 0; t < M; t++)
        memcpy(&xd[t * H], &x[t * xld], H * 2);
    fmoe_tensor tx, tl, ttw, ttid, tout;
    const int64_t xsh[2] = {(int64_t)M, (int64_t)H}, lsh[2] = {(int64_t)M, (int64_t)E},
                  ksh[2] = {(int64_t)M, (int64_t)K};
    fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, xsh, xd.data());
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, lsh, logits.data());
    fmoe_tensor_init(&ttw, FMOE_DTYPE_F32, 2, ksh, tw.data());
    fmoe_tensor_init(&ttid, FMOE_DTYPE_INT32, 2, ksh, tid.data());
    fmoe_tensor_init(&tout, FMOE_DTYPE_BF16, 2, xsh, out_ref.data());
    fmoe_forward_args fa;
    memset(&fa, 0, sizeof fa);
    fa.struct_size = sizeof fa;
    fa.x = &tx;
    fa.router_logits = &tl;
    fa.out = &tout;
    fa.topk_weights_out = &ttw;
    fa.topk_ids_out = &ttid;
    if (fmoe_layer_forward(ref, &fa) != FMOE_STATUS_OK) {
        printf("FAIL %-36s reference forward: %s\n", s.name, fmoe_last_error());
        glayer_free(g);
        fmoe_layer_destroy(ref);
        return 0;
    }
    for (size_t i = 0; i < M * H; i++)
        fr[i] = from_bf16(out_ref[i]);

    void *dx, *dout, *dtw, *dtid;
    CUDA_OK(cudaMalloc(&dx, M * xld * 2));
    CUDA_OK(cudaMalloc(&dout, M * old * 2));
    CUDA_OK(cudaMalloc(&dtw, M * K * 4));
    CUDA_OK(cudaMalloc(&dtid, M * K * 4));
    CUDA_OK(cudaMemcpy(dx, x.data(), M * xld * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dtw, tw.data(), M * K * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dtid, tid.data(), M * K * 4, cudaMemcpyHostToDevice));
    const double atol = s.scheme[0] == 'b' ? 2e-2 : 5e-2, rtol = s.scheme[0] == 'b' ? 2e-2 : 1e-2;
    /* A dynamic per-tensor GEMM2 input scale is the amax of all activations: where wgmma's
     * GEMM1 moved the largest one by a bf16 step, every GEMM2 input was requantized with a
     * scale ~0.4% off and the NMSE reached ~5e-4 (H100: 5.7e-4 at M=1000, 4.9e-4 at M=4096),
     * until amax_exact_kernel recomputed that amax exactly; the scheme now has the fp8 gate. */
    const double gate = s.scheme[0] == 'b' ? 1e-4 : 5e-4;
    int pass = 1;
    /* fmcu_forward reads x and writes out with 16-byte accesses: aligned rows only. */
    const int paths = (xld % 8 == 0 && old % 8 == 0) ? 2 : 1;
    for (int path = 0; path < paths; path++) {
        CUDA_OK(cudaMemset(dout, 0xff, M * old * 2)); /* NaN poison */
        if (path == 0) {
            cudaError_t e = prefill_run(g.L, (int64_t)M, dx, (int64_t)xld, (const float *)dtw, (const int32_t *)dtid,
                                        dout, (int64_t)old, 0, nullptr);
            if (e != cudaSuccess) {
                printf("FAIL %-36s prefill forward: %s\n", s.name, cudaGetErrorString(e));
                pass = 0;
                break;
            }
        } else if (!mma_run(g.L, (int64_t)M, dx, (int64_t)xld, (const float *)dtw, (const int32_t *)dtid, dout,
                            (int64_t)old, 0)) {
            pass = 0;
            break;
        }
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(out_gpu.data(), dout, M * old * 2, cudaMemcpyDeviceToHost));
        float *dst = path == 0 ? fg.data() : fm.data();
        for (size_t t = 0; t < M; t++)
            for (size_t cc = 0; cc < H; cc++)
                dst[t * H + cc] = from_bf16(out_gpu[t * old + cc]);
    }
    if (pass) {
        if (paths == 1)
            fm = fg;
        cmp r = compare(fg.data(), fr.data(), M * H, atol, rtol);
        cmp rm = compare(fm.data(), fr.data(), M * H, atol, rtol);
        cmp rb = compare(fg.data(), fm.data(), M * H, atol, rtol);
        /* FP8: wgmma accumulates GEMM1 with fewer bits than f32 (the reference and
         * mma.sync do not), so a few GEMM2 inputs round to the neighbouring e4m3
         * code: the NMSE gate holds, the per-element bound may miss a few
         * elements. Allowed: 1 in 1000 (reported). */
        const size_t permille = s.tail_permille ? (size_t)s.tail_permille : 1;
        const int64_t allowed = s.scheme[0] == 'b' ? 0 : (int64_t)(M * H * permille / 1000);
        pass = r.unwritten == 0 && r.bad <= allowed && r.nmse <= gate;
        char other[160] = " | mma.sync: not run (unaligned rows)";
        if (paths == 2)
            snprintf(other, sizeof other, " | mma.sync nmse=%.2e | vs mma.sync nmse=%.2e max_abs=%.2e", rm.nmse,
                     rb.nmse, rb.worst);
        printf("%s %-36s M=%-5zu nmse=%.2e max_abs=%.2e outside_tol=%lld unwritten=%lld%s\n", pass ? "PASS" : "FAIL",
               s.name, M, r.nmse, r.worst, (long long)r.bad, (long long)r.unwritten, other);
    }
    cudaFree(dx);
    cudaFree(dout);
    cudaFree(dtw);
    cudaFree(dtid);
    glayer_free(g);
    fmoe_layer_destroy(ref);
    return pass;
}

/* ------------------------------------------------------------------------ */
/* Bench mode                                                                */
/* ------------------------------------------------------------------------ */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static float median(std::vector<float> v)
{
    qsort(v.data(), v.size(), sizeof(float), cmp_float);
    return v[v.size() / 2];
}

/* Random weights on the device, finalized layout (one W13 scale per expert). */
static int glayer_random(glayer &g)
{
    fmcu_layer &L = g.L;
    const size_t E = L.local_experts, H = L.hidden, I = L.inter, R = L.rows13;
    const int fp8 = L.quant != FMCU_Q_NONE;
    const size_t es = fp8 ? 1 : 2;
    void *w13 = dalloc(g, E * R * H * es), *w2 = dalloc(g, E * H * I * es);
    fill(w13, E * R * H, fp8, 1.7f / sqrtf((float)H));
    fill(w2, E * H * I, fp8, 1.7f / sqrtf((float)I));
    L.w13 = w13;
    L.w2 = w2;
    size_t n13 = 0, n2 = 0;
    switch (L.quant) {
    case FMCU_Q_TENSOR: n13 = E; n2 = E; break;
    case FMCU_Q_CHANNEL: n13 = E * R; n2 = E * H; break;
    case FMCU_Q_BLOCK: n13 = E * (R / 128) * (H / 128); n2 = E * (H / 128) * (I / 128); break;
    default: break;
    }
    if (n13) {
        float *s13 = (float *)dalloc(g, n13 * 4), *s2 = (float *)dalloc(g, n2 * 4);
        /* fp8 codes reach 448: keep |w| ~ 1/sqrt(fan_in). */
        fill_scales(s13, n13, 1.0f / (100.0f * sqrtf((float)H)));
        fill_scales(s2, n2, 1.0f / (100.0f * sqrtf((float)I)));
        L.w13_scale = s13;
        L.w2_scale = s2;
        const float in[2] = {4.5f / 448.0f, 0.05f / 448.0f};
        CUDA_OK(cudaMemcpy(L.in_scales, in, sizeof in, cudaMemcpyHostToDevice));
    }
    return 1;
}

static int bench_case(const shape &s, const fmoe_scheme &sc, const uint32_t *ms, int n_m)
{
    uint32_t maxm = 0;
    for (int i = 0; i < n_m; i++)
        maxm = ms[i] > maxm ? ms[i] : maxm;
    glayer g;
    if (!glayer_init(g, s, sc, s.E, maxm))
        return 0;
    char why[256];
    if (!fmcu_prefill_supported_why(&g.L, why, sizeof why)) {
        printf("SKIP %s %s: %s\n", s.name, s.scheme, why);
        glayer_free(g);
        return 1;
    }
    if (!glayer_random(g)) {
        glayer_free(g);
        return 0;
    }
    const size_t H = s.H, K = s.k;
    void *dx, *dout, *dout2, *dtw, *dtid;
    CUDA_OK(cudaMalloc(&dx, (size_t)maxm * H * 2));
    CUDA_OK(cudaMalloc(&dout, (size_t)maxm * H * 2));
    CUDA_OK(cudaMalloc(&dout2, (size_t)maxm * H * 2));
    CUDA_OK(cudaMalloc(&dtw, (size_t)maxm * K * 4));
    CUDA_OK(cudaMalloc(&dtid, (size_t)maxm * K * 4));
    fill(dx, (size_t)maxm * H, 0, 1.7f);
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev[FMCU_PREFILL_EVENTS], e0, e1;
    for (int i = 0; i < FMCU_PREFILL_EVENTS; i++)
        CUDA_OK(cudaEventCreate(&ev[i]));
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    int ok = 1;
    for (int mi = 0; mi < n_m && ok; mi++) {
        const uint32_t m = ms[mi];
        /* Uniform routing: k distinct experts per token, softmax-like weights. */
        std::vector<int32_t> ids((size_t)m * K);
        std::vector<float> w((size_t)m * K);
        for (uint32_t t = 0; t < m; t++) {
            float sum = 0;
            for (uint32_t j = 0; j < K; j++) {
                int32_t e;
                bool dup;
                do {
                    e = (int32_t)(rng_next() % s.E);
                    dup = false;
                    for (uint32_t q = 0; q < j; q++)
                        dup = dup || ids[(size_t)t * K + q] == e;
                } while (dup);
                ids[(size_t)t * K + j] = e;
                w[(size_t)t * K + j] = (float)(0.1 + uniform());
                sum += w[(size_t)t * K + j];
            }
            for (uint32_t j = 0; j < K; j++)
                w[(size_t)t * K + j] /= sum;
        }
        CUDA_OK(cudaMemcpy(dtid, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(dtw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));

        /* Stage times: eager runs with events. */
        enum { WARM = 2, REPS = 11 };
        std::vector<float> stage[5], total;
        for (int r = 0; r < WARM + REPS && ok; r++) {
            cudaError_t e = prefill_run(g.L, m, dx, (int64_t)H, (const float *)dtw, (const int32_t *)dtid, dout,
                                        (int64_t)H, st, ev);
            if (e != cudaSuccess) {
                printf("FAIL bench %s %s M=%u: %s\n", s.name, s.scheme, m, cudaGetErrorString(e));
                ok = 0;
                break;
            }
            CUDA_OK(cudaEventSynchronize(ev[FMCU_PREFILL_EVENTS - 1]));
            if (r < WARM)
                continue;
            for (int j = 0; j < 5; j++) {
                float t;
                CUDA_OK(cudaEventElapsedTime(&t, ev[j], ev[j + 1]));
                stage[j].push_back(t);
            }
            float t;
            CUDA_OK(cudaEventElapsedTime(&t, ev[0], ev[5]));
            total.push_back(t);
        }
        if (!ok)
            break;
        /* The whole prefill forward (plan included) as a graph. */
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        cudaError_t ce = prefill_run(g.L, m, dx, (int64_t)H, (const float *)dtw, (const int32_t *)dtid, dout,
                                     (int64_t)H, st, nullptr);
        CUDA_OK(cudaStreamEndCapture(st, &graph));
        if (ce != cudaSuccess) {
            printf("FAIL bench %s: forward under capture: %s\n", s.name, cudaGetErrorString(ce));
            ok = 0;
            break;
        }
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        std::vector<float> tg, tm;
        for (int r = 0; r < WARM + REPS; r++) {
            CUDA_OK(cudaEventRecord(e0, st));
            CUDA_OK(cudaGraphLaunch(exec, st));
            CUDA_OK(cudaEventRecord(e1, st));
            CUDA_OK(cudaEventSynchronize(e1));
            float t;
            CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
            if (r >= WARM)
                tg.push_back(t);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        /* The mma.sync path on the same layer, same routing. */
        for (int r = 0; r < 1 + 4 && ok; r++) {
            CUDA_OK(cudaEventRecord(e0, st));
            ok = mma_run(g.L, m, dx, (int64_t)H, (const float *)dtw, (const int32_t *)dtid, dout2, (int64_t)H, st);
            CUDA_OK(cudaEventRecord(e1, st));
            CUDA_OK(cudaEventSynchronize(e1));
            float t;
            CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
            if (r >= 1)
                tm.push_back(t);
        }
        if (!ok)
            break;
        /* Both outputs (the graph replays rewrote dout with the same values). */
        std::vector<uint16_t> a((size_t)m * H), b((size_t)m * H);
        CUDA_OK(cudaMemcpy(a.data(), dout, a.size() * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(b.data(), dout2, b.size() * 2, cudaMemcpyDeviceToHost));
        double se = 0, sr = 0;
        int64_t nan = 0;
        uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a of the forward's output bits: same bits, same hash */
        for (size_t i = 0; i < a.size(); i++)
            hash = (hash ^ a[i]) * 0x100000001b3ull;
        for (size_t i = 0; i < a.size(); i++) {
            double x = from_bf16(a[i]), y = from_bf16(b[i]);
            if (isnan(x) || isnan(y)) {
                nan++;
                continue;
            }
            se += (x - y) * (x - y);
            sr += y * y;
        }
        const double rows = (double)m * K;
        const double f1 = 2.0 * rows * g.L.rows13 * H, f2 = 2.0 * rows * H * s.I;
        const double t1 = median(stage[1]) * 1e-3, t2 = median(stage[3]) * 1e-3;
        const double peak = g.L.quant == FMCU_Q_NONE ? 790.0 : 1470.0;
        const double fw = median(tg) * 1e-3, fmma = median(tm) * 1e-3;
        printf("BENCH %-10s %-8s M=%-5u gather %7.1f | GEMM1 %8.1f us %6.1f TF (%3.0f%%) | act %7.1f | "
               "GEMM2 %8.1f us %6.1f TF (%3.0f%%) | combine %7.1f | sum %8.1f us\n",
               s.name, s.scheme[0] == 'b' ? "bf16" : sc.w_strategy == FMOE_QSTRATEGY_TENSOR ? "fp8-tens"
                                                  : sc.w_strategy == FMOE_QSTRATEGY_CHANNEL ? "fp8-chan"
                                                                                          : "fp8-blk",
               m, median(stage[0]) * 1e3, t1 * 1e6, f1 / t1 / 1e12, 100 * f1 / t1 / 1e12 / peak,
               median(stage[2]) * 1e3, t2 * 1e6, f2 / t2 / 1e12, 100 * f2 / t2 / 1e12 / peak, median(stage[4]) * 1e3,
               median(total) * 1e3);
        printf("      forward (graph, plan included) %8.1f us %6.1f TF | mma.sync fmcu_forward %8.1f us %6.1f TF | "
               "x%.2f | nmse vs mma.sync %.2e nan %lld | out %016llx\n",
               fw * 1e6, (f1 + f2) / fw / 1e12, fmma * 1e6, (f1 + f2) / fmma / 1e12, fmma / fw, sr > 0 ? se / sr : se,
               (long long)nan, (unsigned long long)hash);
        if (nan || !(sr > 0 && se / sr < 1e-3)) {
            printf("FAIL bench %s %s M=%u: outputs of the two paths differ\n", s.name, s.scheme, m);
            ok = 0;
        }
        fflush(stdout);
    }
    for (int i = 0; i < FMCU_PREFILL_EVENTS; i++)
        cudaEventDestroy(ev[i]);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(st);
    cudaFree(dx);
    cudaFree(dout);
    cudaFree(dout2);
    cudaFree(dtw);
    cudaFree(dtid);
    glayer_free(g);
    return ok;
}

/* ------------------------------------------------------------------------ */

#define SILU FMOE_ACT_SILU
#define BLOCK "fp8e4m3:block128x128/fp8e4m3:group128:dynamic"
#define BLOCK_UE8M0 "fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic"
#define CHANNEL "fp8e4m3:channel/fp8e4m3:token:dynamic"
#define TENSOR_S "fp8e4m3:tensor/fp8e4m3:tensor"
#define TENSOR_D "fp8e4m3:tensor/fp8e4m3:tensor:dynamic"

static const shape checks[] = {
    /* name                          scheme    E  k   H    I     M   act gated ep rank dead xpad opad tail limit */
    {"bf16", "bf16", 16, 4, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"bf16", "bf16", 16, 4, 512, 256, 4096, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor static", TENSOR_S, 16, 4, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor static", TENSOR_S, 16, 4, 512, 256, 4096, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor dynamic", TENSOR_D, 16, 4, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor dynamic", TENSOR_D, 16, 4, 512, 256, 4096, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 channel", CHANNEL, 16, 4, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 channel", CHANNEL, 16, 4, 512, 256, 4096, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 block", BLOCK, 16, 4, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 block", BLOCK, 16, 4, 512, 256, 4096, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 block ue8m0 E64 k6", BLOCK_UE8M0, 64, 6, 512, 256, 1000, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"bf16 half the experts empty", "bf16", 64, 2, 256, 128, 1000, SILU, 1, 0, 0, 1, 0, 0, 0, 0},
    {"fp8 block half the experts empty", BLOCK, 64, 2, 256, 128, 1000, SILU, 1, 0, 0, 1, 0, 0, 0, 0},
    {"bf16 ep 2/1 (non-local pairs)", "bf16", 16, 4, 256, 128, 1000, SILU, 1, 2, 1, 0, 0, 0, 0, 0},
    {"fp8 channel ep 2/0", CHANNEL, 16, 4, 256, 128, 1000, SILU, 1, 2, 0, 0, 0, 0, 0, 0},
    {"bf16 swigluoai limit 7", "bf16", 8, 2, 256, 128, 1000, FMOE_ACT_SWIGLUOAI, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 channel non-gated gelu_tanh", CHANNEL, 8, 2, 256, 128, 1000, FMOE_ACT_GELU_TANH, 0, 0, 0, 0, 0, 0, 0, 0},
    /* relu2's heavy tail sets a coarse dynamic per-tensor GEMM2 input scale: 662 of 256000 elements
     * (0.26%) past the bound on an H200 with fast accumulation, 395 with GEMM1 promoted every 128 K
     * (H100), NMSE 2.0e-5 (bench/cuda/RESULTS.md at 5ddad69, "Prefill: tile shapes and FP8 accumulation"). */
    {"fp8 tensor dyn non-gated relu2", TENSOR_D, 8, 2, 256, 128, 1000, FMOE_ACT_RELU2, 0, 0, 0, 0, 0, 0, 5, 0},
    {"bf16 strided x/out (unaligned rows)", "bf16", 8, 2, 256, 128, 1000, SILU, 1, 0, 0, 0, 4, 12, 0, 0},
    {"fp8 block strided x/out", BLOCK, 8, 2, 256, 128, 1000, SILU, 1, 0, 0, 0, 4, 12, 0, 0},
    {"bf16 M=7 (mostly empty experts)", "bf16", 16, 4, 256, 128, 7, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    /* The activation kernel's launch shapes (plugins/cuda/prefill_act.cu, act_shape): 2, 4 and 8
     * chunks of 8 columns a thread, rows that do not fill the last chunks, an odd number of
     * 128-column groups (half-warps), and SiLU with a limit (its own kernel). */
    {"bf16 silu limit 7 I=1152 (2 chunks a thread)", "bf16", 8, 2, 256, 1152, 300, SILU, 1, 0, 0, 0, 0, 0, 0, 7.0f},
    {"fp8 channel I=1152", CHANNEL, 8, 2, 256, 1152, 300, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 block I=1152 (9 groups)", BLOCK, 8, 2, 256, 1152, 300, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor dynamic I=2304 (4 chunks a thread)", TENSOR_D, 8, 2, 256, 2304, 200, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 tensor static I=4736 (8 chunks a thread)", TENSOR_S, 8, 2, 256, 4736, 200, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 channel silu limit 7 I=4736", CHANNEL, 8, 2, 256, 4736, 200, SILU, 1, 0, 0, 0, 0, 0, 0, 7.0f},
    {"bf16 swigluoai I=4736", "bf16", 8, 2, 256, 4736, 200, FMOE_ACT_SWIGLUOAI, 1, 0, 0, 0, 0, 0, 0, 0},
    /* Per-token rows a warp each (act_token_warp_kernel): 3 chunks a lane with a limit, 4 with
     * the last lanes' chunk past the row (I = 992: 124 chunks), 4 of another activation. */
    {"fp8 channel silu limit 7 I=768 (warp rows, 3 chunks a lane)", CHANNEL, 8, 2, 256, 768, 300, SILU, 1, 0, 0, 0, 0, 0, 0, 7.0f},
    {"fp8 channel I=992 (warp rows, 4 chunks a lane)", CHANNEL, 8, 2, 256, 992, 300, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"fp8 channel swigluoai I=1024 (warp rows)", CHANNEL, 8, 2, 256, 1024, 300, FMOE_ACT_SWIGLUOAI, 1, 0, 0, 0, 0, 0, 0, 0},
};

static const shape benches[] = {
    {"qwen3-30b", "bf16", 128, 8, 2048, 768, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3-30b", TENSOR_D, 128, 8, 2048, 768, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3-30b", CHANNEL, 128, 8, 2048, 768, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3-30b", BLOCK, 128, 8, 2048, 768, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"mixtral", "bf16", 8, 2, 4096, 14336, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"mixtral", TENSOR_D, 8, 2, 4096, 14336, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"mixtral", CHANNEL, 8, 2, 4096, 14336, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"mixtral", BLOCK, 8, 2, 4096, 14336, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"gpt-oss", "bf16", 128, 4, 2880, 2880, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"gpt-oss", TENSOR_D, 128, 4, 2880, 2880, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"gpt-oss", CHANNEL, 128, 4, 2880, 2880, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"deepseek", "bf16", 256, 8, 7168, 2048, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"deepseek", TENSOR_D, 256, 8, 7168, 2048, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"deepseek", CHANNEL, 256, 8, 7168, 2048, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
    {"deepseek", BLOCK, 256, 8, 7168, 2048, 0, SILU, 1, 0, 0, 0, 0, 0, 0, 0},
};

/* Is a comma-separated part of `list` part of the scheme key? */
static bool scheme_listed(const char *list, const char *key)
{
    char part[64];
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && n < sizeof part) {
            memcpy(part, p, n);
            part[n] = 0;
            if (strstr(key, part))
                return true;
        }
        p += n + (end ? 1 : 0);
    }
    return false;
}

static int usage(void)
{
    fprintf(stderr, "usage: prefill_check REFERENCE_TOML EMPTY_TOML [--check NAME_PART] [--seed N]\n"
                    "       prefill_check REFERENCE_TOML EMPTY_TOML --bench [SHAPE] [--m M1[,M2]] [--schemes PARTS]\n");
    return 2;
}

/* A whole number filling all of s, in [1, max]. */
static bool parse_count(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end = nullptr;
    if (!s || !*s || *s == '-')
        return false;
    const unsigned long long v = strtoull(s, &end, 0);
    if (*end || v == 0 || v > max)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    int bench = 0;
    const char *only = NULL;    /* bench: a shape's name; check: part of a case's name */
    const char *schemes = NULL; /* bench: comma-separated parts of scheme keys ("bf16,channel") */
    uint32_t ms[2] = {4096, 8192};
    int n_m = 2;
    unsigned long long seed = DEFAULT_SEED;
    for (int a = 3; a < argc; a++) {
        const char *arg = argv[a], *next = a + 1 < argc ? argv[a + 1] : NULL;
        unsigned long long v;
        if (!strcmp(arg, "--bench")) {
            bench = 1;
            if (next && next[0] != '-') {
                only = next;
                a++;
            }
        } else if (!strcmp(arg, "--check") && next) {
            only = next;
            a++;
        } else if (!strcmp(arg, "--seed") && parse_count(next, ~0ull, &seed)) {
            a++;
        } else if (!strcmp(arg, "--schemes") && next) {
            schemes = next;
            a++;
        } else if (!strcmp(arg, "--m") && next) { /* one M, or two as "M1,M2" */
            const char *comma = strchr(next, ',');
            char first[32];
            snprintf(first, sizeof first, "%.*s", comma ? (int)(comma - next) : (int)strlen(next), next);
            if (!parse_count(first, 1u << 20, &v))
                return usage();
            ms[0] = (uint32_t)v;
            n_m = 1;
            if (comma) {
                if (!parse_count(comma + 1, 1u << 20, &v))
                    return usage();
                ms[1] = (uint32_t)v;
                n_m = 2;
            }
            a++;
        } else {
            return usage();
        }
    }
    rng_state = seed;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    {
        /* The path compiled out or another architecture: nothing to test. */
        fmcu_layer probe;
        memset(&probe, 0, sizeof probe);
        probe.act_dtype = FMOE_DTYPE_BF16;
        probe.hidden = probe.inter = 128;
        probe.local_experts = 1;
        probe.top_k = 1;
        probe.max_tokens = 1;
        fmcu_workspace_layout(1, 1, 128, 128, 1, 1, FMCU_Q_NONE, 128, &probe.ws);
        char why[256];
        if (!fmcu_prefill_supported_why(&probe, why, sizeof why)) {
            printf("SKIP: %s\n", why);
            return 77;
        }
    }
    char err[256];
    if (fmcu_prepare_kernels(0, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int ok = 1, n = 0;
    if (bench) {
        for (const shape &s : benches) {
            if (only && strcmp(only, s.name))
                continue;
            if (schemes && *schemes && !scheme_listed(schemes, s.scheme))
                continue;
            fmoe_scheme sc;
            if (fmoe_scheme_parse(s.scheme, &sc) != FMOE_STATUS_OK)
                return 1;
            ok &= bench_case(s, sc, ms, n_m);
            n++;
        }
    } else {
        const char *files[1] = {argv[1]};
        fmoe_context_options o;
        fmoe_context_options_init(&o);
        o.config_path = argv[2];
        o.plugin_files = files;
        o.n_plugin_files = 1;
        o.ignore_environment = 1;
        o.isolated = 1;
        fmoe_context *ctx = NULL;
        if (fmoe_context_create(&o, &ctx) != FMOE_STATUS_OK) {
            fprintf(stderr, "context: %s\n", fmoe_last_error());
            return 1;
        }
        for (const shape &s : checks) {
            if (only && !strstr(s.name, only))
                continue;
            ok &= check_case(ctx, s);
            n++;
            fflush(stdout);
        }
        fmoe_context_destroy(ctx);
    }
    if (ok)
        printf("all passed: %d cases\n", n);
    else
        printf("FAILED: %d cases (seed %llu; --seed %llu reruns it)\n", n, seed, seed);
    return ok ? 0 : 1;
}
