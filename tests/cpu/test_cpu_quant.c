/*
 * tests/cpu/test_cpu_quant.c - the CPU plugin's INT8 W8A8 and W4A8 methods
 * end to end, through the public API, against the independent float64
 * model of tests/reference_quant (harness.c, built here with the cpu
 * plugin's manifest in place of the reference's): checkpoint tensors in
 * the reference's parameter names and layouts, TP and EP shards summed,
 * biases, weights on the input, invalid ids. meson runs this once per
 * kernel path, --isa=portable|avx2|avx512_vnni|avx512_bf16, which becomes
 * the plugin option isa in each context's configuration (a path this
 * machine lacks is clamped by the plugin and the run repeats the best one).
 */
#include <stdlib.h>
#include <string.h>

#include "tests/cpu/option_args.h"
#include "tests/reference_quant/harness.h"

static cpu_test_args args;
static char options_toml[256];

static const char *const keys[] = {
    "int8:channel/int8:token:dynamic",
    "int8:tensor/int8:token:dynamic",
    "int4:channel/int8:token:dynamic:asym",
    "int4:group32:scale-bf16/int8:token:dynamic:asym",
};
#define N_KEYS (sizeof keys / sizeof keys[0])

/* The case defaults, with int4's quantization error allowed for in the
 * loose comparison with the unquantized model (as tests/reference_quant). */
static qcase make(int i)
{
    qcase c = qcase_init(keys[i]);
    c.loose = strncmp(keys[i], "int4", 4) == 0 ? 0.4 : 0.05;
    return c;
}

START_TEST(basic)
{
    qcase c = make(_i);
    c.M = 16;
    qcase_run(&c, 100 + (uint64_t)_i);
}
END_TEST

START_TEST(odd_sizes_bias_nongated)
{
    qcase c = make(_i);
    c.H = 96, c.I = 160, c.E = 5, c.topk = 3, c.M = 13, c.bias = 1;
    qcase_run(&c, 200 + (uint64_t)_i);
    c.gated = 0;
    qcase_run(&c, 300 + (uint64_t)_i);
}
END_TEST

START_TEST(sharded_and_on_input)
{
    qcase c = make(_i);
    c.tp = 2;
    c.bias = 1;
    qcase_run(&c, 400 + (uint64_t)_i);
    c = make(_i);
    c.ep = 2, c.E = 6, c.invalid_ids = 1;
    qcase_run(&c, 500 + (uint64_t)_i);
    c = make(_i);
    c.topk = 1, c.on_input = 1, c.M = 5;
    qcase_run(&c, 600 + (uint64_t)_i);
}
END_TEST

START_TEST(decode_many_experts)
{
    qcase c = make(_i);
    c.E = 32, c.topk = 4, c.M = 1, c.H = 256, c.I = 128;
    qcase_run(&c, 700 + (uint64_t)_i);
    c.M = 4;
    qcase_run(&c, 800 + (uint64_t)_i);
}
END_TEST

START_TEST(experts_of_several_rows)
{
    /* ~7 rows an expert: more than the kernels' mr, so each tile is run
     * by two calls (the second from L1), and rows left over after them. */
    qcase c = make(_i);
    c.E = 4, c.topk = 3, c.M = 10, c.H = 128, c.I = 192;
    qcase_run(&c, 900 + (uint64_t)_i);
}
END_TEST

/* The cpu candidate's score for `key` (explain, no layer created). */
static uint32_t cpu_score(fmoe_context *ctx, const char *key)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = 8, cfg.top_k = 2, cfg.hidden_size = 128, cfg.intermediate_size = 64;
    cfg.act_dtype = strcmp(key, "bf16") == 0 ? FMOE_DTYPE_BF16 : FMOE_DTYPE_F32;
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_scheme_parse(key, &s), FMOE_STATUS_OK);
    fmoe_selection *sel = NULL;
    ck_assert_msg(fmoe_context_explain(ctx, &cfg, &s, &sel) == FMOE_STATUS_OK, "explain %s: %s", key,
                  fmoe_last_error());
    int32_t chosen = fmoe_selection_chosen(sel);
    ck_assert_msg(chosen >= 0, "%s: nothing selected: %s", key, fmoe_selection_summary(sel));
    fmoe_candidate c = {.struct_size = sizeof c};
    ck_assert_int_eq(fmoe_selection_candidate(sel, (uint32_t)chosen, &c), FMOE_STATUS_OK);
    ck_assert_msg(strcmp(c.plugin, "cpu") == 0, "%s: selected %s, not cpu", key, c.plugin);
    uint32_t score = c.score;
    fmoe_selection_destroy(sel);
    return score;
}

/* Query scores: the unquantized method scores by kernel path (10 portable
 * .. 40 avx512_bf16); the integer methods score the same, except on the
 * portable kernels, where they score 5 so that a plugin with SIMD kernels
 * for the scheme (cpu_arm on aarch64) wins over them. */
START_TEST(query_scores)
{
    fmoe_context *ctx = refq_context(NULL);
    int level = cpu_test_level(ctx, &args);
    uint32_t path = cpu_score(ctx, "bf16");
    ck_assert_uint_eq(path, 10u * (uint32_t)(level + 1));
    for (size_t i = 0; i < N_KEYS; i++) {
        uint32_t score = cpu_score(ctx, keys[i]);
        ck_assert_msg(score == (path == 10 ? 5u : path), "%s: score %u, bf16 path scores %u", keys[i], score, path);
    }
    fmoe_context_destroy(ctx);
}
END_TEST

int main(int argc, char **argv)
{
    if (cpu_test_args_parse(argc, argv, &args) != 0)
        return EXIT_FAILURE;
    cpu_test_args_toml(&args, options_toml, sizeof options_toml);
    refq_config_extra = options_toml;
    printf("# plugin options: isa %s, amx %s\n", args.isa ? args.isa : "(default)", args.amx ? args.amx : "(default)");
    Suite *s = suite_create("cpu_quant");
    TCase *tc = tcase_create("methods");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, basic, 0, N_KEYS);
    tcase_add_loop_test(tc, experts_of_several_rows, 0, N_KEYS);
    tcase_add_loop_test(tc, odd_sizes_bias_nongated, 0, N_KEYS);
    tcase_add_loop_test(tc, sharded_and_on_input, 0, N_KEYS);
    tcase_add_loop_test(tc, decode_many_experts, 0, N_KEYS);
    tcase_add_test(tc, query_scores);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5 * N_KEYS + 1);
}
