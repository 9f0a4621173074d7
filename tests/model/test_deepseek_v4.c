/*
 * tests/model/test_deepseek_v4.c - the deepseek_v4 family (core/model/
 * family_deepseek_v4.c) and the V4 checkpoint names through the loader:
 *
 *   - the bundled tiny V4 checkpoint (tests/data/models/deepseek-v4, written
 *     by tools/gen_v4_fixture.py): config values written here by hand from
 *     the generator's constants, the names, the scheme key its config gives,
 *     then both MoE layers loaded through fmoe_model_load_layer into the
 *     reference backend ("scale" -> weight_scale, int8 e2m1 pairs, F8_E8M0
 *     scales, "gate.bias" as the selection bias) and run on the bundled x:
 *     the router logits from the named router weight, the routing and the
 *     output equal the generator's numpy model of the scheme
 *     (expected.safetensors), and stay near its float model;
 *   - the config rules: hash-routed layers (refused with the reason, the
 *     other layers served), the keys' spellings, defaults and refusals,
 *     each with its status and message;
 *   - the loader refuses a selection bias the config does not have.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/model.h"
#include "test_util.h"

#define FIXTURE FMOE_TEST_DATA_DIR "/models/deepseek-v4"
#define V4_KEY  "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"

/* tools/gen_v4_fixture.py's constants. */
enum { E = 8, K = 2, H = 128, I = 64, LAYERS = 2, M = 16 };

/* ---- helpers ---------------------------------------------------------------- */

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

/* Tensor `name` of `ck`, checked to be `dtype` [rows(, cols)]. */
static fmoe_tensor tensor_of(const fmoe_checkpoint *ck, const char *name, fmoe_dtype dtype, int64_t rows, int64_t cols)
{
    size_t i = fmoe_checkpoint_find(ck, name);
    ck_assert_msg(i != (size_t)-1, "%s: missing", name);
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &t), FMOE_STATUS_OK);
    ck_assert_msg(t.dtype == dtype, "%s: dtype %s, expected %s", name, fmoe_dtype_name(t.dtype),
                  fmoe_dtype_name(dtype));
    ck_assert_msg(t.ndim == (cols ? 2u : 1u) && t.shape[0] == rows && (!cols || t.shape[1] == cols),
                  "%s: shape [%lld, %lld], expected [%lld, %lld]", name, (long long)t.shape[0],
                  (long long)(t.ndim > 1 ? t.shape[1] : 0), (long long)rows, (long long)cols);
    return t;
}

/* A float tensor (any storage) as f32, into a new buffer. */
static float *floats_of(const fmoe_checkpoint *ck, const char *name, fmoe_dtype dtype, int64_t rows, int64_t cols)
{
    fmoe_tensor t = tensor_of(ck, name, dtype, rows, cols);
    int64_t n = rows * (cols ? cols : 1);
    float *out = malloc((size_t)n * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int64_t i = 0; i < n; i++)
        out[i] = fmoe_load_float(t.data, dtype, i); /* copies: safetensors data may be unaligned */
    return out;
}

static fmoe_model *parse(const char *json)
{
    fmoe_model *m = NULL;
    ck_assert_msg(fmoe_model_config_parse(json, strlen(json), NULL, &m) == FMOE_STATUS_OK, "%s: %s", json,
                  fmoe_last_error());
    return m;
}

/* ---- the bundled checkpoint ---------------------------------------------------- */

static void check_fixture_config(const fmoe_model *m, uint32_t layer, fmoe_layer_config *c)
{
    fmoe_layer_config_init(c);
    ck_assert_msg(fmoe_model_layer_config(m, layer, c) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(c->num_experts, E);
    ck_assert_uint_eq(c->top_k, K);
    ck_assert_uint_eq(c->hidden_size, H);
    ck_assert_uint_eq(c->intermediate_size, I);
    ck_assert_int_eq(c->activation, FMOE_ACT_SILU);
    ck_assert_uint_eq(c->gated, 1);
    ck_assert(c->swiglu_limit == 1.5f);
    ck_assert_int_eq(c->scoring, FMOE_SCORING_SQRTSOFTPLUS);
    ck_assert_uint_eq(c->has_correction_bias, 1);
    ck_assert_uint_eq(c->renormalize, 1);
    ck_assert(c->routed_scaling_factor == 1.5f);
    ck_assert_uint_eq(c->grouped_topk, 0);
    ck_assert_uint_eq(c->has_bias, 0);
    ck_assert_uint_eq(c->apply_router_weight_on_input, 0);
    ck_assert_int_eq(c->act_dtype, FMOE_DTYPE_BF16);
}

static void check_fixture_names(const fmoe_model *m, uint32_t layer, const fmoe_checkpoint *ck)
{
    fmoe_model_names n = {.struct_size = sizeof n};
    ck_assert_int_eq(fmoe_model_layer_names(m, layer, &n), FMOE_STATUS_OK);
    char want[128];
    snprintf(want, sizeof want, "layers.%u.ffn.gate.weight", layer);
    ck_assert_str_eq(n.router_weight, want);
    snprintf(want, sizeof want, "layers.%u.ffn.gate.bias", layer);
    ck_assert_str_eq(n.correction_bias, want);
    snprintf(want, sizeof want, "layers.%u.ffn.experts", layer);
    ck_assert_str_eq(n.experts, want);
    snprintf(want, sizeof want, "layers.%u.ffn.shared_experts", layer);
    ck_assert_str_eq(n.shared, want);
    ck_assert_str_eq(n.expert_gate, "w1");
    ck_assert_str_eq(n.expert_up, "w3");
    ck_assert_str_eq(n.expert_down, "w2");
    ck_assert_ptr_null(n.router_bias); /* gate.bias selects, it is not added to the logits */
    ck_assert_ptr_null(n.fused_gate_up);
    ck_assert_ptr_null(n.mxfp4_gate_up_blocks);
    ck_assert_ptr_null(n.shared_gate_weight);

    /* The tensors are where the names say, in the checkpoint's types. */
    tensor_of(ck, n.router_weight, FMOE_DTYPE_BF16, E, H);
    tensor_of(ck, n.correction_bias, FMOE_DTYPE_F32, E, 0);
    char name[160];
    snprintf(name, sizeof name, "%s.3.%s.weight", n.experts, n.expert_gate);
    tensor_of(ck, name, FMOE_DTYPE_INT8, I, H / 2);
    snprintf(name, sizeof name, "%s.3.%s.scale", n.experts, n.expert_down);
    tensor_of(ck, name, FMOE_DTYPE_UE8M0, H, I / 32);

    /* Shared experts: one MLP of n_shared_experts * I, named like the
     * routed experts' projections, kept out of the routed layer. */
    fmoe_model_shared s = {.struct_size = sizeof s};
    ck_assert_int_eq(fmoe_model_layer_shared(m, layer, &s), FMOE_STATUS_OK);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.intermediate_size, I);
    ck_assert_uint_eq(s.gated, 0);
    snprintf(name, sizeof name, "%s.%s.weight", n.shared, n.expert_gate);
    tensor_of(ck, name, FMOE_DTYPE_FP8_E4M3FN, I, H);
    snprintf(name, sizeof name, "%s.%s.weight", n.shared, n.expert_down);
    tensor_of(ck, name, FMOE_DTYPE_FP8_E4M3FN, H, I);
}

/* The layer's scheme from the config's quantization_config. */
static void fixture_scheme(const fmoe_model *m, uint32_t layer, fmoe_scheme *scheme)
{
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_load(FIXTURE "/config.json", &qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, layer, &mods), FMOE_STATUS_OK);
    ck_assert_uint_eq(mods.fused, 0);
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, scheme) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    char key[FMOE_SCHEME_KEY_MAX];
    ck_assert_int_eq(fmoe_scheme_key(scheme, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, V4_KEY);
    fmoe_quant_config_destroy(qc);
}

/* logits = x W_r^T from the named router weight, against the generator's. */
static void check_logits(const fmoe_checkpoint *ck, const fmoe_checkpoint *ex, uint32_t layer, const float *x)
{
    char name[96];
    snprintf(name, sizeof name, "layers.%u.ffn.gate.weight", layer);
    float *w = floats_of(ck, name, FMOE_DTYPE_BF16, E, H);
    snprintf(name, sizeof name, "layers.%u.router_logits", layer);
    float *want = floats_of(ex, name, FMOE_DTYPE_F32, M, E);
    double worst = 0, scale = 0;
    for (int t = 0; t < M; t++)
        for (int e = 0; e < E; e++) {
            double acc = 0;
            for (int q = 0; q < H; q++)
                acc += (double)x[t * H + q] * w[e * H + q];
            worst = fmax(worst, fabs(acc - want[t * E + e]));
            scale = fmax(scale, fabs(acc));
        }
    ck_assert(scale > 0.5);
    ck_assert_msg(worst <= 1e-6 * scale, "layer %u: router logits off by %.3g", layer, worst);
    free(w);
    free(want);
}

/* Load layer `layer` into the reference, run it on the generator's logits,
 * compare routing and output with the generator's model. */
static void run_layer(fmoe_context *ctx, const fmoe_model *m, const fmoe_checkpoint *ck, const fmoe_checkpoint *ex,
                      uint32_t layer, const float *x)
{
    fmoe_layer_config cfg;
    check_fixture_config(m, layer, &cfg);
    cfg.max_num_tokens = M;
    fmoe_scheme scheme;
    fixture_scheme(m, layer, &scheme);
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_load(FIXTURE "/config.json", &qc), FMOE_STATUS_OK);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *l = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &scheme, &lo, &l) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_model_load_stats stats = {.struct_size = sizeof stats};
    ck_assert_msg(fmoe_model_load_layer(m, layer, ck, qc, l, &stats) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    /* 8 experts x 3 projections x (weight, scale) */
    ck_assert_uint_eq(stats.tensors, E * 3 * 2 + 1);
    ck_assert_msg(fmoe_layer_finalize(l) == FMOE_STATUS_OK, "%s", fmoe_last_error());

    char name[96];
    snprintf(name, sizeof name, "layers.%u.router_logits", layer);
    float *logits = floats_of(ex, name, FMOE_DTYPE_F32, M, E);
    uint16_t xb[M * H], yb[M * H];
    for (int i = 0; i < M * H; i++)
        fmoe_store_float(xb, FMOE_DTYPE_BF16, i, x[i]);
    float tw[M * K];
    int32_t ti[M * K];
    const int64_t xs[2] = {M, H}, ls[2] = {M, E}, ks[2] = {M, K};
    fmoe_tensor tx, tl, ty, ttw, tti;
    fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, xs, xb);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, logits);
    fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, xs, yb);
    fmoe_tensor_init(&ttw, FMOE_DTYPE_F32, 2, ks, tw);
    fmoe_tensor_init(&tti, FMOE_DTYPE_INT32, 2, ks, ti);
    fmoe_forward_args a = {.struct_size = sizeof a,
                           .x = &tx,
                           .router_logits = &tl,
                           .out = &ty,
                           .topk_weights_out = &ttw,
                           .topk_ids_out = &tti};
    ck_assert_msg(fmoe_layer_forward(l, &a) == FMOE_STATUS_OK, "%s", fmoe_last_error());

    /* Routing: the same experts, best first, with the same f32 weights. */
    snprintf(name, sizeof name, "layers.%u.topk_ids", layer);
    fmoe_tensor want_ids = tensor_of(ex, name, FMOE_DTYPE_INT32, M, K);
    snprintf(name, sizeof name, "layers.%u.topk_weights", layer);
    float *want_w = floats_of(ex, name, FMOE_DTYPE_F32, M, K);
    for (int i = 0; i < M * K; i++) {
        int32_t id;
        memcpy(&id, (const char *)want_ids.data + (size_t)i * 4, 4);
        ck_assert_msg(ti[i] == id && tw[i] == want_w[i], "layer %u slot %d: expert %d weight %.9g, expected %d %.9g",
                      layer, i, ti[i], tw[i], id, want_w[i]);
    }

    /* Output: the generator's numpy model of the scheme computes the same
     * roundings with float64 products (the reference: f32 sums), so they
     * agree to a bf16 step where a sum lands near a rounding midpoint;
     * and the scheme stays within its quantization error of the float
     * model on the dequantized weights. */
    snprintf(name, sizeof name, "layers.%u.y", layer);
    float *want = floats_of(ex, name, FMOE_DTYPE_BF16, M, H);
    snprintf(name, sizeof name, "layers.%u.y_float", layer);
    float *ref = floats_of(ex, name, FMOE_DTYPE_F32, M, H);
    int exact = 0;
    double far = 0, big = 0;
    for (int i = 0; i < M * H; i++) {
        float got = fmoe_load_float(yb, FMOE_DTYPE_BF16, i);
        exact += got == want[i];
        ck_assert_msg(fabsf(got - want[i]) <= 0x1p-7f * fabsf(want[i]) + 0x1p-12f,
                      "layer %u token %d col %d: %.6g, the scheme's model says %.6g", layer, i / H, i % H, got,
                      want[i]);
        far = fmax(far, fabs(got - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    ck_assert_msg(exact >= M * H * 99 / 100, "layer %u: only %d of %d outputs bit-equal to the model", layer, exact,
                  M * H);
    ck_assert(big > 0.5);
    ck_assert_msg(far <= 0.1 * big, "layer %u: %.3g from the float model (max |y| %.3g)", layer, far, big);

    free(logits);
    free(want_w);
    free(want);
    free(ref);
    fmoe_layer_destroy(l);
    fmoe_quant_config_destroy(qc);
}

START_TEST(bundled_checkpoint)
{
    fmoe_model *m = NULL;
    ck_assert_msg(fmoe_model_config_load(FIXTURE "/config.json", &m) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_str_eq(fmoe_model_family(m), "deepseek_v4");
    ck_assert_uint_eq(fmoe_model_layer_count(m), LAYERS);
    fmoe_checkpoint *ck = NULL, *ex = NULL, *in = NULL;
    ck_assert_msg(fmoe_checkpoint_open(FIXTURE, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_checkpoint_open(FIXTURE "/expected.safetensors", &ex) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    ck_assert_msg(fmoe_checkpoint_open(FIXTURE "/inputs.safetensors", &in) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    float *x = floats_of(in, "x", FMOE_DTYPE_BF16, M, H);
    fmoe_context *ctx = reference_context();
    for (uint32_t layer = 0; layer < LAYERS; layer++) {
        ck_assert(fmoe_model_layer_is_moe(m, layer));
        check_fixture_names(m, layer, ck);
        check_logits(ck, ex, layer, x);
        run_layer(ctx, m, ck, ex, layer, x);
    }
    fmoe_context_destroy(ctx);
    free(x);
    fmoe_checkpoint_close(in);
    fmoe_checkpoint_close(ex);
    fmoe_checkpoint_close(ck);
    fmoe_model_destroy(m);
}
END_TEST

/* The same checkpoint read with a config that has no selection bias (no
 * topk_method): the loader refuses gate.bias instead of ignoring it (vLLM
 * would skip it, transformers would route with it). */
START_TEST(bias_without_noaux_tc_refused)
{
    char dir[] = "/tmp/fmoe-v4-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], link_to[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(link_to, sizeof link_to, "%s/model.safetensors", FIXTURE);
    ck_assert_int_eq(symlink(link_to, path), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"torch_dtype\": \"bfloat16\", \"expert_dtype\": \"fp4\", "
          "\"hidden_size\": 128, \"moe_intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_hash_layers\": 0, "
          "\"n_routed_experts\": 8, \"n_shared_experts\": 1, \"num_experts_per_tok\": 2, \"swiglu_limit\": 1.5, "
          "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\", "
          "\"weight_block_size\": [128, 128]}}",
          f);
    fclose(f);

    fmoe_model *m = NULL;
    ck_assert_msg(fmoe_model_config_load(path, &m) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_load(path, &qc), FMOE_STATUS_OK);
    fmoe_checkpoint *ck = NULL;
    ck_assert_msg(fmoe_checkpoint_open(dir, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    ck_assert_int_eq(fmoe_model_layer_config(m, 1, &cfg), FMOE_STATUS_OK);
    ck_assert_uint_eq(cfg.has_correction_bias, 0);
    fmoe_model_names n = {.struct_size = sizeof n};
    ck_assert_int_eq(fmoe_model_layer_names(m, 1, &n), FMOE_STATUS_OK);
    ck_assert_str_eq(n.correction_bias, "layers.1.ffn.gate.bias"); /* named, so that it is checked */
    fmoe_scheme scheme;
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, 1, &mods), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &mods, &scheme), FMOE_STATUS_OK);
    fmoe_context *ctx = reference_context();
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *l = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &scheme, &lo, &l) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(fmoe_model_load_layer(m, 1, ck, qc, l, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "layers.1.ffn.gate.bias: the checkpoint has a routing correction bias, but "
                                        "the layer config has none");
    fmoe_layer_destroy(l);
    fmoe_context_destroy(ctx);
    fmoe_checkpoint_close(ck);
    fmoe_quant_config_destroy(qc);
    fmoe_model_destroy(m);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- config rules --------------------------------------------------------------- */

#define V4_BASE \
    "\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v4\", \"num_hidden_layers\": 4, " \
    "\"n_routed_experts\": 16, \"num_experts_per_tok\": 4, \"hidden_size\": 64, \"moe_intermediate_size\": 32, " \
    "\"n_shared_experts\": 1, \"torch_dtype\": \"bfloat16\""

static void expect_error(const char *json, fmoe_status status, const char *message)
{
    fmoe_model *m = (fmoe_model *)1;
    fmoe_status st = fmoe_model_config_parse(json, strlen(json), NULL, &m);
    ck_assert_msg(st == status, "status %d (%s) for %s", st, fmoe_last_error(), json);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(fmoe_last_error(), message);
}

START_TEST(defaults)
{
    /* Absent keys take DeepseekV4Config's defaults; no topk_method: no bias. */
    fmoe_model *m = parse("{" V4_BASE ", \"num_hash_layers\": 0}");
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 3, &c), FMOE_STATUS_OK);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SQRTSOFTPLUS);
    ck_assert_uint_eq(c.renormalize, 1);
    ck_assert(c.routed_scaling_factor == 1.5f);
    ck_assert(c.swiglu_limit == 10.0f);
    ck_assert_uint_eq(c.has_correction_bias, 0);
    ck_assert_uint_eq(c.num_experts, 16);
    ck_assert_uint_eq(c.top_k, 4);
    ck_assert_uint_eq(c.intermediate_size, 32);
    fmoe_model_destroy(m);

    /* The other spellings DeepseekV4Config's attribute_map reads. */
    m = parse("{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"num_hidden_layers\": 2, \"num_local_experts\": 8, "
              "\"num_experts_per_tok\": 2, \"hidden_size\": 64, \"intermediate_size\": 32, \"n_shared_experts\": null, "
              "\"num_hash_layers\": 0, \"scoring_func\": \"sigmoid\", \"topk_method\": \"greedy\", "
              "\"routed_scaling_factor\": 1}");
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 1, &c), FMOE_STATUS_OK);
    ck_assert_uint_eq(c.num_experts, 8);
    ck_assert_uint_eq(c.intermediate_size, 32);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SIGMOID);
    ck_assert(c.routed_scaling_factor == 1.0f);
    fmoe_model_shared s = {.struct_size = sizeof s};
    ck_assert_int_eq(fmoe_model_layer_shared(m, 1, &s), FMOE_STATUS_OK);
    ck_assert_uint_eq(s.count, 0);
    fmoe_model_names n = {.struct_size = sizeof n};
    ck_assert_int_eq(fmoe_model_layer_names(m, 1, &n), FMOE_STATUS_OK);
    ck_assert_ptr_null(n.shared);
    fmoe_model_destroy(m);
}
END_TEST

/* Hash-routed layers: MoE layers with names, whose layer config is refused
 * with the reason; the other layers are served. */
START_TEST(hash_layers)
{
    const char *configs[] = {
        "{" V4_BASE ", \"topk_method\": \"noaux_tc\", \"num_hash_layers\": 2}",
        "{" V4_BASE ", \"topk_method\": \"noaux_tc\", \"mlp_layer_types\": [\"hash_moe\", \"hash_moe\", \"moe\", "
        "\"moe\"]}",
        "{" V4_BASE ", \"topk_method\": \"noaux_tc\", \"num_hash_layers\": 2, \"mlp_layer_types\": [\"hash_moe\", "
        "\"hash_moe\", \"moe\", \"moe\"]}",
    };
    const char *key[] = {"num_hash_layers", "mlp_layer_types", "mlp_layer_types"};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        fmoe_model *m = parse(configs[i]);
        for (uint32_t layer = 0; layer < 4; layer++) {
            ck_assert(fmoe_model_layer_is_moe(m, layer));
            fmoe_layer_config c;
            fmoe_layer_config_init(&c);
            fmoe_status st = fmoe_model_layer_config(m, layer, &c);
            char error[512];
            snprintf(error, sizeof error, "%s", fmoe_last_error());
            fmoe_model_names n = {.struct_size = sizeof n};
            ck_assert_int_eq(fmoe_model_layer_names(m, layer, &n), FMOE_STATUS_OK);
            if (layer < 2) {
                char want[512];
                snprintf(want, sizeof want,
                         "config.json: layer %u is hash-routed (%s): its experts are picked by token id, "
                         "tid2eid[input_ids], which a layer routed from router logits cannot do (the layers routed "
                         "by their logits are served)",
                         layer, key[i]);
                ck_assert_int_eq(st, FMOE_STATUS_UNSUPPORTED);
                ck_assert_str_eq(error, want);
                ck_assert_ptr_null(n.correction_bias); /* a hash layer has tid2eid, no bias */
            } else {
                ck_assert_msg(st == FMOE_STATUS_OK, "%s", error);
                ck_assert_uint_eq(c.has_correction_bias, 1);
                ck_assert_ptr_nonnull(n.correction_bias);
            }
            ck_assert_ptr_nonnull(n.experts);
        }
        fmoe_model_destroy(m);
    }
    /* A hash layer after a scored one (transformers allows the list). */
    fmoe_model *m = parse("{" V4_BASE ", \"mlp_layer_types\": [\"moe\", \"moe\", \"moe\", \"hash_moe\"]}");
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 0, &c), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_model_layer_config(m, 3, &c), FMOE_STATUS_UNSUPPORTED);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(refusals)
{
    expect_error("{" V4_BASE "}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: missing required key \"num_hash_layers\" (or \"mlp_layer_types\"): which layers route "
                 "by token id (transformers would assume the first 3)");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 5}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: num_hash_layers: expected an integer in [0, 4], got 5");
    expect_error("{" V4_BASE ", \"mlp_layer_types\": [\"moe\", \"moe\"]}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: mlp_layer_types: 2 entries, expected num_hidden_layers = 4");
    expect_error("{" V4_BASE ", \"mlp_layer_types\": [\"moe\", \"dense\", \"moe\", \"moe\"]}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: mlp_layer_types[1]: expected \"hash_moe\" or \"moe\", got \"dense\"");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 1, \"mlp_layer_types\": [\"hash_moe\", \"hash_moe\", \"moe\", "
                 "\"moe\"]}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: mlp_layer_types[1]: \"hash_moe\" disagrees with num_hash_layers = 1");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"scoring_func\": \"softmax\"}", FMOE_STATUS_UNSUPPORTED,
                 "config.json: scoring_func: \"softmax\" is not supported; expected \"sqrtsoftplus\" or \"sigmoid\"");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"topk_method\": \"group_limited_greedy\"}",
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: topk_method: \"group_limited_greedy\" is not supported; expected \"noaux_tc\" (top-k "
                 "with the selection bias) or \"greedy\" (without)");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"norm_topk_prob\": false}", FMOE_STATUS_UNSUPPORTED,
                 "config.json: norm_topk_prob: false is not supported: transformers renormalizes the top-k weights "
                 "whatever it says, vLLM does not; expected true");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"swiglu_limit\": 0}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: swiglu_limit: expected a number > 0, got 0");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"routed_scaling_factor\": -1.5}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: routed_scaling_factor: expected a number > 0, got -1.5");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"hidden_act\": \"gelu\"}", FMOE_STATUS_UNSUPPORTED,
                 "config.json: hidden_act: \"gelu\" is not supported; the experts of this family are implemented "
                 "for \"silu\" only");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"num_local_experts\": 8}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: num_local_experts: 8 disagrees with n_routed_experts = 16 (two spellings of one "
                 "setting)");
    expect_error("{" V4_BASE ", \"num_hash_layers\": 0, \"intermediate_size\": 64}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: intermediate_size: 64 disagrees with moe_intermediate_size = 32 (two spellings of one "
                 "setting)");
    expect_error("{\"model_type\": \"deepseek_v4\", \"num_hidden_layers\": 4, \"n_routed_experts\": 16, "
                 "\"num_experts_per_tok\": 4, \"hidden_size\": 64, \"moe_intermediate_size\": 32, "
                 "\"num_hash_layers\": 0}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: missing required key \"n_shared_experts\" (null if the model has none)");
    expect_error("{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v3\"}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: model_type: \"deepseek_v3\" does not match architectures (DeepseekV4ForCausalLM), "
                 "expected \"deepseek_v4\"");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("deepseek_v4");
    TCase *tc = tcase_create("deepseek_v4");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bundled_checkpoint);
    tcase_add_test(tc, bias_without_noaux_tc_refused);
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, hash_layers);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
