/*
 * plugins/reference/method_megamoe.c - the oracle of
 *
 *   fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic
 *
 * MXFP4 expert weights (e2m1, one UE8M0 scale per 32 along K) multiplied by
 * FP8 e4m3 activations with one power-of-two (UE8M0) scale per 32: the
 * arithmetic of DeepGEMM's MegaMoE (fp8_fp4_mega_moe, spec/formats.md §7.3,
 * E18), which DeepSeek-V4 checkpoints (fp8 config, expert_dtype "fp4") are
 * served with. It differs from the generic quantized loop (refq_run) in
 * where the routing weight goes, so this family runs its own loop:
 *
 *   xq  = fq(x_t)        per 32: s = 2^ceil(log2(max(amax, 1e-4) / 448)),
 *                        exponent byte clamped to [1, 254], q = e4m3(x / s)
 *   h   = xq . dq(W13)^T f32 accumulation
 *   g,u = bf16(h_gate), bf16(h_up)             (the epilogue reads bf16)
 *   clamp L (swiglu_limit > 0): g = min(g, bf16(L)), u = clamp(u, +-bf16(L))
 *   a   = (g / (1 + expf(-g)) * u) * w[t,j]    f32; the weight BEFORE GEMM2
 *   aq  = fq2(a)         per 32: sf = 2^(e - 127), e = the f32 exponent
 *                        field of amax * (1/448) plus 1 if its mantissa is
 *                        not zero (no floor: an all-zero group has sf 0)
 *   y   = bf16(aq . dq(W2)^T)                  f32 accumulation
 *   out = bf16(sum of y_j over the token's local slots, ascending j, in f32)
 *
 * That is the kernel's non-fast-math path; fast_math (__expf and an
 * approximate reciprocal) differs from it in the last bits of the SiLU.
 * Layers: gated SiLU, bf16 activations, no biases, router weight not on
 * the input (MegaMoE has none of these); H and I multiples of 32.
 *
 * Parameters (vLLM DeepseekV4MegaMoEExperts names): w13_weight
 * [E, 2I, H/2] and w2_weight [E, H, I/2] e2m1 pairs (low nibble first),
 * w13_weight_scale [E, 2I, H/32] and w2_weight_scale [E, H, I/32] UE8M0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "plugins/reference/quant.h"

#define MX            32
#define FP8           FMOE_DTYPE_FP8_E4M3FN
#define FP8_MAX       448.0f
#define PAIR_BLOCK    16
#define BUDGET_FLOATS ((int64_t)1 << 22) /* per-chunk GEMM2 outputs: 16 MiB */
#define DOT_LANES     8

static int megamoe_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->w_strategy == FMOE_QSTRATEGY_GROUP && s->w_group_size == MX &&
           s->w_scale_dtype == FMOE_DTYPE_UE8M0 && s->w_actorder == FMOE_ACTORDER_NONE && s->a_dtype == FP8 &&
           s->a_strategy == FMOE_QSTRATEGY_GROUP && s->a_group_size == MX && s->a_dynamic && s->a_symmetric;
}

static fmoe_status unsupported(refq_instance *in, fmoe_error *err, const char *what)
{
    return in->host->error_set(err, FMOE_STATUS_UNSUPPORTED, "MXFP4 x FP8 (MegaMoE): %s", what);
}

/* The layer features the scheme's epilogue has (query and create ask the
 * same, so a layer the query accepts is never refused at create): NULL, or
 * the first one missing. */
static const char *megamoe_layer_refusal(const fmoe_layer_config *c)
{
    if (!c->gated || c->activation != FMOE_ACT_SILU)
        return "the scheme's epilogue is SwiGLU: needs a gated layer with activation silu";
    if (c->act_dtype != FMOE_DTYPE_BF16)
        return "GEMM2 outputs and the combine are bf16: needs act_dtype bf16";
    if (c->has_bias)
        return "expert biases are not part of the scheme";
    if (c->apply_router_weight_on_input)
        return "the router weight is applied after SwiGLU, not on the input";
    return NULL;
}

static int megamoe_layer_ok(const fmoe_layer_config *c, char *why, size_t cap)
{
    const char *no = megamoe_layer_refusal(c);
    if (no)
        snprintf(why, cap, "MXFP4 x FP8 (MegaMoE): %s", no);
    return no == NULL;
}

static fmoe_status megamoe_declare(refq_instance *in, fmoe_error *err)
{
    const char *no = megamoe_layer_refusal(&in->cfg);
    if (no)
        return unsupported(in, err, no);
    if (in->hidden % MX)
        return refq_size_error(in, err, "MXFP4 x FP8: hidden_size %u is not divisible by the scale group of %u",
                               in->hidden, MX);
    if (in->inter % MX)
        return refq_size_error(in, err,
                               "MXFP4 x FP8: intermediate_size_per_partition %u is not divisible by the scale group "
                               "of %u (a group would straddle gate/up or a TP shard)",
                               in->inter, MX);
    int64_t rI = 2 * (int64_t)in->inter, H = in->hidden, I = in->inter;
    refq_param(in, "w13_weight", FMOE_DTYPE_FP4_E2M1X2, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 0, 3, rI,
               H / 2);
    refq_param(in, "w2_weight", FMOE_DTYPE_FP4_E2M1X2, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 0, 3, H,
               I / 2);
    refq_param(in, "w13_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 0, 0,
               3, rI, H / MX);
    refq_param(in, "w2_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP, 1, 0, 3,
               H, I / MX);
    return FMOE_STATUS_OK;
}

static fmoe_status megamoe_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    (void)err;
    in->w13 = (refq_matrix){.format = REFQ_W_MXFP4,
                            .experts = in->local_experts,
                            .rows = 2 * in->inter,
                            .cols = in->hidden,
                            .values = p[0]->data,
                            .sf = p[2]->data};
    in->w2 = (refq_matrix){.format = REFQ_W_MXFP4,
                           .experts = in->local_experts,
                           .rows = in->hidden,
                           .cols = in->inter,
                           .values = p[1]->data,
                           .sf = p[3]->data};
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_FP8_GROUP, .group = MX, .rule = FMOE_FP8_SCALE_UE8M0};
    return FMOE_STATUS_OK;
}

/* ---- the numerics of one row ------------------------------------------------ */

/* GEMM1 input: e4m3 per 32 with DeepGEMM's ceil power-of-two scale
 * (formats.h FMOE_FP8_SCALE_UE8M0), fake-quantized in place. */
static int quantize_input(float *x, uint32_t n, uint8_t *codes, float *scales)
{
    if (fmoe_fp8_quantize_blocks(FP8, FP8_MAX, FMOE_FP8_SCALE_UE8M0, 1, n, 1, MX, x, codes, scales) != FMOE_STATUS_OK)
        return -1;
    return fmoe_fp8_dequantize_blocks(FP8, 1, n, 1, MX, codes, scales, x) == FMOE_STATUS_OK ? 0 : -1;
}

static float bf16(float v)
{
    return fmoe_round_to(FMOE_DTYPE_BF16, v);
}

/* a[i] = (silu(bf16 gate) * bf16 up) * weight, clamped first when limit > 0
 * (the clamp is compared in bf16, as the kernel's __hmin2 does). */
static void swiglu_weighted(const float *h, uint32_t I, float limit, float weight, float *a)
{
    float c = bf16(limit);
    for (uint32_t i = 0; i < I; i++) {
        float g = bf16(h[i]), u = bf16(h[I + i]);
        if (limit > 0.0f) {
            g = g < c ? g : c;
            u = u < -c ? -c : u > c ? c : u;
        }
        float denom = 1.0f + expf(-g);
        a[i] = (g / denom * u) * weight;
    }
}

/* The epilogue's requantization of one 32-group: sf from amax * (1/448)
 * rounded up to a power of two by its bits (math.cuh get_e4m3_sf_and_sf_inv),
 * q = e4m3(sat(a * (1 / sf))). Returns the exponent byte (bits of sf >> 23). */
static uint8_t requantize_group(float *a, uint32_t n)
{
    float amax = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        amax = fabsf(a[i]) > amax ? fabsf(a[i]) : amax;
    if (!isfinite(amax)) {
        for (uint32_t i = 0; i < n; i++)
            a[i] = NAN;
        return 0xFF;
    }
    float scaled = amax * (1.0f / FP8_MAX);
    uint32_t bits;
    memcpy(&bits, &scaled, sizeof bits);
    int32_t e = (int32_t)(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0);
    if (e < -127) /* cannot happen for a finite, non-negative amax; kept for the reader */
        e = -127;
    uint32_t sf_bits = (uint32_t)(e + 127) << 23, inv_bits = (uint32_t)(127 - e) << 23;
    float sf, inv;
    memcpy(&sf, &sf_bits, sizeof sf);
    memcpy(&inv, &inv_bits, sizeof inv);
    for (uint32_t i = 0; i < n; i++) {
        float v = a[i] * inv;
        v = v > FP8_MAX ? FP8_MAX : v < -FP8_MAX ? -FP8_MAX : v;
        a[i] = fmoe_fp8_decode(FP8, fmoe_fp8_encode(FP8, v)) * sf;
    }
    return (uint8_t)(e + 127);
}

/* f32 dot product with 8 partial sums. */
static float dot_f32(const float *a, const float *b, uint32_t n)
{
    float part[DOT_LANES] = {0};
    for (uint32_t i = 0; i < n; i++)
        part[i % DOT_LANES] += a[i] * b[i];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

/* ---- the loop ------------------------------------------------------------------ */

typedef struct mm_run {
    refq_instance *in;
    const void *x;
    int64_t x_ld, m;
    uint32_t H, I, k;
    const float *w;
    const int32_t *ids;
    /* scratch */
    float *xb, *hb, *row, *y, *scales;
    uint8_t *codes;
    int32_t *order;
    int64_t *start;
    int64_t chunk;
} mm_run;

static int64_t local_of(const mm_run *r, int64_t pair)
{
    const refq_instance *in = r->in;
    int32_t e = r->ids[pair];
    if (e < 0 || (uint32_t)e >= in->global_experts)
        return -1;
    int64_t l = in->expert_map ? in->expert_map[e] : e;
    return l < 0 || l >= (int64_t)in->local_experts ? -1 : l;
}

/* GEMM1, SwiGLU with the weight, requantization and GEMM2 for the nb pairs
 * `rows` (chunk rows) of local expert l; y rows written. */
static int run_block(mm_run *r, int64_t l, const int32_t *rows, int nb, int64_t p0)
{
    uint32_t H = r->H, I = r->I, wide = H > I ? H : I;
    for (int b = 0; b < nb; b++) {
        float *x = r->xb + (size_t)b * wide;
        int64_t t = (p0 + rows[b]) / r->k;
        for (uint32_t c = 0; c < H; c++)
            x[c] = fmoe_load_float(r->x, r->in->cfg.act_dtype, t * r->x_ld + c);
        if (quantize_input(x, H, r->codes, r->scales) != 0)
            return -1;
    }
    for (uint32_t n = 0; n < 2 * I; n++) {
        refq_matrix_row(&r->in->w13, (uint32_t)l, n, r->row);
        for (int b = 0; b < nb; b++)
            r->hb[(size_t)b * 2 * I + n] = dot_f32(r->xb + (size_t)b * wide, r->row, H);
    }
    float limit = r->in->cfg.swiglu_limit;
    for (int b = 0; b < nb; b++) {
        float *a = r->xb + (size_t)b * wide; /* the GEMM1 input is no longer needed */
        swiglu_weighted(r->hb + (size_t)b * 2 * I, I, limit, r->w[p0 + rows[b]], a);
        for (uint32_t g = 0; g < I; g += MX)
            requantize_group(a + g, MX);
    }
    for (uint32_t n = 0; n < H; n++) {
        refq_matrix_row(&r->in->w2, (uint32_t)l, n, r->row);
        for (int b = 0; b < nb; b++)
            r->y[(size_t)rows[b] * H + n] = bf16(dot_f32(r->xb + (size_t)b * wide, r->row, I));
    }
    return 0;
}

/* Counting sort of the chunk's local pairs by expert (ascending within). */
static void group_pairs(mm_run *r, int64_t p0, int64_t p1)
{
    int64_t n_local = r->in->local_experts;
    memset(r->start, 0, (size_t)(n_local + 1) * sizeof *r->start);
    for (int64_t q = p0; q < p1; q++)
        if (local_of(r, q) >= 0)
            r->start[local_of(r, q) + 1]++;
    for (int64_t l = 0; l < n_local; l++)
        r->start[l + 1] += r->start[l];
    for (int64_t q = p0; q < p1; q++) {
        int64_t l = local_of(r, q);
        if (l >= 0)
            r->order[r->start[l]++] = (int32_t)(q - p0);
    }
    for (int64_t l = n_local; l > 0; l--)
        r->start[l] = r->start[l - 1];
    r->start[0] = 0;
}

/* out_t = bf16(sum of the local slots' y in f32, ascending slot order). */
static void combine(mm_run *r, int64_t t0, int64_t t1, fmoe_tensor *out)
{
    for (int64_t t = t0; t < t1; t++)
        for (uint32_t n = 0; n < r->H; n++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < r->k; j++) {
                int64_t q = t * r->k + j;
                if (local_of(r, q) >= 0)
                    acc += r->y[(size_t)(q - t0 * r->k) * r->H + n];
            }
            fmoe_store_float(out->data, out->dtype, t * out->strides[0] + n, acc);
        }
}

static void scratch_free(mm_run *r)
{
    free(r->xb);
    free(r->hb);
    free(r->row);
    free(r->y);
    free(r->scales);
    free(r->codes);
    free(r->order);
    free(r->start);
}

static int scratch_alloc(mm_run *r)
{
    uint32_t wide = r->H > r->I ? r->H : r->I;
    r->chunk = BUDGET_FLOATS / ((int64_t)r->k * r->H);
    r->chunk = r->chunk < 1 ? 1 : r->chunk > r->m ? r->m : r->chunk;
    size_t pairs = (size_t)(r->chunk * r->k);
    r->xb = malloc(sizeof(float) * PAIR_BLOCK * wide);
    r->hb = malloc(sizeof(float) * PAIR_BLOCK * 2 * r->I);
    r->row = malloc(sizeof(float) * wide);
    r->y = malloc(sizeof(float) * pairs * r->H);
    r->scales = malloc(sizeof(float) * (wide / MX));
    r->codes = malloc(wide);
    r->order = malloc(sizeof(int32_t) * pairs);
    r->start = malloc(sizeof(int64_t) * ((size_t)r->in->local_experts + 1));
    if (r->xb && r->hb && r->row && r->y && r->scales && r->codes && r->order && r->start)
        return 0;
    scratch_free(r);
    return -1;
}

static fmoe_status megamoe_run(refq_instance *in, fmoe_error *err, const fmoe_tensor *x, const float *w,
                               const int32_t *ids, fmoe_tensor *out)
{
    mm_run r = {.in = in,
                .x = x->data,
                .x_ld = x->strides[0],
                .m = x->shape[0],
                .H = in->hidden,
                .I = in->inter,
                .k = in->cfg.top_k,
                .w = w,
                .ids = ids};
    if (r.m <= 0)
        return FMOE_STATUS_OK;
    if (scratch_alloc(&r) != 0)
        return in->host->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory in the MegaMoE reference loop");
    int rc = 0;
    for (int64_t t0 = 0; t0 < r.m && rc == 0; t0 += r.chunk) {
        int64_t t1 = t0 + r.chunk < r.m ? t0 + r.chunk : r.m;
        group_pairs(&r, t0 * r.k, t1 * r.k);
        for (int64_t l = 0; l < (int64_t)in->local_experts && rc == 0; l++)
            for (int64_t i = r.start[l]; i < r.start[l + 1] && rc == 0; i += PAIR_BLOCK) {
                int nb = (int)(r.start[l + 1] - i < PAIR_BLOCK ? r.start[l + 1] - i : PAIR_BLOCK);
                rc = run_block(&r, l, r.order + i, nb, t0 * r.k);
            }
        if (rc == 0)
            combine(&r, t0, t1, out);
    }
    scratch_free(&r);
    return rc == 0 ? FMOE_STATUS_OK
                   : in->host->error_set(err, FMOE_STATUS_INTERNAL, "MegaMoE reference: a quantizer refused its sizes");
}

const refq_family refq_family_megamoe = {
    .name = "mxfp4-fp8",
    .serves = megamoe_serves,
    .layer_ok = megamoe_layer_ok,
    .declare = megamoe_declare,
    .finalize = megamoe_finalize,
    .run = megamoe_run,
    .modular = {.struct_size = sizeof(fmoe_method),
                .name = "mxfp4-fp8",
                .flags = FMOE_METHOD_EPLB,
                .create = refq_create,
                .declare_params = refq_declare,
                .finalize = refq_finalize,
                .apply = refq_apply,
                .destroy = refq_destroy},
    .monolithic = {.struct_size = sizeof(fmoe_method),
                   .name = "mxfp4-fp8-monolithic",
                   .flags = FMOE_METHOD_EPLB | FMOE_METHOD_MONOLITHIC,
                   .create = refq_create,
                   .declare_params = refq_declare,
                   .finalize = refq_finalize,
                   .apply_logits = refq_apply_logits,
                   .destroy = refq_destroy},
};
