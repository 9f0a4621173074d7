/*
 * tests/megamoe/test_megamoe_ref.c - the reference plugin's oracle of
 * fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic (MXFP4 weights x FP8
 * activations, DeepGEMM MegaMoE arithmetic, spec/formats.md §7.3):
 *
 *  - E18 end to end: gate 12, up -3, clamp 10, weight 0.5 gives the
 *    requantized -15.0 (byte 0xF7 at scale 2^-4) times a down weight;
 *    without the clamp -18.0;
 *  - the combine: ascending slots summed in f32 then bf16, masked (-1) and
 *    out-of-range ids adding nothing, all-masked token 0, EP ranks;
 *  - seeded random layers against a model written here from the spec
 *    (double GEMMs, then the same roundings); the same model with the
 *    weight applied after GEMM2 must NOT match (the test can fail);
 *  - refusals: activation, act dtype, biases, weight on the input, sizes;
 *  - the SM100 kernel's data flow run on the host (sm100_model.c: two
 *    ranks' symmetric buffers, the kernel's indexing and scale placement)
 *    equals this oracle; token scales read without the tcgen05.cp order
 *    must not.
 */
#include <math.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "tests/megamoe/sm100_model.h"
#include "tests/test_util.h"

#define KEY "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"
#define BF  FMOE_DTYPE_BF16

static fmoe_context *context(void)
{
    const char *files[] = {REFERENCE_MANIFEST};
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    o.isolated = 1;
    fmoe_context *ctx = NULL;
    ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    return ctx;
}

typedef struct layer_data {
    uint32_t E, H, I, k;
    float limit;
    uint8_t *w13, *s13, *w2, *s2; /* [E,2I,H/2] [E,2I,H/32] [E,H,I/2] [E,H,I/32] */
} layer_data;

static void data_alloc(layer_data *d)
{
    d->w13 = calloc((size_t)d->E * 2 * d->I * d->H / 2, 1);
    d->s13 = calloc((size_t)d->E * 2 * d->I * d->H / 32, 1);
    d->w2 = calloc((size_t)d->E * d->H * d->I / 2, 1);
    d->s2 = calloc((size_t)d->E * d->H * d->I / 32, 1);
    ck_assert(d->w13 && d->s13 && d->w2 && d->s2);
    memset(d->s13, 127, (size_t)d->E * 2 * d->I * d->H / 32);
    memset(d->s2, 127, (size_t)d->E * d->H * d->I / 32);
}

static void data_free(layer_data *d)
{
    free(d->w13);
    free(d->s13);
    free(d->w2);
    free(d->s2);
}

static void set_code(uint8_t *packed, size_t idx, uint8_t code)
{
    uint8_t *b = packed + idx / 2;
    *b = idx % 2 ? (uint8_t)((*b & 0x0F) | code << 4) : (uint8_t)((*b & 0xF0) | code);
}

static fmoe_layer_config config(const layer_data *d, uint32_t ep_size, uint32_t ep_rank, uint32_t tokens)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = d->E;
    c.top_k = d->k;
    c.hidden_size = d->H;
    c.intermediate_size = d->I;
    c.gated = 1;
    c.activation = FMOE_ACT_SILU;
    c.swiglu_limit = d->limit;
    c.act_dtype = BF;
    c.ep_size = ep_size;
    c.ep_rank = ep_rank;
    c.max_num_tokens = tokens;
    return c;
}

static fmoe_status create(fmoe_context *ctx, const fmoe_layer_config *c, fmoe_layer **out)
{
    fmoe_scheme s;
    ck_assert_msg(fmoe_scheme_parse(KEY, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    *out = NULL;
    return fmoe_layer_create(ctx, c, &s, NULL, out);
}

static void load(fmoe_layer *layer, const char *name, uint32_t e, fmoe_dtype dt, int64_t d1, int64_t d2,
                 const uint8_t *base)
{
    int64_t shape[2] = {d1, d2};
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_tensor_init(&t, dt, 2, shape, (void *)(base + (size_t)e * d1 * d2)), FMOE_STATUS_OK);
    ck_assert_msg(fmoe_layer_load(layer, name, (int32_t)e, FMOE_SHARD_FULL, &t, NULL) == FMOE_STATUS_OK, "load %s: %s",
                  name, fmoe_last_error());
}

/* out[M, H] (as float) of one rank's layer for bf16 inputs x [M, H]. */
static void forward(fmoe_context *ctx, const layer_data *d, uint32_t ep_size, uint32_t ep_rank, uint32_t M,
                    const uint16_t *x, const float *w, const int32_t *ids, float *out)
{
    fmoe_layer_config c = config(d, ep_size, ep_rank, M);
    fmoe_layer *layer = NULL;
    ck_assert_msg(create(ctx, &c, &layer) == FMOE_STATUS_OK, "create: %s", fmoe_last_error());
    uint32_t E = d->E, H = d->H, I = d->I;
    for (uint32_t e = 0; e < E; e++) {
        load(layer, "w13_weight", e, FMOE_DTYPE_FP4_E2M1X2, 2 * I, H / 2, d->w13);
        load(layer, "w13_weight_scale", e, FMOE_DTYPE_UE8M0, 2 * I, H / 32, d->s13);
        load(layer, "w2_weight", e, FMOE_DTYPE_FP4_E2M1X2, H, I / 2, d->w2);
        load(layer, "w2_weight_scale", e, FMOE_DTYPE_UE8M0, H, I / 32, d->s2);
    }
    ck_assert_msg(fmoe_layer_finalize(layer) == FMOE_STATUS_OK, "finalize: %s", fmoe_last_error());
    uint16_t *y = calloc((size_t)M * H, sizeof *y);
    ck_assert_ptr_nonnull(y);
    int64_t xs[2] = {M, H}, ks[2] = {M, d->k};
    fmoe_tensor tx, to, tw, ti;
    fmoe_tensor_init(&tx, BF, 2, xs, (void *)x);
    fmoe_tensor_init(&to, BF, 2, xs, y);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, (void *)w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, (void *)ids);
    fmoe_forward_args fa = {.struct_size = sizeof fa, .x = &tx, .out = &to, .topk_weights = &tw, .topk_ids = &ti};
    ck_assert_msg(fmoe_layer_forward(layer, &fa) == FMOE_STATUS_OK, "forward: %s", fmoe_last_error());
    for (size_t i = 0; i < (size_t)M * H; i++)
        out[i] = fmoe_bf16_to_f32(y[i]);
    free(y);
    fmoe_layer_destroy(layer);
}

/* E18: one token, one expert, x = e_0 (quantized exactly: 256 at 2^-8).
 * gate row 0 = 6 at scale 2 (12), up row 0 = -3 at scale 1; W2[0][0] = 1,
 * W2[1][0] = -0.5, W2[2][0] = 4 at scale 2^-1 (2). */
static void e18_layer(layer_data *d, float limit)
{
    *d = (layer_data){.E = 1, .H = 32, .I = 32, .k = 1, .limit = limit};
    data_alloc(d);
    set_code(d->w13, 0, 0x7);                   /* gate[0][0] = 6 */
    d->s13[0] = 128;                            /* x 2 */
    set_code(d->w13, (size_t)d->I * d->H, 0xD); /* up[0][0] = -3 (row I) */
    set_code(d->w2, 0, 0x2);                    /* W2[0][0] = 1 */
    set_code(d->w2, (size_t)1 * d->I, 0x9);     /* W2[1][0] = -0.5 */
    set_code(d->w2, (size_t)2 * d->I, 0x6);     /* W2[2][0] = 4 */
    d->s2[2 * (d->I / 32)] = 126;               /* x 1/2 */
}

START_TEST(e18_swiglu_clamp_weight_requant)
{
    fmoe_context *ctx = context();
    static const struct {
        float limit, w, want;
    } cases[] = {
        /* spec E18: silu(10) * -3 * 0.5 = -14.999319 -> sf 2^-4, q -240 -> -15 */
        {10.0f, 0.5f, -15.0f},
        /* no clamp: silu(12) * -3 * 0.5 = -17.99989 -> sf 2^-4, q -288 -> -18 */
        {0.0f, 0.5f, -18.0f},
        /* weight 1: -29.998638 -> sf 2^-3, q -240 -> -30 */
        {10.0f, 1.0f, -30.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layer_data d;
        e18_layer(&d, cases[i].limit);
        uint16_t x[32] = {0};
        x[0] = fmoe_f32_to_bf16(1.0f);
        float w = cases[i].w, out[32];
        int32_t id = 0;
        forward(ctx, &d, 1, 0, 1, x, &w, &id, out);
        ck_assert_msg(out[0] == cases[i].want, "case %zu: out[0] = %.9g, expected %g", i, out[0], cases[i].want);
        ck_assert_float_eq(out[1], -0.5f * cases[i].want);
        ck_assert_float_eq(out[2], 2.0f * cases[i].want);
        for (int n = 3; n < 32; n++)
            ck_assert_float_eq(out[n], 0.0f);
        data_free(&d);
    }
    fmoe_context_destroy(ctx);
}
END_TEST

/* Two experts that each give a constant row: expert e's output n is
 * v_e = -15 * c_e (E18 with W2[n][0] = c_e for every n). */
START_TEST(combine_slots_masks_and_ep)
{
    fmoe_context *ctx = context();
    layer_data d = {.E = 4, .H = 32, .I = 32, .k = 3, .limit = 10.0f};
    data_alloc(&d);
    const uint8_t w2_code[4] = {0x2, 0x4, 0x9, 0xA}; /* 1, 2, -0.5, -1 */
    for (uint32_t e = 0; e < d.E; e++) {
        set_code(d.w13, (size_t)e * 2 * d.I * d.H, 0x7);
        d.s13[(size_t)e * 2 * d.I * (d.H / 32)] = 128;
        set_code(d.w13, (size_t)e * 2 * d.I * d.H + (size_t)d.I * d.H, 0xD);
        for (uint32_t n = 0; n < d.H; n++)
            set_code(d.w2, ((size_t)e * d.H + n) * d.I, w2_code[e]);
    }
    const float v[4] = {-15.0f, -30.0f, 7.5f, 15.0f};
    uint16_t x[4 * 32] = {0};
    for (int t = 0; t < 4; t++)
        x[t * 32] = fmoe_f32_to_bf16(1.0f);
    /* token 0: experts 0, 1, 2; token 1: -1, 3, 9 (out of range);
     * token 2: all masked; token 3: 3, 2, 0 */
    const int32_t ids[12] = {0, 1, 2, -1, 3, 9, -1, -1, -1, 3, 2, 0};
    const float w[12] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    const float want[4] = {v[0] + v[1] + v[2], v[3], 0.0f, v[3] + v[2] + v[0]};
    float out[4 * 32], part[4 * 32];
    forward(ctx, &d, 1, 0, 4, x, w, ids, out);
    for (int t = 0; t < 4; t++)
        for (int n = 0; n < 32; n++)
            ck_assert_msg(out[t * 32 + n] == want[t], "token %d col %d: %g, expected %g", t, n, out[t * 32 + n],
                          want[t]);
    /* EP 2: rank 0 holds experts 0, 1 and rank 1 experts 2, 3; the ranks'
     * partial sums add up to the same values here (all exact in bf16). */
    float sum[4 * 32] = {0};
    for (uint32_t r = 0; r < 2; r++) {
        forward(ctx, &d, 2, r, 4, x, w, ids, part);
        for (int i = 0; i < 4 * 32; i++)
            sum[i] += part[i];
        float rank_want0 = r == 0 ? v[0] + v[1] : v[2];
        ck_assert_float_eq(part[0], rank_want0);
    }
    for (int t = 0; t < 4; t++)
        ck_assert_float_eq(sum[t * 32], want[t]);
    data_free(&d);
    fmoe_context_destroy(ctx);
}
END_TEST

/* ---- the independent model ------------------------------------------------------ */

static double dq_w(const uint8_t *packed, const uint8_t *sf, size_t row, uint32_t K, uint32_t k)
{
    uint8_t b = packed[(row * K + k) / 2];
    uint8_t code = (row * K + k) % 2 ? b >> 4 : b & 0xF;
    return (double)fmoe_fp4_e2m1_decode(code) * ldexp(1.0, (int)sf[row * (K / 32) + k / 32] - 127);
}

/* x / s -> e4m3 -> * s, with the given power of two s. */
static float fq8(float x, float s)
{
    float v = x / s;
    v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
    return fmoe_fp8_e4m3fn_decode(fmoe_fp8_e4m3fn_encode(v)) * s;
}

/* Input rule: s = smallest power of two >= max(amax, 1e-4) / 448. */
static void model_quant_input(float *x, uint32_t n)
{
    for (uint32_t g = 0; g < n; g += 32) {
        float amax = 1e-4f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[g + i]));
        float s = exp2f(ceilf(log2f(amax / 448.0f)));
        for (int i = 0; i < 32; i++)
            x[g + i] = fq8(x[g + i], s);
    }
}

/* Epilogue rule: s = 2^ceil(log2(amax * (1/448))), 0 for an all-zero group. */
static void model_requant(float *a, uint32_t n)
{
    for (uint32_t g = 0; g < n; g += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(a[g + i]));
        if (amax == 0.0f)
            continue;
        float s = exp2f(ceilf(log2f(amax * (1.0f / 448.0f))));
        for (int i = 0; i < 32; i++)
            a[g + i] = fq8(a[g + i], s);
    }
}

static float rbf(double v)
{
    return fmoe_bf16_to_f32(fmoe_f32_to_bf16((float)v));
}

/* weight_after: the routing weight after GEMM2 (the generic placement), as
 * the control that must not match. */
static void model(const layer_data *d, uint32_t M, const uint16_t *x, const float *w, const int32_t *ids,
                  int weight_after, float *out)
{
    uint32_t H = d->H, I = d->I, k = d->k;
    float *xq = malloc(sizeof(float) * H), *a = malloc(sizeof(float) * I), *y = malloc(sizeof(float) * H);
    ck_assert(xq && a && y);
    float c = rbf(d->limit);
    for (uint32_t t = 0; t < M; t++) {
        double *acc = calloc(H, sizeof(double));
        ck_assert_ptr_nonnull(acc);
        for (uint32_t n = 0; n < H; n++)
            out[t * H + n] = 0.0f;
        for (uint32_t j = 0; j < k; j++) {
            int32_t e = ids[t * k + j];
            if (e < 0 || (uint32_t)e >= d->E)
                continue;
            for (uint32_t h = 0; h < H; h++)
                xq[h] = fmoe_bf16_to_f32(x[t * H + h]);
            model_quant_input(xq, H);
            const uint8_t *w13 = d->w13, *s13 = d->s13;
            for (uint32_t i = 0; i < I; i++) {
                double gs = 0, us = 0;
                for (uint32_t h = 0; h < H; h++) {
                    gs += xq[h] * dq_w(w13, s13, (size_t)e * 2 * I + i, H, h);
                    us += xq[h] * dq_w(w13, s13, (size_t)e * 2 * I + I + i, H, h);
                }
                float g = rbf(gs), u = rbf(us);
                if (d->limit > 0.0f) {
                    g = fminf(g, c);
                    u = fmaxf(-c, fminf(u, c));
                }
                float act = g / (1.0f + expf(-g)) * u;
                a[i] = weight_after ? act : act * w[t * k + j];
            }
            model_requant(a, I);
            for (uint32_t n = 0; n < H; n++) {
                double s = 0;
                for (uint32_t i = 0; i < I; i++)
                    s += a[i] * dq_w(d->w2, d->s2, (size_t)e * H + n, I, i);
                y[n] = rbf(s);
                acc[n] += weight_after ? (double)y[n] * w[t * k + j] : (double)y[n];
            }
        }
        for (uint32_t n = 0; n < H; n++)
            out[t * H + n] = rbf(acc[n]);
        free(acc);
    }
    free(xq);
    free(a);
    free(y);
}

static void random_layer(fmoe_rng *r, layer_data *d)
{
    data_alloc(d);
    size_t n13 = (size_t)d->E * 2 * d->I * d->H, n2 = (size_t)d->E * d->H * d->I;
    for (size_t i = 0; i < n13 / 2; i++)
        d->w13[i] = (uint8_t)fmoe_rng_u64(r);
    for (size_t i = 0; i < n2 / 2; i++)
        d->w2[i] = (uint8_t)fmoe_rng_u64(r);
    /* scales around 2^-4 .. 2^-2 so outputs stay O(1) with K = 64..128 */
    for (size_t i = 0; i < n13 / 32; i++)
        d->s13[i] = (uint8_t)(122 + fmoe_rng_u64(r) % 3);
    for (size_t i = 0; i < n2 / 32; i++)
        d->s2[i] = (uint8_t)(122 + fmoe_rng_u64(r) % 3);
}

static double nmse(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

START_TEST(random_layers_match_the_model)
{
    fmoe_context *ctx = context();
    fmoe_rng r = fmoe_rng_for(36);
    static const struct {
        uint32_t E, H, I, k, M;
        float limit;
    } shapes[] = {{4, 64, 64, 2, 8, 10.0f}, {6, 128, 64, 3, 5, 0.0f}, {3, 64, 96, 3, 7, 1.5f}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        layer_data d = {
            .E = shapes[s].E, .H = shapes[s].H, .I = shapes[s].I, .k = shapes[s].k, .limit = shapes[s].limit};
        uint32_t M = shapes[s].M, H = d.H;
        random_layer(&r, &d);
        uint16_t *x = malloc(sizeof(uint16_t) * M * H);
        float *w = malloc(sizeof(float) * M * d.k), *out = malloc(sizeof(float) * M * H);
        float *want = malloc(sizeof(float) * M * H), *control = malloc(sizeof(float) * M * H);
        int32_t *ids = malloc(sizeof(int32_t) * M * d.k);
        ck_assert(x && w && out && want && control && ids);
        for (size_t i = 0; i < (size_t)M * H; i++)
            x[i] = fmoe_f32_to_bf16(fmoe_rng_normal(&r) * 2.0f);
        for (size_t i = 0; i < (size_t)M * d.k; i++) {
            ids[i] = (int32_t)(fmoe_rng_u64(&r) % d.E);
            w[i] = fmoe_rng_uniform(&r, 0.05f, 1.0f);
        }
        ids[1] = -1; /* a masked slot */
        forward(ctx, &d, 1, 0, M, x, w, ids, out);
        model(&d, M, x, w, ids, 0, want);
        model(&d, M, x, w, ids, 1, control);
        size_t exact = 0, n = (size_t)M * H;
        for (size_t i = 0; i < n; i++)
            exact += out[i] == want[i];
        double e = nmse(out, want, n), ce = nmse(out, control, n), mag = nmse(want, control, n);
        /* f64 vs f32 accumulation may flip a bf16 or e4m3 rounding now and
         * then; the weight's placement changes the e4m3 codes of most
         * groups (NMSE ~1e-3). */
        ck_assert_msg(e < 1e-6 && exact * 100 >= n * 95, "shape %zu: NMSE %g, %zu of %zu exact (seed %llu)", s, e,
                      exact, n, (unsigned long long)fmoe_test_seed());
        ck_assert_msg(ce > 1e-5 && mag > 1e-5, "shape %zu: the weight-after control is too close (NMSE %g)", s, ce);
        free(x);
        free(w);
        free(out);
        free(want);
        free(control);
        free(ids);
        data_free(&d);
    }
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(sm100_data_flow_matches_the_reference)
{
    fmoe_context *ctx = context();
    uint64_t seed = fmoe_test_seed();
    fmoe_rng r = fmoe_rng_for(seed + 361);
    /* the SM100 contract's smallest sizes: H, I multiples of 512 */
    layer_data d = {.E = 4, .H = 512, .I = 512, .k = 2, .limit = 10.0f};
    random_layer(&r, &d);
    enum { RANKS = 2, MAXM = 6 };
    const uint32_t M[RANKS] = {6, 3}, H = d.H;
    static uint16_t x[RANKS][MAXM * 512];
    static float w[RANKS][MAXM * 2], out[RANKS][MAXM * 512], want[RANKS][MAXM * 512];
    static int32_t ids[RANKS][MAXM * 2];
    for (uint32_t q = 0; q < RANKS; q++) {
        for (uint32_t i = 0; i < M[q] * H; i++)
            x[q][i] = fmoe_f32_to_bf16(fmoe_rng_normal(&r) * 2.0f);
        for (uint32_t t = 0; t < M[q]; t++) {
            /* two distinct experts a token, either rank's */
            int32_t a = (int32_t)(fmoe_rng_u64(&r) % d.E), b = (a + 1 + (int32_t)(fmoe_rng_u64(&r) % (d.E - 1))) % 4;
            ids[q][2 * t] = a;
            ids[q][2 * t + 1] = b;
            w[q][2 * t] = fmoe_rng_uniform(&r, 0.05f, 1.0f);
            w[q][2 * t + 1] = fmoe_rng_uniform(&r, 0.05f, 1.0f);
        }
    }
    ids[0][1] = -1;    /* a masked slot */
    ids[0][4] = 4 + 3; /* out of range: masked too */
    for (uint32_t q = 0; q < RANKS; q++)
        forward(ctx, &d, 1, 0, M[q], x[q], w[q], ids[q], want[q]);
    mm100_model_layer L = {.experts = d.E,
                           .hidden = d.H,
                           .inter = d.I,
                           .topk = d.k,
                           .ranks = RANKS,
                           .limit = d.limit,
                           .w13 = d.w13,
                           .s13 = d.s13,
                           .w2 = d.w2,
                           .s2 = d.s2};
    char why[256];
    for (uint32_t bm = 32; bm <= 128; bm *= 4) {
        for (int mode = MM100_MODEL_AS_KERNEL; mode <= MM100_MODEL_BROKEN_TOKEN_SCALES; mode++) {
            mm100_model_rank rk[RANKS];
            for (uint32_t q = 0; q < RANKS; q++)
                rk[q] = (mm100_model_rank){.m = M[q], .x = x[q], .w = w[q], .ids = ids[q], .out = out[q]};
            ck_assert_msg(mm100_model_forward(&L, MAXM, bm, rk, mode, why, sizeof why) == 0, "%s", why);
            double worst = 0;
            size_t exact = 0, n = 0;
            for (uint32_t q = 0; q < RANKS; q++) {
                double e = nmse(out[q], want[q], (size_t)M[q] * H);
                worst = e > worst ? e : worst;
                for (size_t i = 0; i < (size_t)M[q] * H; i++, n++)
                    exact += out[q][i] == want[q][i];
            }
            if (mode == MM100_MODEL_AS_KERNEL)
                /* the model's MMA sums in double, the oracle in f32: a bf16
                 * or e4m3 rounding may flip now and then */
                ck_assert_msg(worst < 1e-6 && exact * 100 >= n * 95,
                              "BLOCK_M %u: NMSE %g, %zu of %zu exact (seed %llu)", bm, worst, exact, n,
                              (unsigned long long)seed);
            else
                ck_assert_msg(worst > 1e-3, "BLOCK_M %u: the broken control is too close (NMSE %g, seed %llu)", bm,
                              worst, (unsigned long long)seed);
        }
    }
    data_free(&d);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(refusals_name_the_reason)
{
    fmoe_context *ctx = context();
    layer_data d = {.E = 2, .H = 64, .I = 64, .k = 1};
    static const struct {
        int what;
        const char *needle;
    } cases[] = {
        {0, "SwiGLU"},        {1, "act_dtype bf16"}, {2, "biases"},
        {3, "router weight"}, {4, "hidden_size 48"}, {5, "intermediate_size_per_partition 40"},
        {6, "SwiGLU"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmoe_layer_config c = config(&d, 1, 0, 4);
        switch (cases[i].what) {
        case 0:
            c.activation = FMOE_ACT_GELU;
            break;
        case 1:
            c.act_dtype = FMOE_DTYPE_F32;
            break;
        case 2:
            c.has_bias = 1;
            break;
        case 3:
            c.apply_router_weight_on_input = 1;
            break;
        case 4:
            c.hidden_size = 48;
            break;
        case 5:
            c.intermediate_size = 40;
            break;
        default:
            c.gated = 0;
            break;
        }
        fmoe_layer *layer = NULL;
        fmoe_status st = create(ctx, &c, &layer);
        ck_assert_msg(st != FMOE_STATUS_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(fmoe_last_error(), cases[i].needle), "case %zu: %s", i, fmoe_last_error());
        fmoe_layer_destroy(layer);
    }
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("megamoe_reference");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, e18_swiglu_clamp_weight_requant);
    tcase_add_test(tc, combine_slots_masks_and_ep);
    tcase_add_test(tc, random_layers_match_the_model);
    tcase_add_test(tc, refusals_name_the_reason);
    tcase_add_test(tc, sm100_data_flow_matches_the_reference);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
