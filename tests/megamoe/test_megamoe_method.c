/*
 * tests/megamoe/test_megamoe_method.c - plugins/megamoe's method and plugin
 * tables called directly, as the host would, without a GPU:
 *
 *   - create plans the symmetric buffer (the plan equals mm_layout_plan's
 *     for the layer's dims; a ring_tokens outside its bounds is refused
 *     there) and declares vLLM's four parameters; a layer outside the
 *     kernel's contract is refused with the rule;
 *   - finalize transforms seeded random weights: the L1 values equal the
 *     spec's interleave row by row, the scales equal mm_transform_sf's,
 *     the L2 values are read in place;
 *   - apply refuses: more tokens than the buffer holds (INVALID_ARGUMENT,
 *     never truncated), otherwise UNSUPPORTED (no SM100 kernel yet);
 *   - the path choice with a fake device side (mm_device_path): 9.0 takes
 *     the SM90 path (H, I multiples of 32 only; an EP rank's expert base), finalize hands
 *     the loaded weights and sm90_plan.h's plan to the device side, apply
 *     checks tokens and tensors and hands over the call; 10.x gets the
 *     SM100 contract and "not served yet"; other capabilities and a
 *     failing runtime are refused with the reason, after the layer rules;
 *   - the plugin (when built: it needs the CUDA toolkit, not a device):
 *     init's options, the probe (score 0 without a usable device, with the
 *     runtime's reason), and the query, which names the first rule a layer
 *     breaks, then the device's path (served on 9.0 only).
 */
#include <stdlib.h>

#include "plugins/megamoe/megamoe.h"
#include "tests/cpu/direct_plugin.h"
#include "tests/test_util.h"

enum { E = 4, K = 2, H = 512, I = 512, TOKENS = 16 };

static fmoe_layer_config layer(void)
{
    fmoe_layer_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.num_experts = E;
    c.top_k = K;
    c.hidden_size = H;
    c.intermediate_size = I;
    c.activation = FMOE_ACT_SILU;
    c.gated = 1;
    c.swiglu_limit = 10.0f;
    c.act_dtype = FMOE_DTYPE_BF16;
    c.scoring = FMOE_SCORING_SQRTSOFTPLUS;
    c.renormalize = 1;
    c.routed_scaling_factor = 1.5f;
    c.tp_size = c.ep_size = 1;
    c.max_num_tokens = TOKENS;
    return c;
}

/* MM_SCHEME_KEY, field by field (the parser lives in libfusedmoe, which
 * this test does not link). */
static fmoe_scheme scheme(void)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = FMOE_DTYPE_FP4_E2M1X2;
    s.w_strategy = FMOE_QSTRATEGY_GROUP;
    s.w_group_size = 32;
    s.w_scale_dtype = FMOE_DTYPE_UE8M0;
    s.w_actorder = FMOE_ACTORDER_NONE;
    s.a_dtype = FMOE_DTYPE_FP8_E4M3FN;
    s.a_strategy = FMOE_QSTRATEGY_GROUP;
    s.a_group_size = 32;
    s.a_dynamic = 1;
    s.a_symmetric = 1;
    return s;
}

static fmoe_status create(mm_state *st, const fmoe_layer_config *c, const fmoe_scheme *s, void **instance)
{
    fmoe_create_args a = {.struct_size = sizeof a,
                          .state = st,
                          .config = c,
                          .scheme = s,
                          .device_kind = FMOE_DEVICE_CUDA,
                          .hidden_size = c->hidden_size,
                          .intermediate_per_rank = c->intermediate_size,
                          .num_local_experts = c->num_experts / c->ep_size,
                          .num_global_experts = c->num_experts};
    dp_error[0] = '\0';
    fmoe_status r = mm_method.create(&a);
    *instance = r == FMOE_STATUS_OK ? a.instance : NULL;
    return r;
}

static void destroy(void *instance)
{
    fmoe_destroy_args d = {.struct_size = sizeof d, .instance = instance};
    mm_method.destroy(&d);
}

START_TEST(create_plans_and_declares)
{
    mm_state st = {.host = &dp_host};
    fmoe_layer_config c = layer();
    fmoe_scheme s = scheme();
    void *in = NULL;
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);

    /* The plan is host.h's for these dims with our ring rule. */
    mm_weights w;
    mm_instance_weights(in, &w);
    mm_dims d = {.ranks = 1, .experts = E, .max_tokens = TOKENS, .topk = K, .hidden = H, .inter = I};
    mm_layout want;
    char why[256];
    ck_assert_int_eq(mm_layout_plan(&d, 0, &want, why, sizeof why), 0);
    ck_assert_uint_eq(w.layout->tokens, 384);
    ck_assert_uint_eq(w.layout->ring, want.ring_max);
    ck_assert_uint_eq(w.layout->total, want.total);
    ck_assert_int_eq(memcmp(w.layout->view, want.view, sizeof want.view), 0);
    ck_assert_ptr_null(w.l1); /* nothing transformed before finalize */

    fmoe_declare_params_args da = {.struct_size = sizeof da, .instance = in};
    ck_assert_int_eq(mm_method.declare_params(&da), FMOE_STATUS_OK);
    ck_assert_uint_eq(da.n_params, 4);
    const struct {
        const char *name;
        fmoe_dtype dtype;
        int64_t d1, d2;
    } params[4] = {
        {"w13_weight", FMOE_DTYPE_FP4_E2M1X2, 2 * I, H / 2},
        {"w2_weight", FMOE_DTYPE_FP4_E2M1X2, H, I / 2},
        {"w13_weight_scale", FMOE_DTYPE_UE8M0, 2 * I, H / 32},
        {"w2_weight_scale", FMOE_DTYPE_UE8M0, H, I / 32},
    };
    for (int i = 0; i < 4; i++) {
        const fmoe_param_desc *p = da.params[i];
        ck_assert_str_eq(p->name, params[i].name);
        ck_assert_int_eq(p->dtype, params[i].dtype);
        ck_assert_uint_eq(p->ndim, 3);
        ck_assert_int_eq(p->shape[0], E);
        ck_assert_int_eq(p->shape[1], params[i].d1);
        ck_assert_int_eq(p->shape[2], params[i].d2);
        ck_assert_uint_eq(p->per_expert, 1);
    }
    destroy(in);

    /* ring_tokens is planned at create: one outside [ring_min, ring_max] is refused there. */
    st.ring_tokens = want.ring_max + 384;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_ptr_null(in);
    ck_assert_msg(strstr(dp_error, "ring") != NULL, "%s", dp_error);
    st.ring_tokens = want.ring_min;
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);
    mm_instance_weights(in, &w);
    ck_assert_uint_eq(w.layout->ring, want.ring_min);
    destroy(in);
}
END_TEST

START_TEST(create_refuses_with_the_rule)
{
    mm_state st = {.host = &dp_host};
    fmoe_scheme s = scheme();
    void *in = NULL;
    fmoe_layer_config c = layer();
    c.has_bias = 1;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "MegaMoE: no expert biases");
    ck_assert_ptr_null(in);
    c = layer();
    c.hidden_size = 256; /* a multiple of 128, not of 512 */
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "512") != NULL, "%s", dp_error);
    s.a_group_size = 128;
    c = layer();
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "MegaMoE serves " MM_SCHEME_KEY " only (MXFP4 weights x FP8 per-32 activations)");
}
END_TEST

static uint8_t *random_bytes(fmoe_rng *r, size_t n, uint8_t lo, uint8_t span)
{
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(lo + fmoe_rng_u64(r) % span);
    return p;
}

static fmoe_tensor param_tensor(fmoe_dtype dt, int64_t d1, int64_t d2, void *data)
{
    fmoe_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.dtype = dt;
    t.ndim = 3;
    t.shape[0] = E;
    t.shape[1] = d1;
    t.shape[2] = d2;
    t.strides[0] = d1 * d2;
    t.strides[1] = d2;
    t.strides[2] = 1;
    t.data = data;
    return t;
}

START_TEST(finalize_transforms_and_apply_refuses)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed);
    mm_state st = {.host = &dp_host};
    fmoe_layer_config c = layer();
    fmoe_scheme s = scheme();
    void *in = NULL;
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);

    size_t row13 = H / 2, row2 = I / 2;
    uint8_t *w13 = random_bytes(&r, (size_t)E * 2 * I * row13, 0, 255);
    uint8_t *w2 = random_bytes(&r, (size_t)E * H * row2, 0, 255);
    uint8_t *s13 = random_bytes(&r, (size_t)E * 2 * I * (H / 32), 110, 30); /* UE8M0 bytes near 2^0 */
    uint8_t *s2 = random_bytes(&r, (size_t)E * H * (I / 32), 110, 30);
    fmoe_tensor t[4] = {param_tensor(FMOE_DTYPE_FP4_E2M1X2, 2 * I, H / 2, w13),
                        param_tensor(FMOE_DTYPE_FP4_E2M1X2, H, I / 2, w2),
                        param_tensor(FMOE_DTYPE_UE8M0, 2 * I, H / 32, s13),
                        param_tensor(FMOE_DTYPE_UE8M0, H, I / 32, s2)};
    const fmoe_tensor *ptrs[4] = {&t[0], &t[1], &t[2], &t[3]};

    /* The wrong number of parameters is an internal error, not a crash. */
    fmoe_finalize_args fa = {.struct_size = sizeof fa, .instance = in, .params = ptrs, .n_params = 3};
    ck_assert_int_eq(mm_method.finalize(&fa), FMOE_STATUS_INTERNAL);
    fa.n_params = 4;
    ck_assert_msg(mm_method.finalize(&fa) == FMOE_STATUS_OK, "%s", dp_error);

    mm_weights w;
    mm_instance_weights(in, &w);
    ck_assert_ptr_nonnull(w.l1);
    /* L1 values: row n of each expert is row mm_interleave_src(n) of [w1; w3]. */
    int moved = 0;
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t n = 0; n < 2 * I; n++) {
            const uint8_t *got = w.l1 + ((size_t)e * 2 * I + n) * row13;
            const uint8_t *src = w13 + ((size_t)e * 2 * I + mm_interleave_src(n, 2 * I)) * row13;
            ck_assert_msg(memcmp(got, src, row13) == 0, "seed %llu: expert %u L1 row %u", (unsigned long long)seed, e,
                          n);
            moved += mm_interleave_src(n, 2 * I) != n;
        }
    ck_assert_int_gt(moved, 0);
    /* Scales: what the host library makes of the loaded bytes. */
    uint64_t n13 = mm_sf_words(E, 2 * I, H), n2 = mm_sf_words(E, H, I);
    uint32_t *want13 = malloc(n13 * 4), *want2 = malloc(n2 * 4);
    char why[256];
    ck_assert_int_eq(mm_transform_sf(s13, want13, E, 2 * I, H, 1, why, sizeof why), 0);
    ck_assert_int_eq(mm_transform_sf(s2, want2, E, H, I, 0, why, sizeof why), 0);
    ck_assert_int_eq(memcmp(w.l1_sf, want13, n13 * 4), 0);
    ck_assert_int_eq(memcmp(w.l2_sf, want2, n2 * 4), 0);
    /* and the L1 ones are not just packed: interleave then UTCCP moved rows. */
    uint32_t *plain = malloc(n13 * 4);
    ck_assert_int_eq(mm_transform_sf(s13, plain, E, 2 * I, H, 0, why, sizeof why), 0);
    ck_assert_int_ne(memcmp(w.l1_sf, plain, n13 * 4), 0);
    ck_assert_ptr_eq(w.l2, w2); /* read in place */

    /* apply: the token check first, then the missing kernel. */
    uint16_t *x = calloc((size_t)(TOKENS + 1) * H, sizeof *x);
    ck_assert_ptr_nonnull(x);
    fmoe_tensor tx;
    memset(&tx, 0, sizeof tx);
    tx.struct_size = sizeof tx;
    tx.dtype = FMOE_DTYPE_BF16;
    tx.ndim = 2;
    tx.shape[0] = TOKENS + 1;
    tx.shape[1] = H;
    tx.data = x;
    fmoe_apply_args aa = {.struct_size = sizeof aa, .instance = in, .x = &tx, .out = &tx};
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(dp_error, "MegaMoE got 17 tokens, but the symmetric buffer was sized for 16 (max_num_tokens; "
                               "384 rows after rounding to 384): refused, not truncated");
    tx.shape[0] = TOKENS;
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "not served yet") != NULL, "%s", dp_error);

    destroy(in);
    free(x);
    free(w13);
    free(w2);
    free(s13);
    free(s2);
    free(want13);
    free(want2);
    free(plain);
}
END_TEST

/* ---- the path choice, with a fake device side ----------------------------------- */

static int fake_major, fake_minor, fake_fail;
static int fake_creates, fake_forwards, fake_destroys;
static mm90_plan fake_plan;
static mm90_host_weights fake_weights;
static mm_call fake_call;
static mm90_layer *const FAKE_LAYER = (mm90_layer *)&fake_creates;

static int fake_capability(int index, int *major, int *minor, char *why, size_t cap)
{
    ck_assert_int_eq(index, 0);
    if (fake_fail) {
        snprintf(why, cap, "fake runtime: no device");
        return -1;
    }
    *major = fake_major;
    *minor = fake_minor;
    return 0;
}

static int fake_create(int device, const mm90_plan *plan, const mm90_host_weights *w, mm90_layer **out, char *why,
                       size_t cap)
{
    (void)why;
    (void)cap;
    ck_assert_int_eq(device, 0);
    fake_plan = *plan;
    fake_weights = *w;
    fake_creates++;
    *out = FAKE_LAYER;
    return 0;
}

static int fake_forward(mm90_layer *l, const mm_call *c, char *why, size_t cap)
{
    (void)why;
    (void)cap;
    ck_assert_ptr_eq(l, FAKE_LAYER);
    fake_call = *c;
    fake_forwards++;
    return 0;
}

static void fake_destroy(mm90_layer *l)
{
    ck_assert_ptr_eq(l, FAKE_LAYER);
    fake_destroys++;
}

static const mm_device_path fake_path = {fake_capability, fake_create, fake_forward, fake_destroy};

static int fake_ep_step(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap)
{
    (void)l, (void)c, (void)why, (void)cap;
    return 0;
}

static fmoe_tensor matrix(fmoe_dtype dt, int64_t rows, int64_t cols, int64_t ld, void *data)
{
    fmoe_tensor t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.dtype = dt;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = ld;
    t.strides[1] = 1;
    t.data = data;
    return t;
}

START_TEST(sm90_path_with_a_fake_device)
{
    mm_state st = {.host = &dp_host, .path = &fake_path};
    fmoe_scheme s = scheme();
    void *in = NULL;
    fake_fail = 0;
    fake_major = 9;
    fake_minor = 0;
    fake_creates = fake_forwards = fake_destroys = 0;

    /* 9.0: sizes the SM100 kernel refuses (not multiples of 128) run here. */
    fmoe_layer_config c = layer();
    c.hidden_size = 96;
    c.intermediate_size = 64;
    c.swiglu_limit = 7.0f;
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);
    mm_weights w;
    mm_instance_weights(in, &w);
    ck_assert_int_eq(w.sm90, 1);
    ck_assert_ptr_null(w.l1); /* no SM100 transforms on this path */
    uint8_t w13[E * 2 * 64 * 48], w2[E * 96 * 32], s13[E * 2 * 64 * 3], s2[E * 96 * 2];
    fmoe_tensor t[4] = {param_tensor(FMOE_DTYPE_FP4_E2M1X2, 2 * 64, 48, w13),
                        param_tensor(FMOE_DTYPE_FP4_E2M1X2, 96, 32, w2), param_tensor(FMOE_DTYPE_UE8M0, 2 * 64, 3, s13),
                        param_tensor(FMOE_DTYPE_UE8M0, 96, 2, s2)};
    const fmoe_tensor *ptrs[4] = {&t[0], &t[1], &t[2], &t[3]};
    fmoe_finalize_args fa = {.struct_size = sizeof fa, .instance = in, .params = ptrs, .n_params = 4};
    ck_assert_msg(mm_method.finalize(&fa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(fake_creates, 1);
    mm90_plan want;
    char why[256];
    ck_assert_int_eq(mm90_plan_make(E, 96, 64, K, TOKENS, &want, why, sizeof why), 0);
    ck_assert_uint_eq(fake_plan.pairs, (uint64_t)TOKENS * K);
    ck_assert_uint_eq(fake_plan.weight_bytes, want.weight_bytes);
    ck_assert_uint_eq(fake_plan.work_bytes, want.work_bytes);
    for (int i = 0; i < MM90_WORK_VIEWS; i++)
        ck_assert_uint_eq(fake_plan.work[i].offset, want.work[i].offset);
    ck_assert_ptr_eq(fake_weights.w13, w13);
    ck_assert_ptr_eq(fake_weights.w13_sf, s13);
    ck_assert_ptr_eq(fake_weights.w2, w2);
    ck_assert_ptr_eq(fake_weights.w2_sf, s2);

    /* apply: tokens first, then each tensor, then the call handed over. */
    static uint16_t x[(TOKENS + 1) * 100], out[(TOKENS + 1) * 100];
    static float wt[(TOKENS + 1) * K];
    static int32_t ids[(TOKENS + 1) * K];
    fmoe_tensor tx = matrix(FMOE_DTYPE_BF16, TOKENS + 1, 96, 100, x), tw = matrix(FMOE_DTYPE_F32, TOKENS + 1, K, K, wt);
    fmoe_tensor ti = matrix(FMOE_DTYPE_INT32, TOKENS + 1, K, K, ids),
                to = matrix(FMOE_DTYPE_BF16, TOKENS + 1, 96, 96, out);
    int stream_token = 0;
    fmoe_apply_args aa = {.struct_size = sizeof aa,
                          .instance = in,
                          .x = &tx,
                          .topk_weights = &tw,
                          .topk_ids = &ti,
                          .out = &to,
                          .stream = &stream_token};
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(dp_error, "MegaMoE got 17 tokens, but the layer's workspace was sized for 16 (max_num_tokens): "
                               "refused, not truncated");
    tx.shape[0] = tw.shape[0] = ti.shape[0] = to.shape[0] = TOKENS;
    tw.dtype = FMOE_DTYPE_BF16;
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dp_error, "'topk_weights' wrong dtype") != NULL, "%s", dp_error);
    tw.dtype = FMOE_DTYPE_F32;
    to.shape[1] = 95;
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dp_error, "'out' wrong shape") != NULL, "%s", dp_error);
    to.shape[1] = 96;
    tx.strides[1] = 2;
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dp_error, "'x' not row-major") != NULL, "%s", dp_error);
    tx.strides[1] = 1;
    ck_assert_int_eq(fake_forwards, 0);
    ck_assert_msg(mm_method.apply(&aa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(fake_forwards, 1);
    ck_assert_ptr_eq(fake_call.x, x);
    ck_assert_int_eq(fake_call.x_ld, 100);
    ck_assert_ptr_eq(fake_call.weights, wt);
    ck_assert_ptr_eq(fake_call.ids, ids);
    ck_assert_ptr_eq(fake_call.out, out);
    ck_assert_int_eq(fake_call.out_ld, 96);
    ck_assert_uint_eq(fake_call.m, TOKENS);
    ck_assert_float_eq(fake_call.swiglu_limit, 7.0f);
    ck_assert_ptr_eq(fake_call.stream, &stream_token);
    ck_assert_int_eq(fake_call.expert_base, 0); /* one device: local = global ids */
    destroy(in);
    ck_assert_int_eq(fake_destroys, 1);

    /* a CPU device is not CUDA device 0 */
    c = layer();
    fmoe_create_args ca = {.struct_size = sizeof ca,
                           .state = &st,
                           .config = &c,
                           .scheme = &s,
                           .device_kind = FMOE_DEVICE_CPU,
                           .hidden_size = H,
                           .intermediate_per_rank = I,
                           .num_local_experts = E,
                           .num_global_experts = E};
    ck_assert_int_eq(mm_method.create(&ca), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "MegaMoE runs on CUDA devices only");

    /* 9.0 serves an EP rank: rank 1 of 2 holds experts [E/2, E) (linear
     * placement), and its forward masks the pairs of the others by that
     * base (the route kernel; the EP transport hands it every received
     * row with global ids). */
    c = layer();
    c.hidden_size = 96;
    c.intermediate_size = 64;
    c.ep_size = 2;
    c.ep_rank = 1;
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);
    for (int i = 0; i < 4; i++)
        t[i].shape[0] = E / 2;
    fa.instance = in;
    ck_assert_msg(mm_method.finalize(&fa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_uint_eq(fake_plan.experts, E / 2);
    aa.instance = in;
    ck_assert_msg(mm_method.apply(&aa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(fake_call.expert_base, E / 2);
    /* the fused EP forward needs the device side's three ep_ functions:
     * this fake has none, so the instance leaves the group to the
     * transport's path */
    mm_ep_view view;
    ck_assert_int_eq(mm_instance_ep_view(in, &view), -1);
    destroy(in);

    /* with them, the fused forward gets the finalized layer, its expert
     * base, local experts, workspace rows and clamp */
    const mm_device_path fused_path = {.capability = fake_capability,
                                       .create = fake_create,
                                       .forward = fake_forward,
                                       .destroy = fake_destroy,
                                       .ep_dispatch = fake_ep_step,
                                       .ep_experts = fake_ep_step,
                                       .ep_combine = fake_ep_step};
    mm_state st_fused = st;
    st_fused.path = &fused_path;
    c.max_num_tokens = 6;
    ck_assert_msg(create(&st_fused, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(mm_instance_ep_view(in, &view), -1); /* not finalized */
    fa.instance = in;
    ck_assert_msg(mm_method.finalize(&fa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(mm_instance_ep_view(in, &view), 0);
    ck_assert_ptr_eq(view.path, &fused_path);
    ck_assert_ptr_eq(view.dev, FAKE_LAYER);
    ck_assert_int_eq(view.expert_base, E / 2);
    ck_assert_uint_eq(view.local, E / 2);
    ck_assert_uint_eq(view.max_rows, 6);
    ck_assert_float_eq(view.swiglu_limit, c.swiglu_limit);
    destroy(in);

    /* ... and refuses sizes off the 32 grid. */
    c = layer();
    c.intermediate_size = 48;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "multiples of 32") != NULL, "%s", dp_error);

    /* 10.x: the SM100 contract, then "not served yet". */
    fake_major = 10;
    c = layer();
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "never run on an SM100 device and is not served yet") != NULL, "%s", dp_error);
    c.hidden_size = 96;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "multiple of 128") != NULL, "%s", dp_error);
    /* 8.9: no path; a failing runtime: its reason; the layer rules first. */
    fake_major = 8;
    fake_minor = 9;
    c = layer();
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "compute capability 8.9 has no path") != NULL, "%s", dp_error);
    fake_fail = 1;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "fake runtime: no device");
    c.act_dtype = FMOE_DTYPE_F16;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "MegaMoE: activations and output are bf16");
    ck_assert_int_eq(fake_creates, 3); /* the one-device layer and the two EP ranks' */
}
END_TEST

/* The SM100 kernel's side, faked: what create100 / forward100 were handed. */
static int fake100_creates, fake100_forwards, fake100_destroys;
static mm_layout fake100_layout;
static mm100_host_weights fake100_weights;
static mm_call fake100_call;
static mm100_layer *const FAKE100 = (mm100_layer *)&fake100_creates;

static int fake_create100(int device, const mm_layout *l, const mm100_host_weights *w, mm100_layer **out, char *why,
                          size_t cap)
{
    (void)device, (void)why, (void)cap;
    fake100_layout = *l;
    fake100_weights = *w;
    fake100_creates++;
    *out = FAKE100;
    return 0;
}

static int fake_forward100(mm100_layer *l, const mm_call *c, char *why, size_t cap)
{
    (void)why, (void)cap;
    ck_assert_ptr_eq(l, FAKE100);
    fake100_call = *c;
    fake100_forwards++;
    return 0;
}

static void fake_destroy100(mm100_layer *l)
{
    ck_assert_ptr_eq(l, FAKE100);
    fake100_destroys++;
}

static const mm_device_path fake_path100 = {fake_capability, fake_create,     fake_forward,   fake_destroy,
                                            fake_create100,  fake_forward100, fake_destroy100};

START_TEST(sm100_kernel_only_with_the_option)
{
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed + 100);
    fmoe_scheme s = scheme();
    void *in = NULL;
    fake_fail = 0;
    fake_major = 10;
    fake_minor = 0;
    fake100_creates = fake100_forwards = fake100_destroys = 0;

    /* 10.0 without the option: refused, naming it */
    mm_state st = {.host = &dp_host, .path = &fake_path100};
    fmoe_layer_config c = layer();
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "never run on an SM100 device") && strstr(dp_error, "sm100_unverified = true"), "%s",
                  dp_error);
    /* with it, but a device side without the kernel */
    mm_state st0 = {.host = &dp_host, .path = &fake_path, .sm100_unverified = 1};
    ck_assert_int_eq(create(&st0, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(dp_error, "MegaMoE: this build has no SM100 kernel");
    /* an EP group: the peers' windows are not wired */
    st.sm100_unverified = 1;
    c.ep_size = 2;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "peers' symmetric windows") != NULL, "%s", dp_error);
    /* the layer rules still come first */
    c = layer();
    c.hidden_size = 96;
    ck_assert_int_eq(create(&st, &c, &s, &in), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(dp_error, "multiple of 128") != NULL, "%s", dp_error);

    /* served: create plans the buffer, finalize hands it and the
     * transformed weights over */
    c = layer();
    ck_assert_msg(create(&st, &c, &s, &in) == FMOE_STATUS_OK, "%s", dp_error);
    mm_weights w;
    mm_instance_weights(in, &w);
    ck_assert_int_eq(w.sm90, 0);
    mm_dims d = {.ranks = 1, .experts = E, .max_tokens = TOKENS, .topk = K, .hidden = H, .inter = I};
    mm_layout want;
    char why[256];
    ck_assert_int_eq(mm_layout_plan(&d, 0, &want, why, sizeof why), 0);
    ck_assert_uint_eq(w.layout->total, want.total);
    uint8_t *w13 = random_bytes(&r, (size_t)E * 2 * I * (H / 2), 0, 255);
    uint8_t *w2 = random_bytes(&r, (size_t)E * H * (I / 2), 0, 255);
    uint8_t *s13 = random_bytes(&r, (size_t)E * 2 * I * (H / 32), 110, 30);
    uint8_t *s2 = random_bytes(&r, (size_t)E * H * (I / 32), 110, 30);
    fmoe_tensor t[4] = {param_tensor(FMOE_DTYPE_FP4_E2M1X2, 2 * I, H / 2, w13),
                        param_tensor(FMOE_DTYPE_FP4_E2M1X2, H, I / 2, w2),
                        param_tensor(FMOE_DTYPE_UE8M0, 2 * I, H / 32, s13),
                        param_tensor(FMOE_DTYPE_UE8M0, H, I / 32, s2)};
    const fmoe_tensor *ptrs[4] = {&t[0], &t[1], &t[2], &t[3]};
    fmoe_finalize_args fa = {.struct_size = sizeof fa, .instance = in, .params = ptrs, .n_params = 4};
    ck_assert_msg(mm_method.finalize(&fa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(fake100_creates, 1);
    ck_assert_int_eq(fake_creates, 0); /* not the SM90 side */
    mm_instance_weights(in, &w);
    ck_assert_uint_eq(fake100_layout.total, want.total);
    for (int i = 0; i < MM_VIEW_COUNT; i++)
        ck_assert_uint_eq(fake100_layout.view[i].offset, want.view[i].offset);
    ck_assert_ptr_nonnull(w.l1);
    ck_assert_ptr_eq(fake100_weights.l1, w.l1);
    ck_assert_ptr_eq(fake100_weights.l1_sf, w.l1_sf);
    ck_assert_ptr_eq(fake100_weights.l2, w2);
    ck_assert_ptr_eq(fake100_weights.l2_sf, w.l2_sf);
    ck_assert_int_eq(mm_method.finalize(&fa), FMOE_STATUS_INTERNAL); /* twice */

    /* apply: tokens, then tensors, then the call handed over */
    uint16_t *x = calloc((size_t)(TOKENS + 1) * H, 2), *out = calloc((size_t)(TOKENS + 1) * H, 2);
    float wt[(TOKENS + 1) * K];
    int32_t ids[(TOKENS + 1) * K];
    fmoe_tensor tx = matrix(FMOE_DTYPE_BF16, TOKENS + 1, H, H, x), tw = matrix(FMOE_DTYPE_F32, TOKENS + 1, K, K, wt);
    fmoe_tensor ti = matrix(FMOE_DTYPE_INT32, TOKENS + 1, K, K, ids),
                to = matrix(FMOE_DTYPE_BF16, TOKENS + 1, H, H, out);
    int stream_token = 0;
    fmoe_apply_args aa = {.struct_size = sizeof aa,
                          .instance = in,
                          .x = &tx,
                          .topk_weights = &tw,
                          .topk_ids = &ti,
                          .out = &to,
                          .stream = &stream_token};
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dp_error, "got 17 tokens") && strstr(dp_error, "refused, not truncated"), "%s", dp_error);
    tx.shape[0] = tw.shape[0] = ti.shape[0] = to.shape[0] = TOKENS;
    ti.dtype = FMOE_DTYPE_INT64;
    ck_assert_int_eq(mm_method.apply(&aa), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(dp_error, "'topk_ids' wrong dtype") != NULL, "%s", dp_error);
    ti.dtype = FMOE_DTYPE_INT32;
    ck_assert_int_eq(fake100_forwards, 0);
    ck_assert_msg(mm_method.apply(&aa) == FMOE_STATUS_OK, "%s", dp_error);
    ck_assert_int_eq(fake100_forwards, 1);
    ck_assert_ptr_eq(fake100_call.x, x);
    ck_assert_ptr_eq(fake100_call.ids, ids);
    ck_assert_ptr_eq(fake100_call.weights, wt);
    ck_assert_ptr_eq(fake100_call.out, out);
    ck_assert_int_eq(fake100_call.out_ld, H);
    ck_assert_uint_eq(fake100_call.m, TOKENS);
    ck_assert_float_eq(fake100_call.swiglu_limit, 10.0f);
    ck_assert_ptr_eq(fake100_call.stream, &stream_token);
    destroy(in);
    ck_assert_int_eq(fake100_destroys, 1);
    free(x), free(out), free(w13), free(w2), free(s13), free(s2);
}
END_TEST

#ifdef MEGAMOE_PLUGIN
static fmoe_status query(const fmoe_plugin *p, void *state, int32_t kind, const fmoe_layer_config *c,
                         const fmoe_scheme *s, char *reason, size_t cap)
{
    fmoe_query_args q = {.struct_size = sizeof q,
                         .state = state,
                         .config = c,
                         .scheme = s,
                         .scheme_key = MM_SCHEME_KEY,
                         .device_kind = kind};
    fmoe_status r = p->query(&q);
    snprintf(reason, cap, "%s", q.reason);
    /* the plugin's own copy of the method (this test links another) */
    ck_assert(r == FMOE_STATUS_OK ? q.method && strcmp(q.method->name, mm_method.name) == 0 && q.score == 100
                                  : q.method == NULL);
    ck_assert(reason[0] != '\0');
    return r;
}

START_TEST(plugin_table)
{
    const fmoe_plugin *p = dp_load(MEGAMOE_PLUGIN);
    ck_assert_str_eq(p->name, "megamoe");
    dp_check_entry_refuses_other_major(MEGAMOE_PLUGIN, "megamoe");
    const char *const words[] = {"ring_tokens", "384", NULL};
    dp_refused(p, "ring_tokens", "100", words);
    const char *const unverified[] = {"sm100_unverified", "true or false", NULL};
    dp_refused(p, "sm100_unverified", "maybe", unverified);
    const char *const fused[] = {"ep_fused", "true or false", NULL};
    dp_refused(p, "ep_fused", "1x", fused);
    const char *const unknown[] = {"unknown option 'isa'", "ring_tokens", "sm100_unverified", "ep_fused", NULL};
    dp_refused(p, "isa", "auto", unknown);
    const char *kv[] = {"ring_tokens", "768", "ep_fused", "false"};
    void *state = NULL;
    ck_assert_int_eq(dp_init(p, kv, 2, &state), FMOE_STATUS_OK);

    /* The probe: a usable device is the SM90 path (runs) or the SM100 path
     * (kernel missing, said so) at score 100; without one, score 0 and the
     * reason. */
    fmoe_device_report rep = dp_probe(p, state);
    ck_assert_int_eq(rep.kind, FMOE_DEVICE_CUDA);
    ck_assert(rep.reason[0] != '\0');
    int sm90 = rep.available && strncmp(rep.arch, "sm_90 ", 6) == 0;
    if (rep.available) {
        ck_assert_uint_eq(rep.score, 100);
        ck_assert_msg(strstr(rep.reason, sm90 ? "SM90 path" : "not served yet") != NULL, "%s", rep.reason);
    } else {
        ck_assert_uint_eq(rep.score, 0);
    }

    /* The query: the first rule a layer breaks, in serve.c's order. */
    char reason[256];
    fmoe_layer_config c = layer();
    fmoe_scheme s = scheme();
    ck_assert_int_eq(query(p, state, FMOE_DEVICE_CPU, &c, &s, reason, sizeof reason), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(reason, "MegaMoE runs on CUDA devices only");
    c.act_dtype = FMOE_DTYPE_F16;
    c.has_bias = 1; /* also broken, but later in the list */
    ck_assert_int_eq(query(p, state, FMOE_DEVICE_CUDA, &c, &s, reason, sizeof reason), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(reason, "MegaMoE: activations and output are bf16");
    c.act_dtype = FMOE_DTYPE_BF16;
    ck_assert_int_eq(query(p, state, FMOE_DEVICE_CUDA, &c, &s, reason, sizeof reason), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(reason, "MegaMoE: no expert biases");
    c = layer();
    c.ep_size = 2;
    c.placement = FMOE_PLACEMENT_ROUND_ROBIN;
    ck_assert_int_eq(query(p, state, FMOE_DEVICE_CUDA, &c, &s, reason, sizeof reason), FMOE_STATUS_UNSUPPORTED);
    ck_assert_msg(strstr(reason, "round_robin") != NULL, "%s", reason);
    /* A layer that breaks no rule: served on an SM90 device (this machine's
     * device 0 when the probe says so), else the device's reason. */
    c = layer();
    fmoe_status r = query(p, state, FMOE_DEVICE_CUDA, &c, &s, reason, sizeof reason);
    ck_assert_msg(r == (sm90 ? FMOE_STATUS_OK : FMOE_STATUS_UNSUPPORTED), "%s", reason);
    if (sm90)
        ck_assert_msg(strstr(reason, "MegaMoE SM90 path") != NULL, "%s", reason);
    p->shutdown(state);
}
END_TEST
#endif

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_method");
    TCase *tc = tcase_create("method");
    tcase_add_test(tc, create_plans_and_declares);
    tcase_add_test(tc, create_refuses_with_the_rule);
    tcase_add_test(tc, finalize_transforms_and_apply_refuses);
    tcase_add_test(tc, sm90_path_with_a_fake_device);
    tcase_add_test(tc, sm100_kernel_only_with_the_option);
#ifdef MEGAMOE_PLUGIN
    tcase_add_test(tc, plugin_table);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
#ifdef MEGAMOE_PLUGIN
    return fmoe_test_main(suite(), 6);
#else
    return fmoe_test_main(suite(), 5);
#endif
}
