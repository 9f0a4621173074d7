/*
 * tests/test_util.h - shared by the Check unit tests: a seeded random
 * generator (fresh seed per run, printed so a failure can be replayed with
 * FMOE_TEST_SEED=<n>) and a TAP runner that fails when fewer tests ran than
 * expected (Check reports 100% for zero tests).
 */
#ifndef FMOE_TEST_UTIL_H
#define FMOE_TEST_UTIL_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* The run's seed: $FMOE_TEST_SEED, else time and pid. Printed once, as a TAP
 * comment, by fmoe_test_main. */
static uint64_t fmoe_test_seed_value;

static inline uint64_t fmoe_test_seed(void)
{
    return fmoe_test_seed_value;
}

typedef struct fmoe_rng {
    uint64_t state;
} fmoe_rng;

/* splitmix64: tiny, full-period, good enough for test data. */
static inline uint64_t fmoe_rng_u64(fmoe_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A generator for one test: the run seed mixed with a per-test stream id, so
 * tests are independent of each other's order. */
static inline fmoe_rng fmoe_rng_for(uint64_t stream)
{
    fmoe_rng r = {fmoe_test_seed_value ^ (stream * 0xD1B54A32D192ED03ull)};
    fmoe_rng_u64(&r);
    return r;
}

/* Uniform in [lo, hi). */
static inline float fmoe_rng_uniform(fmoe_rng *r, float lo, float hi)
{
    double u = (double)(fmoe_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

/* Standard normal (Box-Muller). */
static inline float fmoe_rng_normal(fmoe_rng *r)
{
    double u1 = ((double)(fmoe_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(fmoe_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Run `suite` with TAP on stdout. Returns the process exit status: 0 when
 * every test passed and at least `min_tests` ran. */
static inline int fmoe_test_main(Suite *suite, int min_tests)
{
    const char *env = getenv("FMOE_TEST_SEED");
    fmoe_test_seed_value = env && *env ? strtoull(env, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    printf("# seed %llu (rerun with FMOE_TEST_SEED=%llu)\n", (unsigned long long)fmoe_test_seed_value,
           (unsigned long long)fmoe_test_seed_value);
    fflush(stdout);
    SRunner *sr = srunner_create(suite);
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    int ran = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (ran < min_tests) {
        printf("# only %d tests ran, expected at least %d\n", ran, min_tests);
        return EXIT_FAILURE;
    }
    if (failed)
        printf("# %d failed; seed %llu\n", failed, (unsigned long long)fmoe_test_seed_value);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
