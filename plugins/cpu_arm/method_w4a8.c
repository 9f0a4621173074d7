/*
 * plugins/cpu_arm/method_w4a8.c - vLLM's CompressedTensorsW4A8Int8MoEMethod
 * (dynamic_4bit_int_moe) on Arm CPUs: int4 weights with f32 channel or
 * bf16/f16/f32 group scales, int8 activations quantized per row,
 * dynamically and asymmetrically (KleidiAI qai8dx), optional biases,
 * silu(gate)*up (optionally clamped) or the gpt-oss SwiGLU, weights on the
 * input, EP expert maps (vLLM's op has none: here non-local slots add 0).
 *
 * Parameters are the reference method's (docs/REFERENCE-METHODS.md, W4A8
 * Arm): w13_weight int8 [E, rI, H] and w2_weight int8 [E, H, I] holding
 * int4 values, w13_weight_scale [E, rI, G13] and w2_weight_scale
 * [E, H, G2] (G = 1 channelwise), w13_bias [E, rI] and w2_bias [E, H].
 * finalize checks the int4 range and packs each expert (pack.c).
 *
 * apply, per chunk of tokens (the chunk bounds the workspace, sized at
 * create):
 *   1. quantize every token's input row once (in parallel over tokens):
 *      x = x_t, or round(x_t * w[t,0]) with the router weight on the input;
 *   2. group the chunk's (token, slot) pairs by local expert, in token
 *      order, and cut each expert's pairs into tiles of TILE;
 *   3. per tile (in parallel): GEMM1 with the micro-kernel over W13's row
 *      blocks, h = round(F * s + b13); a = round(act(h)); requantize a per
 *      row; GEMM2, y = round(F * s + b2) (b2 on TP rank 0 only);
 *   4. out_t = round(sum_j y_j * w_j) in slot order (parallel over tokens).
 * Every rounding is the reference's (fusedmoe/kit/refq.h), so the
 * only difference from it is that the kernels multiply integers exactly
 * where the reference adds dequantized f32 products.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"
#include "plugins/cpu_arm/cpu_arm.h"
#include "plugins/cpu_arm/pack.h"

#define TILE                16                /* pairs per work item */
#define Y_BUDGET            ((size_t)1 << 22) /* floats of GEMM2 outputs per chunk: 16 MiB */
#define N_PARAMS_MAX        6
#define PARALLEL_MIN_TOKENS 32 /* below this, quantize / combine on one thread */

typedef struct proj {
    carm_shape shape;
    uint8_t *packed; /* [E][expert_bytes] */
    float *bias;     /* [E][n] f32, or NULL */
} proj;

typedef struct scratch {
    float *row; /* [H] one input row */
    float *h;   /* [TILE][rI] GEMM1 outputs */
    float *act; /* [TILE][I] activations */
    int8_t *aq; /* [TILE][kp2] requantized activations */
    int32_t o[TILE];
    float s[TILE];
    const int8_t *ptr[TILE];
    int32_t o1[TILE];
    float s1[TILE];
    float f[TILE * CARM_NR];
} scratch;

typedef struct item {
    uint32_t expert, begin, count; /* pairs order[begin .. begin+count) */
} item;

typedef struct instance {
    const fmoe_host *host;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    uint32_t H, I, rI, k, local, global;
    int32_t *expert_map; /* NULL: identity */
    fmoe_param_desc descs[N_PARAMS_MAX];
    const fmoe_param_desc *desc_ptrs[N_PARAMS_MAX];
    uint32_t n_params;
    proj w13, w2;
    carm_kernel_fn kernel;
    uint32_t threads;
    /* Workspace for a chunk of `chunk` tokens. */
    uint32_t chunk;
    int8_t *xq; /* [chunk][kp1] */
    int32_t *xo;
    float *xs;
    float *y;        /* [chunk * k][H] */
    uint32_t *order; /* [chunk * k] */
    uint32_t *start; /* [local + 1] */
    item *items;     /* [chunk * k + local] */
    scratch *scr;    /* [threads] */
} instance;

/* ---- what is served ----------------------------------------------------- */

int carm_w4a8_serves(const fmoe_scheme *s, const fmoe_layer_config *cfg, char *reason, size_t cap)
{
    int int4 = s->w_dtype == FMOE_DTYPE_INT4 && s->w_symmetric && s->w_actorder == FMOE_ACTORDER_NONE &&
               (s->w_strategy == FMOE_QSTRATEGY_CHANNEL || s->w_strategy == FMOE_QSTRATEGY_GROUP);
    int a8 = s->a_dtype == FMOE_DTYPE_INT8 && s->a_strategy == FMOE_QSTRATEGY_TOKEN && s->a_dynamic && !s->a_symmetric;
    int sd = s->w_scale_dtype == FMOE_DTYPE_F32 || s->w_scale_dtype == FMOE_DTYPE_BF16 ||
             s->w_scale_dtype == FMOE_DTYPE_F16;
    if (!int4 || !a8 || !sd) {
        snprintf(reason, cap,
                 "serves W4A8 only: symmetric int4 weights per channel or group (f32/bf16/f16 scales) x int8 "
                 "activations per token, dynamic, asymmetric");
        return 0;
    }
    if (s->w_strategy == FMOE_QSTRATEGY_GROUP && (s->w_group_size == 0 || s->w_group_size % 32)) {
        snprintf(reason, cap, "group size %u: the kernels need a multiple of 32 (KleidiAI qsi4c32p)", s->w_group_size);
        return 0;
    }
    if (!cfg->gated || (cfg->activation != FMOE_ACT_SILU && cfg->activation != FMOE_ACT_SWIGLUOAI)) {
        snprintf(reason, cap, "activation %s%s: serves gated silu and swigluoai (vLLM dynamic_4bit_int_moe)",
                 cfg->gated ? "" : "non-gated ",
                 cfg->activation == FMOE_ACT_SILU        ? "silu"
                 : cfg->activation == FMOE_ACT_SWIGLUOAI ? "swigluoai"
                                                         : "other than silu");
        return 0;
    }
    if (cfg->act_dtype != FMOE_DTYPE_F32 && cfg->act_dtype != FMOE_DTYPE_BF16 && cfg->act_dtype != FMOE_DTYPE_F16) {
        snprintf(reason, cap, "activation dtype must be f32, bf16 or f16");
        return 0;
    }
    uint32_t tp = cfg->tp_size ? cfg->tp_size : 1, inter = cfg->intermediate_size / tp;
    uint32_t g = s->w_group_size;
    if (s->w_strategy == FMOE_QSTRATEGY_GROUP && (cfg->hidden_size % g || inter % g)) {
        snprintf(reason, cap, "W4A8: group_size %u must divide hidden_size %u and intermediate_size_per_partition %u",
                 g, cfg->hidden_size, inter);
        return 0;
    }
    snprintf(reason, cap, "W4A8 int4 %s x int8 asym per row",
             s->w_strategy == FMOE_QSTRATEGY_GROUP ? "group" : "channel");
    return 1;
}

/* ---- create / declare ------------------------------------------------------ */

static void *alloc(const fmoe_host *h, size_t n)
{
    return h->alloc(h->ctx, n ? n : 1, 64);
}

static void param(instance *in, const char *name, fmoe_dtype dtype, int32_t proj_id, int32_t role, int32_t kind,
                  int32_t shard_axis, uint32_t ndim, int64_t d1, int64_t d2)
{
    fmoe_param_desc *d = &in->descs[in->n_params];
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dtype;
    d->ndim = ndim;
    d->shape[0] = in->local;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj_id;
    d->role = role;
    d->scale_kind = kind;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
    in->desc_ptrs[in->n_params] = d;
    in->n_params++;
}

static int grouped(const instance *in)
{
    return in->scheme.w_strategy == FMOE_QSTRATEGY_GROUP;
}

/* The reference method's parameters, in its order. */
static void declare(instance *in)
{
    int g = grouped(in);
    uint32_t G13 = g ? in->H / in->scheme.w_group_size : 1, G2 = g ? in->I / in->scheme.w_group_size : 1;
    int32_t kind = g ? FMOE_SCALE_GROUP : FMOE_SCALE_CHANNEL;
    fmoe_dtype sd = in->scheme.w_scale_dtype;
    param(in, "w13_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, in->rI, in->H);
    param(in, "w2_weight", FMOE_DTYPE_INT8, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, in->H, in->I);
    param(in, "w13_weight_scale", sd, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, kind, 0, 3, in->rI, G13);
    param(in, "w2_weight_scale", sd, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, kind, g ? 1 : -1, 3, in->H, G2);
    if (in->cfg.has_bias) {
        param(in, "w13_bias", in->cfg.act_dtype, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 2, in->rI, 0);
        param(in, "w2_bias", in->cfg.act_dtype, FMOE_PROJ_W2, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, -1, 2, in->H, 0);
    }
}

static void destroy_instance(instance *in)
{
    const fmoe_host *h = in->host;
    void *bufs[] = {in->expert_map, in->w13.packed, in->w13.bias, in->w2.packed, in->w2.bias, in->xq,
                    in->xo,         in->xs,         in->y,        in->order,     in->start,   in->items};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        h->free(h->ctx, bufs[i]);
    if (in->scr)
        for (uint32_t t = 0; t < in->threads; t++) {
            h->free(h->ctx, in->scr[t].row);
            h->free(h->ctx, in->scr[t].h);
            h->free(h->ctx, in->scr[t].act);
            h->free(h->ctx, in->scr[t].aq);
        }
    h->free(h->ctx, in->scr);
    h->free(h->ctx, in);
}

/* The workspace of apply: 0, or -1 out of memory. */
static int alloc_workspace(instance *in)
{
    const fmoe_host *h = in->host;
    size_t per_token = (size_t)in->k * in->H;
    size_t chunk = Y_BUDGET / per_token;
    chunk = chunk < 1 ? 1 : chunk > in->cfg.max_num_tokens ? in->cfg.max_num_tokens : chunk;
    in->chunk = (uint32_t)(chunk ? chunk : 1);
    size_t pairs = (size_t)in->chunk * in->k;
    in->xq = alloc(h, (size_t)in->chunk * in->w13.shape.kp);
    in->xo = alloc(h, in->chunk * sizeof(int32_t));
    in->xs = alloc(h, in->chunk * sizeof(float));
    in->y = alloc(h, pairs * in->H * sizeof(float));
    in->order = alloc(h, pairs * sizeof(uint32_t));
    in->start = alloc(h, ((size_t)in->local + 1) * sizeof(uint32_t));
    in->items = alloc(h, (pairs + in->local) * sizeof(item));
    in->scr = alloc(h, in->threads * sizeof(scratch));
    if (!in->xq || !in->xo || !in->xs || !in->y || !in->order || !in->start || !in->items || !in->scr)
        return -1;
    memset(in->scr, 0, in->threads * sizeof(scratch));
    for (uint32_t t = 0; t < in->threads; t++) {
        scratch *s = &in->scr[t];
        s->row = alloc(h, in->H * sizeof(float));
        s->h = alloc(h, (size_t)TILE * in->rI * sizeof(float));
        s->act = alloc(h, (size_t)TILE * in->I * sizeof(float));
        s->aq = alloc(h, (size_t)TILE * in->w2.shape.kp);
        if (!s->row || !s->h || !s->act || !s->aq)
            return -1;
        /* Activation padding columns stay zero (they meet zero weights). */
        memset(s->aq, 0, (size_t)TILE * in->w2.shape.kp);
    }
    memset(in->xq, 0, (size_t)in->chunk * in->w13.shape.kp);
    return 0;
}

static fmoe_status create(fmoe_create_args *a)
{
    const carm_state *st = a->state;
    const fmoe_host *h = st->host;
    char why[256];
    if (!carm_w4a8_serves(a->scheme, a->config, why, sizeof why))
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
    instance *in = alloc(h, sizeof *in);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    memcpy(&in->cfg, a->config, sizeof in->cfg < a->config->struct_size ? sizeof in->cfg : a->config->struct_size);
    memcpy(&in->scheme, a->scheme,
           sizeof in->scheme < a->scheme->struct_size ? sizeof in->scheme : a->scheme->struct_size);
    in->H = a->hidden_size;
    in->I = a->intermediate_per_rank;
    in->rI = 2 * in->I;
    in->k = in->cfg.top_k;
    in->local = a->num_local_experts;
    in->global = a->num_global_experts;
    in->kernel = carm_kernel(st->isa);
    in->threads = st->threads ? st->threads : 1;
    uint32_t g = in->scheme.w_group_size;
    if (grouped(in) && (in->H % g || in->I % g)) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "W4A8: group_size %u must divide hidden_size %u and intermediate_size_per_partition %u", g,
                            a->hidden_size, a->intermediate_per_rank);
    }
    int bad = carm_shape_init(&in->w13.shape, in->rI, in->H, grouped(in) ? in->H / g : 1, grouped(in) ? g : in->H) ||
              carm_shape_init(&in->w2.shape, in->H, in->I, grouped(in) ? in->I / g : 1, grouped(in) ? g : in->I);
    if (bad || in->local == 0) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "W4A8: empty layer (H %u, I %u, %u local experts)",
                            in->H, in->I, in->local);
    }
    if (a->expert_map) {
        in->expert_map = alloc(h, in->global * sizeof(int32_t));
        if (in->expert_map)
            memcpy(in->expert_map, a->expert_map, in->global * sizeof(int32_t));
    }
    if ((a->expert_map && !in->expert_map) || alloc_workspace(in) != 0) {
        destroy_instance(in);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory (workspace for %u tokens)",
                            a->config->max_num_tokens);
    }
    declare(in);
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status declare_params(fmoe_declare_params_args *a)
{
    instance *in = a->instance;
    a->params = in->desc_ptrs;
    a->n_params = in->n_params;
    return FMOE_STATUS_OK;
}

/* ---- finalize ------------------------------------------------------------ */

static fmoe_status pack_proj(instance *in, proj *p, const fmoe_tensor *w, const fmoe_tensor *sc, const char *name,
                             fmoe_error *err)
{
    const fmoe_host *h = in->host;
    const carm_shape *s = &p->shape;
    size_t n_scales = (size_t)s->n * s->groups;
    float *scales = alloc(h, n_scales * sizeof(float));
    p->packed = alloc(h, in->local * s->expert_bytes);
    if (!scales || !p->packed) {
        h->free(h->ctx, scales);
        return h->error_set(err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (uint32_t e = 0; e < in->local; e++) {
        for (size_t i = 0; i < n_scales; i++)
            scales[i] = fmoe_load_float(sc->data, sc->dtype, (int64_t)(e * n_scales + i));
        const int8_t *v = (const int8_t *)w->data + (size_t)e * s->n * s->k;
        size_t at = 0;
        if (carm_pack_expert(s, v, scales, p->packed + e * s->expert_bytes, &at) != 0) {
            h->free(h->ctx, scales);
            return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                "%s: int4 values must be in [-8, 7] (local expert %u, row %zu, column %zu holds %d)",
                                name, e, at / s->k, at % s->k, v[at]);
        }
    }
    h->free(h->ctx, scales);
    return FMOE_STATUS_OK;
}

static fmoe_status widen_bias(instance *in, proj *p, const fmoe_tensor *b)
{
    size_t n = (size_t)in->local * p->shape.n;
    p->bias = alloc(in->host, n * sizeof(float));
    if (!p->bias)
        return FMOE_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        p->bias[i] = fmoe_load_float(b->data, b->dtype, (int64_t)i);
    return FMOE_STATUS_OK;
}

static fmoe_status finalize(fmoe_finalize_args *a)
{
    instance *in = a->instance;
    const fmoe_host *h = in->host;
    if (a->n_params != in->n_params)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared %u", a->n_params,
                            in->n_params);
    fmoe_status s = pack_proj(in, &in->w13, a->params[0], a->params[2], "w13_weight", a->err);
    if (s == FMOE_STATUS_OK)
        s = pack_proj(in, &in->w2, a->params[1], a->params[3], "w2_weight", a->err);
    if (s == FMOE_STATUS_OK && in->cfg.has_bias &&
        (widen_bias(in, &in->w13, a->params[4]) != FMOE_STATUS_OK ||
         widen_bias(in, &in->w2, a->params[5]) != FMOE_STATUS_OK))
        s = h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    return s;
}

/* ---- apply --------------------------------------------------------------- */

typedef struct call {
    instance *in;
    const fmoe_apply_args *a;
    const float *w; /* topk_weights */
    const int32_t *ids;
    uint32_t t0, tokens; /* this chunk */
    uint32_t n_items;
} call;

static int64_t local_of(const instance *in, int32_t e)
{
    if (e < 0 || (uint32_t)e >= in->global)
        return -1;
    int64_t l = in->expert_map ? in->expert_map[e] : e;
    return l < 0 || l >= (int64_t)in->local ? -1 : l;
}

/* 1. Token t of the chunk: its GEMM1 input row, quantized. */
static void quantize_token(void *ctx, uint32_t worker, uint32_t t)
{
    const call *c = ctx;
    instance *in = c->in;
    float *row = in->scr[worker].row;
    const fmoe_tensor *x = c->a->x;
    int64_t tok = (int64_t)c->t0 + t;
    fmoe_dtype act = in->cfg.act_dtype;
    float rw = c->w[tok * in->k];
    for (uint32_t i = 0; i < in->H; i++) {
        float v = fmoe_load_float(x->data, act, tok * x->strides[0] + i);
        row[i] = in->cfg.apply_router_weight_on_input ? fmoe_round_to(act, v * rw) : v;
    }
    fmoe_w4a8_quantize_activations(1, in->H, row, in->xq + (size_t)t * in->w13.shape.kp, &in->xo[t], &in->xs[t]);
}

/* 2. The chunk's local pairs grouped by expert (token order within), cut
 * into tiles. */
static void make_items(call *c)
{
    instance *in = c->in;
    uint32_t pairs = c->tokens * in->k;
    const int32_t *ids = c->ids + (size_t)c->t0 * in->k;
    memset(in->start, 0, ((size_t)in->local + 1) * sizeof *in->start);
    for (uint32_t q = 0; q < pairs; q++) {
        int64_t l = local_of(in, ids[q]);
        if (l >= 0)
            in->start[l + 1]++;
    }
    for (uint32_t l = 0; l < in->local; l++)
        in->start[l + 1] += in->start[l];
    c->n_items = 0;
    for (uint32_t l = 0; l < in->local; l++)
        for (uint32_t b = in->start[l]; b < in->start[l + 1]; b += TILE) {
            uint32_t left = in->start[l + 1] - b;
            in->items[c->n_items++] = (item){.expert = l, .begin = b, .count = left < TILE ? left : TILE};
        }
    for (uint32_t q = 0; q < pairs; q++) {
        int64_t l = local_of(in, ids[q]);
        if (l >= 0)
            in->order[in->start[l]++] = q;
    }
}

/* out[i][n] = round(F * s_i + bias[n]) for the 8 rows of block rb. */
static void epilogue(const instance *in, const float *f, const float *s, uint32_t nb, uint32_t rb, uint32_t n_rows,
                     const float *bias, float *out, size_t ld, const uint32_t *dst_rows)
{
    fmoe_dtype act = in->cfg.act_dtype;
    for (uint32_t i = 0; i < nb; i++) {
        float *o = out + (size_t)(dst_rows ? dst_rows[i] : i) * ld;
        for (uint32_t j = 0; j < CARM_NR && rb * CARM_NR + j < n_rows; j++) {
            uint32_t n = rb * CARM_NR + j;
            float v = f[i * CARM_NR + j] * s[i];
            float b = bias ? bias[n] : 0.0f;
            v = v + b;
            o[n] = fmoe_round_to(act, v);
        }
    }
}

/* 3. One tile: GEMM1, activation, requantization, GEMM2 into y. */
static void run_tile(void *ctx, uint32_t worker, uint32_t index)
{
    const call *c = ctx;
    instance *in = c->in;
    scratch *s = &in->scr[worker];
    const item *it = &in->items[index];
    uint32_t nb = it->count, l = it->expert;
    const uint32_t *pairs = in->order + it->begin;
    const carm_shape *s13 = &in->w13.shape, *s2 = &in->w2.shape;
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t t = pairs[i] / in->k;
        s->ptr[i] = in->xq + (size_t)t * s13->kp;
        s->o1[i] = in->xo[t];
        s->s1[i] = in->xs[t];
    }
    const uint8_t *w13 = in->w13.packed + l * s13->expert_bytes;
    const float *b13 = in->w13.bias ? in->w13.bias + (size_t)l * in->rI : NULL;
    for (uint32_t rb = 0; rb < s13->row_blocks; rb++) {
        in->kernel(nb, s->ptr, s->o1, w13 + rb * s13->block_bytes, s13->groups, s13->bl, s->f);
        epilogue(in, s->f, s->s1, nb, rb, in->rI, b13, s->h, in->rI, NULL);
    }
    fmoe_dtype act = in->cfg.act_dtype;
    for (uint32_t i = 0; i < nb; i++) {
        float *a = s->act + (size_t)i * in->I;
        fmoe_activation_row(&in->cfg, s->h + (size_t)i * in->rI, in->I, a);
        for (uint32_t j = 0; j < in->I; j++)
            a[j] = fmoe_round_to(act, a[j]);
        int8_t *q = s->aq + (size_t)i * s2->kp;
        fmoe_w4a8_quantize_activations(1, in->I, a, q, &s->o[i], &s->s[i]);
        s->ptr[i] = q;
    }
    const uint8_t *w2 = in->w2.packed + l * s2->expert_bytes;
    const float *b2 = in->w2.bias && in->cfg.tp_rank == 0 ? in->w2.bias + (size_t)l * in->H : NULL;
    for (uint32_t rb = 0; rb < s2->row_blocks; rb++) {
        in->kernel(nb, s->ptr, s->o, w2 + rb * s2->block_bytes, s2->groups, s2->bl, s->f);
        epilogue(in, s->f, s->s, nb, rb, in->H, b2, in->y, in->H, pairs);
    }
}

/* 4. Token t of the chunk: out_t = round(sum_j y_j * w_j), local slots only. */
static void combine_token(void *ctx, uint32_t worker, uint32_t t)
{
    (void)worker;
    const call *c = ctx;
    const instance *in = c->in;
    fmoe_tensor *out = c->a->out;
    int64_t tok = (int64_t)c->t0 + t;
    int on_input = in->cfg.apply_router_weight_on_input != 0;
    for (uint32_t n = 0; n < in->H; n++) {
        float acc = 0.0f;
        for (uint32_t j = 0; j < in->k; j++) {
            int64_t q = tok * in->k + j;
            if (local_of(in, c->ids[q]) < 0)
                continue;
            float term = in->y[((size_t)t * in->k + j) * in->H + n] * (on_input ? 1.0f : c->w[q]);
            acc += term;
        }
        fmoe_store_float(out->data, in->cfg.act_dtype, tok * out->strides[0] + n, acc);
    }
}

static fmoe_status apply(fmoe_apply_args *a)
{
    instance *in = a->instance;
    int64_t m = a->x->shape[0];
    call c = {.in = in, .a = a, .w = a->topk_weights->data, .ids = a->topk_ids->data};
    for (int64_t t0 = 0; t0 < m; t0 += in->chunk) {
        c.t0 = (uint32_t)t0;
        c.tokens = (uint32_t)(m - t0 < in->chunk ? m - t0 : in->chunk);
        uint32_t tt = c.tokens < PARALLEL_MIN_TOKENS ? 1 : in->threads;
        carm_parallel(tt, c.tokens, quantize_token, &c);
        make_items(&c);
        carm_parallel(in->threads, c.n_items, run_tile, &c);
        carm_parallel(tt, c.tokens, combine_token, &c);
    }
    return FMOE_STATUS_OK;
}

static void destroy(fmoe_destroy_args *a)
{
    destroy_instance(a->instance);
}

const fmoe_method carm_method_w4a8 = {
    .struct_size = sizeof(fmoe_method),
    .name = "w4a8_int8",
    .flags = FMOE_METHOD_EPLB,
    .create = create,
    .declare_params = declare_params,
    .finalize = finalize,
    .apply = apply,
    .destroy = destroy,
};
