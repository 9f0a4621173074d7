/*
 * tests/robust/test_pyregex.c - the bounded pattern machine itself
 * (core/quant/nfa.h, pyregex.h, module_match.h): Python's re.match answers
 * and fnmatch's, its refusals with their reasons, and its cost bound.
 *
 * The expected answers were produced by CPython 3.11's re.match and by
 * glibc's fnmatch (flags 0) over every dotted prefix of the module, and
 * are written out here: nothing installed changes the outcome.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/limits.h"
#include "core/quant/module_match.h"
#include "core/quant/pyregex.h"
#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

typedef struct match_case {
    const char *pattern, *name;
    int want;
} match_case;

static const match_case regex_cases[] = {
    {".*mlp\\.experts\\.\\d+\\.down_proj$", "model.layers.0.mlp.experts.12.down_proj", 1},
    {".*mlp\\.experts\\.\\d+\\.down_proj$", "model.layers.0.mlp.experts.12.down_proj.weight", 0},
    {".*mlp\\.experts\\.\\d+\\.down_proj$", "model.layers.0.mlp.experts.x.down_proj", 0},
    {".*mlp.gate$", "model.layers.3.mlp.gate", 1},
    {".*mlp.gate$", "model.layers.3.mlp.gate_proj", 0},
    {".*gate$", "model.layers.3.mlp.experts.0.gate", 1},
    {"model\\.layers\\.[0-3]\\.", "model.layers.3.mlp", 1},
    {"model\\.layers\\.[0-3]\\.", "model.layers.30.mlp", 0},
    {"layers", "model.layers.0", 0},
    {"model", "model.layers.0", 1},
    {".*experts\\.(1|17|345)\\.", "m.experts.17.up_proj", 1},
    {".*experts\\.(1|17|345)\\.", "m.experts.170.up_proj", 0},
    {".*experts\\.(?:1|17|345)\\.up", "m.experts.345.up_proj", 1},
    {".*\\.(gate|up)_proj", "m.experts.3.down_proj", 0},
    {".*\\.(gate|up)_proj", "m.experts.3.up_proj", 1},
    {"m\\.experts\\.\\d{1,2}\\.", "m.experts.99.up", 1},
    {"m\\.experts\\.\\d{1,2}\\.", "m.experts.100.up", 0},
    {"m\\.experts\\.\\d{2,}\\.", "m.experts.7.up", 0},
    {"m\\.experts\\.\\d{,1}\\.", "m.experts.7.up", 1},
    {"m\\.experts\\.\\d{3}", "m.experts.123", 1},
    {"a{,}b", "aaab", 1},
    {"a{x}", "a{x}", 1},
    {"a{2", "a{2", 1},
    {"a{}", "a{}", 1},
    {"x}", "x}", 1},
    {"[]a]+$", "]a]", 1},
    {"[^]a]", "b", 1},
    {"[^]a]", "]", 0},
    {"[a-]+$", "a-a", 1},
    {"[\\d.]+$", "1.2.3", 1},
    {"[\\w]+\\b", "up_proj.", 1},
    {"\\bup", "m.up", 0},
    {"\\Bup", "m.up", 0},
    {".*\\Bup", "mup", 1},
    {"\\w+\\s\\S", "ab c", 1},
    {"\\W", ".", 1},
    {"\\D", "5", 0},
    {"a|", "b", 1},
    {"(|a)b", "b", 1},
    {"^model", "model", 1},
    {"x^", "x", 0},
    {"model$", "model\n", 1},
    {"model\\Z", "model\n", 0},
    {"\\Amodel", "model", 1},
    {"a*?b", "aab", 1},
    {"a+?$", "aa", 1},
    {"a??b", "b", 1},
    {"(a*)*b", "aaaa", 0},
    {"(a*)*$", "aaaa", 1},
    {"\\x41", "A", 1},
    {"\\t", "\t", 1},
    {"[\\x30-\\x39]+$", "0123", 1},
    {"\\.", ".", 1},
    {"\\.", "a", 0},
    {"", "anything", 1},
    {".", "\n", 0},
    {"[^a]", "\n", 1},
    {"\\B", "", 0},
    {"\\b", "", 0},
    {"$", "", 1},
    {"Linear", "Linear", 1},
    {".*Linear", "Linear", 1},
};

START_TEST(test_regex_answers)
{
    for (size_t i = 0; i < sizeof regex_cases / sizeof regex_cases[0]; i++) {
        const match_case *c = &regex_cases[i];
        fmoe_pyregex *re = NULL;
        char why[256] = "";
        ck_assert_msg(fmoe_pyregex_compile(c->pattern, &re, why, sizeof why) == 0, "/%s/: %s", c->pattern, why);
        ck_assert_msg(fmoe_pyregex_match(re, c->name) == c->want, "re.match(r'%s', '%s') is %s in Python", c->pattern,
                      c->name, c->want ? "a match" : "None");
        fmoe_pyregex_free(re);
    }
}
END_TEST

typedef struct refusal {
    const char *pattern, *why;
} refusal;

static const refusal refusals[] = {
    {"(a)\\1", "back-references and octal escapes (\\1) are not supported"},
    {"(?<=x)y", "\"(?\" groups other than \"(?:\" (lookarounds, flags, named groups) are not supported"},
    {"(?i)a", "\"(?\" groups other than \"(?:\" (lookarounds, flags, named groups) are not supported"},
    {"(?P<n>a)", "\"(?\" groups other than \"(?:\" (lookarounds, flags, named groups) are not supported"},
    {"a*+", "possessive quantifiers are not supported"},
    {"\\q", "the escape \\q is not supported"},
    {"a\\", "the pattern ends with a backslash"},
    {"[a", "unterminated character set"},
    {"[z-a]", "bad character range"},
    {"[\\d-z]", "bad character range"},
    {"(a", "missing ), unterminated subpattern"},
    {"a)", "unbalanced parenthesis"},
    {"*a", "nothing to repeat"},
    {"a|*", "nothing to repeat"},
    {"^*", "nothing to repeat"},
    {"a**", "multiple repeat"},
    {"a{3,2}", "min repeat greater than max repeat"},
    {"\\x4", "\\x needs two hex digits"},
    {"(a{4096})", "compiles to more than 4096 instructions (repeat counts multiply the size of what they repeat)"},
    {"((((a{10}){10}){10}){10}){10}",
     "compiles to more than 4096 instructions (repeat counts multiply the size of what they repeat)"},
    {"(x{99999999999999999999})", "compiles to more than 4096 instructions (repeat counts multiply the size of what "
                                  "they repeat)"},
};

START_TEST(test_regex_refusals)
{
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        fmoe_pyregex *re = NULL;
        char why[256] = "";
        ck_assert_msg(fmoe_pyregex_compile(refusals[i].pattern, &re, why, sizeof why) == -1, "/%s/ compiled",
                      refusals[i].pattern);
        ck_assert_ptr_null(re);
        ck_assert_msg(strcmp(why, refusals[i].why) == 0, "/%s/: \"%s\", expected \"%s\"", refusals[i].pattern, why,
                      refusals[i].why);
    }
}
END_TEST

/* At the limits: the largest program and the deepest nesting compile. */
START_TEST(test_regex_limits)
{
    fmoe_pyregex *re = NULL;
    char why[256] = "";
    ck_assert_msg(fmoe_pyregex_compile("a{4095}", &re, why, sizeof why) == 0, "%s", why); /* + MATCH = 4096 */
    ck_assert_uint_eq(fmoe_pyregex_size(re), FMOE_LIMIT_PATTERN_PROGRAM);
    fmoe_pyregex_free(re);
    ck_assert_int_eq(fmoe_pyregex_compile("a{4096}", &re, why, sizeof why), -1);

    char deep[2 * 64 + 2];
    size_t k = 0;
    for (int i = 0; i < 64; i++)
        deep[k++] = '(';
    deep[k++] = 'a';
    for (int i = 0; i < 64; i++)
        deep[k++] = ')';
    deep[k] = '\0';
    ck_assert_msg(fmoe_pyregex_compile(deep, &re, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fmoe_pyregex_match(re, "ab"), 1);
    fmoe_pyregex_free(re);

    char longest[FMOE_LIMIT_PATTERN_BYTES + 2];
    memset(longest, 'a', sizeof longest - 1);
    longest[FMOE_LIMIT_PATTERN_BYTES] = '\0';
    ck_assert_msg(fmoe_pyregex_compile(longest, &re, why, sizeof why) == 0, "%s", why);
    fmoe_pyregex_free(re);
    longest[FMOE_LIMIT_PATTERN_BYTES] = 'a';
    longest[FMOE_LIMIT_PATTERN_BYTES + 1] = '\0';
    ck_assert_int_eq(fmoe_pyregex_compile(longest, &re, why, sizeof why), -1);
    ck_assert_str_eq(why, "the pattern has 1025 bytes, more than the 1024 allowed");
}
END_TEST

/* The cost bound: a pattern of the largest size that keeps every
 * instruction live, on a long name, stays within (length + 1) x size
 * steps; measured as time, it is milliseconds. */
START_TEST(test_regex_linear)
{
    fmoe_pyregex *re = NULL;
    char why[256] = "";
    ck_assert_msg(fmoe_pyregex_compile("(a|a?){800}b", &re, why, sizeof why) == 0, "%s", why);
    char name[2001];
    memset(name, 'a', 2000);
    name[2000] = '\0';
    clock_t start = clock();
    ck_assert_int_eq(fmoe_pyregex_match(re, name), 0);
    double s = (double)(clock() - start) / CLOCKS_PER_SEC;
    ck_assert_msg(s < 5.0, "one match took %.2f s", s);
    fmoe_pyregex_free(re);
}
END_TEST

static const match_case glob_cases[] = {
    {"model.layers.*.self_attn", "model.layers.3.self_attn.q_proj", 1},
    {"model.layers.*.self_attn", "model.layers.3.mlp.experts.0.up_proj", 0},
    {"*self_attn*", "model.layers.3.self_attn.q_proj", 1},
    {"*.mlp.gate", "model.layers.3.mlp.gate", 1},
    {"*.mlp.gate", "model.layers.3.mlp.gate_proj", 0},
    {"*mlp.experts.1*", "model.layers.0.mlp.experts.12.up_proj", 1},
    {"*mlp.experts.1*", "model.layers.0.mlp.experts.2.up_proj", 0},
    {"model.layers.1", "model.layers.10.mlp", 0},
    {"model.layers.1?", "model.layers.10.mlp", 1},
    {"model.layers.[0-3].mlp", "model.layers.2.mlp.experts.0.gate_proj", 1},
    {"model.layers.[!0-3].mlp", "model.layers.2.mlp.experts.0.gate_proj", 0},
    {"model.layers.[^0-3].mlp", "model.layers.7.mlp.experts.0.gate_proj", 1},
    {"model.layers.[[:digit:]].mlp", "model.layers.7.mlp", 1},
    {"model.layers.[]7].mlp", "model.layers.7.mlp", 1},
    {"model.layers.\\*.mlp", "model.layers.*.mlp.x", 1},
    {"model.layers.\\*.mlp", "model.layers.1.mlp.x", 0},
    {"model.layers.[7", "model.layers.[7", 1},
    {"*", "anything.at.all", 1},
    {"*.up_proj", "m.experts.0.up_proj", 1},
    {"m.experts.?.up_proj", "m.experts.10.up_proj", 0},
    {"m.*.0", "m.experts.0.up_proj", 1},
    {"m.*.0", "m.experts.10.up_proj", 0},
    /* literal entries: the module or an ancestor, never a longer sibling */
    {"model.layers.1", "model.layers.1.mlp", 1},
    {"model.layers.1", "model.layers.1", 1},
    {"model.layers.1.mlp.experts.0.up_proj", "model.layers.1.mlp.experts.0.up_proj", 1},
    {"model.layers.1.mlp.experts.0.up", "model.layers.1.mlp.experts.0.up_proj", 0},
};

/* A module list of the one entry `entry`, read as a config would. */
static void list_of(const char *entry, module_list *l)
{
    json_t *obj = json_pack("{s:[s]}", "l", entry);
    ck_assert_ptr_nonnull(obj);
    qjson j;
    qjson_init(&j, "config.json");
    memset(l, 0, sizeof *l);
    ck_assert_msg(module_list_read(&j, obj, "l", l) == FMOE_STATUS_OK, "%s: %s", entry, fmoe_last_error());
    module_list_finish(l);
    json_decref(obj);
}

START_TEST(test_glob_answers)
{
    for (size_t i = 0; i < sizeof glob_cases / sizeof glob_cases[0]; i++) {
        const match_case *c = &glob_cases[i];
        module_list l;
        list_of(c->pattern, &l);
        ck_assert_msg(module_list_contains(&l, c->name) == c->want, "'%s' %s '%s' for fnmatch", c->pattern,
                      c->want ? "covers" : "does not cover", c->name);
        module_list_free(&l);
    }
}
END_TEST

START_TEST(test_glob_refusals)
{
    json_t *obj = json_pack("{s:[s,s]}", "ignored_layers", "a.b", "model.[[:nope:]]");
    qjson j;
    qjson_init(&j, "config.json");
    module_list l = {0};
    ck_assert_int_eq(module_list_read(&j, obj, "ignored_layers", &l), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "config.json: ignored_layers[1]: bad glob \"model.[[:nope:]]\": unknown "
                                        "character class in a bracket expression");
    module_list_free(&l);
    json_decref(obj);
    char longest[FMOE_LIMIT_PATTERN_BYTES + 2];
    memset(longest, '*', FMOE_LIMIT_PATTERN_BYTES + 1);
    longest[FMOE_LIMIT_PATTERN_BYTES + 1] = '\0';
    obj = json_pack("{s:[s]}", "l", longest);
    qjson_init(&j, "config.json");
    ck_assert_int_eq(module_list_read(&j, obj, "l", &l), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "config.json: l[0]: the glob \"****") &&
                      strstr(fmoe_last_error(), "has 1025 bytes, more than the 1024 allowed"),
                  "%s", fmoe_last_error());
    module_list_free(&l);
    json_decref(obj);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pyregex");
    TCase *tc = tcase_create("machine");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_regex_answers);
    tcase_add_test(tc, test_regex_refusals);
    tcase_add_test(tc, test_regex_limits);
    tcase_add_test(tc, test_regex_linear);
    tcase_add_test(tc, test_glob_answers);
    tcase_add_test(tc, test_glob_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 6);
}
