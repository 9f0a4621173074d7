/*
 * plugins/rocm/moe_stages.hip - the non-MFMA path of the fused MoE, after
 * moe_sorting (AITER's 2-stage flow: ck_moe_stage1 / ck_moe_stage2),
 * written once against dialect.h and wave-size generic (no cross-lane
 * operation: shared-memory reductions only), so the same source runs on
 * CDNA (64 lanes) and in the NVIDIA test build (32):
 *
 *   input quantization  x (times the router weight with doweight_stage1,
 *                       rounded to bf16) -> a1: bf16, or e4m3fnuz with a
 *                       static / dynamic per-tensor, per-token or 1x128
 *                       group scale;
 *   stage 1             per block of sorted rows (one expert): gate and
 *                       up = a1 . W13^T (f32 accumulation per scale group,
 *                       then scaled), + bias, rounded to bf16, the gated
 *                       activation, rounded to bf16 -> act;
 *   act quantization    act -> a2 (fp8 schemes) as AITER quantizes the
 *                       intermediate: per token, per 1x128 group, or per
 *                       tensor (dynamic: the amax over every routed row);
 *   stage 2             y = a2 . W2^T + bias (TP rank 0), rounded to bf16,
 *                       one row per sorted entry;
 *   combine             out_t = bf16(sum over slots in slot order of
 *                       y * w), the reference's order, so two forwards
 *                       give the same bytes (no atomics on out).
 *
 * Weights are read in the 16x16 pre-shuffled layout the MFMA kernels use
 * (device_math.h fmro_shuffled_at). One thread per output column and
 * RCHUNK rows at a time: simple and correct first; mfma_stages.hip is the
 * fast path for AMD targets.
 */
#include "plugins/rocm/device_math.h"
#include "plugins/rocm/launch.h"
#include "plugins/rocm/sorting.h"

#define THREADS 256 /* power of two: the tree reductions halve it */
#define COLS    128 /* output columns per stage block */
#define ROWS    FMRO_SORT_BLOCK
#define RCHUNK  8 /* sorted rows accumulated at once (registers) */

/* Largest v over the block (NaN skipped, as the reference's comparisons). */
static __device__ float block_amax(float v, float *buf)
{
    buf[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s && buf[threadIdx.x + s] > buf[threadIdx.x])
            buf[threadIdx.x] = buf[threadIdx.x + s];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

static __device__ inline uint32_t groups_of(const fmro_layer_dev &L, uint32_t n)
{
    return L.quant == FMRO_Q_BLOCK ? (n + L.group - 1) / L.group : 1u;
}

/* GEMM1 input value of token t, column col (0 in the padding). */
static __device__ inline float input_value(const fmro_layer_dev &L, const fmro_call &c, uint32_t t, uint32_t col)
{
    if (col >= L.hidden)
        return 0.0f;
    float v = fmro_bf16_to_f32(((const uint16_t *)c.x)[(int64_t)t * c.x_ld + col]);
    return L.on_input ? fmro_round_bf16(v * c.topk_w[(size_t)t * L.top_k]) : v;
}

/* Token of sorted entry e, or -1 for padding and entries past num_valid. */
static __device__ inline int32_t entry_token(const fmro_layer_dev &L, uint32_t m, uint32_t e)
{
    const char *ws = (const char *)L.workspace;
    if (e >= ((const uint32_t *)(ws + L.ws.num_valid))[0])
        return -1;
    uint32_t t = FMRO_SORT_TOKEN(((const uint32_t *)(ws + L.ws.sorted_ids))[e]);
    return t < m ? (int32_t)t : -1;
}

/* One row of a GEMM input quantized: `n` real columns of `value(col)`, the
 * row padded with zeros to `n_pad`; fnuz codes to q, one scale per group. */
template <typename Value>
static __device__ void quantize_row(const fmro_layer_dev &L, float tensor_scale, Value value, uint32_t n,
                                    uint32_t n_pad, uint8_t *q, float *scales, float *buf)
{
    uint32_t groups = groups_of(L, n), width = L.quant == FMRO_Q_BLOCK ? L.group : n_pad;
    for (uint32_t g = 0; g < groups; g++) {
        uint32_t c0 = g * width, c1 = g + 1 == groups ? n_pad : c0 + width;
        float s = tensor_scale;
        if (L.quant != FMRO_Q_TENSOR) {
            float amax = 0.0f;
            for (uint32_t col = c0 + threadIdx.x; col < c1 && col < n; col += blockDim.x) {
                float a = fabsf(value(col));
                amax = a > amax ? a : amax;
            }
            s = fmro_fnuz_dynamic_scale(block_amax(amax, buf));
        }
        if (threadIdx.x == 0)
            scales[g] = s;
        int finite = s > 0.0f && s < INFINITY;
        for (uint32_t col = c0 + threadIdx.x; col < c1; col += blockDim.x)
            q[col] = col >= n ? 0 : finite ? fmro_fnuz_quantize(value(col), s) : (uint8_t)FMRO_FNUZ_NAN;
    }
}

/* Dynamic per-tensor: amax over every token's GEMM1 input. */
FMRO_KERNEL void fmro_amax_input(fmro_layer_dev L, fmro_call c)
{
    FMRO_SHARED float buf[THREADS];
    uint32_t t = blockIdx.x;
    float amax = 0.0f;
    for (uint32_t col = threadIdx.x; col < L.hidden; col += blockDim.x) {
        float a = fabsf(input_value(L, c, t, col));
        amax = a > amax ? a : amax;
    }
    amax = block_amax(amax, buf);
    if (threadIdx.x == 0)
        fmro_atomic_max((unsigned int *)((char *)L.workspace + L.ws.amax), __float_as_uint(amax));
}

/* Dynamic per-tensor: amax over the activations of every routed row. */
FMRO_KERNEL void fmro_amax_act(fmro_layer_dev L, uint32_t m)
{
    FMRO_SHARED float buf[THREADS];
    uint32_t e = blockIdx.x;
    if (entry_token(L, m, e) < 0)
        return;
    const uint16_t *act = (const uint16_t *)((const char *)L.workspace + L.ws.act) + (size_t)e * L.inter_pad;
    float amax = 0.0f;
    for (uint32_t col = threadIdx.x; col < L.inter; col += blockDim.x) {
        float a = fabsf(fmro_bf16_to_f32(act[col]));
        amax = a > amax ? a : amax;
    }
    amax = block_amax(amax, buf);
    if (threadIdx.x == 0)
        fmro_atomic_max((unsigned int *)((char *)L.workspace + L.ws.amax) + 1, __float_as_uint(amax));
}

static __device__ float tensor_scale(const fmro_layer_dev &L, int which)
{
    if (L.quant != FMRO_Q_TENSOR)
        return 0.0f;
    if (!L.a_dynamic)
        return L.a_static_scale[which];
    const unsigned int *amax = (const unsigned int *)((const char *)L.workspace + L.ws.amax);
    return fmro_fnuz_dynamic_scale(__uint_as_float(amax[which]));
}

FMRO_KERNEL void fmro_quant_input(fmro_layer_dev L, fmro_call c)
{
    FMRO_SHARED float buf[THREADS];
    uint32_t t = blockIdx.x;
    char *ws = (char *)L.workspace;
    if (L.quant == FMRO_Q_BF16) {
        uint16_t *a1 = (uint16_t *)(ws + L.ws.a1) + (size_t)t * L.hidden_pad;
        for (uint32_t col = threadIdx.x; col < L.hidden_pad; col += blockDim.x)
            a1[col] = fmro_f32_to_bf16(input_value(L, c, t, col));
        return;
    }
    uint8_t *a1 = (uint8_t *)(ws + L.ws.a1) + (size_t)t * L.hidden_pad;
    float *scales = (float *)(ws + L.ws.a1_scale) + (size_t)t * groups_of(L, L.hidden);
    quantize_row(
        L, tensor_scale(L, 0), [&](uint32_t col) { return input_value(L, c, t, col); }, L.hidden, L.hidden_pad, a1,
        scales, buf);
}

FMRO_KERNEL void fmro_quant_act(fmro_layer_dev L, uint32_t m)
{
    FMRO_SHARED float buf[THREADS];
    uint32_t e = blockIdx.x;
    if (entry_token(L, m, e) < 0)
        return;
    char *ws = (char *)L.workspace;
    const uint16_t *act = (const uint16_t *)(ws + L.ws.act) + (size_t)e * L.inter_pad;
    uint8_t *a2 = (uint8_t *)(ws + L.ws.a2) + (size_t)e * L.inter_pad;
    float *scales = (float *)(ws + L.ws.a2_scale) + (size_t)e * groups_of(L, L.inter);
    quantize_row(
        L, tensor_scale(L, 1), [&](uint32_t col) { return fmro_bf16_to_f32(act[col]); }, L.inter, L.inter_pad, a2,
        scales, buf);
}

/* Dequant scale of weight row `row` (checkpoint numbering) of expert e in
 * scale group g; w13 1 for W13 (2I rows), 0 for W2 (H rows). */
static __device__ inline float weight_scale(const fmro_layer_dev &L, int w13, uint32_t e, uint32_t row, uint32_t g)
{
    const float *s = w13 ? L.w13_scale : L.w2_scale;
    uint32_t rows = w13 ? 2 * L.inter : L.hidden, k = w13 ? L.hidden : L.inter;
    switch (L.quant) {
    case FMRO_Q_TENSOR:
        return s[e];
    case FMRO_Q_CHANNEL:
        return s[(size_t)e * rows + row];
    case FMRO_Q_BLOCK: {
        uint32_t row_blocks = (rows + L.group - 1) / L.group;
        return s[((size_t)e * row_blocks + row / L.group) * groups_of(L, k) + g];
    }
    default:
        return 1.0f;
    }
}

template <bool FP8> static __device__ inline float weight_at(const void *w, size_t at)
{
    if (FP8)
        return fmro_fnuz_decode(((const uint8_t *)w)[at]);
    return fmro_bf16_to_f32(((const uint16_t *)w)[at]);
}

/* sum over k in [k0, k1) of a[row r][k] * W[n][k] for RCHUNK rows, with
 * `nw` weight rows (1, or 2 for gate and up). */
template <bool FP8, int NW>
static __device__ inline void dot_rows(const void *a, const float *a_scale, uint32_t a_groups, const int32_t *rows,
                                       uint32_t a_ld, const void *w, const size_t *w_row, uint32_t w_k, uint32_t k0,
                                       uint32_t k1, float (*part)[RCHUNK])
{
    for (int i = 0; i < NW; i++)
        for (int r = 0; r < RCHUNK; r++)
            part[i][r] = 0.0f;
    for (uint32_t kk = k0; kk < k1; kk++) {
        float wv[NW];
        for (int i = 0; i < NW; i++)
            wv[i] = weight_at<FP8>(w, w_row[i] + fmro_shuffled_at(w_k, FP8 ? 1 : 2, 0, kk));
        for (int r = 0; r < RCHUNK; r++) {
            if (rows[r] < 0)
                continue;
            float av = weight_at<FP8>(a, (size_t)rows[r] * a_ld + kk);
            for (int i = 0; i < NW; i++)
                part[i][r] += av * wv[i];
        }
    }
    (void)a_scale;
    (void)a_groups;
}

/* Offset (elements) of row `row` of expert e's shuffled [rows_pad, k]
 * matrix: the tile row it sits in and its place inside the tile. */
static __device__ inline size_t shuffled_row(uint32_t rows_pad, uint32_t k, uint32_t eb, uint32_t e, uint32_t row)
{
    return (size_t)e * rows_pad * k + fmro_shuffled_at(k, eb, row, 0);
}

template <bool FP8> FMRO_KERNEL_TEMPLATE void fmro_stage1(fmro_layer_dev L, uint32_t m)
{
    FMRO_SHARED int32_t tok[ROWS];
    uint32_t blk = blockIdx.x, n = blockIdx.y * blockDim.x + threadIdx.x;
    char *ws = (char *)L.workspace;
    int32_t expert = ((const int32_t *)(ws + L.ws.sorted_expert))[blk];
    if (expert < 0)
        return;
    if (threadIdx.x < ROWS)
        tok[threadIdx.x] = entry_token(L, m, blk * ROWS + threadIdx.x);
    __syncthreads();
    if (n >= L.inter_pad)
        return;
    uint16_t *act = (uint16_t *)(ws + L.ws.act);
    uint32_t Hp = L.hidden_pad, Ip = L.inter_pad, eb = FP8 ? 1 : 2;
    if (n >= L.inter) {
        for (int r = 0; r < ROWS; r++)
            act[(size_t)(blk * ROWS + r) * Ip + n] = 0;
        return;
    }
    uint32_t groups = groups_of(L, L.hidden), width = L.quant == FMRO_Q_BLOCK ? L.group : Hp;
    const float *a_scale = (const float *)(ws + L.ws.a1_scale);
    /* Weight rows: gate n, up Ip + n of the padded matrix (prepare.c). */
    size_t w_row[2] = {shuffled_row(2 * Ip, Hp, eb, (uint32_t)expert, n),
                       shuffled_row(2 * Ip, Hp, eb, (uint32_t)expert, Ip + n)};
    /* fmro_shuffled_at(k, eb, row, col) = at(row, 0) + at(0, col) - at(0, 0): columns add on. */
    for (int r0 = 0; r0 < ROWS; r0 += RCHUNK) {
        float acc[2][RCHUNK], part[2][RCHUNK];
        for (int r = 0; r < RCHUNK; r++)
            acc[0][r] = acc[1][r] = 0.0f;
        for (uint32_t g = 0; g < groups; g++) {
            uint32_t k0 = g * width, k1 = g + 1 == groups ? Hp : k0 + width;
            dot_rows<FP8, 2>(ws + L.ws.a1, a_scale, groups, tok + r0, Hp, L.w13, w_row, Hp, k0, k1, part);
            float sg = weight_scale(L, 1, (uint32_t)expert, n, g);
            float su = weight_scale(L, 1, (uint32_t)expert, L.inter + n, g);
            for (int r = 0; r < RCHUNK; r++) {
                if (tok[r0 + r] < 0)
                    continue;
                float sa = FP8 ? a_scale[(size_t)tok[r0 + r] * groups + g] : 1.0f;
                acc[0][r] += part[0][r] * sa * sg;
                acc[1][r] += part[1][r] * sa * su;
            }
        }
        for (int r = 0; r < RCHUNK; r++) {
            size_t e = (size_t)blk * ROWS + r0 + r;
            if (tok[r0 + r] < 0) {
                act[e * Ip + n] = 0;
                continue;
            }
            float bg = L.b13 ? fmro_bf16_to_f32(L.b13[(size_t)expert * 2 * L.inter + n]) : 0.0f;
            float bu = L.b13 ? fmro_bf16_to_f32(L.b13[(size_t)expert * 2 * L.inter + L.inter + n]) : 0.0f;
            float h_g = fmro_round_bf16(acc[0][r] + bg), h_u = fmro_round_bf16(acc[1][r] + bu);
            act[e * Ip + n] = fmro_f32_to_bf16(fmro_activation(L.activation, L.swiglu_alpha, L.swiglu_limit, h_g, h_u));
        }
    }
}

template <bool FP8> FMRO_KERNEL_TEMPLATE void fmro_stage2(fmro_layer_dev L, uint32_t m)
{
    FMRO_SHARED int32_t ent[ROWS];
    uint32_t blk = blockIdx.x, n = blockIdx.y * blockDim.x + threadIdx.x;
    char *ws = (char *)L.workspace;
    int32_t expert = ((const int32_t *)(ws + L.ws.sorted_expert))[blk];
    if (expert < 0)
        return;
    /* GEMM2 rows are sorted entries (not tokens): the input is per entry. */
    if (threadIdx.x < ROWS)
        ent[threadIdx.x] = entry_token(L, m, blk * ROWS + threadIdx.x) < 0 ? -1 : (int32_t)(blk * ROWS + threadIdx.x);
    __syncthreads();
    if (n >= L.hidden)
        return;
    uint32_t Hp = L.hidden_pad, Ip = L.inter_pad, eb = FP8 ? 1 : 2;
    uint32_t groups = groups_of(L, L.inter), width = L.quant == FMRO_Q_BLOCK ? L.group : Ip;
    const void *a = FP8 ? (const void *)(ws + L.ws.a2) : (const void *)(ws + L.ws.act);
    const float *a_scale = (const float *)(ws + L.ws.a2_scale);
    float *y = (float *)(ws + L.ws.y);
    size_t w_row[1] = {shuffled_row(Hp, Ip, eb, (uint32_t)expert, n)};
    for (int r0 = 0; r0 < ROWS; r0 += RCHUNK) {
        float acc[RCHUNK], part[1][RCHUNK];
        for (int r = 0; r < RCHUNK; r++)
            acc[r] = 0.0f;
        for (uint32_t g = 0; g < groups; g++) {
            uint32_t k0 = g * width, k1 = g + 1 == groups ? Ip : k0 + width;
            dot_rows<FP8, 1>(a, a_scale, groups, ent + r0, Ip, L.w2, w_row, Ip, k0, k1, part);
            float sw = weight_scale(L, 0, (uint32_t)expert, n, g);
            for (int r = 0; r < RCHUNK; r++) {
                if (ent[r0 + r] < 0)
                    continue;
                float sa = FP8 ? a_scale[(size_t)ent[r0 + r] * groups + g] : 1.0f;
                acc[r] += part[0][r] * sa * sw;
            }
        }
        float b = L.b2 && L.add_b2 ? fmro_bf16_to_f32(L.b2[(size_t)expert * L.hidden + n]) : 0.0f;
        for (int r = 0; r < RCHUNK; r++)
            if (ent[r0 + r] >= 0)
                y[(size_t)ent[r0 + r] * L.hidden + n] = fmro_round_bf16(acc[r] + b);
    }
}

FMRO_KERNEL void fmro_combine(fmro_layer_dev L, fmro_call c)
{
    uint32_t t = blockIdx.x, k = L.top_k;
    const char *ws = (const char *)L.workspace;
    const int32_t *pos_of = (const int32_t *)(ws + L.ws.pos_of) + (size_t)t * k;
    const float *y = (const float *)(ws + L.ws.y);
    uint16_t *out = (uint16_t *)c.out + (int64_t)t * c.out_ld;
    for (uint32_t n = threadIdx.x; n < L.hidden; n += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t j = 0; j < k; j++) {
            int32_t p = pos_of[j];
            if (p >= 0)
                acc += y[(size_t)p * L.hidden + n] * (L.on_input ? 1.0f : c.topk_w[(size_t)t * k + j]);
        }
        out[n] = fmro_f32_to_bf16(acc);
    }
}

void fmro_launch_stages(const fmro_layer_dev *L, const fmro_call *c, const fmro_sizes *z, fmro_stream s)
{
    int fp8 = L->quant != FMRO_Q_BF16;
    uint32_t entries = z->blocks * ROWS;
    if (L->quant == FMRO_Q_TENSOR && L->a_dynamic) {
        fmro_launch_fill((uint32_t *)((char *)L->workspace + L->ws.amax), 2, 0u, s);
        FMRO_LAUNCH(fmro_amax_input, z->m, THREADS, 0, s, *L, *c);
    }
    FMRO_LAUNCH(fmro_quant_input, z->m, THREADS, 0, s, *L, *c);
    if (z->local > 0 && z->blocks > 0) {
        dim3 g1(z->blocks, (L->inter_pad + COLS - 1) / COLS), g2(z->blocks, (L->hidden + COLS - 1) / COLS);
        if (fp8)
            FMRO_LAUNCH(fmro_stage1<true>, g1, COLS, 0, s, *L, z->m);
        else
            FMRO_LAUNCH(fmro_stage1<false>, g1, COLS, 0, s, *L, z->m);
        if (fp8) {
            if (L->quant == FMRO_Q_TENSOR && L->a_dynamic)
                FMRO_LAUNCH(fmro_amax_act, entries, THREADS, 0, s, *L, z->m);
            FMRO_LAUNCH(fmro_quant_act, entries, THREADS, 0, s, *L, z->m);
            FMRO_LAUNCH(fmro_stage2<true>, g2, COLS, 0, s, *L, z->m);
        } else {
            FMRO_LAUNCH(fmro_stage2<false>, g2, COLS, 0, s, *L, z->m);
        }
    }
    FMRO_LAUNCH(fmro_combine, z->m, THREADS, 0, s, *L, *c);
}
