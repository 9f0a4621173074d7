/*
 * tests/registry/test_fixtures.c - every checkpoint of tests/data/models
 * (written by compressed-tensors and safetensors, tools/gen_fixtures.py)
 * loaded through fmoe_model_load_layer into the reference backend, against
 * a float64 model computed here straight from the bf16 float weights the
 * fixtures were made from (raw safetensors reads, no loader):
 *
 *   - bf16 (sharded) and bf16-fused (gpt-oss layout) match it to bf16
 *     rounding: the loader put every value where it belongs;
 *   - each quantized fixture matches it within its format's error;
 *   - TP=2 shards and EP=2/4 ranks sum to the unsharded output, and EPLB
 *     with redundant experts gives the unsharded output.
 *
 * The float64 model: logits = x W_r^T (+ b_r) from the router weights,
 * routing by fmoe_reference_route (tested on its own in test_routing.c),
 * then sum_k w_k * W2 act(W1 x (+b1), W3 x (+b3)) (+ b2) in double.
 */
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "tests/registry/registry_fixtures.h"

#define MODELS FMOE_TEST_DATA_DIR "/models"
#define MAX_M  16

typedef struct fixture_run {
    fmoe_context *ctx;
    fmoe_model *model;
    fmoe_quant_config *qc;
    fmoe_checkpoint *ck;
} fixture_run;

static void open_fixture(fixture_run *f, const char *name)
{
    char dir[512], config[600];
    snprintf(dir, sizeof dir, "%s/%s", MODELS, name);
    snprintf(config, sizeof config, "%s/config.json", dir);
    const char *files[] = {REFERENCE_MANIFEST};
    f->ctx = fx_context(files, 1, NULL, 0, NULL);
    ck_assert_msg(fmoe_model_config_load(config, &f->model) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_quant_config_load(config, &f->qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_checkpoint_open(dir, &f->ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
}

static void close_fixture(fixture_run *f)
{
    fmoe_checkpoint_close(f->ck);
    fmoe_quant_config_destroy(f->qc);
    fmoe_model_destroy(f->model);
    fmoe_context_destroy(f->ctx);
}

/* Tensor `name` of `ck` as doubles (bf16/f32 only), into a new buffer. */
static double *read_doubles(const fmoe_checkpoint *ck, const char *name, int64_t want_numel)
{
    size_t i = fmoe_checkpoint_find(ck, name);
    ck_assert_msg(i != (size_t)-1, "%s missing", name);
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &t), FMOE_STATUS_OK);
    int64_t n = fmoe_tensor_numel(&t);
    ck_assert_msg(n == want_numel, "%s: %lld elements, expected %lld", name, (long long)n, (long long)want_numel);
    double *out = malloc((size_t)n * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int64_t k = 0; k < n; k++) {
        if (t.dtype == FMOE_DTYPE_BF16) {
            uint32_t bits = (uint32_t)((const uint16_t *)t.data)[k] << 16;
            float v;
            memcpy(&v, &bits, 4);
            out[k] = v;
        } else {
            ck_assert_int_eq(t.dtype, FMOE_DTYPE_F32);
            out[k] = ((const float *)t.data)[k];
        }
    }
    return out;
}

/* The bundled hidden states, [MAX_M, H]. */
static double *inputs(int64_t h)
{
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(MODELS "/inputs.safetensors", &ck), FMOE_STATUS_OK);
    double *x = read_doubles(ck, "x", MAX_M * h);
    fmoe_checkpoint_close(ck);
    return x;
}

/* The float weights of one layer in [rows, K] form per expert. */
typedef struct float_layer {
    int64_t e, h, i;
    double *w1, *w3, *w2; /* [E, I, H], [E, I, H], [E, H, I] */
    double *b1, *b3, *b2; /* [E, I], [E, I], [E, H] or NULL */
    double *router, *router_bias;
} float_layer;

static void free_float_layer(float_layer *l)
{
    free(l->w1), free(l->w3), free(l->w2), free(l->b1), free(l->b3), free(l->b2), free(l->router), free(l->router_bias);
}

/* bf16: per-expert Linear weights. */
static void read_qwen_layer(const fmoe_checkpoint *ck, uint32_t layer, float_layer *l)
{
    char name[256];
    l->w1 = malloc((size_t)(l->e * l->i * l->h) * sizeof(double));
    l->w3 = malloc((size_t)(l->e * l->i * l->h) * sizeof(double));
    l->w2 = malloc((size_t)(l->e * l->h * l->i) * sizeof(double));
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    double *dst[3] = {l->w1, l->w3, l->w2};
    for (int64_t e = 0; e < l->e; e++)
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%lld.%s.weight", layer, (long long)e, proj[p]);
            double *w = read_doubles(ck, name, l->i * l->h);
            memcpy(dst[p] + e * l->i * l->h, w, (size_t)(l->i * l->h) * sizeof(double));
            free(w);
        }
    snprintf(name, sizeof name, "model.layers.%u.mlp.gate.weight", layer);
    l->router = read_doubles(ck, name, l->e * l->h);
}

/* gpt-oss fused: gate_up [E, H, 2I] with interleaved columns, down [E, I, H]. */
static void read_gpt_oss_layer(const fmoe_checkpoint *ck, uint32_t layer, float_layer *l)
{
    char name[256];
    int64_t e = l->e, h = l->h, i = l->i;
    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.gate_up_proj", layer);
    double *gu = read_doubles(ck, name, e * h * 2 * i);
    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.down_proj", layer);
    double *dn = read_doubles(ck, name, e * i * h);
    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.gate_up_proj_bias", layer);
    double *gub = read_doubles(ck, name, e * 2 * i);
    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.down_proj_bias", layer);
    l->b2 = read_doubles(ck, name, e * h);
    l->w1 = malloc((size_t)(e * i * h) * sizeof(double));
    l->w3 = malloc((size_t)(e * i * h) * sizeof(double));
    l->w2 = malloc((size_t)(e * h * i) * sizeof(double));
    l->b1 = malloc((size_t)(e * i) * sizeof(double));
    l->b3 = malloc((size_t)(e * i) * sizeof(double));
    for (int64_t x = 0; x < e; x++) {
        for (int64_t r = 0; r < i; r++) {
            for (int64_t k = 0; k < h; k++) {
                l->w1[(x * i + r) * h + k] = gu[(x * h + k) * 2 * i + 2 * r];
                l->w3[(x * i + r) * h + k] = gu[(x * h + k) * 2 * i + 2 * r + 1];
            }
            l->b1[x * i + r] = gub[x * 2 * i + 2 * r];
            l->b3[x * i + r] = gub[x * 2 * i + 2 * r + 1];
        }
        for (int64_t r = 0; r < h; r++)
            for (int64_t k = 0; k < i; k++)
                l->w2[(x * h + r) * i + k] = dn[(x * i + k) * h + r];
    }
    free(gu), free(dn), free(gub);
    snprintf(name, sizeof name, "model.layers.%u.mlp.router.weight", layer);
    l->router = read_doubles(ck, name, e * h);
    snprintf(name, sizeof name, "model.layers.%u.mlp.router.bias", layer);
    l->router_bias = read_doubles(ck, name, e);
}

static double act(const fmoe_layer_config *c, double g, double u)
{
    if (c->activation == FMOE_ACT_SWIGLUOAI) { /* gpt-oss: clamp, then g*sigmoid(alpha g)*(u+1) */
        double lim = c->swiglu_limit;
        g = g < lim ? g : lim;
        u = u < -lim ? -lim : u > lim ? lim : u;
        return g / (1.0 + exp(-c->swiglu_alpha * g)) * (u + 1.0);
    }
    ck_assert_int_eq(c->activation, FMOE_ACT_SILU);
    return g / (1.0 + exp(-g)) * u;
}

/* logits in f32 (as the layers get them) and the f64 output y [M, H]. */
static void float_model(const fmoe_layer_config *c, const float_layer *l, const double *x, int64_t m, float *logits,
                        double *y)
{
    int64_t e = l->e, h = l->h, i = l->i, k = c->top_k;
    for (int64_t t = 0; t < m; t++)
        for (int64_t j = 0; j < e; j++) {
            double acc = l->router_bias ? l->router_bias[j] : 0;
            for (int64_t q = 0; q < h; q++)
                acc += x[t * h + q] * l->router[j * h + q];
            logits[t * e + j] = (float)acc;
        }
    float tw[MAX_M * 8];
    int32_t ti[MAX_M * 8];
    fmoe_tensor tl, ttw, tti;
    const int64_t ls[2] = {m, e}, ks[2] = {m, k};
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, logits);
    fmoe_tensor_init(&ttw, FMOE_DTYPE_F32, 2, ks, tw);
    fmoe_tensor_init(&tti, FMOE_DTYPE_INT32, 2, ks, ti);
    ck_assert_int_eq(fmoe_reference_route(c, &tl, NULL, &ttw, &tti), FMOE_STATUS_OK);
    double *a = malloc((size_t)i * sizeof(double));
    for (int64_t t = 0; t < m; t++) {
        for (int64_t q = 0; q < h; q++)
            y[t * h + q] = 0;
        for (int64_t s = 0; s < k; s++) {
            int64_t ex = ti[t * k + s];
            /* Llama-4 scales the token before the expert, not its output. */
            double w_in = c->apply_router_weight_on_input ? tw[t * k + s] : 1.0;
            double w_out = c->apply_router_weight_on_input ? 1.0 : tw[t * k + s];
            for (int64_t r = 0; r < i; r++) {
                double g = l->b1 ? l->b1[ex * i + r] : 0, u = l->b3 ? l->b3[ex * i + r] : 0;
                for (int64_t q = 0; q < h; q++) {
                    g += l->w1[(ex * i + r) * h + q] * w_in * x[t * h + q];
                    u += l->w3[(ex * i + r) * h + q] * w_in * x[t * h + q];
                }
                a[r] = act(c, g, u);
            }
            for (int64_t q = 0; q < h; q++) {
                double acc = l->b2 ? l->b2[ex * h + q] : 0;
                for (int64_t r = 0; r < i; r++)
                    acc += l->w2[(ex * h + q) * i + r] * a[r];
                y[t * h + q] += w_out * acc;
            }
        }
    }
    free(a);
}

/* Load layer `index` of the open fixture with parallel settings, forward. */
static fmoe_status run_layer(fixture_run *f, uint32_t index, const fmoe_layer_config *base, uint32_t tp,
                             uint32_t tp_rank, uint32_t ep, uint32_t ep_rank, uint32_t redundant, const double *x,
                             const float *logits, int64_t m, double *y)
{
    fmoe_layer_config c = *base;
    c.tp_size = tp, c.tp_rank = tp_rank, c.ep_size = ep, c.ep_rank = ep_rank;
    c.enable_eplb = redundant > 0, c.num_redundant_experts = redundant;
    c.max_num_tokens = MAX_M;
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_model_layer_expert_modules(f->model, index, &mods), FMOE_STATUS_OK);
    ck_assert_msg(fmoe_quant_config_scheme(f->qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *layer = NULL;
    fmoe_status st = fmoe_layer_create(f->ctx, &c, &s, &lo, &layer);
    if (st != FMOE_STATUS_OK)
        return st;
    fmoe_model_load_stats stats = {.struct_size = sizeof stats};
    ck_assert_msg(fmoe_model_load_layer(f->model, index, f->ck, f->qc, layer, &stats) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    ck_assert_msg(stats.tensors > 0, "nothing loaded");
    ck_assert_msg(fmoe_layer_finalize(layer) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    int64_t h = c.hidden_size;
    float xf[MAX_M * 256], yf[MAX_M * 256];
    ck_assert_int_le(m * h, MAX_M * 256);
    for (int64_t q = 0; q < m * h; q++)
        xf[q] = (float)x[q];
    fmoe_tensor tx, ty, tl;
    const int64_t xs[2] = {m, h}, ls[2] = {m, c.num_experts};
    /* f32 activations: the comparison then sees the weights' error only. */
    ck_assert_int_eq(c.act_dtype, FMOE_DTYPE_F32);
    fmoe_tensor_init(&tx, FMOE_DTYPE_F32, 2, xs, xf);
    fmoe_tensor_init(&ty, FMOE_DTYPE_F32, 2, xs, yf);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, (void *)logits);
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &tx, .router_logits = &tl, .out = &ty};
    ck_assert_msg(fmoe_layer_forward(layer, &a) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    for (int64_t q = 0; q < m * h; q++)
        y[q] = yf[q];
    fmoe_layer_destroy(layer);
    return FMOE_STATUS_OK;
}

/* sum (got - want)^2 / sum want^2 */
static double nmse(const double *got, const double *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t q = 0; q < n; q++) {
        num += (got[q] - want[q]) * (got[q] - want[q]);
        den += want[q] * want[q];
    }
    return num / den;
}

/* max |got - want| / max |want| */
static double rel_err(const double *got, const double *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t q = 0; q < n; q++) {
        ck_assert_msg(isfinite(got[q]), "non-finite output at %lld", (long long)q);
        num = fmax(num, fabs(got[q] - want[q]));
        den = fmax(den, fabs(want[q]));
    }
    ck_assert(den > 0); /* never compare zeros */
    return num / den;
}

/* The float model of a fixture family (qwen: "bf16", gpt-oss: "bf16-fused"). */
typedef struct float_ref {
    fmoe_layer_config cfg;
    float_layer l;
    double *x, *y;
    float *logits;
} float_ref;

static void float_ref_make(float_ref *r, const char *fixture, uint32_t layer)
{
    fixture_run f;
    open_fixture(&f, fixture);
    fmoe_layer_config_init(&r->cfg);
    ck_assert_int_eq(fmoe_model_layer_config(f.model, layer, &r->cfg), FMOE_STATUS_OK);
    r->cfg.act_dtype = FMOE_DTYPE_F32;
    r->l = (float_layer){.e = r->cfg.num_experts, .h = r->cfg.hidden_size, .i = r->cfg.intermediate_size};
    if (strcmp(fmoe_model_family(f.model), "gpt_oss") == 0)
        read_gpt_oss_layer(f.ck, layer, &r->l);
    else
        read_qwen_layer(f.ck, layer, &r->l);
    r->x = inputs(r->l.h);
    r->y = malloc((size_t)(MAX_M * r->l.h) * sizeof(double));
    r->logits = malloc((size_t)(MAX_M * r->l.e) * sizeof(float));
    float_model(&r->cfg, &r->l, r->x, MAX_M, r->logits, r->y);
    close_fixture(&f);
}

static void float_ref_free(float_ref *r)
{
    free_float_layer(&r->l);
    free(r->x), free(r->y), free(r->logits);
}

/* Fixture `name`, both layers, against the float model within `tol`. */
static void check_fixture(const char *name, const char *float_name, double tol, double nmse_tol)
{
    for (uint32_t layer = 0; layer < 2; layer++) {
        float_ref r;
        float_ref_make(&r, float_name, layer);
        fixture_run f;
        open_fixture(&f, name);
        double *y = malloc((size_t)(MAX_M * r.l.h) * sizeof(double));
        fmoe_status st = run_layer(&f, layer, &r.cfg, 1, 0, 1, 0, 0, r.x, r.logits, MAX_M, y);
        ck_assert_msg(st == FMOE_STATUS_OK, "%s layer %u: %s", name, layer, fmoe_last_error());
        double err = rel_err(y, r.y, MAX_M * r.l.h), e2 = nmse(y, r.y, MAX_M * r.l.h);
        printf("# %s layer %u: max|y - y_f64| / max|y_f64| = %.3e (tolerance %.1e), nmse %.3e (tolerance %.1e)\n", name,
               layer, err, tol, e2, nmse_tol);
        ck_assert_msg(err <= tol, "%s layer %u: relative error %.3e > %.1e", name, layer, err, tol);
        ck_assert_msg(e2 <= nmse_tol, "%s layer %u: nmse %.3e > %.1e", name, layer, e2, nmse_tol);
        free(y);
        close_fixture(&f);
        float_ref_free(&r);
    }
}

/* f32 activations and f32 accumulation over bf16 weights read exactly: the
 * difference is f32 rounding over K <= 256 terms, ~1e-6 relative. */
#define FLOAT_TOL 1e-5

START_TEST(bf16_sharded_matches_float64)
{
    check_fixture("bf16", "bf16", FLOAT_TOL, FLOAT_TOL * FLOAT_TOL);
}
END_TEST

START_TEST(bf16_fused_gpt_oss_matches_float64)
{
    check_fixture("bf16-fused", "bf16-fused", FLOAT_TOL, FLOAT_TOL * FLOAT_TOL);
}
END_TEST

/*
 * Quantized fixtures against the float model. The bound that matters is the
 * NMSE, sum (y - y_f64)^2 / sum y_f64^2, predicted from the format's
 * relative rounding error per value: round-to-nearest with step q leaves
 * q^2/12 of variance; e4m3 (3 mantissa bits, q = 2^-3 of the binade) gives
 * about 1.3e-3 per quantized operand, and fp8 W8A8 quantizes four
 * (x, W13, the intermediate, W2): ~5e-3. int4 with one scale per 128 or 32
 * values (q = amax/7.5, amax ~ 2.6 sigma) gives ~1e-2 per GEMM: ~3-4e-2
 * after two GEMMs and the gate nonlinearity; e2m1 blocks are coarser still
 * (NVFP4 quantizes the activations too). Measured when the fixtures were
 * made: fp8 3.8e-3..5.3e-3, int4 2.7e-2..4.6e-2, NVFP4 5.4e-2..5.9e-2,
 * MXFP4 3.5e-2. Bounds are about 2.5x that; a misplaced scale, a
 * transposed block or a wrong g_idx gives O(1). The max-element bound
 * (max|y - y_f64| / max|y_f64|) is looser because over 2048 outputs the
 * largest error is a tail value.
 */
START_TEST(fp8_fixtures_match_float64)
{
    check_fixture("fp8-tensor", "bf16", 0.25, 1.5e-2);
    check_fixture("fp8-channel", "bf16", 0.25, 1.5e-2);
    check_fixture("fp8-block", "bf16", 0.25, 1.5e-2);
}
END_TEST

START_TEST(int4_fixtures_match_float64)
{
    check_fixture("w4a16", "bf16", 0.5, 0.12);
    check_fixture("w4a16-actorder", "bf16", 0.5, 0.12);
    check_fixture("w4a8", "bf16", 0.5, 0.12);
}
END_TEST

START_TEST(fp4_fixtures_match_float64)
{
    check_fixture("nvfp4", "bf16", 0.6, 0.15);
    check_fixture("mxfp4", "bf16-fused", 0.6, 0.12);
}
END_TEST

/* Shards of layer 0 of `name` sum to its unsharded output. */
static void check_shards(const char *name, const char *float_name)
{
    float_ref r;
    float_ref_make(&r, float_name, 0);
    fixture_run f;
    open_fixture(&f, name);
    int64_t n = MAX_M * r.l.h;
    double *full = malloc((size_t)n * sizeof(double)), *part = malloc((size_t)n * sizeof(double));
    double *sum = calloc((size_t)n, sizeof(double));
    ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 1, 0, 0, r.x, r.logits, MAX_M, full), FMOE_STATUS_OK);
    static const uint32_t setups[][3] = {{2, 1, 0}, {1, 2, 0}, {1, 4, 0}}; /* tp, ep, - */
    for (size_t s = 0; s < sizeof setups / sizeof setups[0]; s++) {
        uint32_t tp = setups[s][0], ep = setups[s][1], ranks = tp > ep ? tp : ep;
        memset(sum, 0, (size_t)n * sizeof(double));
        for (uint32_t rank = 0; rank < ranks; rank++) {
            ck_assert_int_eq(run_layer(&f, 0, &r.cfg, tp, tp > 1 ? rank : 0, ep, ep > 1 ? rank : 0, 0, r.x, r.logits,
                                       MAX_M, part),
                             FMOE_STATUS_OK);
            for (int64_t q = 0; q < n; q++)
                sum[q] += part[q];
        }
        double err = rel_err(sum, full, n);
        ck_assert_msg(err <= FLOAT_TOL, "%s tp %u ep %u: shards differ from unsharded by %.3e", name, tp, ep, err);
    }
    /* EPLB: 4 redundant physical experts, same output. */
    ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 1, 0, 4, r.x, r.logits, MAX_M, part), FMOE_STATUS_OK);
    ck_assert_msg(rel_err(part, full, n) <= FLOAT_TOL, "%s EPLB differs", name);
    /* EPLB over EP 2: the ranks sum to it. */
    memset(sum, 0, (size_t)n * sizeof(double));
    for (uint32_t rank = 0; rank < 2; rank++) {
        ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 2, rank, 4, r.x, r.logits, MAX_M, part), FMOE_STATUS_OK);
        for (int64_t q = 0; q < n; q++)
            sum[q] += part[q];
    }
    ck_assert_msg(rel_err(sum, full, n) <= FLOAT_TOL, "%s EPLB over EP 2 differs", name);
    free(full), free(part), free(sum);
    close_fixture(&f);
    float_ref_free(&r);
}

START_TEST(bf16_tp_ep_eplb_shards_sum)
{
    check_shards("bf16", "bf16");
}
END_TEST

START_TEST(fused_tp_ep_eplb_shards_sum)
{
    check_shards("bf16-fused", "bf16-fused");
}
END_TEST

/* Quantized layers shard too: act-order int4 (w2 scales loaded whole
 * under TP), FP8 blocks (1 x 128 activation groups align with the 128-row
 * TP shards, so even the dynamic quantization is the same) and fused
 * MXFP4 (blocks and scales narrowed along K). */
START_TEST(quantized_tp_ep_eplb_shards_sum)
{
    check_shards("w4a16-actorder", "bf16");
    check_shards("fp8-block", "bf16");
    check_shards("mxfp4", "bf16-fused");
}
END_TEST

/* ---- GPTQ's own layout ---------------------------------------------------------- */

typedef struct st_out {
    char name[160];
    const char *dtype;
    int64_t shape[2];
    uint32_t ndim;
    void *data;
    size_t bytes;
} st_out;

static void write_st(const char *path, const st_out *t, size_t n)
{
    json_t *h = json_object();
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        for (uint32_t a = 0; a < t[i].ndim; a++)
            json_array_append_new(shape, json_integer(t[i].shape[a]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += t[i].bytes;
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_object_set_new(e, "dtype", json_string(t[i].dtype));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(h, t[i].name, e);
    }
    char *text = json_dumps(h, JSON_COMPACT);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t le = padded;
    fwrite(&le, 8, 1, f); /* x86/aarch64: little-endian */
    fwrite(text, 1, len, f);
    for (size_t p = len; p < padded; p++)
        fputc(' ', f);
    for (size_t i = 0; i < n; i++)
        fwrite(t[i].data, 1, t[i].bytes, f);
    fclose(f);
    free(text);
    json_decref(h);
}

static uint16_t bf16_to_f16(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float v;
    memcpy(&v, &bits, 4);
    _Float16 h = (_Float16)v;
    uint16_t out;
    memcpy(&out, &h, 2);
    return out;
}

/* The w4a16-actorder fixture rewritten as AutoGPTQ would store it:
 * qweight [K/8, N], scales [K/g, N] f16, qzeros 0x77777777, g_idx [K]. */
static void write_gptq_fixture(const char *dir)
{
    fixture_run f;
    open_fixture(&f, "w4a16-actorder");
    size_t n = fmoe_checkpoint_tensor_count(f.ck), m = 0;
    st_out *out = calloc(2 * n, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const char *name = fmoe_checkpoint_tensor_name(f.ck, i);
        fmoe_tensor t;
        ck_assert_int_eq(fmoe_checkpoint_tensor(f.ck, i, &t), FMOE_STATUS_OK);
        const char *dot = strrchr(name, '.');
        size_t base = (size_t)(dot - name);
        st_out *o = &out[m++];
        if (strcmp(dot, ".weight_shape") == 0) {
            m--;
            continue;
        }
        if (strcmp(dot, ".weight_packed") == 0 || strcmp(dot, ".weight_scale") == 0) {
            int scale = strcmp(dot, ".weight_scale") == 0;
            int64_t r = t.shape[0], c = t.shape[1];
            size_t es = scale ? 2 : 4;
            o->data = malloc((size_t)(r * c) * es);
            for (int64_t a = 0; a < r; a++)
                for (int64_t b = 0; b < c; b++) {
                    if (scale)
                        ((uint16_t *)o->data)[b * r + a] = bf16_to_f16(((const uint16_t *)t.data)[a * c + b]);
                    else
                        ((int32_t *)o->data)[b * r + a] = ((const int32_t *)t.data)[a * c + b];
                }
            snprintf(o->name, sizeof o->name, "%.*s.%s", (int)base, name, scale ? "scales" : "qweight");
            o->dtype = scale ? "F16" : "I32";
            o->ndim = 2, o->shape[0] = c, o->shape[1] = r, o->bytes = (size_t)(r * c) * es;
            if (scale) { /* qzeros beside the scales: [K/g, N/8] */
                st_out *z = &out[m++];
                snprintf(z->name, sizeof z->name, "%.*s.qzeros", (int)base, name);
                z->dtype = "I32", z->ndim = 2, z->shape[0] = c, z->shape[1] = r / 8;
                z->bytes = (size_t)(c * (r / 8)) * 4;
                z->data = malloc(z->bytes);
                memset(z->data, 0x77, z->bytes);
            }
            continue;
        }
        /* router (bf16) and g_idx (renamed) as they are */
        size_t bytes = (size_t)fmoe_tensor_numel(&t) * fmoe_dtype_size(t.dtype);
        o->data = malloc(bytes);
        memcpy(o->data, t.data, bytes);
        o->bytes = bytes, o->ndim = t.ndim;
        for (uint32_t a = 0; a < t.ndim; a++)
            o->shape[a] = t.shape[a];
        o->dtype = t.dtype == FMOE_DTYPE_BF16 ? "BF16" : "I32";
        if (strcmp(dot, ".weight_g_idx") == 0)
            snprintf(o->name, sizeof o->name, "%.*s.g_idx", (int)base, name);
        else
            snprintf(o->name, sizeof o->name, "%s", name);
    }
    close_fixture(&f);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_st(path, out, m);
    for (size_t i = 0; i < m; i++)
        free(out[i].data);
    free(out);
    /* config.json: the fixture's, with a GPTQ quantization_config. */
    json_error_t jerr;
    json_t *cfg = json_load_file(MODELS "/w4a16-actorder/config.json", 0, &jerr);
    ck_assert_ptr_nonnull(cfg);
    json_t *q = json_pack("{s:s, s:i, s:i, s:b, s:b}", "quant_method", "gptq", "bits", 4, "group_size", 32, "desc_act",
                          1, "sym", 1);
    json_object_set_new(cfg, "quantization_config", q);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_int_eq(json_dump_file(cfg, path, JSON_INDENT(2)), 0);
    json_decref(cfg);
}

/* The nvfp4 fixture as ModelOpt stores it: weight (packed), weight_scale,
 * weight_scale_2 = 1 / weight_global_scale, input_scale = 1 /
 * input_global_scale (dequant values instead of quantize multipliers). */
static void write_modelopt_fixture(const char *dir)
{
    fixture_run f;
    open_fixture(&f, "nvfp4");
    size_t n = fmoe_checkpoint_tensor_count(f.ck);
    st_out *out = calloc(n, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const char *name = fmoe_checkpoint_tensor_name(f.ck, i);
        fmoe_tensor t;
        ck_assert_int_eq(fmoe_checkpoint_tensor(f.ck, i, &t), FMOE_STATUS_OK);
        const char *dot = strrchr(name, '.');
        int base = (int)(dot - name);
        st_out *o = &out[i];
        size_t bytes = (size_t)fmoe_tensor_numel(&t) * fmoe_dtype_size(t.dtype);
        o->data = malloc(bytes);
        memcpy(o->data, t.data, bytes);
        o->bytes = bytes, o->ndim = t.ndim;
        for (uint32_t a = 0; a < t.ndim; a++)
            o->shape[a] = t.shape[a];
        o->dtype = t.dtype == FMOE_DTYPE_BF16         ? "BF16"
                   : t.dtype == FMOE_DTYPE_F32        ? "F32"
                   : t.dtype == FMOE_DTYPE_FP8_E4M3FN ? "F8_E4M3"
                                                      : "U8";
        const char *suffix = dot + 1;
        if (strcmp(suffix, "weight_global_scale") == 0 || strcmp(suffix, "input_global_scale") == 0) {
            float *v = o->data;
            *v = (float)(1.0 / (double)*v);
            suffix = strcmp(suffix, "weight_global_scale") == 0 ? "weight_scale_2" : "input_scale";
        } else if (strcmp(suffix, "weight_packed") == 0) {
            suffix = "weight";
        }
        if (strcmp(suffix, dot + 1) != 0 || strcmp(dot, ".weight") == 0)
            snprintf(o->name, sizeof o->name, "%.*s.%s", base, name, suffix);
        else
            snprintf(o->name, sizeof o->name, "%s", name);
    }
    close_fixture(&f);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_st(path, out, n);
    for (size_t i = 0; i < n; i++)
        free(out[i].data);
    free(out);
    json_error_t jerr;
    json_t *cfg = json_load_file(MODELS "/nvfp4/config.json", 0, &jerr);
    ck_assert_ptr_nonnull(cfg);
    json_object_set_new(cfg, "quantization_config",
                        json_pack("{s:s, s:{s:s, s:i, s:[s]}}", "quant_method", "modelopt", "quantization",
                                  "quant_algo", "NVFP4", "group_size", 16, "exclude_modules", "lm_head"));
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_int_eq(json_dump_file(cfg, path, JSON_INDENT(2)), 0);
    json_decref(cfg);
}

/* The float values came from bf16: their top 16 bits are the bf16. */
static uint16_t BF(double v)
{
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}

/* The bf16 fixture's layer-0 weights as a Llama-4 text checkpoint: fused
 * feed_forward.experts.gate_up_proj [E, H, 2I] with gate and up
 * concatenated, down_proj [E, I, H], router feed_forward.router.weight,
 * top-1 sigmoid routing applied on the input. */
static void write_llama4_fixture(const char *dir, const float_layer *l)
{
    int64_t e = l->e, h = l->h, i = l->i;
    uint16_t *gu = malloc((size_t)(e * h * 2 * i) * 2), *dn = malloc((size_t)(e * i * h) * 2);
    uint16_t *rt = malloc((size_t)(e * h) * 2);
    for (int64_t x = 0; x < e; x++)
        for (int64_t k = 0; k < h; k++)
            for (int64_t r = 0; r < i; r++) {
                gu[(x * h + k) * 2 * i + r] = BF(l->w1[(x * i + r) * h + k]);
                gu[(x * h + k) * 2 * i + i + r] = BF(l->w3[(x * i + r) * h + k]);
            }
    for (int64_t x = 0; x < e; x++)
        for (int64_t r = 0; r < h; r++)
            for (int64_t k = 0; k < i; k++)
                dn[(x * i + k) * h + r] = BF(l->w2[(x * h + r) * i + k]);
    for (int64_t q = 0; q < e * h; q++)
        rt[q] = BF(l->router[q]);
    st_out out[6];
    memset(out, 0, sizeof out);
    size_t n = 0;
    for (int layer = 0; layer < 2; layer++) { /* both layers the same weights */
        st_out *o = &out[n++];
        snprintf(o->name, sizeof o->name, "model.layers.%d.feed_forward.experts.gate_up_proj", layer);
        o->dtype = "BF16", o->ndim = 3, o->data = gu, o->bytes = (size_t)(e * h * 2 * i) * 2;
        o = &out[n++];
        snprintf(o->name, sizeof o->name, "model.layers.%d.feed_forward.experts.down_proj", layer);
        o->dtype = "BF16", o->ndim = 3, o->data = dn, o->bytes = (size_t)(e * i * h) * 2;
        o = &out[n++];
        snprintf(o->name, sizeof o->name, "model.layers.%d.feed_forward.router.weight", layer);
        o->dtype = "BF16", o->ndim = 2, o->shape[0] = e, o->shape[1] = h, o->data = rt, o->bytes = (size_t)(e * h) * 2;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    /* write_st writes up to 2 dims from st_out; the 3-D ones need a third. */
    json_t *hdr = json_object();
    size_t off = 0;
    for (size_t q = 0; q < n; q++) {
        int gate_up = strstr(out[q].name, "gate_up") != NULL, router = strstr(out[q].name, "router") != NULL;
        json_t *shape = router    ? json_pack("[I,I]", (json_int_t)e, (json_int_t)h)
                        : gate_up ? json_pack("[I,I,I]", (json_int_t)e, (json_int_t)h, (json_int_t)(2 * i))
                                  : json_pack("[I,I,I]", (json_int_t)e, (json_int_t)i, (json_int_t)h);
        json_object_set_new(hdr, out[q].name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", "BF16", "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + out[q].bytes)));
        off += out[q].bytes;
    }
    char *text = json_dumps(hdr, JSON_COMPACT);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    uint64_t le = padded;
    fwrite(&le, 8, 1, f);
    fwrite(text, 1, len, f);
    for (size_t p = len; p < padded; p++)
        fputc(' ', f);
    for (size_t q = 0; q < n; q++)
        fwrite(out[q].data, 1, out[q].bytes, f);
    fclose(f);
    free(text);
    json_decref(hdr);
    free(gu), free(dn), free(rt);
    json_t *cfg = json_pack("{s:[s], s:s, s:I, s:i, s:I, s:I, s:i, s:i, s:s, s:s}", "architectures",
                            "Llama4ForCausalLM", "model_type", "llama4_text", "num_local_experts", (json_int_t)e,
                            "num_experts_per_tok", 1, "hidden_size", (json_int_t)h, "intermediate_size", (json_int_t)i,
                            "num_hidden_layers", 2, "interleave_moe_layer_step", 1, "hidden_act", "silu", "torch_dtype",
                            "bfloat16");
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_int_eq(json_dump_file(cfg, path, JSON_INDENT(2)), 0);
    json_decref(cfg);
}

/* Layer 0 of the checkpoint in `dir` (any directory) into `y`. */
static void run_dir_layer(const char *dir, const char *want_method, const float_ref *r, double *y)
{
    char config[600];
    snprintf(config, sizeof config, "%s/config.json", dir);
    const char *files[] = {REFERENCE_MANIFEST};
    fixture_run f;
    f.ctx = fx_context(files, 1, NULL, 0, NULL);
    ck_assert_msg(fmoe_model_config_load(config, &f.model) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_quant_config_load(config, &f.qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_str_eq(fmoe_quant_config_method(f.qc), want_method);
    ck_assert_msg(fmoe_checkpoint_open(dir, &f.ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(run_layer(&f, 0, &r->cfg, 1, 0, 1, 0, 0, r->x, r->logits, MAX_M, y), FMOE_STATUS_OK);
    close_fixture(&f);
}

/* ModelOpt's names and dequant-value globals give the compressed-tensors
 * result: the globals are inverted twice (in the writer and the loader),
 * so equal to f32 rounding, not bit for bit. */
START_TEST(modelopt_nvfp4_equals_compressed_tensors)
{
    char dir[512];
    fx_tempdir(dir, sizeof dir);
    write_modelopt_fixture(dir);
    float_ref r;
    float_ref_make(&r, "bf16", 0);
    int64_t n = MAX_M * r.l.h;
    double *ct = malloc((size_t)n * sizeof(double)), *mo = malloc((size_t)n * sizeof(double));
    fixture_run f;
    open_fixture(&f, "nvfp4");
    ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 1, 0, 0, r.x, r.logits, MAX_M, ct), FMOE_STATUS_OK);
    close_fixture(&f);
    run_dir_layer(dir, "modelopt", &r, mo);
    double err = rel_err(mo, ct, n);
    ck_assert_msg(err <= 1e-5, "ModelOpt layout differs from compressed-tensors by %.3e", err);
    free(ct), free(mo);
    float_ref_free(&r);
}
END_TEST

/* Llama-4's fused layout (gate | up concatenated, transposed) with its
 * routing (sigmoid top-1, weight on the input) against the float model. */
START_TEST(llama4_fused_matches_float64)
{
    char dir[512];
    fx_tempdir(dir, sizeof dir);
    float_ref r;
    float_ref_make(&r, "bf16", 0);
    write_llama4_fixture(dir, &r.l);
    char config[600];
    snprintf(config, sizeof config, "%s/config.json", dir);
    fmoe_model *model = NULL;
    ck_assert_msg(fmoe_model_config_load(config, &model) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    ck_assert_int_eq(fmoe_model_layer_config(model, 0, &cfg), FMOE_STATUS_OK);
    ck_assert(cfg.apply_router_weight_on_input && cfg.top_k == 1);
    cfg.act_dtype = FMOE_DTYPE_F32;
    fmoe_model_destroy(model);
    /* The float model under Llama-4's routing. */
    r.cfg = cfg;
    float_model(&r.cfg, &r.l, r.x, MAX_M, r.logits, r.y);
    double *y = malloc((size_t)(MAX_M * r.l.h) * sizeof(double));
    run_dir_layer(dir, "none", &r, y);
    double err = rel_err(y, r.y, MAX_M * r.l.h);
    ck_assert_msg(err <= FLOAT_TOL, "Llama-4 fused layout: relative error %.3e", err);
    free(y);
    float_ref_free(&r);
}
END_TEST

/* The same weights in GPTQ's layout give bit-identical outputs. */
START_TEST(gptq_layout_equals_compressed_tensors)
{
    char dir[512];
    fx_tempdir(dir, sizeof dir);
    write_gptq_fixture(dir);
    float_ref r;
    float_ref_make(&r, "bf16", 0);
    int64_t n = MAX_M * r.l.h;
    double *ct = malloc((size_t)n * sizeof(double)), *gq = malloc((size_t)n * sizeof(double));
    fixture_run f;
    open_fixture(&f, "w4a16-actorder");
    ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 1, 0, 0, r.x, r.logits, MAX_M, ct), FMOE_STATUS_OK);
    close_fixture(&f);
    /* open_fixture takes a fixture name under MODELS; this one is elsewhere. */
    char config[600];
    snprintf(config, sizeof config, "%s/config.json", dir);
    const char *files[] = {REFERENCE_MANIFEST};
    f.ctx = fx_context(files, 1, NULL, 0, NULL);
    ck_assert_msg(fmoe_model_config_load(config, &f.model) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_quant_config_load(config, &f.qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_str_eq(fmoe_quant_config_method(f.qc), "gptq");
    ck_assert_msg(fmoe_checkpoint_open(dir, &f.ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(run_layer(&f, 0, &r.cfg, 1, 0, 1, 0, 0, r.x, r.logits, MAX_M, gq), FMOE_STATUS_OK);
    for (int64_t q = 0; q < n; q++)
        ck_assert_msg(ct[q] == gq[q], "output %lld: compressed-tensors %.9g, GPTQ %.9g", (long long)q, ct[q], gq[q]);
    close_fixture(&f);
    free(ct), free(gq);
    float_ref_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fixtures");
    TCase *tc = tcase_create("fixtures");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bf16_sharded_matches_float64);
    tcase_add_test(tc, bf16_fused_gpt_oss_matches_float64);
    tcase_add_test(tc, bf16_tp_ep_eplb_shards_sum);
    tcase_add_test(tc, fused_tp_ep_eplb_shards_sum);
    tcase_add_test(tc, fp8_fixtures_match_float64);
    tcase_add_test(tc, int4_fixtures_match_float64);
    tcase_add_test(tc, fp4_fixtures_match_float64);
    tcase_add_test(tc, quantized_tp_ep_eplb_shards_sum);
    tcase_add_test(tc, gptq_layout_equals_compressed_tensors);
    tcase_add_test(tc, modelopt_nvfp4_equals_compressed_tensors);
    tcase_add_test(tc, llama4_fused_matches_float64);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 11);
}
