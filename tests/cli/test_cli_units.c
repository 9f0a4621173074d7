/*
 * tests/cli/test_cli_units.c - the pieces of the `fusedmoe` tool whose
 * mistakes the end-to-end tests cannot see: storing the synthetic layer
 * as f32/bf16/f16, the comparison that decides PASS/FAIL
 * (NaN must never pass), strict number parsing, the seeded streams, and the
 * layer-flag parser reading back every replay line the library prints,
 * and the rate `fusedmoe bench` divides its memory floor by.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/config_args.h"
#include "cli/args.h"
#include "cli/bench/bench.h"
#include "cli/halfconv.h"
#include "cli/layer_flags.h"
#include "cli/rng.h"
#include "cli/run_compare.h"
#include "fusedmoe/fusedmoe.h"
#include "tests/test_util.h"

START_TEST(test_store_load)
{
    const float src[4] = {1.5f, -0.25f, 3.0f, 0.0f};
    uint16_t h[4];
    float back[4];
    for (fmoe_dtype d = FMOE_DTYPE_F32; d <= FMOE_DTYPE_F16; d++) {
        float buf32[4];
        void *dst = d == FMOE_DTYPE_F32 ? (void *)buf32 : (void *)h;
        cli_store_floats(d, dst, src, 4);
        cli_load_floats(d, back, dst, 4);
        for (int i = 0; i < 4; i++)
            ck_assert_float_eq(back[i], src[i]);
    }
    ck_assert(cli_is_float_storage(FMOE_DTYPE_BF16));
    ck_assert(!cli_is_float_storage(FMOE_DTYPE_FP8_E4M3FN));
}
END_TEST

START_TEST(test_compare)
{
    run_tolerance tol = {1e-3, 1e-3, FMOE_DTYPE_F16};
    const float ref[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    float got[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    run_errors e;
    run_compare(got, ref, 4, &tol, &e);
    ck_assert(run_passed(&e));
    ck_assert(e.max_abs == 0 && e.max_rel == 0 && e.nmse == 0 && e.worst == -1);
    ck_assert(e.max_ref == 2.0);

    /* Inside: 1e-3 + 1e-3 * 2 = 3e-3 allowed at element 1. */
    got[1] = -2.0025f;
    run_compare(got, ref, 4, &tol, &e);
    ck_assert(run_passed(&e));
    ck_assert(fabs(e.max_abs - 0.0025) < 1e-6);
    ck_assert(fabs(e.max_rel - 0.0025 / 2.0) < 1e-6);

    /* Outside at element 3 (|ref| = 0: only atol). */
    got[3] = 2e-3f;
    run_compare(got, ref, 4, &tol, &e);
    ck_assert(!run_passed(&e));
    ck_assert_int_eq(e.outside, 1);
    ck_assert_int_eq(e.worst, 3);

    /* NaN never passes, however loose the tolerance, and is the worst. */
    run_tolerance loose = {1e9, 1e9, FMOE_DTYPE_BF16};
    got[3] = 0.0f;
    got[2] = NAN;
    run_compare(got, ref, 4, &loose, &e);
    ck_assert(!run_passed(&e));
    ck_assert_int_eq(e.nonfinite, 1);
    ck_assert_int_eq(e.worst, 2);
    ck_assert(isfinite(e.max_abs));

    /* A NaN in the reference fails too; so does inf against inf. */
    float nan_ref[1] = {NAN}, one[1] = {1.0f}, inf1[1] = {INFINITY};
    run_compare(one, nan_ref, 1, &loose, &e);
    ck_assert(!run_passed(&e));
    run_compare(inf1, inf1, 1, &loose, &e);
    ck_assert(!run_passed(&e));

    /* All-zero reference, nonzero output: relative error is infinite. */
    float zero[1] = {0.0f}, small[1] = {1e-9f};
    run_compare(small, zero, 1, &tol, &e);
    ck_assert(run_passed(&e));
    ck_assert(isinf(e.max_rel) && isinf(e.nmse));
}
END_TEST

START_TEST(test_tolerance_choice)
{
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
    ck_assert_int_eq(run_tolerance_for(FMOE_DTYPE_F32, &s).dtype, FMOE_DTYPE_BF16);
    ck_assert(run_tolerance_for(FMOE_DTYPE_BF16, &s).atol == 2e-2);
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    run_tolerance t = run_tolerance_for(FMOE_DTYPE_F32, &s);
    ck_assert(t.dtype == FMOE_DTYPE_F32 && t.atol == 1e-5 && t.rtol == 1e-5);
    t = run_tolerance_for(FMOE_DTYPE_F16, &s);
    ck_assert(t.dtype == FMOE_DTYPE_F16 && t.atol == 1e-3 && t.rtol == 1e-3);
    ck_assert_int_eq(fmoe_scheme_parse("fp8e4m3:channel/fp8e4m3:token:dynamic", &s), FMOE_STATUS_OK);
    ck_assert_int_eq(run_tolerance_for(FMOE_DTYPE_F32, &s).dtype, FMOE_DTYPE_BF16);
}
END_TEST

START_TEST(test_numbers)
{
    uint32_t u = 7;
    uint64_t u64 = 0;
    float f = 0;
    ck_assert_int_eq(cli_parse_u32("0", &u), 0);
    ck_assert_uint_eq(u, 0);
    ck_assert_int_eq(cli_parse_u32("4294967295", &u), 0);
    ck_assert_uint_eq(u, 4294967295u);
    static const char *const bad_u[] = {"4294967296", "-1", "+1", " 1", "1 ", "", "0x10", "1e3", "1.0", "abc"};
    for (size_t i = 0; i < sizeof bad_u / sizeof bad_u[0]; i++)
        ck_assert_msg(cli_parse_u32(bad_u[i], &u) != 0, "'%s' accepted", bad_u[i]);
    ck_assert_int_eq(cli_parse_u64("18446744073709551615", &u64), 0);
    ck_assert(u64 == UINT64_MAX);
    ck_assert_int_ne(cli_parse_u64("18446744073709551616", &u64), 0);
    ck_assert_int_eq(cli_parse_float("2.5", &f), 0);
    ck_assert_float_eq(f, 2.5f);
    ck_assert_int_eq(cli_parse_float("-1e-3", &f), 0);
    static const char *const bad_f[] = {"nan", "inf", "-inf", "1e999", "2.5x", "", " 1", "x"};
    for (size_t i = 0; i < sizeof bad_f / sizeof bad_f[0]; i++)
        ck_assert_msg(cli_parse_float(bad_f[i], &f) != 0, "'%s' accepted", bad_f[i]);
}
END_TEST

START_TEST(test_rng_streams)
{
    float a[64], b[64], c[64], d[64];
    cli_rng_fill_normal(a, 64, 1.0f, 42, "w1", 3);
    cli_rng_fill_normal(b, 64, 1.0f, 42, "w1", 3);
    cli_rng_fill_normal(c, 64, 1.0f, 42, "w1", 4);
    cli_rng_fill_normal(d, 64, 1.0f, 42, "w3", 3);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(a, c, sizeof a) != 0);
    ck_assert(memcmp(a, d, sizeof a) != 0);
    /* Roughly standard normal. */
    float big[4096];
    cli_rng_fill_normal(big, 4096, 1.0f, 7, "x", 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < 4096; i++) {
        ck_assert(isfinite(big[i]));
        sum += big[i];
        sq += (double)big[i] * big[i];
    }
    ck_assert(fabs(sum / 4096) < 0.1 && fabs(sq / 4096 - 1.0) < 0.1);
}
END_TEST

/* Parse a space-separated flag line into cfg (starting from defaults). */
static int parse_line(const char *line, fmoe_layer_config *cfg)
{
    char buf[1024];
    char *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "test";
    for (char *tok = strtok(buf, " "); tok && argc < 127; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    layer_flags_defaults(cfg);
    for (int i = 1; i < argc; i++)
        if (layer_flags_parse(cfg, "test", argc, argv, &i) != LAYER_FLAG_TAKEN)
            return -1;
    return 0;
}

/* The memory floor divides by the higher of a device's read and copy
 * rates, whichever that is, and names it; a missing rate (0) never wins. */
START_TEST(test_bench_memory_rate)
{
    const char *src = NULL;
    ck_assert_double_eq(bench_memory_rate(2e9, 3e9, &src), 3e9);
    ck_assert_str_eq(src, "device read");
    ck_assert_double_eq(bench_memory_rate(3.35e12, 2.98e12, &src), 3.35e12);
    ck_assert_str_eq(src, "device copy");
    ck_assert_double_eq(bench_memory_rate(2.5e9, 2.5e9, &src), 2.5e9);
    ck_assert_str_eq(src, "device read"); /* a tie: the read rate is what a weight stream meets */
    ck_assert_double_eq(bench_memory_rate(2e9, 0, &src), 2e9);
    ck_assert_str_eq(src, "device copy");
    ck_assert_double_eq(bench_memory_rate(0, 4e9, &src), 4e9);
    ck_assert_str_eq(src, "device read");
    ck_assert_double_eq(bench_memory_rate(0, 0, &src), 0);
    ck_assert_str_eq(src, "none");
    ck_assert_double_eq(bench_memory_rate(1e9, 5e9, NULL), 5e9);
}
END_TEST

/* floor = max(bytes / rate, flops / peak), a term left out when its rate
 * is not known. */
START_TEST(test_bench_floor_seconds)
{
    /* Memory bound: 6e9 bytes at 3e9 B/s = 2 s against 1e12 flops at 1e12. */
    ck_assert_double_eq_tol(bench_floor_seconds(6e9, 3e9, 1e12, 1e12), 2.0, 1e-12);
    /* Compute bound: 4e12 flops at 1e12 = 4 s. */
    ck_assert_double_eq_tol(bench_floor_seconds(6e9, 3e9, 4e12, 1e12), 4.0, 1e-12);
    ck_assert_double_eq_tol(bench_floor_seconds(6e9, 0, 4e12, 1e12), 4.0, 1e-12);
    ck_assert_double_eq_tol(bench_floor_seconds(6e9, 3e9, 4e12, 0), 2.0, 1e-12);
    ck_assert_double_eq(bench_floor_seconds(6e9, 0, 4e12, 0), 0.0);
}
END_TEST

/* The busiest rank of a linear placement: distinct experts only, empty
 * slots skipped. */
START_TEST(test_bench_busiest_rank_experts)
{
    /* 8 experts on 2 ranks (0-3, 4-7): rank 0 gets 1 and 3 (1 twice), rank 1
     * gets 4, 5, 7 */
    const int32_t ids[] = {1, 4, 1, 5, 3, 7, -1, 8, 4, 5};
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 10, 8, 2), 3);
    /* on 4 ranks (two each): {1}, {3}, {4, 5}, {7} */
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 10, 8, 4), 2);
    /* one rank holds all: 1, 3, 4, 5, 7 */
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 10, 8, 1), 5);
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 2, 8, 2), 1);
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 0, 8, 2), 0);
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 10, 8, 3), 0); /* not a multiple */
    ck_assert_uint_eq(bench_busiest_rank_experts(ids, 10, 8, 0), 0);
}
END_TEST

START_TEST(test_replay_round_trip)
{
    /* Configs that set every field away from its default, in turn. */
    fmoe_layer_config cfgs[3];
    for (int k = 0; k < 3; k++) {
        fmoe_layer_config_init(&cfgs[k]);
        cfgs[k].num_experts = 16;
        cfgs[k].top_k = 4;
        cfgs[k].hidden_size = 128;
        cfgs[k].intermediate_size = 384;
    }
    fmoe_layer_config *c = &cfgs[0];
    c->activation = FMOE_ACT_SWIGLUOAI;
    c->has_bias = 1;
    c->swiglu_alpha = 1.5f;
    c->swiglu_limit = 7.25f;
    c->act_dtype = FMOE_DTYPE_F16;
    c->scoring = FMOE_SCORING_SQRTSOFTPLUS;
    c->renormalize = 1;
    c->grouped_topk = 1;
    c->num_expert_group = 4;
    c->topk_group = 2;
    c->has_correction_bias = 1;
    c->routed_scaling_factor = 2.5f;
    c->ep_size = 4;
    c->ep_rank = 3;
    c->placement = FMOE_PLACEMENT_ROUND_ROBIN;
    c->enable_eplb = 1;
    c->num_redundant_experts = 4;
    c->max_num_tokens = 1000;
    c = &cfgs[1];
    c->activation = FMOE_ACT_GELU;
    c->gated = 0;
    c->act_dtype = FMOE_DTYPE_F32;
    c->tp_size = 2;
    c->tp_rank = 1;
    c = &cfgs[2];
    c->top_k = 1;
    c->apply_router_weight_on_input = 1;
    c->scoring = FMOE_SCORING_SIGMOID;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(fmoe_layer_config_validate(&cfgs[k]), FMOE_STATUS_OK);
        char line[1024];
        fmoe_layer_config_format_args(&cfgs[k], line, sizeof line);
        fmoe_layer_config back;
        ck_assert_msg(parse_line(line, &back) == 0, "cannot parse replay line '%s'", line);
        ck_assert_msg(memcmp(&back, &cfgs[k], sizeof back) == 0, "'%s' parsed back differently", line);
    }
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli_units");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_store_load);
    tcase_add_test(tc, test_compare);
    tcase_add_test(tc, test_tolerance_choice);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_rng_streams);
    tcase_add_test(tc, test_replay_round_trip);
    tcase_add_test(tc, test_bench_memory_rate);
    tcase_add_test(tc, test_bench_floor_seconds);
    tcase_add_test(tc, test_bench_busiest_rank_experts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(cli_suite(), 6);
}
