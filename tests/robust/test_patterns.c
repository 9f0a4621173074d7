/*
 * tests/robust/test_patterns.c - regexes and globs from checkpoints, through
 * the public quantization_config API (docs/ROBUSTNESS.md, "Patterns").
 *
 * A pattern of a few bytes can ask a regex library for gigabytes
 * ("(((a{100}){100}){100}){100}" is 10^8 copies of "a" for glibc's
 * regcomp). Every such pattern must be refused at once, as INVALID_ARGUMENT
 * naming the config key and the pattern, and a layer whose matching work
 * would be too large must be refused before any name is matched. The
 * address space is capped (outside ASan, which reserves its own) so an
 * engine that tries to build such a pattern fails here instead of taking
 * the machine's memory; the case timeout bounds one that tries for long.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

static void cap_memory(void)
{
#ifndef __SANITIZE_ADDRESS__
    struct rlimit r = {.rlim_cur = 2ull << 30, .rlim_max = 2ull << 30};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &r), 0);
#endif
}

/* A compressed-tensors config with one int4 group and these members. */
#define CT_FORMAT \
    "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", " \
    "\"format\": \"pack-quantized\", \"config_groups\": {\"g\": {\"targets\": %s, \"weights\": {\"num_bits\": 4, " \
    "\"type\": \"int\", \"symmetric\": true, \"strategy\": \"group\", \"group_size\": 128}}}, \"ignore\": %s}}"

static char *ct_config(const char *targets, const char *ignore)
{
    size_t n = sizeof CT_FORMAT + strlen(targets) + strlen(ignore);
    char *json = malloc(n);
    ck_assert_ptr_nonnull(json);
    snprintf(json, n, CT_FORMAT, targets, ignore);
    return json;
}

static void expect_parse_error(const char *json, const char *want)
{
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(qc);
    ck_assert_str_eq(fmoe_last_error(), want);
}

/* Nested repeats multiply: refused by size, before anything is built. */
START_TEST(test_nested_repeats)
{
    cap_memory();
    char *json = ct_config("[\"Linear\"]", "[\"lm_head\", \"re:(((a{100}){100}){100}){100}\"]");
    expect_parse_error(json, "config.json: quantization_config.ignore[1]: bad regular expression "
                             "\"re:(((a{100}){100}){100}){100}\": compiles to more than 4096 instructions (repeat "
                             "counts multiply the size of what they repeat)");
    free(json);
    json = ct_config("[\"re:.*x{5000}\"]", "[]");
    expect_parse_error(json, "config.json: quantization_config.config_groups.g.targets[0]: bad regular expression "
                             "\"re:.*x{5000}\": compiles to more than 4096 instructions (repeat counts multiply the "
                             "size of what they repeat)");
    free(json);
    /* GPTQ's dynamic keys are regexes too. */
    const char *gptq = "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
                       "\"dynamic\": {\"-:((.{64}){64})\": {}}}}";
    expect_parse_error(gptq, "config.json: quantization_config.dynamic[\"-:((.{64}){64})\"]: bad regular expression "
                             "\"-:((.{64}){64})\": compiles to more than 4096 instructions (repeat counts multiply "
                             "the size of what they repeat)");
}
END_TEST

/* Length and nesting are bounded too. */
START_TEST(test_long_and_deep)
{
    cap_memory();
    char pattern[1100 + 8], list[1200];
    memset(pattern, 'a', 1025);
    pattern[1025] = '\0';
    snprintf(list, sizeof list, "[\"re:%s\"]", pattern);
    char *json = ct_config("[\"Linear\"]", list);
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "config.json: quantization_config.ignore[0]: bad regular expression "
                                            "\"re:aaaa") &&
                      strstr(fmoe_last_error(), ": the pattern has 1025 bytes, more than the 1024 allowed"),
                  "%s", fmoe_last_error());
    free(json);
    /* 65 nested groups. */
    size_t k = 0;
    for (int i = 0; i < 65; i++)
        pattern[k++] = '(';
    pattern[k++] = 'a';
    for (int i = 0; i < 65; i++)
        pattern[k++] = ')';
    pattern[k] = '\0';
    snprintf(list, sizeof list, "[\"re:%s\"]", pattern);
    json = ct_config("[\"Linear\"]", list);
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "groups nest more than 64 deep"), "%s", fmoe_last_error());
    free(json);
}
END_TEST

/* Patterns whose sum is too large: refused at the entry that crosses it. */
START_TEST(test_total_size)
{
    cap_memory();
    char list[20 * 40] = "[";
    for (int i = 0; i < 17; i++) /* 17 x (4000 + 3) instructions > 65536 */
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"re:%c{4000}\"", i ? ", " : "", 'a' + i);
    strcat(list, "]");
    char *json = ct_config("[\"Linear\"]", list);
    expect_parse_error(json, "config.json: quantization_config.ignore[16]: \"re:q{4000}\": the module-name patterns "
                             "of this config compile to more than 65536 instructions together");
    free(json);
}
END_TEST

/* A layer of many experts against large patterns: refused before the first
 * name is matched, with the numbers. */
START_TEST(test_match_work)
{
    cap_memory();
    char *json = ct_config("[\"Linear\"]", "[\"re:.*x{3000}\"]");
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    mods.prefix = "model.layers.0.mlp.experts";
    mods.num_experts = 65536;
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &mods, &s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "config.json: model.layers.0.mlp.experts: matching 196608 expert module "
                                            "names against the quantization_config's patterns (3004 instructions) "
                                            "would take up to") &&
                      strstr(fmoe_last_error(), "more than the 1073741824 allowed"),
                  "%s", fmoe_last_error());
    /* The same config on a layer of 8 experts is fine: no expert matches. */
    mods.num_experts = 8;
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    char key[FMOE_SCHEME_KEY_MAX];
    fmoe_scheme_key(&s, key, sizeof key);
    ck_assert_str_eq(key, "int4:group128");
    fmoe_quant_config_destroy(qc);
    free(json);
}
END_TEST

/* What a backtracking engine takes exponential time on is linear here. */
START_TEST(test_linear_time)
{
    cap_memory();
    char *json = ct_config("[\"Linear\"]", "[\"re:(a|a?)*(a*)*(a|aa)*b\", \"re:(.*a){20}\"]");
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    char prefix[600];
    memset(prefix, 'a', 500);
    prefix[500] = '\0';
    mods.prefix = prefix;
    mods.num_experts = 64;
    fmoe_scheme s;
    /* (.*a){20} matches every name (500 a's): all ignored, the layer bf16. */
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    char key[FMOE_SCHEME_KEY_MAX];
    fmoe_scheme_key(&s, key, sizeof key);
    ck_assert_str_eq(key, "bf16");
    fmoe_quant_config_destroy(qc);
    free(json);
}
END_TEST

/* Real configs' patterns still mean what they meant. */
START_TEST(test_real_patterns)
{
    char *json = ct_config("[\"re:.*mlp\\\\.experts\\\\.\\\\d+\\\\.(gate|up|down)_proj$\"]",
                           "[\"lm_head\", \"re:.*mlp.gate$\", \"re:.*experts\\\\.(?:3|17)\\\\.down_proj$\"]");
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    mods.prefix = "model.layers.5.mlp.experts";
    mods.num_experts = 3; /* experts 0..2: every module targeted, none ignored */
    fmoe_scheme s;
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    char key[FMOE_SCHEME_KEY_MAX];
    fmoe_scheme_key(&s, key, sizeof key);
    ck_assert_str_eq(key, "int4:group128");
    mods.num_experts = 4; /* expert 3's down_proj is ignored */
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &mods, &s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "model.layers.5.mlp.experts.3.down_proj is 'bf16'"), "%s",
                  fmoe_last_error());
    fmoe_quant_config_destroy(qc);
    free(json);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("patterns");
    TCase *tc = tcase_create("bounds");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_nested_repeats);
    tcase_add_test(tc, test_long_and_deep);
    tcase_add_test(tc, test_total_size);
    tcase_add_test(tc, test_match_work);
    tcase_add_test(tc, test_linear_time);
    tcase_add_test(tc, test_real_patterns);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 6);
}
