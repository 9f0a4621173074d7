/*
 * cli/synth/synth.c - the dispatcher of the synthetic checkpoints (see
 * synth.h): float weights and biases per expert, the calibration pass, the
 * family that quantizes them, and loading the result into layers.
 */
#include "cli/synth/family.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/halfconv.h"
#include "cli/rng.h"
#include "cli/synth/normal.h"
#include "cli/synth/parallel.h"

#define DEAD_SCALE   1e-23f
#define CALIB_TOKENS 16       /* tokens per expert in the calibration batch */
#define TOKEN_GROUP  4        /* divides CALIB_TOKENS */
#define MIN_WORK     262144.0 /* weights per worker at least (a few ms): a small layer starts fewer threads */

typedef struct synth_tensor {
    uint32_t expert;
    int32_t shard, role;
    fmoe_dtype dtype;
    uint32_t ndim;
    int64_t shape[2];
    void *data;
} synth_tensor;

struct synth_ckpt {
    uint64_t seed;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    char key[FMOE_SCHEME_KEY_MAX];
    const synth_family *family;
    float *correction_bias; /* copy, or NULL */
    synth_tensor *t;
    size_t n, cap;
    char why[512];
};

static const synth_family *const families[] = {
    &synth_family_float, &synth_family_fp8,   &synth_family_mxfp8, &synth_family_mxfp4,
    &synth_family_nvfp4, &synth_family_wna16, &synth_family_int8,  &synth_family_w4a8,
};

static const synth_family *family_of(const fmoe_scheme *s)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i]->serves(s))
            return families[i];
    return NULL;
}

int synth_supports(const fmoe_scheme *s, char *why, size_t cap)
{
    if (family_of(s))
        return 1;
    char key[FMOE_SCHEME_KEY_MAX] = "?";
    fmoe_scheme_key(s, key, sizeof key);
    snprintf(why, cap,
             "no synthesizer makes %s checkpoints (cli/synth/ knows float, FP8 tensor/channel/block, "
             "MXFP8, MXFP4, NVFP4, WNA16, INT8 W8A8 and W4A8 schemes)",
             key);
    return 0;
}

/* --- what the families call ---------------------------------------------- */

const fmoe_scheme *synth_scheme(const synth_ckpt *ck)
{
    return &ck->scheme;
}

uint64_t synth_seed(const synth_ckpt *ck)
{
    return ck->seed;
}

fmoe_status synth_why(synth_ckpt *ck, fmoe_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->why, sizeof ck->why, fmt, ap);
    va_end(ap);
    return st;
}

void *synth_add(synth_ckpt *ck, uint32_t expert, int32_t shard, int32_t role, fmoe_dtype dtype, uint32_t ndim,
                int64_t d0, int64_t d1)
{
    if (ck->n == ck->cap) {
        size_t nc = ck->cap ? 2 * ck->cap : 64;
        synth_tensor *t = realloc(ck->t, nc * sizeof *t);
        if (!t) {
            synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
            return NULL;
        }
        ck->t = t;
        ck->cap = nc;
    }
    size_t numel = ndim == 0 ? 1 : (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
    void *data = calloc(numel ? numel : 1, fmoe_dtype_size(dtype));
    if (!data) {
        synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    ck->t[ck->n++] = (synth_tensor){.expert = expert,
                                    .shard = shard,
                                    .role = role,
                                    .dtype = dtype,
                                    .ndim = ndim,
                                    .shape = {ndim > 0 ? d0 : 0, ndim > 1 ? d1 : 0},
                                    .data = data};
    return data;
}

fmoe_status synth_add_scalar(synth_ckpt *ck, uint32_t expert, int32_t shard, int32_t role, float v)
{
    float *p = synth_add(ck, expert, shard, role, FMOE_DTYPE_F32, 0, 0, 0);
    if (!p)
        return FMOE_STATUS_OUT_OF_MEMORY;
    *p = v;
    return FMOE_STATUS_OK;
}

float synth_amax(const float *x, size_t n)
{
    /* Four independent maxima: one chain waited on each compare. */
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++)
            a[l] = fabsf(x[i + l]) > a[l] ? fabsf(x[i + l]) : a[l];
    for (; i < n; i++)
        a[0] = fabsf(x[i]) > a[0] ? fabsf(x[i]) : a[0];
    float m01 = a[0] > a[1] ? a[0] : a[1], m23 = a[2] > a[3] ? a[2] : a[3];
    return m01 > m23 ? m01 : m23;
}

float synth_round_to(fmoe_dtype dt, float v)
{
    if (dt != FMOE_DTYPE_BF16 && dt != FMOE_DTYPE_F16)
        return v;
    uint16_t bits;
    float out;
    cli_store_floats(dt, &bits, &v, 1);
    cli_load_floats(dt, &out, &bits, 1);
    return out;
}

void synth_store_scales(fmoe_dtype dt, void *dst, const float *src, size_t n)
{
    cli_store_floats(dt, dst, src, n);
}

void synth_gidx(uint64_t seed, const char *name, uint32_t expert, int32_t *gidx, uint32_t k, uint32_t g)
{
    cli_rng r;
    cli_rng_init(&r, seed, name, expert);
    for (uint32_t c = 0; c < k; c++)
        gidx[c] = (int32_t)(c / g);
    for (uint32_t c = k - 1; c > 0; c--) { /* Fisher-Yates */
        uint32_t j = (uint32_t)(cli_rng_next(&r) % (c + 1));
        int32_t t = gidx[c];
        gidx[c] = gidx[j];
        gidx[j] = t;
    }
}

/* --- float weights -------------------------------------------------------- */

/* out[i] = scale * N(0,1) from the stream (seed, stream, e), never zero (a
 * zero weight would hide a missing scale); a dead expert's values scaled by
 * DEAD_SCALE, still not zero. */
static void draw(float *out, size_t n, float scale, uint64_t seed, const char *stream, uint32_t e, int dead)
{
    synth_fill_normal(out, n, dead ? scale * DEAD_SCALE : scale, seed, stream, e);
}

void synth_expert_floats(const synth_spec *spec, uint32_t e, float *w1, float *w3, float *w2, float *b13, float *b2)
{
    const fmoe_layer_config *c = spec->cfg;
    size_t h = c->hidden_size, i = c->intermediate_size;
    float s13 = 1.0f / sqrtf((float)h), s2 = 1.0f / sqrtf((float)i);
    int dead = (int32_t)e == spec->dead_expert;
    if (w1)
        draw(w1, i * h, s13, spec->seed, "w1", e, dead);
    if (w3 && c->gated)
        draw(w3, i * h, s13, spec->seed, "w3", e, dead);
    if (w2)
        draw(w2, h * i, s2, spec->seed, "w2", e, dead);
    if (b13) {
        draw(b13, i, s13, spec->seed, "w1_bias", e, dead);
        if (c->gated)
            draw(b13 + i, i, s13, spec->seed, "w3_bias", e, dead);
    }
    if (b2)
        draw(b2, h, s2, spec->seed, "w2_bias", e, dead);
}

/* --- calibration ----------------------------------------------------------- */

static float silu(float g)
{
    return g / (1.0f + expf(-g));
}

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The activation of one gate/up pair (u ignored when not gated), in f32
 * (docs of FMOE_ACT_*: a calibration needs the range, not the last bit). */
static float activation(const fmoe_layer_config *c, float g, float u)
{
    float lim = c->swiglu_limit, a;
    switch (c->activation) {
    case FMOE_ACT_GELU:
        a = 0.5f * g * (1.0f + erff(g * 0.70710678f));
        break;
    case FMOE_ACT_GELU_TANH:
        a = 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));
        break;
    case FMOE_ACT_RELU2:
        a = g > 0.0f ? g * g : 0.0f;
        break;
    case FMOE_ACT_SWIGLUOAI:
        if (lim > 0.0f)
            g = fminf(g, lim), u = clampf(u, -lim, lim);
        return g / (1.0f + expf(-c->swiglu_alpha * g)) * (u + 1.0f);
    case FMOE_ACT_SWIGLUSTEP:
        return fminf(silu(g), 7.0f) * clampf(u, -7.0f, 7.0f);
    default:
        if (lim > 0.0f && c->gated)
            g = fminf(g, lim), u = clampf(u, -lim, lim);
        a = silu(g);
        break;
    }
    return c->gated ? a * u : a;
}

/* x_amax, a_amax of expert e on its own batch of CALIB_TOKENS tokens
 * x ~ N(0,1): what a producer's calibration observes at the GEMM inputs. */
static int calibrate(const synth_spec *spec, uint32_t e, const float *w1, const float *w3, const float *b13,
                     synth_expert *x)
{
    const fmoe_layer_config *c = spec->cfg;
    uint32_t h = c->hidden_size, i = c->intermediate_size;
    float *xs = malloc((size_t)CALIB_TOKENS * h * sizeof *xs);
    if (!xs)
        return -1;
    synth_fill_normal(xs, (size_t)CALIB_TOKENS * h, 1.0f, spec->seed, "calib_x", e);
    x->x_amax = synth_amax(xs, (size_t)CALIB_TOKENS * h);
    /* Each weight row is read once for a group of TOKEN_GROUP tokens (their
     * sums independent, each still added in k order). */
    float a_amax = 0.0f;
    for (uint32_t n = 0; n < i; n++) {
        const float *r1 = w1 + (size_t)n * h, *r3 = c->gated ? w3 + (size_t)n * h : NULL;
        for (uint32_t t0 = 0; t0 < CALIB_TOKENS; t0 += TOKEN_GROUP) {
            const float *row = xs + (size_t)t0 * h;
            float g[TOKEN_GROUP], u[TOKEN_GROUP];
            for (int l = 0; l < TOKEN_GROUP; l++) {
                g[l] = b13 ? b13[n] : 0.0f;
                u[l] = r3 && b13 ? b13[i + n] : 0.0f;
            }
            if (r3) {
                for (uint32_t k = 0; k < h; k++)
                    for (int l = 0; l < TOKEN_GROUP; l++) {
                        g[l] += row[(size_t)l * h + k] * r1[k];
                        u[l] += row[(size_t)l * h + k] * r3[k];
                    }
            } else {
                for (uint32_t k = 0; k < h; k++)
                    for (int l = 0; l < TOKEN_GROUP; l++)
                        g[l] += row[(size_t)l * h + k] * r1[k];
            }
            for (int l = 0; l < TOKEN_GROUP; l++) {
                float a = fabsf(activation(c, g[l], u[l]));
                a_amax = a > a_amax ? a : a_amax;
            }
        }
    }
    x->a_amax = a_amax;
    free(xs);
    return 0;
}

/* --- building ------------------------------------------------------------------ */

void synth_free(synth_ckpt *ck)
{
    if (!ck)
        return;
    for (size_t i = 0; i < ck->n; i++)
        free(ck->t[i].data);
    free(ck->t);
    free(ck->correction_bias);
    free(ck);
}

static fmoe_status add_biases(synth_ckpt *ck, uint32_t e, const float *b13, const float *b2)
{
    uint32_t i = ck->cfg.intermediate_size, h = ck->cfg.hidden_size;
    for (uint32_t half = 0; half < (ck->cfg.gated ? 2u : 1u); half++) {
        float *p = synth_add(ck, e, half ? FMOE_SHARD_W3 : FMOE_SHARD_W1, FMOE_ROLE_BIAS, FMOE_DTYPE_F32, 1, i, 0);
        if (!p)
            return FMOE_STATUS_OUT_OF_MEMORY;
        memcpy(p, b13 + (size_t)half * i, i * sizeof *p);
    }
    float *p = synth_add(ck, e, FMOE_SHARD_W2, FMOE_ROLE_BIAS, FMOE_DTYPE_F32, 1, h, 0);
    if (!p)
        return FMOE_STATUS_OUT_OF_MEMORY;
    memcpy(p, b2, h * sizeof *p);
    return FMOE_STATUS_OK;
}

/* Float weights of one expert, reused for every expert a worker builds. */
typedef struct floats {
    float *w1, *w3, *w2, *b13, *b2;
} floats;

static void floats_free(floats *f)
{
    free(f->w1);
    free(f->w3);
    free(f->w2);
    free(f->b13);
    free(f->b2);
}

/* The experts, built in parallel: each into its own part (a checkpoint
 * holding that expert's tensors), the parts appended to the checkpoint in
 * expert order afterwards. An expert's tensors depend only on the seed and
 * the expert, so the checkpoint is the same for any number of workers. */
typedef struct build_job {
    const synth_spec *spec;
    const synth_ckpt *ck;
    const uint32_t *experts;
    synth_ckpt *parts;  /* per item */
    fmoe_status *st;    /* per item */
    unsigned char *ran; /* per item */
    floats *scratch;    /* per worker */
} build_job;

static fmoe_status build_expert(synth_ckpt *part, const synth_spec *spec, uint32_t e, floats *f)
{
    const fmoe_layer_config *c = spec->cfg;
    size_t h = c->hidden_size, i = c->intermediate_size;
    if (!f->w1) {
        f->w1 = malloc(i * h * sizeof *f->w1);
        f->w3 = c->gated ? malloc(i * h * sizeof *f->w3) : NULL;
        f->w2 = malloc(h * i * sizeof *f->w2);
        f->b13 = malloc(2 * i * sizeof *f->b13);
        f->b2 = malloc(h * sizeof *f->b2);
        if (!f->w1 || (c->gated && !f->w3) || !f->w2 || !f->b13 || !f->b2) {
            floats_free(f);
            *f = (floats){0};
            return synth_why(part, FMOE_STATUS_OUT_OF_MEMORY, "out of memory for the float weights");
        }
    }
    synth_expert_floats(spec, e, f->w1, f->w3, f->w2, c->has_bias ? f->b13 : NULL, c->has_bias ? f->b2 : NULL);
    synth_expert x = {.e = e,
                      .h = (uint32_t)h,
                      .i = (uint32_t)i,
                      .r = c->gated ? 2 : 1,
                      .w1 = f->w1,
                      .w3 = c->gated ? f->w3 : NULL,
                      .w2 = f->w2};
    if (part->family->calibrates && part->family->calibrates(&part->scheme) &&
        calibrate(spec, e, f->w1, f->w3, c->has_bias ? f->b13 : NULL, &x) != 0)
        return synth_why(part, FMOE_STATUS_OUT_OF_MEMORY, "out of memory for the calibration batch");
    fmoe_status st = part->family->quantize(part, &x, FMOE_SHARD_W1, f->w1, (uint32_t)i, (uint32_t)h);
    if (st == FMOE_STATUS_OK && c->gated)
        st = part->family->quantize(part, &x, FMOE_SHARD_W3, f->w3, (uint32_t)i, (uint32_t)h);
    if (st == FMOE_STATUS_OK)
        st = part->family->quantize(part, &x, FMOE_SHARD_W2, f->w2, (uint32_t)h, (uint32_t)i);
    if (st == FMOE_STATUS_OK && c->has_bias)
        st = add_biases(part, e, f->b13, f->b2);
    if (st == FMOE_STATUS_OUT_OF_MEMORY && !part->why[0])
        synth_why(part, st, "out of memory");
    return st;
}

static int build_item(void *ctx, size_t item, uint32_t worker)
{
    build_job *j = ctx;
    synth_ckpt *part = &j->parts[item];
    *part = *j->ck; /* the scheme, seed and sizes; no tensors */
    part->correction_bias = NULL;
    part->t = NULL;
    part->n = part->cap = 0;
    part->why[0] = '\0';
    j->st[item] = build_expert(part, j->spec, j->experts[item], &j->scratch[worker]);
    j->ran[item] = 1;
    return j->st[item] != FMOE_STATUS_OK;
}

static fmoe_status build_experts(synth_ckpt *ck, const synth_spec *spec)
{
    const fmoe_layer_config *c = spec->cfg;
    int32_t *map = NULL;
    uint32_t global = fmoe_layer_config_global_experts(c);
    if (spec->local_only && c->ep_size > 1 && global == c->num_experts) {
        map = malloc(global * sizeof *map);
        if (map && fmoe_layer_config_expert_map(c, map, global) != FMOE_STATUS_OK) {
            free(map);
            map = NULL; /* build every expert */
        }
    }
    uint32_t *experts = malloc((c->num_experts + 1) * sizeof *experts);
    size_t items = 0;
    for (uint32_t e = 0; experts && e < c->num_experts; e++)
        if (!map || map[e] >= 0) /* else another rank's expert */
            experts[items++] = e;
    free(map);
    double per_expert = 3.0 * (double)c->hidden_size * (double)c->intermediate_size;
    uint32_t workers = synth_workers(spec->threads, items, per_expert, MIN_WORK);
    build_job j = {.spec = spec,
                   .ck = ck,
                   .experts = experts,
                   .parts = calloc(items + 1, sizeof *j.parts),
                   .st = calloc(items + 1, sizeof *j.st),
                   .ran = calloc(items + 1, 1),
                   .scratch = calloc(workers, sizeof *j.scratch)};
    fmoe_status st = FMOE_STATUS_OK;
    if (!experts || !j.parts || !j.st || !j.ran || !j.scratch)
        st = synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == FMOE_STATUS_OK)
        synth_parallel_for(workers, items, build_item, &j);
    for (uint32_t w = 0; j.scratch && w < workers; w++)
        floats_free(&j.scratch[w]);
    /* The first failure in expert order is the one reported. */
    size_t total = 0;
    for (size_t it = 0; st == FMOE_STATUS_OK && it < items; it++) {
        if (j.ran[it] && j.st[it] != FMOE_STATUS_OK) {
            st = synth_why(ck, j.st[it], "expert %u: %s", experts[it], j.parts[it].why);
            break;
        }
        total += j.parts[it].n;
    }
    if (st == FMOE_STATUS_OK && total > ck->cap - ck->n) {
        synth_tensor *t = realloc(ck->t, (ck->n + total) * sizeof *t);
        if (t) {
            ck->t = t;
            ck->cap = ck->n + total;
        } else {
            st = synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    }
    for (size_t it = 0; j.parts && it < items; it++) {
        synth_ckpt *part = &j.parts[it];
        if (st == FMOE_STATUS_OK) {
            memcpy(ck->t + ck->n, part->t, part->n * sizeof *part->t);
            ck->n += part->n;
        } else {
            for (size_t k = 0; k < part->n; k++)
                free(part->t[k].data);
        }
        free(part->t);
    }
    free(j.parts);
    free(j.st);
    free(j.ran);
    free(j.scratch);
    free(experts);
    return st;
}

fmoe_status synth_build(const synth_spec *spec, synth_ckpt **out, char *why, size_t cap)
{
    *out = NULL;
    const synth_family *f = family_of(spec->scheme);
    if (!f) {
        synth_supports(spec->scheme, why, cap);
        return FMOE_STATUS_UNSUPPORTED;
    }
    synth_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck) {
        snprintf(why, cap, "out of memory");
        return FMOE_STATUS_OUT_OF_MEMORY;
    }
    ck->seed = spec->seed;
    ck->cfg = *spec->cfg;
    ck->scheme = *spec->scheme;
    ck->family = f;
    fmoe_scheme_key(spec->scheme, ck->key, sizeof ck->key);
    fmoe_status st = FMOE_STATUS_OK;
    if (spec->correction_bias) {
        ck->correction_bias = malloc((spec->cfg->num_experts + 1) * sizeof(float));
        if (ck->correction_bias)
            memcpy(ck->correction_bias, spec->correction_bias, spec->cfg->num_experts * sizeof(float));
        else
            st = synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (st == FMOE_STATUS_OK)
        st = build_experts(ck, spec);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, cap, "synthesizing a %s checkpoint (%s): %s", ck->key, f->name, ck->why);
        synth_free(ck);
        return st;
    }
    *out = ck;
    return FMOE_STATUS_OK;
}

size_t synth_tensor_count(const synth_ckpt *ck)
{
    return ck->n;
}

void synth_tensor_get(const synth_ckpt *ck, size_t i, synth_tensor_info *out)
{
    const synth_tensor *t = &ck->t[i];
    size_t numel = t->ndim == 0 ? 1 : (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    *out = (synth_tensor_info){.expert = t->expert,
                               .shard = t->shard,
                               .role = t->role,
                               .dtype = t->dtype,
                               .ndim = t->ndim,
                               .shape = {t->shape[0], t->shape[1]},
                               .data = t->data,
                               .bytes = numel * fmoe_dtype_size(t->dtype)};
}

/* --- loading ------------------------------------------------------------------- */

static int32_t projection_of(int32_t shard)
{
    return shard == FMOE_SHARD_W2 ? FMOE_PROJ_W2 : FMOE_PROJ_W13;
}

static const char *role_name(int32_t role)
{
    static const char *const names[] = {"?",
                                        "weight",
                                        "bias",
                                        "weight scale",
                                        "weight global scale",
                                        "input scale",
                                        "input global scale",
                                        "zero point",
                                        "g_idx",
                                        "routing bias"};
    return role >= 0 && role < (int32_t)(sizeof names / sizeof names[0]) ? names[role] : "?";
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* NVFP4 global factors are stored as compressed-tensors quant multipliers
 * g; the ModelOpt parameter names (`*_weight_scale_2`, `*_input_scale` for
 * a global role, docs/REFERENCE-METHODS.md) hold the dequant scale 1/g.
 * The name is the checkpoint format's only signal of the convention. */
static int wants_reciprocal(const fmoe_param_info *p)
{
    return (p->role == FMOE_ROLE_WEIGHT_GLOBAL_SCALE && ends_with(p->name, "_scale_2")) ||
           (p->role == FMOE_ROLE_INPUT_GLOBAL_SCALE && ends_with(p->name, "input_scale"));
}

typedef struct scratch {
    void *buf;
    size_t cap;
} scratch;

static void *reserve(scratch *s, size_t bytes)
{
    if (bytes > s->cap) {
        void *b = realloc(s->buf, bytes);
        if (!b)
            return NULL;
        s->buf = b;
        s->cap = bytes;
    }
    return s->buf;
}

/* t as the declared dtype (converted into s when needed); NULL with why. */
static const void *as_declared(const synth_ckpt *ck, const fmoe_param_info *p, const synth_tensor *t, scratch *s,
                               char *why, size_t cap)
{
    size_t n = t->ndim == 0 ? 1 : (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    int recip = wants_reciprocal(p) && t->dtype == FMOE_DTYPE_F32;
    if (t->dtype == p->dtype && !recip)
        return t->data;
    if (!cli_is_float_storage(t->dtype) || !cli_is_float_storage(p->dtype)) {
        snprintf(why, cap, "declares %s (%s) as %s, but a %s checkpoint stores it as %s", p->name, role_name(p->role),
                 fmoe_dtype_name(p->dtype), ck->key, fmoe_dtype_name(t->dtype));
        return NULL;
    }
    float *f = reserve(s, n * sizeof(float) * 2);
    if (!f) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    cli_load_floats(t->dtype, f, t->data, n);
    if (recip)
        for (size_t i = 0; i < n; i++)
            f[i] = 1.0f / f[i];
    void *dst = f + n;
    cli_store_floats(p->dtype, dst, f, n);
    return dst;
}

static fmoe_status load_per_expert(fmoe_layer *layer, const synth_ckpt *ck, const fmoe_param_info *p, scratch *s,
                                   char *why, size_t cap)
{
    size_t found = 0;
    for (size_t i = 0; i < ck->n; i++) {
        const synth_tensor *t = &ck->t[i];
        if (projection_of(t->shard) != p->projection || t->role != p->role)
            continue;
        found++;
        const void *data = as_declared(ck, p, t, s, why, cap);
        if (!data)
            return strstr(why, "out of memory") ? FMOE_STATUS_OUT_OF_MEMORY : FMOE_STATUS_UNSUPPORTED;
        fmoe_tensor ft;
        fmoe_status st = fmoe_tensor_init(&ft, p->dtype, t->ndim, t->shape, (void *)data);
        if (st == FMOE_STATUS_OK)
            st = fmoe_layer_load(layer, p->name, (int32_t)t->expert, t->shard, &ft, NULL);
        if (st != FMOE_STATUS_OK) {
            snprintf(why, cap, "loading %s (expert %u): %s", p->name, t->expert, fmoe_last_error());
            return st;
        }
    }
    if (found == 0) {
        snprintf(why, cap, "declares %s (%s of %s), which a %s checkpoint does not have", p->name, role_name(p->role),
                 p->projection == FMOE_PROJ_W2    ? "w2"
                 : p->projection == FMOE_PROJ_W13 ? "w13"
                                                  : "no projection",
                 ck->key);
        return FMOE_STATUS_UNSUPPORTED;
    }
    return FMOE_STATUS_OK;
}

/* A parameter without an expert axis, loaded whole: the correction bias the
 * routing also uses, or another float parameter (random values keyed by its
 * name, so every layer gets the same ones). */
static fmoe_status load_whole(fmoe_layer *layer, const synth_ckpt *ck, const fmoe_param_info *p, scratch *s, char *why,
                              size_t cap)
{
    fmoe_tensor t;
    fmoe_status st = fmoe_tensor_init(&t, p->dtype, p->ndim, p->shape, NULL);
    int64_t n = st == FMOE_STATUS_OK ? fmoe_tensor_numel(&t) : -1;
    if (n < 0) {
        snprintf(why, cap, "describing %s: %s", p->name, fmoe_last_error());
        return FMOE_STATUS_INTERNAL;
    }
    if (!cli_is_float_storage(p->dtype)) {
        snprintf(why, cap, "declares %s (%s, no expert axis) as %s, which the synthesizer cannot make", p->name,
                 role_name(p->role), fmoe_dtype_name(p->dtype));
        return FMOE_STATUS_UNSUPPORTED;
    }
    float *f = reserve(s, (size_t)(n + 1) * sizeof(float) * 2);
    if (!f) {
        snprintf(why, cap, "out of memory for %s", p->name);
        return FMOE_STATUS_OUT_OF_MEMORY;
    }
    if (p->role == FMOE_ROLE_ROUTING_BIAS && ck->correction_bias && n == (int64_t)ck->cfg.num_experts)
        memcpy(f, ck->correction_bias, (size_t)n * sizeof(float));
    else
        synth_fill_normal(f, (size_t)n, 1.0f, ck->seed, p->name, 0);
    void *dst = f + n + 1;
    cli_store_floats(p->dtype, dst, f, (size_t)n);
    t.data = dst;
    st = fmoe_layer_load(layer, p->name, FMOE_ALL_LOCAL_EXPERTS, FMOE_SHARD_FULL, &t, NULL);
    if (st != FMOE_STATUS_OK)
        snprintf(why, cap, "loading %s: %s", p->name, fmoe_last_error());
    return st;
}

fmoe_status synth_load(fmoe_layer *layer, const synth_ckpt *ck, char *why, size_t cap)
{
    scratch s = {0};
    fmoe_status st = FMOE_STATUS_OK;
    uint32_t n = fmoe_layer_param_count(layer);
    for (uint32_t i = 0; i < n && st == FMOE_STATUS_OK; i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        st = fmoe_layer_param(layer, i, &p);
        if (st != FMOE_STATUS_OK) {
            snprintf(why, cap, "reading declared parameter %u: %s", i, fmoe_last_error());
            break;
        }
        st = p.per_expert ? load_per_expert(layer, ck, &p, &s, why, cap) : load_whole(layer, ck, &p, &s, why, cap);
    }
    free(s.buf);
    return st;
}
