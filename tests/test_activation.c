/*
 * tests/test_activation.c - the expert activations (core/activation.c).
 *
 * Expected values were computed with python3's math module in double
 * precision (e.g. silu(x) = x/(1+exp(-x)), gelu = 0.5x(1+erf(x/sqrt(2)))),
 * never with the code under test. The implementation rounds once to f32, so
 * the tolerance is a few f32 ulps.
 */
#include <math.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/activation.h"
#include "test_util.h"

#define REL_TOL 3e-7

static void expect_close(double got, double want, const char *what, int i)
{
    if (isnan(want)) {
        ck_assert_msg(isnan(got), "%s[%d] = %.9g, expected NaN", what, i, got);
        return;
    }
    ck_assert_msg(fabs(got - want) <= REL_TOL * fabs(want) + 1e-37, "%s[%d] = %.9g, expected %.9g", what, i, got, want);
}

static void expect_row(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        expect_close(got[i], want[i], what, i);
}

static fmoe_layer_config act_config(int32_t activation, uint32_t gated)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = 4;
    cfg.top_k = 1;
    cfg.hidden_size = 8;
    cfg.intermediate_size = 3;
    cfg.activation = activation;
    cfg.gated = gated;
    return cfg;
}

/* Run one row through the code under test (config validated first). */
static void run_row(const fmoe_layer_config *cfg, const float *h, float *out)
{
    ck_assert_int_eq(fmoe_layer_config_validate(cfg), FMOE_STATUS_OK);
    fmoe_activation_row(cfg, h, cfg->intermediate_size, out);
}

/* gate (-5, 0.5, 2.5) | up (1.5, -3, 4), the halves layout */
static const float halves[6] = {-5.0f, 0.5f, 2.5f, 1.5f, -3.0f, 4.0f};

START_TEST(scalars)
{
    const float xs[5] = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
    const double silu[5] = {-0.2384058440442351, -0.1887703343990727, 0.0, 0.7310585786300049, 2.8577223804673};
    for (int i = 0; i < 5; i++)
        expect_close(fmoe_silu(xs[i]), silu[i], "silu", i);

    const float gx[3] = {-1.0f, 0.5f, 2.0f};
    const double gelu[3] = {-0.15865525393145707, 0.34573123063700656, 1.9544997361036416};
    const double gtanh[3] = {-0.15880800939172324, 0.34571400982514394, 1.954597694087775};
    for (int i = 0; i < 3; i++) {
        expect_close(fmoe_gelu_erf(gx[i]), gelu[i], "gelu_erf", i);
        expect_close(fmoe_gelu_tanh(gx[i]), gtanh[i], "gelu_tanh", i);
    }

    const float sx[4] = {-3.0f, 0.0f, 0.25f, 4.0f};
    const double sig[4] = {0.04742587317756678, 0.5, 0.5621765008857981, 0.9820137900379085};
    for (int i = 0; i < 4; i++)
        expect_close(fmoe_sigmoid(sx[i]), sig[i], "sigmoid", i);

    /* Far tails: accurate where 1 + erf(x) cancels in f32, finite for silu. */
    expect_close(fmoe_gelu_erf(-5.0f), -1.4332578593401202e-06, "gelu_erf(-5)", 0);
    float s = fmoe_silu(-1000.0f);
    ck_assert(s == 0.0f && !isnan(s));
    expect_close(fmoe_silu(1000.0f), 1000.0, "silu(1000)", 0);
}
END_TEST

START_TEST(gated_halves)
{
    float out[3];
    fmoe_layer_config cfg = act_config(FMOE_ACT_SILU, 1);
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){-0.05019638193213642, -0.933688996802782, 9.241418199787566}, 3, "silu");

    cfg = act_config(FMOE_ACT_GELU, 1);
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){-2.1498867890101803e-06, -1.0371936919110196, 9.937903346742239}, 3, "gelu");

    cfg = act_config(FMOE_ACT_GELU_TANH, 1);
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){-3.4376942958935786e-07, -1.0371420294754319, 9.939662935640005}, 3, "gelu_tanh");

    /* relu(g)^2 * u: relu(-5)^2 = 0, 0.25 * -3, 6.25 * 4 */
    cfg = act_config(FMOE_ACT_RELU2, 1);
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){0.0, -0.75, 25.0}, 3, "relu2");
}
END_TEST

START_TEST(silu_clamp)
{
    /* L = 1.5: g = min(g, 1.5) (no lower clamp: -5 stays), u = clamp(u, +-1.5):
     * silu(-5)*1.5, silu(0.5)*-1.5, silu(1.5)*1.5 */
    fmoe_layer_config cfg = act_config(FMOE_ACT_SILU, 1);
    cfg.swiglu_limit = 1.5f;
    float out[3];
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){-0.05019638193213642, -0.466844498401391, 1.839542571435698}, 3, "silu clamp");

    /* NaN passes through the clamp instead of becoming the limit. */
    const float nan_h[6] = {NAN, 1.0f, 1.0f, 1.0f, NAN, 1.0f};
    run_row(&cfg, nan_h, out);
    ck_assert(isnan(out[0]));
    ck_assert(isnan(out[1]));
    expect_close(out[2], 0.7310585786300049, "silu clamp", 2);
}
END_TEST

START_TEST(non_gated)
{
    const float h[3] = {-5.0f, 0.5f, 2.5f};
    float out[3];
    fmoe_layer_config cfg = act_config(FMOE_ACT_SILU, 0);
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-0.03346425462142428, 0.3112296656009273, 2.3103545499468914}, 3, "silu");

    cfg = act_config(FMOE_ACT_GELU, 0);
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-1.4332578593401202e-06, 0.34573123063700656, 2.4844758366855597}, 3, "gelu");

    cfg = act_config(FMOE_ACT_GELU_TANH, 0);
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-2.2917961972623857e-07, 0.34571400982514394, 2.484915733910001}, 3, "gelu_tanh");

    cfg = act_config(FMOE_ACT_RELU2, 0);
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){0.0, 0.25, 6.25}, 3, "relu2");
}
END_TEST

START_TEST(swigluoai_halves)
{
    /* [gate | up]: pairs (g,u) = (8,-9), (0.5,2), (-3,7.5) */
    const float h[6] = {8.0f, 0.5f, -3.0f, -9.0f, 2.0f, 7.5f};
    float out[3];
    fmoe_layer_config cfg = act_config(FMOE_ACT_SWIGLUOAI, 1);
    cfg.swiglu_alpha = 1.702f;
    cfg.swiglu_limit = 7.0f;
    run_row(&cfg, h, out);
    /* g=min(8,7)=7, u=clamp(-9)=-7: 7*sigmoid(1.702f*7)*(-6); 0.5*sig(0.851)*3;
     * -3*sig(-5.106)*(7+1). (alpha is the f32 value of 1.702.) */
    expect_row(out, (const double[]){-41.99971876986308, 1.0511653132687035, -0.1445704682063462}, 3, "swigluoai");

    /* Configured alpha and limit are honoured: alpha 1, no clamp. */
    cfg.swiglu_alpha = 1.0f;
    cfg.swiglu_limit = 0.0f;
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-63.97853759165015, 0.933688996802782, -1.209359766027953}, 3,
               "swigluoai alpha 1, no clamp");
}
END_TEST

START_TEST(swiglustep)
{
    /* gate (10, 1, -2) | up (-20, 3, 8): min(silu(10),7)=7 * clamp(-20)=-7;
     * silu(1)*3; silu(-2)*7 */
    const float h[6] = {10.0f, 1.0f, -2.0f, -20.0f, 3.0f, 8.0f};
    float out[3];
    fmoe_layer_config cfg = act_config(FMOE_ACT_SWIGLUSTEP, 1);
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-49.0, 2.193175735890015, -1.6688409083096456}, 3, "swiglustep");

    /* The limit is fixed at 7: a configured swiglu_limit does not change it. */
    cfg.swiglu_limit = 1.0f;
    run_row(&cfg, h, out);
    expect_row(out, (const double[]){-49.0, 2.193175735890015, -1.6688409083096456}, 3, "swiglustep");
}
END_TEST

START_TEST(clamp_limit_only_for_silu_family)
{
    /* GELU ignores swiglu_limit (vLLM applies the clamp to SiLU-GLU only). */
    fmoe_layer_config cfg = act_config(FMOE_ACT_GELU, 1);
    cfg.swiglu_limit = 1.0f;
    float out[3];
    run_row(&cfg, halves, out);
    expect_row(out, (const double[]){-2.1498867890101803e-06, -1.0371936919110196, 9.937903346742239}, 3,
               "gelu with limit");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("activation");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, scalars);
    tcase_add_test(tc, gated_halves);
    tcase_add_test(tc, silu_clamp);
    tcase_add_test(tc, non_gated);
    tcase_add_test(tc, swigluoai_halves);
    tcase_add_test(tc, swiglustep);
    tcase_add_test(tc, clamp_limit_only_for_silu_family);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 7);
}
