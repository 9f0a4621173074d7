/*
 * tests/cpu_arm/test_plugin.c - the cpu_arm plugin against the reference
 * plugin through the public API: one context loads both, and each case
 * creates the same W4A8 layer twice (backend pinned to "cpu_arm", then to
 * "reference"), loads the same random checkpoint tensors (int4 values held
 * in int8, never all zero; f32 channel or bf16 group scales; biases),
 * forwards the same random inputs and routing, and compares with the
 * conformance suite's W4A8 tolerance (docs/CONFORMANCE.md: |d| <= 2e-2 +
 * 2e-2 |ref| per element, NMSE <= 5e-4).
 *
 * Every case runs once per kernel level (plugin option isa = portable,
 * dotprod, i8mm; a level the CPU lacks falls back to the best HWCAP offers,
 * which the query's reason names). Cases: channel and group scales; silu,
 * clamped silu, swigluoai; f32/bf16/f16; biases; weights on the input;
 * EP ranks with ids outside the rank and outside [0, E); TP ranks; many
 * tokens over several threads.
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "plugins/cpu_arm/kernels.h"
#include "tests/cpu_arm/hwcap_arg.h"
#include "tests/test_util.h"

typedef struct pcase {
    const char *key;
    uint32_t E, H, I, topk, M;
    int32_t activation;
    float limit;
    fmoe_dtype act;
    int bias, on_input, bad_ids;
    uint32_t tp, tp_rank, ep, ep_rank;
} pcase;

static pcase pcase_init(const char *key)
{
    return (pcase){.key = key,
                   .E = 8,
                   .H = 128,
                   .I = 64,
                   .topk = 2,
                   .M = 13,
                   .activation = FMOE_ACT_SILU,
                   .act = FMOE_DTYPE_F32,
                   .tp = 1,
                   .ep = 1};
}

/* A context with both plugins; cpu_arm gets isa / threads options. */
static fmoe_context *context(const char *isa, uint32_t threads)
{
    const char *files[] = {REFERENCE_MANIFEST, CPU_ARM_MANIFEST};
    char path[] = "/tmp/fmoe-cpu-arm-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[plugins.cpu_arm.options]\nisa = \"%s\"\n", isa);
    if (threads)
        fprintf(f, "threads = %u\n", threads);
    fclose(f);
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.plugin_files = files;
    o.n_plugin_files = 2;
    o.ignore_environment = 1;
    o.isolated = 1;
    o.config_path = path;
    fmoe_context *ctx = NULL;
    fmoe_status st = fmoe_context_create(&o, &ctx);
    unlink(path);
    ck_assert_msg(st == FMOE_STATUS_OK, "context: %s", fmoe_last_error());
    return ctx;
}

/* The checkpoint of one layer: per expert w1, w3 [I, H], w2 [H, I] int4 in
 * int8, their scales, biases (act dtype). */
typedef struct ckpt {
    int8_t *w1, *w3, *w2;
    void *s1, *s3, *s2;
    fmoe_dtype sd;
    uint32_t G13, G2;
    void *b1, *b3, *b2;
} ckpt;

static void store(void *dst, fmoe_dtype dt, size_t i, float v)
{
    fmoe_store_float(dst, dt, (int64_t)i, v);
}

static void fill_int4(fmoe_rng *r, int8_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (int8_t)((int)(fmoe_rng_u64(r) % 16) - 8);
    w[0] = w[0] ? w[0] : 3; /* never all zero */
}

static void fill_scales(fmoe_rng *r, void *s, fmoe_dtype dt, size_t n, uint32_t fan_in)
{
    /* int4 values have RMS ~4.6: scale them to N(0, 1/fan_in)-like weights. */
    float base = 1.0f / (4.6f * sqrtf((float)fan_in));
    for (size_t i = 0; i < n; i++)
        store(s, dt, i, base * fmoe_rng_uniform(r, 0.5f, 1.5f));
}

static ckpt make_ckpt(const pcase *c, const fmoe_scheme *s, fmoe_rng *r)
{
    ckpt k = {.sd = s->w_scale_dtype};
    uint32_t g = s->w_strategy == FMOE_QSTRATEGY_GROUP ? s->w_group_size : 0;
    k.G13 = g ? c->H / g : 1;
    k.G2 = g ? c->I / g : 1;
    size_t sz = fmoe_dtype_size(k.sd), a = fmoe_dtype_size(c->act);
    size_t E = c->E, HI = (size_t)c->H * c->I;
    k.w1 = malloc(E * HI);
    k.w3 = malloc(E * HI);
    k.w2 = malloc(E * HI);
    k.s1 = malloc(E * c->I * k.G13 * sz);
    k.s3 = malloc(E * c->I * k.G13 * sz);
    k.s2 = malloc(E * c->H * k.G2 * sz);
    k.b1 = malloc(E * c->I * a);
    k.b3 = malloc(E * c->I * a);
    k.b2 = malloc(E * c->H * a);
    ck_assert(k.w1 && k.w3 && k.w2 && k.s1 && k.s3 && k.s2 && k.b1 && k.b3 && k.b2);
    fill_int4(r, k.w1, E * HI);
    fill_int4(r, k.w3, E * HI);
    fill_int4(r, k.w2, E * HI);
    fill_scales(r, k.s1, k.sd, E * c->I * k.G13, c->H);
    fill_scales(r, k.s3, k.sd, E * c->I * k.G13, c->H);
    fill_scales(r, k.s2, k.sd, E * c->H * k.G2, c->I);
    for (size_t i = 0; i < E * c->I; i++) {
        store(k.b1, c->act, i, 0.1f * fmoe_rng_normal(r));
        store(k.b3, c->act, i, 0.1f * fmoe_rng_normal(r));
    }
    for (size_t i = 0; i < E * c->H; i++)
        store(k.b2, c->act, i, 0.1f * fmoe_rng_normal(r));
    return k;
}

static void free_ckpt(ckpt *k)
{
    void *p[] = {k->w1, k->w3, k->w2, k->s1, k->s3, k->s2, k->b1, k->b3, k->b2};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

static void load(fmoe_layer *layer, const char *name, uint32_t e, int32_t shard, fmoe_dtype dt, uint32_t ndim,
                 int64_t d0, int64_t d1, const void *base, size_t per_expert)
{
    int64_t shape[2] = {d0, d1};
    fmoe_tensor t;
    const char *data = (const char *)base + (size_t)e * per_expert * fmoe_dtype_size(dt);
    ck_assert_int_eq(fmoe_tensor_init(&t, dt, ndim, shape, (void *)data), FMOE_STATUS_OK);
    fmoe_status st = fmoe_layer_load(layer, name, (int32_t)e, shard, &t, NULL);
    ck_assert_msg(st == FMOE_STATUS_OK, "load %s expert %u: %s", name, e, fmoe_last_error());
}

/* Create the layer on `backend`, load the checkpoint, finalize, forward. */
static void run(fmoe_context *ctx, const char *backend, const pcase *c, const fmoe_scheme *s, const ckpt *k,
                const void *x, const float *w, const int32_t *ids, void *out, const char *want_reason)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = c->E;
    cfg.top_k = c->topk;
    cfg.hidden_size = c->H;
    cfg.intermediate_size = c->I;
    cfg.gated = 1;
    cfg.activation = c->activation;
    cfg.swiglu_limit = c->limit;
    cfg.has_bias = (uint32_t)c->bias;
    cfg.act_dtype = c->act;
    cfg.apply_router_weight_on_input = (uint32_t)c->on_input;
    cfg.tp_size = c->tp;
    cfg.tp_rank = c->tp_rank;
    cfg.ep_size = c->ep;
    cfg.ep_rank = c->ep_rank;
    cfg.max_num_tokens = c->M;
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = backend;
    fmoe_layer *layer = NULL;
    fmoe_status st = fmoe_layer_create(ctx, &cfg, s, &lo, &layer);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s on %s: create: %s", c->key, backend, fmoe_last_error());
    if (want_reason) {
        const fmoe_selection *sel = fmoe_layer_selection(layer);
        fmoe_candidate cand = {.struct_size = sizeof cand};
        ck_assert_int_ge(fmoe_selection_chosen(sel), 0);
        ck_assert_int_eq(fmoe_selection_candidate(sel, (uint32_t)fmoe_selection_chosen(sel), &cand), FMOE_STATUS_OK);
        ck_assert_str_eq(cand.plugin, backend);
        ck_assert_msg(strstr(cand.reason, want_reason), "query reason '%s' does not say '%s'", cand.reason,
                      want_reason);
    }
    size_t HI = (size_t)c->H * c->I;
    uint32_t H = c->H, I = c->I;
    for (uint32_t e = 0; e < c->E; e++) {
        load(layer, "w13_weight", e, FMOE_SHARD_W1, FMOE_DTYPE_INT8, 2, I, H, k->w1, HI);
        load(layer, "w13_weight", e, FMOE_SHARD_W3, FMOE_DTYPE_INT8, 2, I, H, k->w3, HI);
        load(layer, "w2_weight", e, FMOE_SHARD_W2, FMOE_DTYPE_INT8, 2, H, I, k->w2, HI);
        load(layer, "w13_weight_scale", e, FMOE_SHARD_W1, k->sd, 2, I, k->G13, k->s1, (size_t)I * k->G13);
        load(layer, "w13_weight_scale", e, FMOE_SHARD_W3, k->sd, 2, I, k->G13, k->s3, (size_t)I * k->G13);
        load(layer, "w2_weight_scale", e, FMOE_SHARD_W2, k->sd, 2, H, k->G2, k->s2, (size_t)H * k->G2);
        if (c->bias) {
            load(layer, "w13_bias", e, FMOE_SHARD_W1, c->act, 1, I, 0, k->b1, I);
            load(layer, "w13_bias", e, FMOE_SHARD_W3, c->act, 1, I, 0, k->b3, I);
            load(layer, "w2_bias", e, FMOE_SHARD_W2, c->act, 1, H, 0, k->b2, H);
        }
    }
    st = fmoe_layer_finalize(layer);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s on %s: finalize: %s", c->key, backend, fmoe_last_error());
    int64_t xs[2] = {c->M, c->H}, rs[2] = {c->M, c->topk};
    fmoe_tensor tx, tw, ti, to;
    fmoe_tensor_init(&tx, c->act, 2, xs, (void *)x);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, rs, (void *)w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, rs, (void *)ids);
    fmoe_tensor_init(&to, c->act, 2, xs, out);
    fmoe_forward_args fa = {.struct_size = sizeof fa, .x = &tx, .topk_weights = &tw, .topk_ids = &ti, .out = &to};
    st = fmoe_layer_forward(layer, &fa);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s on %s: forward: %s", c->key, backend, fmoe_last_error());
    fmoe_layer_destroy(layer);
}

/* Run case c on both backends at every kernel level; compare. */
static void check_case(const pcase *c, uint64_t stream, uint32_t threads)
{
    fmoe_scheme s;
    ck_assert_msg(fmoe_scheme_parse(c->key, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_rng r = fmoe_rng_for(stream);
    ckpt k = make_ckpt(c, &s, &r);
    size_t n = (size_t)c->M * c->H, a = fmoe_dtype_size(c->act);
    void *x = malloc(n * a), *got = malloc(n * a), *ref = malloc(n * a);
    float *w = malloc(sizeof(float) * c->M * c->topk);
    int32_t *ids = malloc(sizeof(int32_t) * c->M * c->topk);
    ck_assert(x && got && ref && w && ids);
    for (size_t i = 0; i < n; i++)
        store(x, c->act, i, fmoe_rng_normal(&r) + 0.3f);
    for (uint32_t t = 0; t < c->M; t++)
        for (uint32_t j = 0; j < c->topk; j++) {
            size_t q = (size_t)t * c->topk + j;
            /* distinct experts per token */
            ids[q] = (int32_t)((t * 3 + j * (c->E / c->topk) + (uint32_t)(fmoe_rng_u64(&r) % 2)) % c->E);
            w[q] = fmoe_rng_uniform(&r, 0.1f, 1.0f);
            if (c->bad_ids && fmoe_rng_u64(&r) % 5 == 0)
                ids[q] = fmoe_rng_u64(&r) % 2 ? -1 : (int32_t)(c->E + 3);
        }
    fmoe_context *ctx = context("i8mm", 0);
    run(ctx, "reference", c, &s, &k, x, w, ids, ref, NULL);
    fmoe_context_destroy(ctx);
    /* The level in use: the lower of the option and HWCAP. */
    int hw = carm_isa_detect();
    for (int isa = 0; isa < CARM_ISA_COUNT; isa++) {
        ctx = context(carm_isa_name(isa), threads);
        char want[64];
        snprintf(want, sizeof want, "%s kernels", carm_isa_name(isa < hw ? isa : hw));
        memset(got, 0xFF, n * a); /* NaN: every element must be written */
        run(ctx, "cpu_arm", c, &s, &k, x, w, ids, got, want);
        fmoe_context_destroy(ctx);
        double num = 0, den = 0, worst = 0;
        size_t bad = 0, at = 0;
        for (size_t i = 0; i < n; i++) {
            double g = fmoe_load_float(got, c->act, (int64_t)i), e = fmoe_load_float(ref, c->act, (int64_t)i);
            double d = fabs(g - e);
            ck_assert_msg(isfinite(g), "%s [%s]: element %zu not written (%g)", c->key, carm_isa_name(isa), i, g);
            num += d * d;
            den += e * e;
            if (d > 2e-2 + 2e-2 * fabs(e))
                bad++;
            if (d > worst) {
                worst = d;
                at = i;
            }
        }
        double nmse = den > 0 ? num / den : num;
        printf("# %s %s act %s M %u [%s]: nmse %.3g, worst %.3g at %zu\n", c->key, fmoe_activation_name(c->activation),
               fmoe_dtype_name(c->act), c->M, carm_isa_name(isa), nmse, worst, at);
        fflush(stdout);
        ck_assert_msg(den > 0, "%s: reference output is all zero", c->key);
        ck_assert_msg(bad == 0 && nmse <= 5e-4, "%s [%s]: %zu elements outside tolerance, nmse %g, worst %g at %zu",
                      c->key, carm_isa_name(isa), bad, nmse, worst, at);
    }
    free(x);
    free(got);
    free(ref);
    free(w);
    free(ids);
    free_ckpt(&k);
}

#define CHANNEL "int4:channel/int8:token:dynamic:asym"
#define GROUP32 "int4:group32:scale-bf16/int8:token:dynamic:asym"

START_TEST(channel_silu)
{
    pcase c = pcase_init(CHANNEL);
    check_case(&c, 1, 0);
}
END_TEST

START_TEST(group_swigluoai_bias_bf16)
{
    pcase c = pcase_init(GROUP32);
    c.activation = FMOE_ACT_SWIGLUOAI;
    c.limit = 7.0f;
    c.bias = 1;
    c.act = FMOE_DTYPE_BF16;
    c.H = 96;
    c.M = 7;
    check_case(&c, 2, 0);
}
END_TEST

START_TEST(group64_clamped_silu_f16)
{
    pcase c = pcase_init("int4:group64:scale-bf16/int8:token:dynamic:asym");
    c.limit = 7.0f;
    c.act = FMOE_DTYPE_F16;
    c.bias = 1;
    check_case(&c, 3, 0);
}
END_TEST

START_TEST(weight_on_input)
{
    pcase c = pcase_init(CHANNEL);
    c.topk = 1;
    c.on_input = 1;
    c.H = 72; /* K padded to 80 */
    c.I = 40;
    check_case(&c, 4, 0);
}
END_TEST

START_TEST(expert_parallel)
{
    for (uint32_t rank = 0; rank < 2; rank++) {
        pcase c = pcase_init(GROUP32);
        c.ep = 2;
        c.ep_rank = rank;
        c.bad_ids = 1;
        c.bias = 1;
        check_case(&c, 5 + rank, 0);
    }
}
END_TEST

START_TEST(tensor_parallel)
{
    for (uint32_t rank = 0; rank < 2; rank++) {
        pcase c = pcase_init(CHANNEL);
        c.tp = 2;
        c.tp_rank = rank;
        c.bias = 1;
        check_case(&c, 7 + rank, 0);
    }
}
END_TEST

START_TEST(many_tokens_threads)
{
    pcase c = pcase_init(GROUP32);
    c.M = 300;
    c.topk = 4;
    c.E = 6;
    check_case(&c, 9, 3);
}
END_TEST

int main(int argc, char **argv)
{
    if (carm_test_args_parse(argc, argv) != 0 || !carm_test_hwcap_as_expected())
        return EXIT_FAILURE;
    Suite *s = suite_create("cpu_arm_plugin");
    TCase *tc = tcase_create("vs_reference");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, channel_silu);
    tcase_add_test(tc, group_swigluoai_bias_bf16);
    tcase_add_test(tc, group64_clamped_silu_f16);
    tcase_add_test(tc, weight_on_input);
    tcase_add_test(tc, expert_parallel);
    tcase_add_test(tc, tensor_parallel);
    tcase_add_test(tc, many_tokens_threads);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 7);
}
