/*
 * tests/cpu/option_args.h - the command line of the cpu tests that run the
 * plugin through a context (meson passes one kernel path per test):
 *
 *   --isa=LEVEL   [plugins.cpu.options] isa = "LEVEL"
 *   --amx=BOOL    [plugins.cpu.options] amx = BOOL (true or false)
 *
 * The options reach the plugin through a configuration file, as a user's
 * would; nothing is read from the environment. Include once per program.
 */
#ifndef FMOE_TEST_CPU_OPTION_ARGS_H
#define FMOE_TEST_CPU_OPTION_ARGS_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"

/* The plugin's levels in its order (plugins/cpu/cpu.h, CPU_ISA_*). */
static const char *const cpu_test_isa_names[] = {"portable", "avx2", "avx512_vnni", "avx512_bf16"};
#define CPU_TEST_ISA_COUNT 4

typedef struct cpu_test_args {
    const char *isa; /* NULL: not given (auto) */
    const char *amx; /* NULL: not given (true) */
} cpu_test_args;

/* The level index of `name`, or -1. */
static inline int cpu_test_isa_level(const char *name)
{
    for (int i = 0; name && i < CPU_TEST_ISA_COUNT; i++)
        if (strcmp(name, cpu_test_isa_names[i]) == 0)
            return i;
    return -1;
}

/* 0, or -1 with a usage line on stderr. The strings point into argv. */
static inline int cpu_test_args_parse(int argc, char **argv, cpu_test_args *out)
{
    *out = (cpu_test_args){0};
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--isa=", 6) == 0 && cpu_test_isa_level(argv[i] + 6) >= 0)
            out->isa = argv[i] + 6;
        else if (strcmp(argv[i], "--amx=true") == 0 || strcmp(argv[i], "--amx=false") == 0)
            out->amx = argv[i] + 6;
        else {
            fprintf(stderr,
                    "%s: unexpected argument '%s'\nusage: %s [--isa=portable|avx2|avx512_vnni|avx512_bf16] "
                    "[--amx=true|false]\n",
                    argv[0], argv[i], argv[0]);
            return -1;
        }
    }
    return 0;
}

/* The [plugins.cpu.options] table for `a` (just the header when empty). */
static inline void cpu_test_args_toml(const cpu_test_args *a, char *buf, size_t cap)
{
    snprintf(buf, cap, "[plugins.cpu.options]\n%s%s%s%s%s%s", a->isa ? "isa = \"" : "", a->isa ? a->isa : "",
             a->isa ? "\"\n" : "", a->amx ? "amx = " : "", a->amx ? a->amx : "", a->amx ? "\n" : "");
}

/* The level the cpu plugin's kernels run in `ctx`, from its device's probe
 * reason "kernels: <level>[ + amx_bf16] ... (machine and OS: <level>)",
 * checked against the arguments: the level asked for, clamped to the
 * machine's, and no AMX kernel under --amx=false. */
static inline int cpu_test_level(fmoe_context *ctx, const cpu_test_args *a)
{
    static const char machine_at[] = "(machine and OS: ";
    for (uint32_t i = 0; i < fmoe_context_device_count(ctx); i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        ck_assert_int_eq(fmoe_context_device(ctx, i, &d), FMOE_STATUS_OK);
        if (strcmp(d.plugin, "cpu") != 0)
            continue;
        const char *machine = strstr(d.reason, machine_at);
        char name[32] = "";
        if (machine)
            sscanf(machine + strlen(machine_at), "%31[a-z0-9_]", name);
        int detected = cpu_test_isa_level(name), asked = cpu_test_isa_level(a->isa);
        ck_assert_msg(detected >= 0, "cpu device reason '%s'", d.reason);
        int want = asked >= 0 && asked < detected ? asked : detected;
        char kernels[64];
        snprintf(kernels, sizeof kernels, "kernels: %s", cpu_test_isa_names[want]);
        ck_assert_msg(strncmp(d.reason, kernels, strlen(kernels)) == 0, "--isa=%s: cpu device reason '%s'",
                      a->isa ? a->isa : "(none)", d.reason);
        if (a->amx && strcmp(a->amx, "false") == 0)
            ck_assert_msg(strstr(d.reason, "+ amx_bf16") == NULL, "--amx=false: cpu device reason '%s'", d.reason);
        return want;
    }
    ck_abort_msg("no cpu device");
    return -1;
}

#endif
