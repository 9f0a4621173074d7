/*
 * tests/model/test_hf_models.c - the tiny models transformers itself saved
 * (tests/data/hf_models, tools/gen_hf_fixtures.py) through the whole path:
 * config.json as save_pretrained writes it today -> fmoe_model_config_load
 * -> fmoe_model_load_layer into the reference backend -> forward, against
 * transformers' own results saved beside them (golden.safetensors):
 *
 *   - the parsed config: values written here by hand from the generator's
 *     config objects (never read back from the file under test);
 *   - the names: the router weight reproduces transformers' router logits,
 *     the shared experts' tensors have the size the config gives;
 *   - routing: fmoe_reference_route on transformers' logits picks the same
 *     experts with the same weights (Llama-4 with saturated sigmoids: the
 *     largest logit, as transformers ranks);
 *   - the layer output equals the output of transformers' experts module
 *     (the routed part of the block) to f32 rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"
#include "test_util.h"

#define MODELS FMOE_TEST_DATA_DIR "/hf_models"
#define M      16 /* tokens in golden.safetensors */
#define H      32 /* hidden_size of every fixture */

typedef struct hf_case {
    const char *dir, *family;
    const char *moe; /* per decoder layer: '1' MoE, '0' dense */
    uint32_t experts, top_k, inter;
    int32_t scoring, activation;
    uint32_t renormalize, grouped, groups, topk_group, correction_bias, on_input, has_bias;
    float scaling;
    uint32_t shared_count, shared_inter, shared_gated;
    const char *router; /* router weight name of layer 1 */
} hf_case;

/* Hand-written from tools/gen_hf_fixtures.py's config objects. */
static const hf_case cases[] = {
    {"mixtral",
     "mixtral",
     "11",
     8,
     2,
     16,
     FMOE_SCORING_SOFTMAX,
     FMOE_ACT_SILU,
     1,
     0,
     0,
     0,
     0,
     0,
     0,
     1.0f,
     0,
     0,
     0,
     "model.layers.1.block_sparse_moe.gate.weight"},
    {"qwen2_moe",
     "qwen2_moe",
     "01",
     8,
     2,
     16,
     FMOE_SCORING_SOFTMAX,
     FMOE_ACT_SILU,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     1.0f,
     1,
     32,
     1,
     "model.layers.1.mlp.gate.weight"},
    {"qwen3_moe",
     "qwen3_moe",
     "11",
     8,
     2,
     16,
     FMOE_SCORING_SOFTMAX,
     FMOE_ACT_SILU,
     1,
     0,
     0,
     0,
     0,
     0,
     0,
     1.0f,
     0,
     0,
     0,
     "model.layers.1.mlp.gate.weight"},
    {"deepseek_v2",
     "deepseek_v2",
     "11",
     8,
     2,
     16,
     FMOE_SCORING_SOFTMAX,
     FMOE_ACT_SILU,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     1.0f,
     1,
     16,
     0,
     "model.layers.1.mlp.gate.weight"},
    {"deepseek_v3",
     "deepseek_v3",
     "01",
     8,
     2,
     16,
     FMOE_SCORING_SIGMOID,
     FMOE_ACT_SILU,
     1,
     1,
     4,
     2,
     1,
     0,
     0,
     2.5f,
     1,
     16,
     0,
     "model.layers.1.mlp.gate.weight"},
    {"gpt_oss",
     "gpt_oss",
     "11",
     8,
     2,
     16,
     FMOE_SCORING_SOFTMAX,
     FMOE_ACT_SWIGLUOAI,
     1,
     0,
     0,
     0,
     0,
     0,
     1,
     1.0f,
     0,
     0,
     0,
     "model.layers.1.mlp.router.weight"},
    {"llama4_text",
     "llama4_text",
     "01",
     4,
     1,
     16,
     FMOE_SCORING_SIGMOID,
     FMOE_ACT_SILU,
     0,
     0,
     0,
     0,
     0,
     1,
     0,
     1.0f,
     1,
     16,
     0,
     "model.layers.1.feed_forward.router.weight"},
    {"llama4",
     "llama4",
     "11",
     4,
     1,
     16,
     FMOE_SCORING_SIGMOID,
     FMOE_ACT_SILU,
     0,
     0,
     0,
     0,
     0,
     1,
     0,
     1.0f,
     1,
     16,
     0,
     "language_model.model.layers.1.feed_forward.router.weight"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* ---- reading tensors ----------------------------------------------------- */

static fmoe_tensor tensor_of(const fmoe_checkpoint *ck, const char *name, fmoe_dtype dtype, int64_t rows, int64_t cols)
{
    size_t i = fmoe_checkpoint_find(ck, name);
    ck_assert_msg(i != (size_t)-1, "%s: missing", name);
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &t), FMOE_STATUS_OK);
    ck_assert_msg(t.dtype == dtype, "%s: dtype %d, expected %d", name, t.dtype, dtype);
    ck_assert_msg(t.ndim == (cols ? 2u : 1u) && t.shape[0] == rows && (!cols || t.shape[1] == cols),
                  "%s: shape [%lld, %lld], expected [%lld, %lld]", name, (long long)t.shape[0],
                  (long long)(t.ndim > 1 ? t.shape[1] : 0), (long long)rows, (long long)cols);
    return t;
}

static const float *golden_f32(const fmoe_checkpoint *g, uint32_t layer, const char *what, int64_t cols)
{
    char name[96];
    snprintf(name, sizeof name, "layers.%u.%s", layer, what);
    return tensor_of(g, name, FMOE_DTYPE_F32, M, cols).data;
}

static fmoe_context *reference_context(void)
{
    const char *files[] = {REFERENCE_MANIFEST};
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    o.isolated = 1;
    fmoe_context *ctx = NULL;
    ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "context: %s", fmoe_last_error());
    return ctx;
}

static fmoe_model *load_model(const hf_case *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/config.json", MODELS, c->dir);
    fmoe_model *m = NULL;
    ck_assert_msg(fmoe_model_config_load(path, &m) == FMOE_STATUS_OK, "%s: %s", c->dir, fmoe_last_error());
    return m;
}

/* ---- the checks ------------------------------------------------------------ */

static void check_config(const hf_case *c, const fmoe_model *m, uint32_t layer, fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    ck_assert_msg(fmoe_model_layer_config(m, layer, cfg) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(cfg->num_experts, c->experts);
    ck_assert_uint_eq(cfg->top_k, c->top_k);
    ck_assert_uint_eq(cfg->hidden_size, H);
    ck_assert_uint_eq(cfg->intermediate_size, c->inter);
    ck_assert_int_eq(cfg->scoring, c->scoring);
    ck_assert_int_eq(cfg->activation, c->activation);
    ck_assert_uint_eq(cfg->gated, 1);
    ck_assert_uint_eq(cfg->renormalize, c->renormalize);
    ck_assert_uint_eq(cfg->grouped_topk, c->grouped);
    if (c->grouped) {
        ck_assert_uint_eq(cfg->num_expert_group, c->groups);
        ck_assert_uint_eq(cfg->topk_group, c->topk_group);
    }
    ck_assert_uint_eq(cfg->has_correction_bias, c->correction_bias);
    ck_assert_uint_eq(cfg->apply_router_weight_on_input, c->on_input);
    ck_assert_uint_eq(cfg->has_bias, c->has_bias);
    ck_assert(cfg->routed_scaling_factor == c->scaling);
    if (c->activation == FMOE_ACT_SWIGLUOAI) /* GptOssConfig's defaults, saved */
        ck_assert(cfg->swiglu_alpha == 1.702f && cfg->swiglu_limit == 7.0f);
    ck_assert_int_eq(cfg->act_dtype, FMOE_DTYPE_F32); /* "dtype": "float32" */

    fmoe_model_shared s = {.struct_size = sizeof s};
    ck_assert_int_eq(fmoe_model_layer_shared(m, layer, &s), FMOE_STATUS_OK);
    ck_assert_uint_eq(s.count, c->shared_count);
    ck_assert_uint_eq(s.intermediate_size, c->shared_inter);
    ck_assert_uint_eq(s.gated, c->shared_gated);
}

/* The router weight (and bias) reproduce transformers' logits, and the
 * shared experts' tensors exist with the configured size. */
static void check_names(const hf_case *c, const fmoe_model *m, uint32_t layer, const fmoe_checkpoint *ck,
                        const float *x, const float *logits)
{
    fmoe_model_names n = {.struct_size = sizeof n};
    ck_assert_int_eq(fmoe_model_layer_names(m, layer, &n), FMOE_STATUS_OK);
    if (layer == 1)
        ck_assert_str_eq(n.router_weight, c->router);
    const float *w = tensor_of(ck, n.router_weight, FMOE_DTYPE_F32, c->experts, H).data;
    const float *b = n.router_bias ? tensor_of(ck, n.router_bias, FMOE_DTYPE_F32, c->experts, 0).data : NULL;
    double worst = 0, scale = 0;
    for (int t = 0; t < M; t++)
        for (uint32_t e = 0; e < c->experts; e++) {
            double acc = b ? b[e] : 0.0;
            for (int q = 0; q < H; q++)
                acc += (double)x[t * H + q] * w[e * H + q];
            worst = fmax(worst, fabs(acc - logits[t * c->experts + e]));
            scale = fmax(scale, fabs(acc));
        }
    ck_assert(scale > 0.5);
    ck_assert_msg(worst <= 1e-5 * scale, "%s layer %u: router logits off by %.3g", c->dir, layer, worst);

    if (c->shared_count) {
        char name[256];
        snprintf(name, sizeof name, "%s.gate_proj.weight", n.shared);
        tensor_of(ck, name, FMOE_DTYPE_F32, c->shared_inter, H);
        snprintf(name, sizeof name, "%s.down_proj.weight", n.shared);
        tensor_of(ck, name, FMOE_DTYPE_F32, H, c->shared_inter);
    }
    if (c->shared_gated)
        tensor_of(ck, n.shared_gate_weight, FMOE_DTYPE_F32, 1, H);
}

/* Our router on transformers' logits: the same experts (transformers'
 * order is not always sorted: compared as sets) with the same weights. */
static void check_routing(const hf_case *c, const fmoe_layer_config *cfg, const fmoe_model *m, uint32_t layer,
                          const fmoe_checkpoint *ck, const fmoe_checkpoint *g, const float *logits)
{
    uint32_t k = c->top_k;
    ck_assert_uint_le(k, 2);
    char name[96];
    snprintf(name, sizeof name, "layers.%u.topk_ids", layer);
    const int32_t *want_ids = tensor_of(g, name, FMOE_DTYPE_INT32, M, k).data;
    const float *want_w = golden_f32(g, layer, "topk_weights", k);

    fmoe_tensor tl, tw, ti, tb;
    float w[M * 2];
    int32_t ids[M * 2];
    const int64_t ls[2] = {M, c->experts}, ks[2] = {M, k};
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, (void *)logits);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, ids);
    const fmoe_tensor *bias = NULL;
    if (cfg->has_correction_bias) {
        fmoe_model_names n = {.struct_size = sizeof n};
        ck_assert_int_eq(fmoe_model_layer_names(m, layer, &n), FMOE_STATUS_OK);
        tb = tensor_of(ck, n.correction_bias, FMOE_DTYPE_F32, c->experts, 0);
        bias = &tb;
    }
    ck_assert_msg(fmoe_reference_route(cfg, &tl, bias, &tw, &ti) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    for (int t = 0; t < M; t++)
        for (uint32_t j = 0; j < k; j++) {
            uint32_t at = k;
            for (uint32_t i = 0; i < k; i++)
                if (ids[t * k + i] == want_ids[t * k + j])
                    at = i;
            ck_assert_msg(at < k, "%s layer %u token %d: transformers chose expert %d, we did not (first: %d)", c->dir,
                          layer, t, want_ids[t * k + j], ids[t * k]);
            double got = w[t * k + at], want = want_w[t * k + j];
            ck_assert_msg(fabs(got - want) <= 1e-6 * fabs(want) + 1e-7, "%s layer %u token %d expert %d: %.9g vs %.9g",
                          c->dir, layer, t, want_ids[t * k + j], got, want);
        }
}

/* The layer on the reference backend against transformers' experts output. */
static void check_forward(const hf_case *c, fmoe_context *ctx, const fmoe_model *m, uint32_t layer,
                          const fmoe_layer_config *base, const fmoe_checkpoint *ck, const float *x, const float *logits,
                          const float *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/config.json", MODELS, c->dir);
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_load(path, &qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_config cfg = *base;
    cfg.max_num_tokens = M;
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, layer, &mods), FMOE_STATUS_OK);
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *l = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &s, &lo, &l) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_model_load_stats stats = {.struct_size = sizeof stats};
    ck_assert_msg(fmoe_model_load_layer(m, layer, ck, qc, l, &stats) == FMOE_STATUS_OK, "%s layer %u: %s", c->dir,
                  layer, fmoe_last_error());
    ck_assert_msg(fmoe_layer_finalize(l) == FMOE_STATUS_OK, "%s", fmoe_last_error());

    float y[M * H];
    fmoe_tensor tx, ty, tl;
    const int64_t xs[2] = {M, H}, ls[2] = {M, c->experts};
    fmoe_tensor_init(&tx, FMOE_DTYPE_F32, 2, xs, (void *)x);
    fmoe_tensor_init(&ty, FMOE_DTYPE_F32, 2, xs, y);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, (void *)logits);
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &tx, .router_logits = &tl, .out = &ty};
    ck_assert_msg(fmoe_layer_forward(l, &a) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_destroy(l);
    fmoe_quant_config_destroy(qc);

    /* Both sides are f32 with f32 sums over K <= 32 terms in different
     * orders: ~1e-6 of the output's scale. A wrong expert, a swapped
     * gate/up or a missing weight is O(1). */
    double worst = 0, scale = 0;
    for (int q = 0; q < M * H; q++) {
        ck_assert_msg(isfinite(y[q]), "%s layer %u: non-finite output", c->dir, layer);
        worst = fmax(worst, fabs((double)y[q] - want[q]));
        scale = fmax(scale, fabs(want[q]));
    }
    printf("# %s layer %u: max |ours - transformers| = %.3g of max |transformers| = %.3g\n", c->dir, layer, worst,
           scale);
    ck_assert(scale > 0.5); /* never compare zeros */
    ck_assert_msg(worst <= 1e-5 * scale, "%s layer %u: output off by %.3g (scale %.3g)", c->dir, layer, worst, scale);
}

START_TEST(hf_model)
{
    const hf_case *c = &cases[_i];
    fmoe_model *m = load_model(c);
    ck_assert_str_eq(fmoe_model_family(m), c->family);
    uint32_t layers = (uint32_t)strlen(c->moe);
    ck_assert_uint_eq(fmoe_model_layer_count(m), layers);
    ck_assert_int_eq(fmoe_model_dtype(m), FMOE_DTYPE_F32);

    char dir[512], golden[600];
    snprintf(dir, sizeof dir, "%s/%s", MODELS, c->dir);
    snprintf(golden, sizeof golden, "%s/golden.safetensors", dir);
    fmoe_checkpoint *ck = NULL, *g = NULL;
    ck_assert_msg(fmoe_checkpoint_open(dir, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_checkpoint_open(golden, &g) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    const float *x = tensor_of(g, "x", FMOE_DTYPE_F32, M, H).data;
    fmoe_context *ctx = reference_context();

    uint32_t checked = 0;
    for (uint32_t layer = 0; layer < layers; layer++) {
        ck_assert_msg(fmoe_model_layer_is_moe(m, layer) == (c->moe[layer] == '1'), "%s layer %u", c->dir, layer);
        if (c->moe[layer] != '1')
            continue;
        fmoe_layer_config cfg;
        check_config(c, m, layer, &cfg);
        const float *logits = golden_f32(g, layer, "router_logits", c->experts);
        check_names(c, m, layer, ck, x, logits);
        check_routing(c, &cfg, m, layer, ck, g, logits);
        check_forward(c, ctx, m, layer, &cfg, ck, x, logits, golden_f32(g, layer, "routed_out", H));
        checked++;
    }
    ck_assert_uint_gt(checked, 0);
    fmoe_context_destroy(ctx);
    fmoe_checkpoint_close(g);
    fmoe_checkpoint_close(ck);
    fmoe_model_destroy(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hf_models");
    TCase *tc = tcase_create("transformers");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, hf_model, 0, (int)N_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), (int)N_CASES);
}
