/*
 * tests/registry/test_layer.c - the layer lifecycle through the reference
 * plugin: declared parameters, loading (halves, TP narrowing, EP and EPLB
 * placement), what finalize refuses, forward's checks, and that sharded
 * layers sum to the unsharded one.
 */
#include <math.h>
#include <stdlib.h>

#include "tests/registry/registry_fixtures.h"

enum { E = 4, K = 2, H = 8, I = 6, M = 5 };

/* The checkpoint: full (unsharded) per-expert tensors, identical on every rank. */
typedef struct ckpt {
    float w1[E][I][H], w3[E][I][H], w2[E][H][I];
    float x[M][H];
    float topk_w[M][K];
    int32_t topk_ids[M][K];
    float logits[M][E];
} ckpt;

static void make_ckpt(ckpt *c, uint64_t stream)
{
    fmoe_rng r = fmoe_rng_for(stream);
    for (int e = 0; e < E; e++)
        for (int i = 0; i < I; i++)
            for (int h = 0; h < H; h++) {
                c->w1[e][i][h] = fmoe_rng_normal(&r) / sqrtf(H);
                c->w3[e][i][h] = fmoe_rng_normal(&r) / sqrtf(H);
                c->w2[e][h][i] = fmoe_rng_normal(&r) / sqrtf(I);
            }
    for (int t = 0; t < M; t++) {
        for (int h = 0; h < H; h++)
            c->x[t][h] = fmoe_rng_normal(&r);
        for (int e = 0; e < E; e++)
            c->logits[t][e] = fmoe_rng_normal(&r);
        /* Two distinct experts per token, positive weights. */
        int a = (int)(fmoe_rng_u64(&r) % E), b = (a + 1 + (int)(fmoe_rng_u64(&r) % (E - 1))) % E;
        c->topk_ids[t][0] = a;
        c->topk_ids[t][1] = b;
        c->topk_w[t][0] = fmoe_rng_uniform(&r, 0.1f, 1.0f);
        c->topk_w[t][1] = fmoe_rng_uniform(&r, 0.1f, 1.0f);
    }
}

static fmoe_context *ref_ctx(const char *config_text)
{
    static char cfg[600];
    const char *path = NULL;
    if (config_text) {
        char dir[512];
        fx_tempdir(dir, sizeof dir);
        snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
        fx_write(cfg, config_text);
        path = cfg;
    }
    const char *files[] = {REFERENCE_MANIFEST};
    return fx_context(files, 1, path, 0, NULL);
}

static fmoe_layer *make_layer(fmoe_context *ctx, const fmoe_layer_config *cfg)
{
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer *layer = NULL;
    fmoe_status st = fmoe_layer_create(ctx, cfg, &s, NULL, &layer);
    ck_assert_msg(st == FMOE_STATUS_OK, "create: %s", fmoe_last_error());
    return layer;
}

static void load_all(fmoe_layer *layer, ckpt *c)
{
    for (int e = 0; e < E; e++) {
        fmoe_tensor t;
        const int64_t ih[2] = {I, H}, hi[2] = {H, I};
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, c->w1[e]);
        ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", e, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, c->w3[e]);
        ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", e, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, hi, c->w2[e]);
        ck_assert_int_eq(fmoe_layer_load(layer, "w2_weight", e, FMOE_SHARD_W2, &t, NULL), FMOE_STATUS_OK);
    }
    ck_assert_msg(fmoe_layer_finalize(layer) == FMOE_STATUS_OK, "finalize: %s", fmoe_last_error());
}

static void forward_topk(fmoe_layer *layer, ckpt *c, float out[M][H])
{
    fmoe_tensor x, w, ids, y;
    const int64_t mh[2] = {M, H}, mk[2] = {M, K};
    fmoe_tensor_init(&x, FMOE_DTYPE_F32, 2, mh, c->x);
    fmoe_tensor_init(&y, FMOE_DTYPE_F32, 2, mh, out);
    fmoe_tensor_init(&w, FMOE_DTYPE_F32, 2, mk, c->topk_w);
    fmoe_tensor_init(&ids, FMOE_DTYPE_INT32, 2, mk, c->topk_ids);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &x, .topk_weights = &w, .topk_ids = &ids, .out = &y};
    ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "forward: %s", fmoe_last_error());
}

/* Independent float64 model of the layer (gated silu, routing given). */
static void model(const ckpt *c, double out[M][H])
{
    for (int t = 0; t < M; t++) {
        for (int h = 0; h < H; h++)
            out[t][h] = 0;
        for (int j = 0; j < K; j++) {
            int e = c->topk_ids[t][j];
            double a[I];
            for (int i = 0; i < I; i++) {
                double g = 0, u = 0;
                for (int h = 0; h < H; h++) {
                    g += (double)c->x[t][h] * c->w1[e][i][h];
                    u += (double)c->x[t][h] * c->w3[e][i][h];
                }
                a[i] = g / (1 + exp(-g)) * u;
            }
            for (int h = 0; h < H; h++) {
                double y = 0;
                for (int i = 0; i < I; i++)
                    y += a[i] * c->w2[e][h][i];
                out[t][h] += y * c->topk_w[t][j];
            }
        }
    }
}

static fmoe_layer_config base_cfg(void)
{
    fmoe_layer_config cfg = fx_layer();
    cfg.num_experts = E;
    cfg.top_k = K;
    cfg.hidden_size = H;
    cfg.intermediate_size = I;
    return cfg;
}

START_TEST(declared_params)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    cfg.has_correction_bias = 1;
    cfg.scoring = FMOE_SCORING_SIGMOID;
    fmoe_layer *layer = make_layer(ctx, &cfg);
    ck_assert_uint_eq(fmoe_layer_param_count(layer), 3);
    fmoe_param_info p = {.struct_size = sizeof p};
    ck_assert_int_eq(fmoe_layer_param(layer, 0, &p), FMOE_STATUS_OK);
    ck_assert_str_eq(p.name, "w13_weight");
    ck_assert_int_eq(p.dtype, FMOE_DTYPE_F32);
    ck_assert_uint_eq(p.ndim, 3);
    ck_assert_int_eq(p.shape[0], E);
    ck_assert_int_eq(p.shape[1], 2 * I);
    ck_assert_int_eq(p.shape[2], H);
    ck_assert_int_eq(p.projection, FMOE_PROJ_W13);
    ck_assert_uint_eq(p.per_expert, 1);
    ck_assert_int_eq(fmoe_layer_param(layer, 2, &p), FMOE_STATUS_OK);
    ck_assert_str_eq(p.name, "e_score_correction_bias");
    ck_assert_int_eq(p.role, FMOE_ROLE_ROUTING_BIAS);
    ck_assert_int_eq(p.shape[0], E);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(finalize_refuses_missing_and_names_them)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *layer = make_layer(ctx, &cfg);
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 1);
    const int64_t ih[2] = {I, H};
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, c->w1[2]);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 2, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_finalize(layer), FMOE_STATUS_BAD_STATE);
    ck_assert_str_eq(fmoe_last_error(),
                     "cannot finalize: 11 required parameter slot(s) not loaded: w13_weight expert 0 (w1), "
                     "w13_weight expert 0 (w3), w13_weight expert 1 (w1), w13_weight expert 1 (w3), "
                     "w13_weight expert 2 (w3), w13_weight expert 3 (w1), w13_weight expert 3 (w3), "
                     "w2_weight expert 0, ...");
    fmoe_tensor x;
    const int64_t mh[2] = {M, H};
    fmoe_tensor_init(&x, FMOE_DTYPE_F32, 2, mh, c->x);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &x, .out = &x};
    ck_assert_int_eq(fmoe_layer_forward(layer, &f), FMOE_STATUS_BAD_STATE);
    ck_assert_str_eq(fmoe_last_error(), "forward before fmoe_layer_finalize");
    free(c);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(load_errors_are_precise)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *layer = make_layer(ctx, &cfg);
    float buf[2 * I * H] = {0};
    fmoe_tensor t;
    const int64_t wrong[2] = {I, H + 1}, ih[2] = {I, H};
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, wrong, buf);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 1, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "w13_weight expert 1 (w3): tensor gives [6, 9], the layer expects [6, 8]");
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, buf);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 1, FMOE_SHARD_W2, &t, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "shard w2 cannot be loaded into w13_weight (a w13 parameter: w1 or w3)");
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weights", 1, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_NOT_FOUND);
    ck_assert_str_eq(fmoe_last_error(),
                     "layer (reference/unquantized) has no parameter 'w13_weights' (declared: w13_weight, w2_weight)");
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", E, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "w13_weight expert 4 (w1): expert id out of range [0, 4)");
    t.dtype = FMOE_DTYPE_BF16;
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 0, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "w13_weight expert 0 (w1): expected f32"));
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(forward_matches_float64_model)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *layer = make_layer(ctx, &cfg);
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 2);
    load_all(layer, c);
    float out[M][H];
    double want[M][H];
    forward_topk(layer, c, out);
    model(c, want);
    for (int t = 0; t < M; t++)
        for (int h = 0; h < H; h++)
            ck_assert_msg(fabs(out[t][h] - want[t][h]) <= 1e-5 * (1 + fabs(want[t][h])),
                          "out[%d][%d] = %g, model %g (seed %llu)", t, h, out[t][h], want[t][h],
                          (unsigned long long)fmoe_test_seed());
    free(c);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* Sum of the per-rank outputs of a sharded layer equals the unsharded one. */
static void check_shards_sum(int tp, int ep, int placement)
{
    fmoe_context *ctx = ref_ctx(NULL);
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 3);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *full = make_layer(ctx, &cfg);
    load_all(full, c);
    float want[M][H], part[M][H];
    forward_topk(full, c, want);
    double sum[M][H] = {{0}};
    for (int r = 0; r < tp * ep; r++) {
        fmoe_layer_config s = base_cfg();
        s.tp_size = (uint32_t)tp;
        s.tp_rank = tp > 1 ? (uint32_t)r : 0;
        s.ep_size = (uint32_t)ep;
        s.ep_rank = ep > 1 ? (uint32_t)r : 0;
        s.placement = placement;
        fmoe_layer *layer = make_layer(ctx, &s);
        load_all(layer, c);
        forward_topk(layer, c, part);
        for (int t = 0; t < M; t++)
            for (int h = 0; h < H; h++)
                sum[t][h] += part[t][h];
        fmoe_layer_destroy(layer);
    }
    for (int t = 0; t < M; t++)
        for (int h = 0; h < H; h++)
            ck_assert_msg(fabs(sum[t][h] - want[t][h]) <= 1e-5 * (1 + fabs(want[t][h])),
                          "tp %d ep %d: sum %g vs %g at [%d][%d]", tp, ep, sum[t][h], want[t][h], t, h);
    free(c);
    fmoe_layer_destroy(full);
    fmoe_context_destroy(ctx);
}

START_TEST(tp_shards_sum_to_unsharded)
{
    check_shards_sum(2, 1, FMOE_PLACEMENT_LINEAR);
    check_shards_sum(3, 1, FMOE_PLACEMENT_LINEAR);
}
END_TEST

START_TEST(ep_shards_sum_to_unsharded)
{
    check_shards_sum(1, 2, FMOE_PLACEMENT_LINEAR);
    check_shards_sum(1, 3, FMOE_PLACEMENT_LINEAR); /* 4 experts over 3 ranks: 2, 1, 1 */
    check_shards_sum(1, 4, FMOE_PLACEMENT_ROUND_ROBIN);
}
END_TEST

START_TEST(non_local_expert_not_taken)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    cfg.ep_size = 2;
    cfg.ep_rank = 1;
    fmoe_layer *layer = make_layer(ctx, &cfg);
    float buf[I * H];
    for (int i = 0; i < I * H; i++)
        buf[i] = 0.5f + (float)i;
    const int64_t ih[2] = {I, H};
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, buf);
    uint32_t taken = 7;
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 0, FMOE_SHARD_W1, &t, &taken), FMOE_STATUS_OK);
    ck_assert_uint_eq(taken, 0);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 3, FMOE_SHARD_W1, &t, &taken), FMOE_STATUS_OK);
    ck_assert_uint_eq(taken, 1);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(eplb_replicas_give_identical_output)
{
    fmoe_context *ctx = ref_ctx(NULL);
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 4);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *plain = make_layer(ctx, &cfg);
    load_all(plain, c);
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 3;
    fmoe_layer *eplb = make_layer(ctx, &cfg);
    load_all(eplb, c); /* logical experts fan out to their replicas */
    fmoe_tensor x, lg, y;
    const int64_t mh[2] = {M, H}, me[2] = {M, E};
    fmoe_tensor_init(&x, FMOE_DTYPE_F32, 2, mh, c->x);
    fmoe_tensor_init(&lg, FMOE_DTYPE_F32, 2, me, c->logits);
    float a[M][H], b[M][H];
    fmoe_tensor_init(&y, FMOE_DTYPE_F32, 2, mh, a);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &x, .router_logits = &lg, .out = &y};
    ck_assert_int_eq(fmoe_layer_forward(plain, &f), FMOE_STATUS_OK);
    fmoe_tensor_init(&y, FMOE_DTYPE_F32, 2, mh, b);
    ck_assert_msg(fmoe_layer_forward(eplb, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    free(c);
    fmoe_layer_destroy(plain);
    fmoe_layer_destroy(eplb);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(monolithic_equals_host_routing)
{
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 5);
    float a[M][H], b[M][H];
    float w_host[M][K], w_mono[M][K];
    int32_t id_host[M][K], id_mono[M][K];
    const char *configs[2] = {NULL, "[plugins.reference.options]\nmonolithic = true\n"};
    float(*outs[2])[H] = {a, b};
    float(*ws[2])[K] = {w_host, w_mono};
    int32_t(*ids[2])[K] = {id_host, id_mono};
    const char *methods[2] = {"unquantized", "unquantized-monolithic"};
    for (int v = 0; v < 2; v++) {
        fmoe_context *ctx = ref_ctx(configs[v]);
        fmoe_layer_config cfg = base_cfg();
        cfg.scoring = FMOE_SCORING_SIGMOID;
        cfg.renormalize = 1;
        fmoe_layer *layer = make_layer(ctx, &cfg);
        fmoe_candidate cand = {.struct_size = sizeof cand};
        const fmoe_selection *sel = fmoe_layer_selection(layer);
        fmoe_selection_candidate(sel, (uint32_t)fmoe_selection_chosen(sel), &cand);
        ck_assert_str_eq(cand.method, methods[v]);
        load_all(layer, c);
        fmoe_tensor x, lg, y, tw, ti;
        const int64_t mh[2] = {M, H}, me[2] = {M, E}, mk[2] = {M, K};
        fmoe_tensor_init(&x, FMOE_DTYPE_F32, 2, mh, c->x);
        fmoe_tensor_init(&lg, FMOE_DTYPE_F32, 2, me, c->logits);
        fmoe_tensor_init(&y, FMOE_DTYPE_F32, 2, mh, outs[v]);
        fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, mk, ws[v]);
        fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, mk, ids[v]);
        fmoe_forward_args f = {.struct_size = sizeof f,
                               .x = &x,
                               .router_logits = &lg,
                               .out = &y,
                               .topk_weights_out = &tw,
                               .topk_ids_out = &ti};
        ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
        /* A monolithic method cannot take routing from the caller. */
        fmoe_forward_args g = {.struct_size = sizeof g, .x = &x, .topk_weights = &tw, .topk_ids = &ti, .out = &y};
        ck_assert_int_eq(fmoe_layer_forward(layer, &g), v ? FMOE_STATUS_INVALID_ARGUMENT : FMOE_STATUS_OK);
        fmoe_layer_destroy(layer);
        fmoe_context_destroy(ctx);
    }
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    ck_assert_int_eq(memcmp(w_host, w_mono, sizeof w_host), 0);
    ck_assert_int_eq(memcmp(id_host, id_mono, sizeof id_host), 0);
    /* Weights renormalized to sum 1 per token. */
    for (int t = 0; t < M; t++)
        ck_assert_float_eq_tol(w_host[t][0] + w_host[t][1], 1.0f, 1e-6f);
    free(c);
}
END_TEST

START_TEST(zero_tokens_is_a_no_op)
{
    fmoe_context *ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_layer *layer = make_layer(ctx, &cfg);
    ckpt *c = malloc(sizeof *c);
    make_ckpt(c, 6);
    load_all(layer, c);
    fmoe_tensor x, w, ids, y;
    const int64_t mh[2] = {0, H}, mk[2] = {0, K};
    fmoe_tensor_init(&x, FMOE_DTYPE_F32, 2, mh, NULL);
    fmoe_tensor_init(&y, FMOE_DTYPE_F32, 2, mh, NULL);
    fmoe_tensor_init(&w, FMOE_DTYPE_F32, 2, mk, NULL);
    fmoe_tensor_init(&ids, FMOE_DTYPE_INT32, 2, mk, NULL);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &x, .topk_weights = &w, .topk_ids = &ids, .out = &y};
    ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    free(c);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* A layer on a (pretend) accelerator gets its tensors from the plugin's
 * allocator and copies (ABI 1.1), and computes what the host layer does. */
static fmoe_layer *device_layer(fmoe_context **ctx, const char *so, const char *name, ckpt *c)
{
    const char *files[] = {REFERENCE_MANIFEST, so};
    *ctx = fx_context(files, 2, NULL, 0, NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer_options o;
    fmoe_layer_options_init(&o);
    o.backend = name;
    fmoe_layer *layer = NULL;
    ck_assert_msg(fmoe_layer_create(*ctx, &cfg, &s, &o, &layer) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    load_all(layer, c);
    return layer;
}

START_TEST(device_layer_through_plugin_memory)
{
    ckpt c;
    make_ckpt(&c, 41);
    fmoe_context *ctx;
    fmoe_layer *layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE, "fixture_device", &c);
    const int64_t mh[2] = {M, H}, mk[2] = {M, K};
    fmoe_tensor dx, dy, dw, did, hx, hy, hw, hid;
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dx), FMOE_STATUS_OK);
    ck_assert_int_eq(dx.device_kind, FMOE_DEVICE_CUDA);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dy), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mk, &dw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_INT32, 2, mk, &did), FMOE_STATUS_OK);
    float out[M][H];
    fmoe_tensor_init(&hx, FMOE_DTYPE_F32, 2, mh, c.x);
    fmoe_tensor_init(&hy, FMOE_DTYPE_F32, 2, mh, out);
    fmoe_tensor_init(&hw, FMOE_DTYPE_F32, 2, mk, c.topk_w);
    fmoe_tensor_init(&hid, FMOE_DTYPE_INT32, 2, mk, c.topk_ids);
    /* Host tensors are refused by a device layer. */
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &hx, .topk_weights = &hw, .topk_ids = &hid, .out = &hy};
    ck_assert_int_eq(fmoe_layer_forward(layer, &f), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "cuda") != NULL, "%s", fmoe_last_error());
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dx, &hx), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dw, &hw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &did, &hid), FMOE_STATUS_OK);
    /* Routing tensors too: a host topk_ids beside device x/out would reach
     * the device kernels as a host pointer. */
    f = (fmoe_forward_args){.struct_size = sizeof f, .x = &dx, .topk_weights = &dw, .topk_ids = &hid, .out = &dy};
    ck_assert_int_eq(fmoe_layer_forward(layer, &f), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "topk_ids: on cpu:0, but the layer runs on cuda:0");
    f = (fmoe_forward_args){.struct_size = sizeof f, .x = &dx, .topk_weights = &hw, .topk_ids = &did, .out = &dy};
    ck_assert_int_eq(fmoe_layer_forward(layer, &f), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "topk_weights: on cpu:0, but the layer runs on cuda:0");
    f = (fmoe_forward_args){.struct_size = sizeof f, .x = &dx, .topk_weights = &dw, .topk_ids = &did, .out = &dy};
    ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(fmoe_layer_synchronize(layer, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &hy, &dy), FMOE_STATUS_OK);
    double want[M][H];
    model(&c, want);
    for (int t = 0; t < M; t++)
        for (int h = 0; h < H; h++)
            ck_assert_msg(fabs(out[t][h] - want[t][h]) <= 1e-5 + 1e-5 * fabs(want[t][h]), "y[%d][%d] %g vs %g", t, h,
                          out[t][h], want[t][h]);
    /* Copies go through the plugin: a host pointer dressed as device memory
     * is caught by it, with its message. */
    float fake[M][H];
    fmoe_tensor bad = dy;
    bad.data = fake;
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &bad, &hx), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fixture_device memory copy failed (invalid-argument): not fixture device "
                                        "memory of 160 bytes");
    /* Shapes must agree. */
    fmoe_tensor small;
    const int64_t one[2] = {1, H};
    fmoe_tensor_init(&small, FMOE_DTYPE_F32, 2, one, out);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &small, &dy), FMOE_STATUS_INVALID_ARGUMENT);
    fmoe_layer_tensor_free(layer, &dx);
    ck_assert_ptr_null(dx.data);
    fmoe_layer_tensor_free(layer, &dx); /* twice: a no-op */
    fmoe_layer_tensor_free(layer, &dy);
    fmoe_layer_tensor_free(layer, &dw);
    fmoe_layer_tensor_free(layer, &did);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* Timing through the plugin (ABI 1.2): every record is enqueued once, then
 * replayed warmup + reps times; the caller's failure is reported as its own. */
typedef struct replay_probe {
    fmoe_layer *layer;
    fmoe_forward_args args;
    uint32_t calls[4];
    uint32_t fail_at; /* index whose forward fails (UINT32_MAX: none) */
} replay_probe;

static fmoe_status probe_enqueue(void *ctx, uint32_t index, void *stream)
{
    replay_probe *p = ctx;
    ck_assert_ptr_nonnull(stream);
    ck_assert_uint_lt(index, 4);
    p->calls[index]++;
    if (index == p->fail_at) {
        fmoe_forward_args bad = p->args;
        bad.x = NULL;
        return fmoe_layer_forward(p->layer, &bad);
    }
    fmoe_forward_args a = p->args;
    a.stream = stream;
    return fmoe_layer_forward(p->layer, &a);
}

/* The expert load record of a layer on an EP group whose routing is on
 * the device: the plugin counts into the counters the core allocated there
 * (plugin ABI 1.5), and fmoe_layer_expert_load reads them back, adds the
 * host part, and resets both. Built for 1.4, the same plugin is handed no
 * counters and the record says UNSUPPORTED, naming it. */
static void ep_device_load(const char *so, const char *name, int counts)
{
    ckpt c;
    make_ckpt(&c, 47);
    const char *files[] = {REFERENCE_MANIFEST, so};
    fmoe_context *ctx = fx_context(files, 2, NULL, 0, NULL);
    fmoe_ep_group_options go;
    fmoe_ep_group_options_init(&go);
    go.backend = name;
    go.device_kind = FMOE_DEVICE_CUDA;
    go.device_index = 0;
    go.rank = 0;
    go.size = 1;
    go.max_tokens_per_rank = M;
    go.hidden_size = H;
    go.top_k = K;
    go.num_experts = E;
    go.act_dtype = FMOE_DTYPE_F32;
    fmoe_ep_unique_id id;
    ck_assert_msg(fmoe_ep_unique_id_make(ctx, &go, &id) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    go.unique_id = &id;
    fmoe_ep_group *g = NULL;
    ck_assert_msg(fmoe_ep_group_create(ctx, &go, &g) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_config cfg = base_cfg();
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer_options o;
    fmoe_layer_options_init(&o);
    o.ep_group = g;
    fmoe_layer *layer = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &s, &o, &layer) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    load_all(layer, &c);
    const int64_t mh[2] = {M, H}, mk[2] = {M, K};
    fmoe_tensor dx, dy, dw, did, hx, hw, hid;
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dx), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dy), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mk, &dw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_INT32, 2, mk, &did), FMOE_STATUS_OK);
    fmoe_tensor_init(&hx, FMOE_DTYPE_F32, 2, mh, c.x);
    fmoe_tensor_init(&hw, FMOE_DTYPE_F32, 2, mk, c.topk_w);
    fmoe_tensor_init(&hid, FMOE_DTYPE_INT32, 2, mk, c.topk_ids);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dx, &hx), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dw, &hw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &did, &hid), FMOE_STATUS_OK);
    uint64_t want[E] = {0}, got[E];
    for (int t = 0; t < M; t++)
        for (int j = 0; j < K; j++)
            want[c.topk_ids[t][j]]++;
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &dx, .topk_weights = &dw, .topk_ids = &did, .out = &dy};
    for (int round = 1; round <= 2; round++)
        ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_status st = fmoe_layer_expert_load(layer, got, E, 1);
    if (!counts) {
        ck_assert_int_eq(st, FMOE_STATUS_UNSUPPORTED);
        ck_assert_msg(strstr(fmoe_last_error(), "stayed on cuda:0") && strstr(fmoe_last_error(), name), "%s",
                      fmoe_last_error());
    } else {
        ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_last_error());
        for (int e = 0; e < E; e++) /* two forwards */
            ck_assert_msg(got[e] == 2 * want[e], "expert %d: %llu, expected %llu", e, (unsigned long long)got[e],
                          (unsigned long long)(2 * want[e]));
        /* The reset zeroed the device part: one more forward counts once. */
        ck_assert_msg(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
        ck_assert_int_eq(fmoe_layer_expert_load(layer, got, E, 0), FMOE_STATUS_OK);
        for (int e = 0; e < E; e++)
            ck_assert_uint_eq(got[e], want[e]);
        /* Read without reset: unchanged; then reset, and it reads zero. */
        ck_assert_int_eq(fmoe_layer_expert_load(layer, got, E, 1), FMOE_STATUS_OK);
        for (int e = 0; e < E; e++)
            ck_assert_uint_eq(got[e], want[e]);
        ck_assert_int_eq(fmoe_layer_expert_load(layer, got, E, 0), FMOE_STATUS_OK);
        for (int e = 0; e < E; e++)
            ck_assert_uint_eq(got[e], 0);
    }
    fmoe_layer_tensor_free(layer, &dx);
    fmoe_layer_tensor_free(layer, &dy);
    fmoe_layer_tensor_free(layer, &dw);
    fmoe_layer_tensor_free(layer, &did);
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
    fmoe_context_destroy(ctx);
}

START_TEST(device_ep_load_record)
{
    ep_device_load(FIXTURE_SO_FIXTURE_DEVICE_EP, "fixture_device_ep", 1);
    ep_device_load(FIXTURE_SO_FIXTURE_DEVICE_EP_V14, "fixture_device_ep_v14", 0);
}
END_TEST

START_TEST(device_layer_timed_by_plugin)
{
    ckpt c;
    make_ckpt(&c, 43);
    fmoe_context *ctx;
    fmoe_layer *layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE, "fixture_device", &c);
    const int64_t mh[2] = {M, H}, mk[2] = {M, K};
    fmoe_tensor dx, dy, dw, did, hx, hw, hid;
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dx), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &dy), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mk, &dw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_INT32, 2, mk, &did), FMOE_STATUS_OK);
    fmoe_tensor_init(&hx, FMOE_DTYPE_F32, 2, mh, c.x);
    fmoe_tensor_init(&hw, FMOE_DTYPE_F32, 2, mk, c.topk_w);
    fmoe_tensor_init(&hid, FMOE_DTYPE_INT32, 2, mk, c.topk_ids);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dx, &hx), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &dw, &hw), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &did, &hid), FMOE_STATUS_OK);
    replay_probe p = {
        .layer = layer,
        .args = {.struct_size = sizeof p.args, .x = &dx, .topk_weights = &dw, .topk_ids = &did, .out = &dy},
        .fail_at = UINT32_MAX};
    double sec[5] = {-1, -1, -1, -1, -1};
    ck_assert_msg(fmoe_layer_time_replays(layer, 3, 2, 5, probe_enqueue, &p, sec) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    /* Recorded once each, then 2 + 5 replays of records 0,1,2,0,1,2,0. */
    ck_assert_uint_eq(p.calls[0], 1 + 3);
    ck_assert_uint_eq(p.calls[1], 1 + 2);
    ck_assert_uint_eq(p.calls[2], 1 + 2);
    for (int r = 0; r < 5; r++)
        ck_assert_msg(sec[r] >= 0.0 && sec[r] < 10.0, "replay %d: %g s", r, sec[r]);
    /* The replays computed the layer. */
    float out[M][H];
    fmoe_tensor hy;
    fmoe_tensor_init(&hy, FMOE_DTYPE_F32, 2, mh, out);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &hy, &dy), FMOE_STATUS_OK);
    double want[M][H];
    model(&c, want);
    ck_assert_msg(fabs(out[1][2] - want[1][2]) <= 1e-5 + 1e-5 * fabs(want[1][2]), "%g vs %g", out[1][2], want[1][2]);
    /* A forward that fails is reported as the caller's, with its message. */
    p.fail_at = 1;
    ck_assert_int_eq(fmoe_layer_time_replays(layer, 3, 0, 1, probe_enqueue, &p, sec), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strncmp(fmoe_last_error(), "timing replays on fixture_device: forward 1: ", 45) == 0, "%s",
                  fmoe_last_error());
    ck_assert_int_eq(fmoe_layer_time_replays(layer, 0, 0, 1, probe_enqueue, &p, sec), FMOE_STATUS_INVALID_ARGUMENT);
    double rate = 0;
    ck_assert_msg(fmoe_layer_device_copy_rate(layer, 1u << 20, 3, &rate) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(rate > 1e6, "copy rate %g", rate);
    fmoe_layer_tensor_free(layer, &dx);
    fmoe_layer_tensor_free(layer, &dy);
    fmoe_layer_tensor_free(layer, &dw);
    fmoe_layer_tensor_free(layer, &did);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    /* A plugin of an older minor, and a host layer, do not time. */
    layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE_V10, "fixture_device_v10", &c);
    ck_assert_int_eq(fmoe_layer_time_replays(layer, 1, 0, 1, probe_enqueue, &p, sec), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(fmoe_last_error(), "plugin fixture_device_v10 does not time cuda:0 (time_replays needs plugin ABI "
                                        "1.2 fmoe_device_memory.time_replays); time with a host clock instead");
    ck_assert_int_eq(fmoe_layer_device_copy_rate(layer, 1u << 20, 1, &rate), FMOE_STATUS_UNSUPPORTED);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    layer = make_layer(ctx, &cfg);
    ck_assert_int_eq(fmoe_layer_time_replays(layer, 1, 0, 1, probe_enqueue, &p, sec), FMOE_STATUS_UNSUPPORTED);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* The device's read rate (ABI 1.4) beside its copy rate: forwarded with
 * the plugin's value, refused with the reason by a plugin built for 1.3
 * (its table holds the slot, the negotiated minor does not) or 1.0, and
 * by a host layer. */
START_TEST(device_read_rate_through_plugin)
{
    ckpt c;
    make_ckpt(&c, 44);
    fmoe_context *ctx;
    fmoe_layer *layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE, "fixture_device", &c);
    double rate = 0;
    /* The pretend device folds its buffer on the host clock, checked. */
    ck_assert_msg(fmoe_layer_device_read_rate(layer, 1u << 20, 3, &rate) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(rate > 1e6 && rate < 1e15, "read rate %g", rate);
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 0, 3, &rate), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "fmoe_layer_device_read_rate: layer and bytes_per_second are required, bytes and reps at least 1");
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 1u << 20, 0, &rate), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 1u << 20, 1, NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_layer_device_read_rate(NULL, 1u << 20, 1, &rate), FMOE_STATUS_INVALID_ARGUMENT);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    /* Exactly what the plugin reports, each slot its own value. */
    layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE_RATES, "fixture_device_rates", &c);
    ck_assert_msg(fmoe_layer_device_read_rate(layer, 1u << 30, 2, &rate) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_double_eq(rate, 3e9);
    ck_assert_msg(fmoe_layer_device_copy_rate(layer, 1u << 30, 2, &rate) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_double_eq(rate, 2e9);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    /* Built for 1.3: copy rate yes, read rate no, and the output untouched. */
    layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE_RATES_V13, "fixture_device_rates_v13", &c);
    ck_assert_msg(fmoe_layer_device_copy_rate(layer, 1u << 30, 2, &rate) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_double_eq(rate, 2e9);
    rate = -1;
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 1u << 30, 2, &rate), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(fmoe_last_error(), "plugin fixture_device_rates_v13 does not measure cuda:0 (read_rate needs "
                                        "plugin ABI 1.4 fmoe_device_memory.read_rate); use its copy rate instead");
    ck_assert_double_eq(rate, -1);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE_V10, "fixture_device_v10", &c);
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 1u << 20, 1, &rate), FMOE_STATUS_UNSUPPORTED);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    layer = make_layer(ctx, &cfg);
    ck_assert_int_eq(fmoe_layer_device_read_rate(layer, 1u << 20, 1, &rate), FMOE_STATUS_UNSUPPORTED);
    ck_assert_int_eq(fmoe_layer_device_copy_rate(layer, 1u << 20, 1, &rate), FMOE_STATUS_UNSUPPORTED);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* A plugin built for ABI 1.0 has no memory table, whatever its struct holds. */
START_TEST(device_memory_needs_abi_1_1)
{
    ckpt c;
    make_ckpt(&c, 42);
    fmoe_context *ctx;
    fmoe_layer *layer = device_layer(&ctx, FIXTURE_SO_FIXTURE_DEVICE_V10, "fixture_device_v10", &c);
    const int64_t mh[2] = {M, H};
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &t), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(fmoe_last_error(), "plugin fixture_device_v10 lends no device memory for cuda:0 (plugin ABI 1.1 "
                                        "fmoe_device_memory); allocate with the device runtime instead");
    ck_assert_int_eq(fmoe_layer_synchronize(layer, NULL), FMOE_STATUS_UNSUPPORTED);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    /* A host layer: host memory, host copies, nothing to wait for. */
    ctx = ref_ctx(NULL);
    fmoe_layer_config cfg = base_cfg();
    layer = make_layer(ctx, &cfg);
    fmoe_tensor a, b;
    ck_assert_int_eq(fmoe_layer_tensor_alloc(layer, FMOE_DTYPE_F32, 2, mh, &a), FMOE_STATUS_OK);
    ck_assert_int_eq(a.device_kind, FMOE_DEVICE_CPU);
    fmoe_tensor_init(&b, FMOE_DTYPE_F32, 2, mh, c.x);
    ck_assert_int_eq(fmoe_layer_tensor_copy(layer, &a, &b), FMOE_STATUS_OK);
    ck_assert_float_eq(((float *)a.data)[H + 1], c.x[1][1]);
    ck_assert_int_eq(fmoe_layer_synchronize(layer, NULL), FMOE_STATUS_OK);
    fmoe_layer_tensor_free(layer, &a);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* An unquantized f32 layer on the one plugin `so` is refused with `status`
 * and an error containing `want`. */
static void layer_refused(const char *so, fmoe_status status, const char *want)
{
    const char *files[] = {so};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_layer_config cfg = base_cfg();
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer *layer = NULL;
    ck_assert_int_eq(fmoe_layer_create(ctx, &cfg, &s, NULL, &layer), status);
    ck_assert_ptr_null(layer);
    ck_assert_msg(strstr(fmoe_last_error(), want) != NULL, "error \"%s\", expected \"%s\"", fmoe_last_error(), want);
    fmoe_context_destroy(ctx);
}

/* A plugin's declared shape is an input: one whose size overflows is the
 * plugin's fault, said with its name and the shape, before any load. */
START_TEST(overflowing_param_blames_the_plugin)
{
    layer_refused(FIXTURE_SO_FIXTURE_HUGE_PARAM, FMOE_STATUS_PLUGIN_ERROR,
                  "fixture_huge_param: parameter huge declares shape [1048576, 1048576, 1048576, 1048576] of f32");
}
END_TEST

/* A plugin's parameter descriptors are replies from outside: each way one
 * can be broken is refused at layer creation, as the plugin's fault, with
 * its name (fixture_bad_param_N, fixture_plugin.c FIXTURE_BAD_PARAM). */
START_TEST(broken_param_descriptors_blame_the_plugin)
{
    static const struct {
        const char *so, *name, *error;
    } cases[] = {
        {FIXTURE_SO_FIXTURE_BAD_PARAM_1, "fixture_bad_param_1", "parameter descriptor 2 is NULL or too small"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_2, "fixture_bad_param_2", "parameter descriptor 2 is NULL or too small"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_3, "fixture_bad_param_3", "parameter 2 has no name or a reserved one"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_4, "fixture_bad_param_4", "parameter 2 has no name or a reserved one"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_5, "fixture_bad_param_5", "parameter extra has non-storage dtype "},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_6, "fixture_bad_param_6", "parameter extra has ndim 0"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_7, "fixture_bad_param_7", "parameter extra has empty axis 1"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_8, "fixture_bad_param_8", "parameter extra: per_expert is 2, expected 0 or 1"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_9, "fixture_bad_param_9", "parameter extra axis 0 has 1000 experts, expected 4"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_10, "fixture_bad_param_10", "parameter extra: shard_axis 2 out of range"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_11, "fixture_bad_param_11", "parameter extra: unknown projection or role"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_12, "fixture_bad_param_12", "parameter extra: only 2-D slices can be transposed"},
        {FIXTURE_SO_FIXTURE_BAD_PARAM_13, "fixture_bad_param_13", "parameter w13_weight declared twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s: %s", cases[i].name, cases[i].error);
        layer_refused(cases[i].so, FMOE_STATUS_PLUGIN_ERROR, want);
    }
}
END_TEST

/* roundup_sizes is the plugin's to pad, never to shrink: a shrinking one
 * and a failing one each refuse the layer, naming plugin and method. */
START_TEST(roundup_that_shrinks_or_fails_refuses_the_layer)
{
    static const struct {
        const char *so, *error;
        fmoe_status status;
    } cases[] = {
        {FIXTURE_SO_FIXTURE_ROUNDUP_1,
         "fixture_roundup_1/unquantized roundup_sizes shrank the layer (hidden 8 -> 8, intermediate 6 -> 5)",
         FMOE_STATUS_PLUGIN_ERROR},
        {FIXTURE_SO_FIXTURE_ROUNDUP_2,
         "fixture_roundup_2/unquantized roundup_sizes failed (unsupported): fixture cannot pad",
         FMOE_STATUS_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        layer_refused(cases[i].so, cases[i].status, cases[i].error);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("layer");
    TCase *tc = tcase_create("layer");
    tcase_add_test(tc, declared_params);
    tcase_add_test(tc, finalize_refuses_missing_and_names_them);
    tcase_add_test(tc, load_errors_are_precise);
    tcase_add_test(tc, forward_matches_float64_model);
    tcase_add_test(tc, tp_shards_sum_to_unsharded);
    tcase_add_test(tc, ep_shards_sum_to_unsharded);
    tcase_add_test(tc, non_local_expert_not_taken);
    tcase_add_test(tc, eplb_replicas_give_identical_output);
    tcase_add_test(tc, monolithic_equals_host_routing);
    tcase_add_test(tc, zero_tokens_is_a_no_op);
    tcase_add_test(tc, device_layer_through_plugin_memory);
    tcase_add_test(tc, device_memory_needs_abi_1_1);
    tcase_add_test(tc, device_layer_timed_by_plugin);
    tcase_add_test(tc, device_ep_load_record);
    tcase_add_test(tc, device_read_rate_through_plugin);
    tcase_add_test(tc, overflowing_param_blames_the_plugin);
    tcase_add_test(tc, broken_param_descriptors_blame_the_plugin);
    tcase_add_test(tc, roundup_that_shrinks_or_fails_refuses_the_layer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 12);
}
