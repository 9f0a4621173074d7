/*
 * tests/cpu_arm/hwcap_arg.h - the command line the cpu_arm tests share:
 *
 *   --expect-hwcap=LEVEL   the kernel level (portable, dotprod, i8mm) the
 *                          runner's CPU offers; the test fails when HWCAP
 *                          says otherwise
 *
 * tools/cross/test_cpu_arm.sh runs the suite once per emulated CPU and
 * passes what each one has, so a run on the wrong CPU (a QEMU_CPU that did
 * not take) cannot pass as a run of the path it meant to cover. Without the
 * argument the tests run on whatever CPU they find. Include once a program.
 */
#ifndef FMOE_TEST_CPU_ARM_HWCAP_ARG_H
#define FMOE_TEST_CPU_ARM_HWCAP_ARG_H

#include <stdio.h>
#include <string.h>

#include "plugins/cpu_arm/kernels.h"

/* The level --expect-hwcap named, or -1 when not given. */
static int carm_test_expected_hwcap = -1;

/* 0, or -1 with a line on stderr for an argument it does not know. */
static inline int carm_test_args_parse(int argc, char **argv)
{
    static const char flag[] = "--expect-hwcap=";
    for (int i = 1; i < argc; i++) {
        int level = strncmp(argv[i], flag, strlen(flag)) == 0 ? carm_isa_parse(argv[i] + strlen(flag)) : -1;
        if (level < 0) {
            fprintf(stderr, "%s: unexpected argument '%s'\nusage: %s [--expect-hwcap=portable|dotprod|i8mm]\n", argv[0],
                    argv[i], argv[0]);
            return -1;
        }
        carm_test_expected_hwcap = level;
    }
    return 0;
}

/* 1 when HWCAP offers the expected level (or none was given); else 0, with
 * a line saying what it found. */
static inline int carm_test_hwcap_as_expected(void)
{
    int hw = carm_isa_detect();
    if (carm_test_expected_hwcap < 0 || carm_test_expected_hwcap == hw)
        return 1;
    printf("# --expect-hwcap=%s, but HWCAP offers %s\n", carm_isa_name(carm_test_expected_hwcap), carm_isa_name(hw));
    return 0;
}

#endif
