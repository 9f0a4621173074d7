/*
 * tests/cpu_arm/test_options.c - the cpu_arm plugin's options
 * (cpu_arm.toml.in's [[option]] tables, docs/CPU_ARM.md "Options") as its
 * init parses them: the built library is loaded and its table called
 * directly (tests/cpu/direct_plugin.h), with the options as the host hands
 * them.
 *
 *   - every value of isa is accepted and the probe reports the level that
 *     runs (the one asked for, lowered to what HWCAP offers) and what was
 *     asked; threads at its bounds and 0 (the online CPUs, at most 64);
 *   - an unknown option name and bad values are refused with
 *     INVALID_ARGUMENT and text naming the option and what it takes;
 *   - two inits keep two states;
 *   - the entry point refuses another ABI major with text naming the plugin.
 *
 * The expectations read HWCAP through the plugin's own function, so they
 * hold on every CPU (tools/cross/test_cpu_arm.sh runs three under qemu and
 * passes --expect-hwcap to check each took).
 */
#include <unistd.h>

#include "plugins/cpu_arm/kernels.h"
#include "tests/cpu/direct_plugin.h"
#include "tests/cpu_arm/hwcap_arg.h"
#include "tests/test_util.h"

static const char *const isa_values[] = {"auto", "portable", "dotprod", "i8mm"};
#define N_ISA_VALUES 4

static int contains(const char *text, const char *part)
{
    return strstr(text, part) != NULL;
}

START_TEST(isa_each_value)
{
    const fmoe_plugin *p = dp_load(CPU_ARM_PLUGIN_LIBRARY);
    int hw = carm_isa_detect();
    const char *value = isa_values[_i];
    int asked = _i - 1; /* -1: auto */
    int want = asked < 0 || asked > hw ? hw : asked;
    const char *kv[] = {"isa", value};
    void *state;
    ck_assert_msg(dp_init(p, kv, 1, &state) == FMOE_STATUS_OK, "isa = %s: %s", value, dp_error);
    fmoe_device_report r = dp_probe(p, state);
    char part[160];
    ck_assert_uint_eq(r.score, 10u * (uint32_t)(want + 1));
    snprintf(part, sizeof part, "kernels %s", carm_isa_name(want));
    ck_assert_str_eq(r.driver, part);
    snprintf(part, sizeof part, "W4A8 kernels: %s (from HWCAP: %s)", carm_isa_name(want), carm_isa_name(hw));
    ck_assert_msg(strncmp(r.reason, part, strlen(part)) == 0, "isa = %s: reason '%s'", value, r.reason);
    snprintf(part, sizeof part, "option isa = \"%s\"", value);
    if (asked < 0)
        ck_assert_msg(!contains(r.reason, "option isa"), "reason '%s'", r.reason);
    else
        ck_assert_msg(contains(r.reason, part) && contains(dp_log, part), "isa = %s: reason '%s', log '%s'", value,
                      r.reason, dp_log);
    snprintf(part, sizeof part, "this CPU lacks it (HWCAP: %s); using %s", carm_isa_name(hw), carm_isa_name(hw));
    ck_assert_int_eq(contains(r.reason, part), asked > hw);
    p->shutdown(state);
    printf("# isa = %s: %s\n", value, r.reason);
}
END_TEST

START_TEST(threads)
{
    const fmoe_plugin *p = dp_load(CPU_ARM_PLUGIN_LIBRARY);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char online[64];
    snprintf(online, sizeof online, "Arm CPU (%ld threads)", cpus < 1 ? 1 : cpus > 64 ? 64 : cpus);
    static const char *const values[] = {"1", "64", "0"};
    const char *names[] = {"Arm CPU (1 threads)", "Arm CPU (64 threads)", online};
    for (int i = 0; i < 3; i++) {
        const char *kv[] = {"threads", values[i]};
        void *state;
        ck_assert_msg(dp_init(p, kv, 1, &state) == FMOE_STATUS_OK, "threads = %s: %s", values[i], dp_error);
        fmoe_device_report r = dp_probe(p, state);
        ck_assert_str_eq(r.name, names[i]);
        p->shutdown(state);
    }
    /* no options: the manifest's defaults (isa auto, threads 0) */
    void *state;
    ck_assert_msg(dp_init(p, NULL, 0, &state) == FMOE_STATUS_OK, "%s", dp_error);
    fmoe_device_report r = dp_probe(p, state);
    ck_assert_str_eq(r.name, online);
    ck_assert_uint_eq(r.score, 10u * (uint32_t)(carm_isa_detect() + 1));
    ck_assert_msg(!contains(r.reason, "option"), "reason '%s'", r.reason);
    p->shutdown(state);
}
END_TEST

START_TEST(refused)
{
    const fmoe_plugin *p = dp_load(CPU_ARM_PLUGIN_LIBRARY);
    static const char *const isa_words[] = {"option 'isa'", "auto, portable, dotprod or i8mm", NULL};
    static const char *const threads_words[] = {"option 'threads'", "from 0", "to 64", NULL};
    static const char *const unknown_words[] = {"unknown option 'kernel'", "isa, threads", NULL};
    dp_refused(p, "kernel", "i8mm", unknown_words);
    dp_refused(p, "isa", "sve", isa_words);
    ck_assert_msg(contains(dp_error, "got 'sve'"), "%s", dp_error);
    dp_refused(p, "isa", "I8MM", isa_words);
    dp_refused(p, "isa", "", isa_words);
    dp_refused(p, "threads", "65", threads_words);
    ck_assert_msg(contains(dp_error, "got '65'"), "%s", dp_error);
    dp_refused(p, "threads", "-1", threads_words);
    dp_refused(p, "threads", "4 ", threads_words);
    /* a bad option after a good one still fails the whole init */
    const char *kv[] = {"isa", "portable", "threads", "many"};
    void *state;
    ck_assert_int_eq(dp_init(p, kv, 2, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(contains(dp_error, "option 'threads'"), "%s", dp_error);
}
END_TEST

START_TEST(states_apart)
{
    dp_check_states_apart(CPU_ARM_PLUGIN_LIBRARY, 10u * (uint32_t)(carm_isa_detect() + 1));
}
END_TEST

START_TEST(entry_refuses_other_major)
{
    dp_check_entry_refuses_other_major(CPU_ARM_PLUGIN_LIBRARY, "cpu_arm");
}
END_TEST

int main(int argc, char **argv)
{
    if (carm_test_args_parse(argc, argv) != 0 || !carm_test_hwcap_as_expected())
        return EXIT_FAILURE;
    Suite *s = suite_create("cpu_arm_options");
    TCase *tc = tcase_create("init");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, isa_each_value, 0, N_ISA_VALUES);
    tcase_add_test(tc, threads);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, states_apart);
    tcase_add_test(tc, entry_refuses_other_major);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, N_ISA_VALUES + 4);
}
