/*
 * tests/cuda/test_cuda_mx_w4a8.c - the host side of the CUDA plugin's MXFP4
 * x FP8 method (DeepSeek-V4's MegaMoE arithmetic, plugins/cuda/mx_w4a8.h),
 * no GPU needed (runs in CI):
 *   - the scheme key maps to FMCU_Q_MXFP4_A8, its neighbours do not;
 *   - layers the reference refuses are refused with the reference's reason
 *     (plugins/reference/method_megamoe.c), the others accepted;
 *   - declared parameters equal the reference plugin's (names, dtypes,
 *     shapes, roles, shard axes), TP 1 and 2, and the size errors name the
 *     same sizes;
 *   - the built plugin's query hands out `mxfp4_w4a8_emulated_bf16_mma`
 *     (monolithic, and modular on an EP group) at score 90, below the megamoe plugin's 100;
 *   - the row kernels' per-value rules (mx_w4a8_rules.h, the same code the
 *     kernels run): the input scale against formats.h's UE8M0 rule and block
 *     quantizer, the requantization's sf against fmoe_ue8m0_encode_ceil and
 *     spec E18's worked example, and the values exact in bf16 down to the
 *     documented bound. Random values from a fixed seed, printed on failure.
 * Usage: test_cuda_mx_w4a8 (the plugins this build made).
 */
#include <check.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"
#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/layout.h"
#include "plugins/cuda/mx_w4a8_rules.h"
#include "tests/cpu/direct_plugin.h"

#define KEY "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"

typedef struct loaded {
    const fmoe_plugin *plugin;
    void *state;
} loaded;

/* The built plugin at `path`, initialised without options. */
static loaded load_plugin(const char *path)
{
    loaded l = {dp_load(path), NULL};
    ck_assert_int_eq(dp_init(l.plugin, NULL, 0, &l.state), FMOE_STATUS_OK);
    return l;
}

static fmoe_scheme scheme(const char *key)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    ck_assert_int_eq(fmoe_scheme_parse(key, &s), FMOE_STATUS_OK);
    return s;
}

/* A DeepSeek-V4-like layer of the scheme: gated SiLU with a clamp, bf16. */
static fmoe_layer_config config(void)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = 8;
    c.top_k = 2;
    c.hidden_size = 256;
    c.intermediate_size = 128;
    c.activation = FMOE_ACT_SILU;
    c.gated = 1;
    c.swiglu_limit = 10.0f;
    c.act_dtype = FMOE_DTYPE_BF16;
    c.scoring = FMOE_SCORING_SQRTSOFTPLUS;
    c.renormalize = 1;
    c.routed_scaling_factor = 1.5f;
    c.max_num_tokens = 64;
    return c;
}

START_TEST(scheme_maps_to_the_method)
{
    char why[256];
    fmoe_scheme s = scheme(KEY);
    ck_assert_int_eq(fmcu_scheme_quant(&s, why, sizeof why), FMCU_Q_MXFP4_A8);
    /* W4A16 stays the gpt-oss method. */
    fmoe_scheme w16 = scheme("fp4:group32:scale-ue8m0");
    ck_assert_int_eq(fmcu_scheme_quant(&w16, why, sizeof why), FMCU_Q_MXFP4);
    /* MXFP4 W4A4 is its own method (the reference's mxfp4 family). */
    fmoe_scheme a4 = scheme("fp4:group32:scale-ue8m0/fp4:group32:dynamic");
    ck_assert_int_eq(fmcu_scheme_quant(&a4, why, sizeof why), FMCU_Q_MXFP4_A4);
    /* Neighbours the reference's megamoe family does not serve either. */
    const char *refused[] = {"fp4:group32:scale-ue8m0/fp8e4m3:group128:dynamic",
                             "fp4:group32:scale-ue8m0/fp8e4m3:token:dynamic"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        fmoe_scheme r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        if (fmoe_scheme_parse(refused[i], &r) != FMOE_STATUS_OK)
            continue; /* not even a key */
        why[0] = 0;
        ck_assert_msg(fmcu_scheme_quant(&r, why, sizeof why) == -1, "%s accepted", refused[i]);
        ck_assert_msg(strstr(why, "MXFP4") != NULL, "%s: %s", refused[i], why);
    }
    /* Static (non-dynamic) or asymmetric activations. */
    fmoe_scheme st = s;
    st.a_dynamic = 0;
    ck_assert_int_eq(fmcu_scheme_quant(&st, why, sizeof why), -1);
    fmoe_scheme asym = s;
    asym.a_symmetric = 0;
    ck_assert_int_eq(fmcu_scheme_quant(&asym, why, sizeof why), -1);
}
END_TEST

/* Each layer the reference refuses, refused with its reason, by the cuda
 * plugin's config check and by the reference plugin's query alike. */
START_TEST(layers_refused_like_the_reference)
{
    loaded ref = load_plugin(FMCU_TEST_REFERENCE_PLUGIN);
    fmoe_scheme s = scheme(KEY);
    char why[256];
    fmoe_layer_config ok = config();
    ck_assert_int_eq(fmcu_check_config(&ok, &s, 256, 128, why, sizeof why), 0);
    ok.swiglu_limit = 0.0f; /* the clamp is optional */
    ck_assert_int_eq(fmcu_check_config(&ok, &s, 256, 128, why, sizeof why), 0);
    for (int v = 0; v < 5; v++) {
        fmoe_layer_config c = config();
        const char *core = NULL;
        switch (v) {
        case 0:
            c.gated = 0;
            core = "needs a gated layer with activation silu";
            break;
        case 1:
            c.activation = FMOE_ACT_GELU;
            core = "needs a gated layer with activation silu";
            break;
        case 2:
            c.act_dtype = FMOE_DTYPE_F16;
            core = "needs act_dtype bf16";
            break;
        case 3:
            c.has_bias = 1;
            core = "expert biases are not part of the scheme";
            break;
        default:
            c.top_k = 1;
            c.apply_router_weight_on_input = 1;
            core = "the router weight is applied after SwiGLU, not on the input";
        }
        why[0] = 0;
        ck_assert_int_eq(fmcu_check_config(&c, &s, 256, 128, why, sizeof why), -1);
        ck_assert_msg(strstr(why, core) != NULL, "case %d: %s", v, why);
        ck_assert_msg(strncmp(why, "MXFP4 x FP8 (MegaMoE): ", 23) == 0, "case %d: %s", v, why);
        fmoe_query_args q = {.struct_size = sizeof q,
                             .state = ref.state,
                             .config = &c,
                             .scheme = &s,
                             .scheme_key = KEY,
                             .device_kind = FMOE_DEVICE_CPU};
        ck_assert_int_eq(ref.plugin->query(&q), FMOE_STATUS_UNSUPPORTED);
        ck_assert_msg(strstr(q.reason, why) != NULL, "case %d: reference says \"%s\", cuda \"%s\"", v, q.reason, why);
    }
    ref.plugin->shutdown(ref.state);
}
END_TEST

/* The reference's declarations, TP 1 and 2. */
START_TEST(params_match_the_reference)
{
    loaded ref = load_plugin(FMCU_TEST_REFERENCE_PLUGIN);
    fmoe_scheme s = scheme(KEY);
    char why[256];
    for (uint32_t tp = 1; tp <= 2; tp++) {
        fmoe_layer_config c = config();
        c.tp_size = tp;
        uint32_t inter = c.intermediate_size / tp;
        fmoe_query_args q = {.struct_size = sizeof q,
                             .state = ref.state,
                             .config = &c,
                             .scheme = &s,
                             .scheme_key = KEY,
                             .device_kind = FMOE_DEVICE_CPU};
        ck_assert_int_eq(ref.plugin->query(&q), FMOE_STATUS_OK);
        fmoe_create_args ca = {.struct_size = sizeof ca,
                               .state = ref.state,
                               .config = &c,
                               .scheme = &s,
                               .device_kind = FMOE_DEVICE_CPU,
                               .hidden_size = c.hidden_size,
                               .intermediate_per_rank = inter,
                               .num_local_experts = 8,
                               .num_global_experts = 8};
        ck_assert_int_eq(q.method->create(&ca), FMOE_STATUS_OK);
        fmoe_declare_params_args da = {.struct_size = sizeof da, .instance = ca.instance};
        ck_assert_int_eq(q.method->declare_params(&da), FMOE_STATUS_OK);
        fmoe_param_desc mine[FMCU_MAX_PARAMS];
        uint32_t n = 0;
        ck_assert_int_eq(fmcu_declare(&c, &s, c.hidden_size, inter, 8, mine, &n, why, sizeof why), 0);
        ck_assert_uint_eq(n, 4);
        ck_assert_uint_eq(n, da.n_params);
        for (uint32_t i = 0; i < n; i++) {
            const fmoe_param_desc *r = da.params[i], *m = &mine[i];
            ck_assert_str_eq(m->name, r->name);
            ck_assert_int_eq(m->dtype, r->dtype);
            ck_assert_uint_eq(m->ndim, r->ndim);
            for (uint32_t d = 0; d < m->ndim; d++)
                ck_assert_int_eq(m->shape[d], r->shape[d]);
            ck_assert_int_eq(m->projection, r->projection);
            ck_assert_int_eq(m->role, r->role);
            ck_assert_int_eq(m->scale_kind, r->scale_kind);
            ck_assert_int_eq(m->shard_axis, r->shard_axis);
            ck_assert_uint_eq(m->per_expert, r->per_expert);
            ck_assert_uint_eq(m->flags, r->flags);
        }
        /* vLLM DeepseekV4MegaMoEExperts' names and shapes. */
        ck_assert_str_eq(mine[0].name, "w13_weight");
        ck_assert_int_eq(mine[0].shape[1], 2 * (int64_t)inter);
        ck_assert_int_eq(mine[0].shape[2], 128);
        ck_assert_str_eq(mine[3].name, "w2_weight_scale");
        ck_assert_int_eq(mine[3].shape[2], (int64_t)inter / 32);
        fmoe_destroy_args xa = {.struct_size = sizeof xa, .instance = ca.instance};
        q.method->destroy(&xa);
    }
    ref.plugin->shutdown(ref.state);
}
END_TEST

/* H and I multiples of 16 (the kernels) but not of the scale group of 32. */
START_TEST(sizes_off_the_scale_group)
{
    fmoe_scheme s = scheme(KEY);
    fmoe_layer_config c = config();
    fmoe_param_desc d[FMCU_MAX_PARAMS];
    uint32_t n;
    char why[256];
    ck_assert_int_eq(fmcu_declare(&c, &s, 272, 128, 8, d, &n, why, sizeof why), -1);
    ck_assert_str_eq(why, "MXFP4 x FP8: hidden_size 272 is not divisible by the scale group of 32");
    ck_assert_int_eq(fmcu_declare(&c, &s, 256, 80, 8, d, &n, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "intermediate_size_per_partition 80 is not divisible by the scale group of 32"));
}
END_TEST

/* The built plugin's query (no GPU needed: it reads no device for this
 * scheme): the emulated method at score 90 (below megamoe), monolithic, and
 * modular on an EP group. */
START_TEST(query_hands_out_the_method)
{
    loaded l = load_plugin(FMCU_TEST_CUDA_PLUGIN);
    fmoe_scheme s = scheme(KEY);
    fmoe_layer_config c = config();
    fmoe_query_args q = {.struct_size = sizeof q,
                         .state = l.state,
                         .config = &c,
                         .scheme = &s,
                         .scheme_key = KEY,
                         .device_kind = FMOE_DEVICE_CUDA};
    ck_assert_int_eq(l.plugin->query(&q), FMOE_STATUS_OK);
    ck_assert_str_eq(q.method->name, "mxfp4_w4a8_emulated_bf16_mma");
    ck_assert_uint_eq(q.score, 90);
    ck_assert(q.method->flags & FMOE_METHOD_MONOLITHIC);
    ck_assert_ptr_nonnull(q.method->apply_logits);
    int group = 1; /* any non-NULL group: the query only asks whether there is one */
    q.ep_group = &group;
    ck_assert_int_eq(l.plugin->query(&q), FMOE_STATUS_OK);
    ck_assert_str_eq(q.method->name, "mxfp4_w4a8_emulated_bf16_mma");
    ck_assert(!(q.method->flags & FMOE_METHOD_MONOLITHIC));
    ck_assert_ptr_nonnull(q.method->apply);
    q.ep_group = NULL;
    c.has_bias = 1;
    ck_assert_int_eq(l.plugin->query(&q), FMOE_STATUS_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(q.reason, "expert biases"));
    l.plugin->shutdown(l.state);
}
END_TEST

/* ---- the row kernels' rules (mx_w4a8_rules.h) ------------------------------ */

#define SEED 0x6D78773461380001ull /* "mxw4a8" */

static uint64_t rng_state = SEED;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static float uniform01(void)
{
    return (float)(rng_next() >> 40) / (float)(1u << 24);
}

/* bf16 round to nearest even, on the bits (NaN kept). */
static float bf16_round(float v)
{
    if (v != v)
        return v;
    uint32_t u = fmcu_mx_bits(v);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return fmcu_mx_float(u & 0xFFFF0000u);
}

/* A value of magnitude about 2^e (sign random, 1..2 times). */
static float around(int e)
{
    float v = ldexpf(1.0f + uniform01(), e);
    return (rng_next() & 1) ? -v : v;
}

START_TEST(input_scale_is_the_core_rule)
{
    rng_state = SEED;
    const float special[] = {0.0f,   1e-40f, 1e-30f, 9.99e-5f, 1e-4f,    1.0001e-4f,     1.0f,
                             447.9f, 448.0f, 896.0f, 3.0e38f,  INFINITY, 1.17549435e-38f};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        ck_assert_msg(fmcu_mx_bits(fmcu_mx_input_scale(special[i])) ==
                          fmcu_mx_bits(fmoe_fp8_dynamic_scale(special[i], 448.0f, FMOE_FP8_SCALE_UE8M0)),
                      "amax %g", (double)special[i]);
    for (int i = 0; i < 200000; i++) {
        float a = fabsf(around((int)(rng_next() % 280) - 150));
        ck_assert_msg(fmcu_mx_bits(fmcu_mx_input_scale(a)) ==
                          fmcu_mx_bits(fmoe_fp8_dynamic_scale(a, 448.0f, FMOE_FP8_SCALE_UE8M0)),
                      "amax %a (seed %llx)", (double)a, (unsigned long long)SEED);
    }
    /* The floor keeps every scale at 2^-22 or above: the values stay far from bf16's subnormals. */
    ck_assert(fmcu_mx_input_scale(0.0f) == ldexpf(1.0f, -22));
    /* A 32-group quantized the kernel's way (the scale, x / s, the encoder,
     * times s) is the core block quantizer's, bit for bit, and exact in bf16. */
    for (int row = 0; row < 20000; row++) {
        float x[FMCU_MX_GROUP], core[FMCU_MX_GROUP], amax = 0.0f, cs;
        uint8_t q[FMCU_MX_GROUP];
        int e = (int)(rng_next() % 60) - 40;
        for (int i = 0; i < FMCU_MX_GROUP; i++) {
            x[i] = bf16_round(around(e - (int)(rng_next() % 12)));
            if (row % 97 == 0 && i % 5 == 0)
                x[i] = 0.0f;
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        }
        ck_assert_int_eq(fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_UE8M0, 1, FMCU_MX_GROUP,
                                                  1, FMCU_MX_GROUP, x, q, &cs),
                         FMOE_STATUS_OK);
        ck_assert_int_eq(fmoe_fp8_dequantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 1, FMCU_MX_GROUP, 1, FMCU_MX_GROUP, q, &cs,
                                                    core),
                         FMOE_STATUS_OK);
        const float s = fmcu_mx_input_scale(amax);
        for (int i = 0; i < FMCU_MX_GROUP; i++) {
            float v = x[i] / s;
            v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
            const float mine = fmoe_fp8_e4m3fn_decode(fmoe_fp8_e4m3fn_encode(v)) * s;
            ck_assert_msg(fmcu_mx_bits(mine) == fmcu_mx_bits(core[i]), "row %d value %d: %a vs core %a (seed %llx)",
                          row, i, (double)mine, (double)core[i], (unsigned long long)SEED);
            ck_assert_msg(bf16_round(mine) == mine, "row %d value %d: %a not exact in bf16", row, i, (double)mine);
        }
    }
}
END_TEST

START_TEST(requant_rule)
{
    /* spec E18: gate 12, up -3, clamp 10, weight 0.5 -> -14.999319 -> sf 2^-4
     * (byte 123), code 0xF7, -15.0. */
    const float a = fmcu_mx_swiglu(12.0f, -3.0f, 1, bf16_round(10.0f), 0.5f);
    ck_assert_msg(fabsf(a + 14.999319f) < 2e-6f, "a = %.7f", (double)a);
    const int32_t ex = fmcu_mx_requant_exponent(fabsf(a));
    ck_assert_int_eq(ex, -4);
    ck_assert_int_eq(ex + 127, 123);
    const uint8_t code = fmoe_fp8_e4m3fn_encode(a * fmcu_mx_pow2(-ex));
    ck_assert_uint_eq(code, 0xF7);
    ck_assert(fmoe_fp8_e4m3fn_decode(code) * fmcu_mx_pow2(ex) == -15.0f);
    /* The clamp: g = min(g, c), u = clamp(u, +-c); off, nothing is clamped. */
    ck_assert(fmcu_mx_swiglu(20.0f, -30.0f, 1, 10.0f, 1.0f) == fmcu_mx_swiglu(10.0f, -10.0f, 0, 0.0f, 1.0f));
    ck_assert(fmcu_mx_swiglu(-20.0f, 30.0f, 1, 10.0f, 1.0f) == fmcu_mx_swiglu(-20.0f, 10.0f, 0, 0.0f, 1.0f));
    ck_assert(fmcu_mx_swiglu(20.0f, -30.0f, 0, 10.0f, 1.0f) != fmcu_mx_swiglu(10.0f, -10.0f, 0, 0.0f, 1.0f));
    /* An all-zero group: sf 0, and the quotients 0 * 2^127 are 0. */
    ck_assert_int_eq(fmcu_mx_requant_exponent(0.0f), -127);
    ck_assert(fmcu_mx_pow2(-127) == 0.0f);
    ck_assert(fmcu_mx_pow2(127) == ldexpf(1.0f, 127));
    /* Elsewhere sf is the smallest power of two >= amax * (1/448), which
     * is fmoe_ue8m0_encode_ceil's (where that does not clamp). */
    rng_state = SEED ^ 1;
    for (int i = 0; i < 200000; i++) {
        const float amax = fabsf(around((int)(rng_next() % 230) - 110));
        const float t = amax * (1.0f / 448.0f);
        const int32_t e = fmcu_mx_requant_exponent(amax);
        ck_assert_msg(fmcu_mx_pow2(e) == fmoe_ue8m0_decode(fmoe_ue8m0_encode_ceil(t)), "amax %a (seed %llx)",
                      (double)amax, (unsigned long long)(SEED ^ 1));
        ck_assert(fmcu_mx_pow2(e) >= t && fmcu_mx_pow2(e) < 2.0f * t);
    }
}
END_TEST

/* Every e4m3 value times sf = 2^e is exact in bf16 for e >= -124 (what the
 * GEMM2 input rows rely on); at -125 the smallest code is not (the bound
 * docs/CUDA.md gives: group amax below about 2^-116). */
START_TEST(values_exact_in_bf16)
{
    for (int32_t e = -124; e <= 120; e++)
        for (uint32_t c = 0; c < 256; c++) {
            if ((c & 0x7F) == 0x7F)
                continue; /* NaN */
            const float v = fmoe_fp8_e4m3fn_decode((uint8_t)c) * fmcu_mx_pow2(e);
            ck_assert_msg(bf16_round(v) == v, "code %02x x 2^%d", c, e);
        }
    const float tiny = fmoe_fp8_e4m3fn_decode(1) * fmcu_mx_pow2(-125);
    ck_assert(tiny == ldexpf(1.0f, -134));
    ck_assert(bf16_round(tiny) != tiny);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_mx_w4a8");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, scheme_maps_to_the_method);
    tcase_add_test(tc, layers_refused_like_the_reference);
    tcase_add_test(tc, params_match_the_reference);
    tcase_add_test(tc, sizes_off_the_scale_group);
    tcase_add_test(tc, query_hands_out_the_method);
    tcase_add_test(tc, input_scale_is_the_core_rule);
    tcase_add_test(tc, requant_rule);
    tcase_add_test(tc, values_exact_in_bf16);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
