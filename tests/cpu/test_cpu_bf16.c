/*
 * tests/cpu/test_cpu_bf16.c - the CPU plugin's bf16 method end to end
 * through the public API (bf16 weights and activations: the bgemm kernels
 * for experts with few rows, oneDNN above) against a float64 model with
 * the reference's rounding points (docs/REFERENCE-METHODS.md): h, act(h)
 * and y rounded to bf16, the routing weights applied after GEMM2 in slot
 * order, out rounded to bf16.
 *
 * meson runs it once per kernel path, --isa=LEVEL (and once with
 * --amx=false), which become the plugin options isa and amx in each
 * context's configuration (tests/cpu/option_args.h; a path this machine
 * lacks is clamped by the plugin and the run repeats the best one).
 * Cases: decode (1, 4 and 16 tokens over many experts: every expert on the
 * kernels), a prefill-sized call whose experts fall on both sides
 * of the kernels' 16 rows, odd H and I (K odd, off the 32 block; N off the
 * 64-row tile), biases, non-gated; bad option values refused through the
 * host (the plugin fails, the reason names the option).
 *
 * The model computes in double; the plugin sums in f32 in another order,
 * so a bf16 rounding of h, act(h), y or out may land one step (2^-8
 * relative) apart. The bound: per element 2e-2 + 2e-2*|model| (conform's
 * bf16 row), and a normalized squared error below 1e-4, which a wrong
 * weight, row or scale cannot meet; the output must not be zero.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "tests/cpu/option_args.h"
#include "tests/test_util.h"

static cpu_test_args args;

typedef struct bcase {
    uint32_t E, H, I, k, M;
    int gated, bias;
} bcase;

typedef struct blayer {
    const bcase *c;
    uint32_t rI;
    uint16_t *w13, *w2, *b13, *b2; /* bf16 as the checkpoint holds them */
} blayer;

static uint16_t *bf16_normal(fmoe_rng *r, size_t n, float scale)
{
    uint16_t *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = fmoe_f32_to_bf16(scale * fmoe_rng_normal(r));
    return v;
}

static double bf(uint16_t v)
{
    return fmoe_bf16_to_f32(v);
}

static double round_bf16(double v)
{
    return fmoe_bf16_to_f32(fmoe_f32_to_bf16((float)v));
}

static double silu(double x)
{
    return x / (1.0 + exp(-x));
}

/* The model's output row of token t. */
static void model_token(const blayer *L, const uint16_t *x, const float *w, const int32_t *ids, double *out)
{
    const bcase *c = L->c;
    uint32_t H = c->H, I = c->I, rI = L->rI;
    double *h = malloc(rI * sizeof *h), *a = malloc(I * sizeof *a), *acc = calloc(H, sizeof *acc);
    for (uint32_t j = 0; j < c->k; j++) {
        uint32_t e = (uint32_t)ids[j];
        for (uint32_t n = 0; n < rI; n++) {
            double s = 0;
            for (uint32_t q = 0; q < H; q++)
                s += bf(x[q]) * bf(L->w13[((size_t)e * rI + n) * H + q]);
            h[n] = round_bf16(s + (c->bias ? bf(L->b13[(size_t)e * rI + n]) : 0.0));
        }
        for (uint32_t i = 0; i < I; i++)
            a[i] = round_bf16(c->gated ? silu(h[i]) * h[I + i] : silu(h[i]));
        for (uint32_t n = 0; n < H; n++) {
            double s = 0;
            for (uint32_t i = 0; i < I; i++)
                s += a[i] * bf(L->w2[((size_t)e * H + n) * I + i]);
            /* y is rounded in f32 then bf16, then scaled by the weight in f32 */
            acc[n] += round_bf16(s + (c->bias ? bf(L->b2[(size_t)e * H + n]) : 0.0)) * w[j];
        }
    }
    for (uint32_t n = 0; n < H; n++)
        out[n] = round_bf16(acc[n]);
    free(h), free(a), free(acc);
}

/* Write `text` to a fresh temporary file; its path in buf. */
static void write_config(char *buf, size_t cap, const char *text)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, cap, "%s/fmoe-cpu-options-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(buf);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* More [plugins.cpu.options] lines for the next contexts, or NULL. */
static const char *extra_options;

/* A context with the cpu plugin alone, its options from the command line
 * and extra_options; the state of its init in *state. */
static fmoe_context *cpu_context_state(int32_t *state, char *reason, size_t cap)
{
    char text[512], path[256];
    cpu_test_args_toml(&args, text, sizeof text);
    if (extra_options)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s\n", extra_options);
    write_config(path, sizeof path, text);
    const char *files[] = {CPU_MANIFEST};
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.config_path = path;
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    o.isolated = 1;
    fmoe_context *ctx = NULL;
    fmoe_status st = fmoe_context_create(&o, &ctx);
    remove(path);
    ck_assert_msg(st == FMOE_STATUS_OK, "context: %s", fmoe_last_error());
    *state = -1;
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        fmoe_plugin_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        ck_assert_int_eq(fmoe_context_plugin(ctx, i, &info), FMOE_STATUS_OK);
        if (strcmp(info.name, "cpu") == 0) {
            *state = info.state;
            snprintf(reason, cap, "%s", info.reason);
        }
    }
    return ctx;
}

static fmoe_context *cpu_context(void)
{
    int32_t state;
    char reason[512];
    fmoe_context *ctx = cpu_context_state(&state, reason, sizeof reason);
    ck_assert_msg(state == FMOE_PLUGIN_STATE_LOADED, "cpu plugin not loaded: %s", reason);
    cpu_test_level(ctx, &args);
    return ctx;
}

static void load(fmoe_layer *layer, const char *name, uint16_t *data, uint32_t ndim, int64_t d0, int64_t d1, int64_t d2)
{
    fmoe_tensor t;
    int64_t shape[3] = {d0, d1, d2};
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_BF16, ndim, shape, data), FMOE_STATUS_OK);
    ck_assert_msg(fmoe_layer_load(layer, name, FMOE_ALL_LOCAL_EXPERTS, FMOE_SHARD_FULL, &t, NULL) == FMOE_STATUS_OK,
                  "load %s: %s", name, fmoe_last_error());
}

static void run_case(const bcase *c, uint64_t stream)
{
    fmoe_rng r = fmoe_rng_for(stream);
    blayer L = {.c = c, .rI = (c->gated ? 2 : 1) * c->I};
    /* Weights N(0, 1/fan_in): outputs O(1). */
    L.w13 = bf16_normal(&r, (size_t)c->E * L.rI * c->H, 1.0f / sqrtf((float)c->H));
    L.w2 = bf16_normal(&r, (size_t)c->E * c->H * c->I, 1.0f / sqrtf((float)c->I));
    L.b13 = bf16_normal(&r, (size_t)c->E * L.rI, 0.1f);
    L.b2 = bf16_normal(&r, (size_t)c->E * c->H, 0.1f);
    uint16_t *x = bf16_normal(&r, (size_t)c->M * c->H, 1.0f), *y = malloc((size_t)c->M * c->H * 2);
    float *w = malloc((size_t)c->M * c->k * sizeof *w);
    int32_t *ids = malloc((size_t)c->M * c->k * sizeof *ids);
    for (uint32_t t = 0; t < c->M; t++)
        for (uint32_t j = 0; j < c->k; j++) {
            int32_t e, dup;
            do { /* distinct experts per token */
                e = (int32_t)(fmoe_rng_u64(&r) % c->E);
                dup = 0;
                for (uint32_t i = 0; i < j; i++)
                    dup |= ids[t * c->k + i] == e;
            } while (dup);
            ids[t * c->k + j] = e;
            w[t * c->k + j] = fmoe_rng_uniform(&r, 0.1f, 1.0f);
        }

    fmoe_context *ctx = cpu_context();
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = c->E;
    cfg.top_k = c->k;
    cfg.hidden_size = c->H;
    cfg.intermediate_size = c->I;
    cfg.gated = (uint32_t)c->gated;
    cfg.has_bias = (uint32_t)c->bias;
    cfg.act_dtype = FMOE_DTYPE_BF16;
    cfg.max_num_tokens = c->M;
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_scheme_parse("bf16", &s), FMOE_STATUS_OK);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "cpu";
    fmoe_layer *layer = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &s, &lo, &layer) == FMOE_STATUS_OK, "create: %s", fmoe_last_error());
    load(layer, "w13_weight", L.w13, 3, c->E, L.rI, c->H);
    load(layer, "w2_weight", L.w2, 3, c->E, c->H, c->I);
    if (c->bias) {
        load(layer, "w13_bias", L.b13, 2, c->E, L.rI, 0);
        load(layer, "w2_bias", L.b2, 2, c->E, c->H, 0);
    }
    ck_assert_msg(fmoe_layer_finalize(layer) == FMOE_STATUS_OK, "finalize: %s", fmoe_last_error());
    fmoe_tensor tx, ty, tw, ti;
    int64_t xs[2] = {c->M, c->H}, ks[2] = {c->M, c->k};
    fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, xs, x);
    fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, xs, y);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, ids);
    fmoe_forward_args fa = {.struct_size = sizeof fa, .x = &tx, .out = &ty, .topk_weights = &tw, .topk_ids = &ti};
    ck_assert_msg(fmoe_layer_forward(layer, &fa) == FMOE_STATUS_OK, "forward: %s", fmoe_last_error());

    double *want = malloc(c->H * sizeof *want), err2 = 0, ref2 = 0, got2 = 0;
    for (uint32_t t = 0; t < c->M; t++) {
        model_token(&L, x + (size_t)t * c->H, w + (size_t)t * c->k, ids + (size_t)t * c->k, want);
        for (uint32_t n = 0; n < c->H; n++) {
            double got = bf(y[(size_t)t * c->H + n]), d = got - want[n];
            ck_assert_msg(fabs(d) <= 2e-2 + 2e-2 * fabs(want[n]),
                          "E%u H%u I%u k%u M%u%s%s: token %u col %u: got %.6g, model %.6g (seed %llu)", c->E, c->H,
                          c->I, c->k, c->M, c->gated ? "" : " non-gated", c->bias ? " bias" : "", t, n, got, want[n],
                          (unsigned long long)fmoe_test_seed());
            err2 += d * d, ref2 += want[n] * want[n], got2 += got * got;
        }
    }
    ck_assert_msg(got2 > 0 && err2 <= 1e-4 * ref2, "E%u H%u I%u M%u: nmse %.3g, sum of squares %.3g (seed %llu)", c->E,
                  c->H, c->I, c->M, err2 / ref2, got2, (unsigned long long)fmoe_test_seed());
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    free(want), free(x), free(y), free(w), free(ids);
    free(L.w13), free(L.w2), free(L.b13), free(L.b2);
}

START_TEST(decode)
{
    /* Qwen3-like proportions, scaled: many experts, a few rows each. */
    static const uint32_t ms[] = {1, 4, 16};
    for (size_t i = 0; i < 3; i++) {
        bcase c = {.E = 32, .H = 256, .I = 128, .k = 4, .M = ms[i], .gated = 1};
        run_case(&c, 10 + i);
    }
}
END_TEST

START_TEST(experts_on_both_paths)
{
    /* 128 pairs over 8 experts: around 16 each, some above (oneDNN where it
     * has an optimized bf16 matmul), some at or below (the kernels). */
    bcase c = {.E = 8, .H = 128, .I = 96, .k = 2, .M = 64, .gated = 1};
    run_case(&c, 20);
    c.M = 200; /* every expert above 16 rows */
    run_case(&c, 21);
}
END_TEST

START_TEST(odd_sizes_bias_nongated)
{
    bcase c = {.E = 5, .H = 99, .I = 45, .k = 3, .M = 13, .gated = 1, .bias = 1};
    run_case(&c, 30);
    c.gated = 0;
    run_case(&c, 31);
    c.M = 1;
    run_case(&c, 32);
}
END_TEST

/* The cpu plugin's state in a context with these options alone (not the
 * command line's). */
static int32_t plugin_state(const char *options, char *reason, size_t cap)
{
    cpu_test_args saved = args;
    args = (cpu_test_args){0};
    extra_options = options;
    int32_t state;
    fmoe_context *ctx = cpu_context_state(&state, reason, cap);
    extra_options = NULL;
    args = saved;
    fmoe_context_destroy(ctx);
    return state;
}

/* A bad option fails the plugin, and the reason names the option: the
 * plugin's init says so (tests/cpu/test_cpu_options.c checks its exact
 * words), or the host's check of the manifest's [[option]] tables. */
static void refused(const char *options, const char *name)
{
    char reason[512];
    ck_assert_int_eq(plugin_state(options, reason, sizeof reason), FMOE_PLUGIN_STATE_FAILED);
    ck_assert_msg(strstr(reason, name) != NULL, "%s: reason '%s' does not name '%s'", options, reason, name);
}

START_TEST(plugin_options)
{
    refused("spin_ms = -1", "spin_ms");
    refused("spin = 3", "'spin'");
    refused("threads = 1025", "threads");
    refused("isa = \"sse9\"", "isa");
    refused("amx = \"maybe\"", "amx");
    /* Workers that sleep at once (spin_ms 0): every run starts with them
     * asleep and ends when its items are done, whoever took them. */
    extra_options = "spin_ms = 0\nthreads = 2";
    bcase c = {.E = 32, .H = 256, .I = 128, .k = 4, .M = 4, .gated = 1};
    run_case(&c, 30);
    c.M = 16;
    run_case(&c, 31);
    extra_options = NULL;
}
END_TEST

int main(int argc, char **argv)
{
    if (cpu_test_args_parse(argc, argv, &args) != 0)
        return EXIT_FAILURE;
    printf("# plugin options: isa %s, amx %s\n", args.isa ? args.isa : "(default)", args.amx ? args.amx : "(default)");
    Suite *s = suite_create("cpu_bf16");
    TCase *tc = tcase_create("method");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, decode);
    tcase_add_test(tc, experts_on_both_paths);
    tcase_add_test(tc, odd_sizes_bias_nongated);
    tcase_add_test(tc, plugin_options);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
