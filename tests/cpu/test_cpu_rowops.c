/*
 * tests/cpu/test_cpu_rowops.c - the AVX-512 row steps (plugins/cpu/rowops.h)
 * against the portable code they replace, bit for bit: the gated SiLU
 * rounded to bf16 against core/activation.c (double) + fmoe_round_to, and
 * the asymmetric row quantizer against cpu_quant_asym (the reference
 * codec). On a machine without AVX-512 there is nothing to compare and the
 * tests say so.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"
#include "plugins/cpu/cpu.h"
#include "plugins/cpu/qgemm.h"
#include "plugins/cpu/rowops.h"
#include "tests/test_util.h"

static int have_avx512(void)
{
    if (cpu_isa_detect() >= CPU_ISA_AVX512_VNNI)
        return 1;
    fprintf(stderr, "# no AVX-512 on this machine: nothing to compare\n");
    return 0;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* One row of I gate and I up values through both paths; returns the slow count. */
static uint32_t check_silu(const fmoe_layer_config *cfg, const float *h, uint32_t I, const char *what)
{
    float *want = malloc(sizeof(float) * I), *got = malloc(sizeof(float) * I);
    fmoe_activation_row(cfg, h, I, want);
    for (uint32_t i = 0; i < I; i++)
        want[i] = fmoe_round_to(FMOE_DTYPE_BF16, want[i]);
    uint32_t slow = cpu_silu_bf16_avx512(cfg, h, I, got);
    for (uint32_t i = 0; i < I; i++)
        ck_assert_msg(bits(got[i]) == bits(want[i]) || (isnan(got[i]) && isnan(want[i])),
                      "%s (limit %g): value %u: silu(%.9g) * %.9g = %.9g, want %.9g (seed %llu)", what,
                      (double)cfg->swiglu_limit, i, (double)h[i], (double)h[I + i], (double)got[i], (double)want[i],
                      (unsigned long long)fmoe_test_seed());
    free(want), free(got);
    return slow;
}

static fmoe_layer_config silu_config(float limit)
{
    fmoe_layer_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.gated = 1;
    c.activation = FMOE_ACT_SILU;
    c.swiglu_limit = limit;
    return c;
}

START_TEST(silu_random_rows)
{
    if (!have_avx512())
        return;
    fmoe_rng r = fmoe_rng_for(1);
    const float sigmas[] = {0.05f, 1.0f, 4.0f, 40.0f};
    const uint32_t sizes[] = {768, 14336, 37, 1};
    for (int limited = 0; limited < 2; limited++) {
        fmoe_layer_config cfg = silu_config(limited ? 7.0f : 0.0f);
        uint64_t total = 0, slow = 0;
        for (int s = 0; s < 4; s++)
            for (int n = 0; n < 4; n++) {
                uint32_t I = sizes[n];
                float *h = malloc(sizeof(float) * 2 * I);
                for (uint32_t i = 0; i < 2 * I; i++)
                    h[i] = fmoe_bf16_to_f32(fmoe_f32_to_bf16(sigmas[s] * fmoe_rng_normal(&r))); /* GEMM1 output: bf16 */
                slow += check_silu(&cfg, h, I, "random");
                total += I;
                free(h);
            }
        /* The f32 path must be the common one (about 1 in 1000 is slow);
         * with sigma 40 more gates fall below -87. */
        ck_assert_msg(slow * 20 < total, "%llu of %llu values took the double path", (unsigned long long)slow,
                      (unsigned long long)total);
    }
}
END_TEST

/* Every 97th f32 bit pattern from -100 to 100 as the gate (u = 1 and a
 * random u): every binade, the exp range's edges, many bf16 midpoints.
 * 23 M values, each against the double path: under AddressSanitizer (CI's
 * second build, which looks for memory errors, not numerics) every 1009th,
 * which still covers every binade and kept the test inside its timeout on
 * two loaded cores. */
#if defined(__SANITIZE_ADDRESS__)
#define SWEEP_STRIDE 1009u
#else
#define SWEEP_STRIDE 97u
#endif

START_TEST(silu_gate_sweep)
{
    if (!have_avx512())
        return;
    fmoe_rng r = fmoe_rng_for(2);
    fmoe_layer_config cfg = silu_config(0.0f);
    enum { I = 4096 };
    static float h[2 * I];
    uint32_t n = 0;
    for (int sign = 0; sign < 2; sign++)
        for (uint32_t u = 0; u <= bits(100.0f); u += SWEEP_STRIDE) {
            uint32_t b = u | (sign ? 0x80000000u : 0);
            float g;
            memcpy(&g, &b, sizeof g);
            h[n] = g;
            h[I + n] = (u / SWEEP_STRIDE) & 1 ? 1.0f : fmoe_rng_uniform(&r, -3.0f, 3.0f);
            if (++n == I) {
                check_silu(&cfg, h, I, "sweep");
                n = 0;
            }
        }
}
END_TEST

START_TEST(silu_special_values)
{
    if (!have_avx512())
        return;
    const float g[] = {NAN,   INFINITY, -INFINITY, 0.0f,   -0.0f,  -87.0f,  -87.5f, -88.0f, -89.0f, -150.0f,
                       88.0f, 89.0f,    1e30f,     -1e30f, 1e-40f, -1e-40f, 7.0f,   7.5f,   -7.5f,  3.0f};
    const uint32_t I = sizeof g / sizeof g[0];
    float h[2 * sizeof g / sizeof g[0]];
    for (uint32_t i = 0; i < I; i++) {
        h[i] = g[i];
        h[I + i] = i % 3 == 0 ? NAN : i % 3 == 1 ? 9.0f : -2.5f;
    }
    for (int limited = 0; limited < 2; limited++) {
        fmoe_layer_config cfg = silu_config(limited ? 7.0f : 0.0f);
        check_silu(&cfg, h, I, "special");
    }
}
END_TEST

static void check_quant(const float *x, uint32_t n, uint32_t group, const char *what)
{
    uint32_t kp = (n + 7) / 8 * 8;
    if (group < kp)
        kp = (kp + group - 1) / group * group;
    else
        group = kp;
    int8_t *qa = malloc(kp), *qb = malloc(kp);
    int32_t *sa = calloc(kp / group, sizeof(int32_t)), *sb = calloc(kp / group, sizeof(int32_t)), oa, ob;
    float ca, cb;
    cpu_quant_asym(x, n, kp, group, qa, &oa, &ca, sa);
    cpu_quant_asym_avx512(x, n, kp, group, qb, &ob, &cb, sb);
    ck_assert_msg(memcmp(qa, qb, kp) == 0, "%s n %u: codes differ (seed %llu)", what, n,
                  (unsigned long long)fmoe_test_seed());
    ck_assert_msg(oa == ob, "%s n %u: offset %d, want %d", what, n, ob, oa);
    ck_assert_msg(bits(ca) == bits(cb) || (isnan(ca) && isnan(cb)), "%s n %u: scale %.9g, want %.9g", what, n,
                  (double)cb, (double)ca);
    ck_assert_msg(memcmp(sa, sb, kp / group * sizeof(int32_t)) == 0, "%s n %u: group sums differ", what, n);
    free(qa), free(qb), free(sa), free(sb);
}

START_TEST(quant_asym_rows)
{
    if (!have_avx512())
        return;
    fmoe_rng r = fmoe_rng_for(3);
    const uint32_t sizes[] = {1, 15, 16, 17, 768, 2051, 14336};
    for (int shape = 0; shape < 5; shape++)
        for (int s = 0; s < 7; s++) {
            uint32_t n = sizes[s];
            float *x = malloc(sizeof(float) * n);
            for (uint32_t i = 0; i < n; i++) {
                float v = fmoe_rng_normal(&r) * (shape == 4 ? 1e-3f : 2.0f);
                /* random; all positive; all negative; a constant row; tiny */
                x[i] = shape == 1 ? fabsf(v) + 0.5f : shape == 2 ? -fabsf(v) - 0.5f : shape == 3 ? 1.75f : v;
            }
            check_quant(x, n, 32, "rows");
            check_quant(x, n, 8, "rows g8");
            check_quant(x, n, n, "rows channel");
            /* A range of exactly 255 makes the scale 1, so halves are
             * roundf's ties (away from zero, not to even). */
            if (n >= 16) {
                for (uint32_t i = 0; i < n; i++)
                    x[i] = (float)(i % 256) - 127.5f;
                x[0] = -127.5f, x[1] = 127.5f;
                check_quant(x, n, 32, "halves");
            }
            x[n / 2] = NAN;
            check_quant(x, n, 32, "NaN");
            x[n / 2] = -INFINITY;
            check_quant(x, n, 32, "inf");
            free(x);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_rowops");
    TCase *tc = tcase_create("rowops");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, silu_random_rows);
    tcase_add_test(tc, silu_gate_sweep);
    tcase_add_test(tc, silu_special_values);
    tcase_add_test(tc, quant_asym_rows);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
