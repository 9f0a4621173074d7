/*
 * tests/cpu/test_cpu_options.c - the cpu plugin's options (cpu.toml.in's
 * [[option]] tables, docs/CPU.md "Options") as its init parses them: the
 * built library is loaded and its table called directly
 * (tests/cpu/direct_plugin.h), with the options as the host hands them.
 *
 *   - every value of isa is accepted and the probe reports the level that
 *     runs (the one asked for, clamped to what this machine enables) and
 *     what was asked; amx true/false; threads and spin_ms at their bounds;
 *   - an unknown option name and a bad value of each option are refused
 *     with INVALID_ARGUMENT and text naming the option and what it takes;
 *   - two inits keep two states (a context's choice is its own);
 *   - the entry point refuses another ABI major with text naming the plugin.
 *
 * Nothing here depends on the environment; what depends on the machine
 * (the detected level, AMX) is read through the same functions the plugin
 * uses, so the expectations hold on every machine.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>

#include "plugins/cpu/cpu.h"
#include "tests/cpu/direct_plugin.h"
#include "tests/test_util.h"

static const char *const isa_values[] = {"auto", "portable", "avx2", "avx512_vnni", "avx512_bf16"};
#define N_ISA_VALUES 5

static int contains(const char *text, const char *part)
{
    return strstr(text, part) != NULL;
}

START_TEST(isa_each_value)
{
    const fmoe_plugin *p = dp_load(CPU_PLUGIN_LIBRARY);
    int detected = cpu_isa_detect();
    const char *value = isa_values[_i];
    int asked = _i == 0 ? CPU_ISA_AUTO : _i - 1;
    int want = asked == CPU_ISA_AUTO || asked > detected ? detected : asked;
    const char *kv[] = {"isa", value};
    void *state;
    ck_assert_msg(dp_init(p, kv, 1, &state) == FMOE_STATUS_OK, "isa = %s: %s", value, dp_error);
    fmoe_device_report r = dp_probe(p, state);
    char part[160];
    /* arch: "<machine> <level that runs>"; score 10, 20, 30, 40 by level */
    snprintf(part, sizeof part, " %s", cpu_isa_name(want));
    ck_assert_msg(strlen(r.arch) > strlen(part) && strcmp(r.arch + strlen(r.arch) - strlen(part), part) == 0,
                  "isa = %s: arch '%s', expected the level %s", value, r.arch, cpu_isa_name(want));
    ck_assert_uint_eq(r.score, 10u * (uint32_t)(want + 1));
    snprintf(part, sizeof part, "kernels: %s", cpu_isa_name(want));
    ck_assert_msg(strncmp(r.reason, part, strlen(part)) == 0, "isa = %s: reason '%s'", value, r.reason);
    snprintf(part, sizeof part, "(machine and OS: %s)", cpu_isa_name(detected));
    ck_assert_msg(contains(r.reason, part), "isa = %s: reason '%s' lacks '%s'", value, r.reason, part);
    /* what was asked: named for a level, nothing for auto */
    snprintf(part, sizeof part, "option isa = \"%s\"", value);
    if (asked == CPU_ISA_AUTO)
        ck_assert_msg(!contains(r.reason, "option isa"), "reason '%s'", r.reason);
    else
        ck_assert_msg(contains(r.reason, part) && contains(dp_log, part), "isa = %s: reason '%s', log '%s'", value,
                      r.reason, dp_log);
    snprintf(part, sizeof part, "only enables %s; using %s", cpu_isa_name(detected), cpu_isa_name(detected));
    ck_assert_int_eq(contains(r.reason, part), asked > detected);
    p->shutdown(state);
    printf("# isa = %s: %s\n", value, r.reason);
}
END_TEST

/* No options at all: the manifest's defaults (isa auto, amx true, threads
 * 0 = one per CPU we may run on). */
START_TEST(defaults)
{
    const fmoe_plugin *p = dp_load(CPU_PLUGIN_LIBRARY);
    void *state;
    ck_assert_msg(dp_init(p, NULL, 0, &state) == FMOE_STATUS_OK, "%s", dp_error);
    fmoe_device_report r = dp_probe(p, state);
    char part[96];
    snprintf(part, sizeof part, "kernels: %s", cpu_isa_name(cpu_isa_detect()));
    ck_assert_msg(strncmp(r.reason, part, strlen(part)) == 0, "reason '%s'", r.reason);
    ck_assert_msg(!contains(r.reason, "option"), "reason '%s'", r.reason);
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    snprintf(part, sizeof part, ", %d thread(s) per layer", CPU_COUNT(&set));
    ck_assert_msg(contains(r.reason, part), "reason '%s' lacks '%s'", r.reason, part);
    ck_assert_msg(contains(dp_log, "idle spin 200 ms"), "log '%s'", dp_log);
    p->shutdown(state);
}
END_TEST

START_TEST(amx_each_value)
{
    const fmoe_plugin *p = dp_load(CPU_PLUGIN_LIBRARY);
    int on = _i == 1;
    const char *kv[] = {"amx", on ? "true" : "false"};
    void *state;
    ck_assert_msg(dp_init(p, kv, 1, &state) == FMOE_STATUS_OK, "amx = %s: %s", kv[1], dp_error);
    fmoe_device_report r = dp_probe(p, state);
    int bf16 = cpu_isa_detect() >= CPU_ISA_AVX512_BF16;
    int amx = on && bf16 && cpu_amx_enable();
    ck_assert_msg(contains(r.reason, "+ amx_bf16") == amx, "amx = %s: reason '%s'", kv[1], r.reason);
    ck_assert_msg(contains(r.reason, "option amx = false") == (!on && bf16), "amx = %s: reason '%s'", kv[1], r.reason);
    p->shutdown(state);
    printf("# amx = %s: %s\n", kv[1], r.reason);
}
END_TEST

START_TEST(threads_and_spin)
{
    const fmoe_plugin *p = dp_load(CPU_PLUGIN_LIBRARY);
    static const char *const cases[][5] = {
        {"1", "0", ", 1 thread(s) per layer", "idle spin 0 ms", NULL},
        {"3", "60000", ", 3 thread(s) per layer", "idle spin 60000 ms", NULL},
        {"1024", "200", ", 1024 thread(s) per layer", "idle spin 200 ms", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *kv[] = {"threads", cases[i][0], "spin_ms", cases[i][1]};
        void *state;
        ck_assert_msg(dp_init(p, kv, 2, &state) == FMOE_STATUS_OK, "%s", dp_error);
        fmoe_device_report r = dp_probe(p, state);
        ck_assert_msg(contains(r.reason, cases[i][2]), "reason '%s' lacks '%s'", r.reason, cases[i][2]);
        ck_assert_msg(contains(dp_log, cases[i][3]), "log '%s' lacks '%s'", dp_log, cases[i][3]);
        p->shutdown(state);
    }
}
END_TEST

START_TEST(refused)
{
    const fmoe_plugin *p = dp_load(CPU_PLUGIN_LIBRARY);
    static const char *const isa_words[] = {"option 'isa'", "auto, portable, avx2, avx512_vnni or avx512_bf16", NULL};
    static const char *const amx_words[] = {"option 'amx'", "true or false", NULL};
    static const char *const threads_words[] = {"option 'threads'", "from 0", "to 1024", NULL};
    static const char *const spin_words[] = {"option 'spin_ms'", "from 0 to 60000", NULL};
    static const char *const unknown_words[] = {"unknown option 'isa_level'", "isa, amx, threads, spin_ms", NULL};
    dp_refused(p, "isa_level", "avx2", unknown_words);
    dp_refused(p, "isa", "sse9", isa_words);
    ck_assert_msg(contains(dp_error, "got 'sse9'"), "%s", dp_error);
    dp_refused(p, "isa", "AVX2", isa_words);
    dp_refused(p, "isa", "", isa_words);
    dp_refused(p, "amx", "maybe", amx_words);
    ck_assert_msg(contains(dp_error, "got 'maybe'"), "%s", dp_error);
    dp_refused(p, "threads", "1025", threads_words);
    ck_assert_msg(contains(dp_error, "got '1025'"), "%s", dp_error);
    dp_refused(p, "threads", "-1", threads_words);
    dp_refused(p, "threads", "2x", threads_words);
    dp_refused(p, "spin_ms", "60001", spin_words);
    dp_refused(p, "spin_ms", "-1", spin_words);
    /* a bad option after good ones still fails the whole init */
    const char *kv[] = {"isa", "portable", "threads", "2", "amx", "yes"};
    void *state;
    ck_assert_int_eq(dp_init(p, kv, 3, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(contains(dp_error, "option 'amx'"), "%s", dp_error);
}
END_TEST

START_TEST(states_apart)
{
    dp_check_states_apart(CPU_PLUGIN_LIBRARY, 10u * (uint32_t)(cpu_isa_detect() + 1));
}
END_TEST

START_TEST(entry_refuses_other_major)
{
    dp_check_entry_refuses_other_major(CPU_PLUGIN_LIBRARY, "cpu");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_options");
    TCase *tc = tcase_create("init");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, isa_each_value, 0, N_ISA_VALUES);
    tcase_add_test(tc, defaults);
    tcase_add_loop_test(tc, amx_each_value, 0, 2);
    tcase_add_test(tc, threads_and_spin);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, states_apart);
    tcase_add_test(tc, entry_refuses_other_major);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, N_ISA_VALUES + 7);
}
