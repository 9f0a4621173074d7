/*
 * tests/test_routing.c - the reference router (core/routing.c).
 *
 * Expected values were computed by hand with python3 (math module, double
 * precision), never with the code under test; the random cross-check uses an
 * independent sort-based router written below in double precision.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/routing.h"
#include "test_util.h"

#define TOL 2e-6 /* relative; f32 scores vs double hand values */

static fmoe_layer_config base_config(uint32_t E, uint32_t k, int32_t scoring)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = E;
    cfg.top_k = k;
    cfg.hidden_size = 16;
    cfg.intermediate_size = 16;
    cfg.scoring = scoring;
    return cfg;
}

/* Route M rows through the code under test; validates the config first so
 * that every case here is one the library accepts. */
static void route(const fmoe_layer_config *cfg, const float *logits, int64_t M, int64_t ld, const float *bias, float *w,
                  int32_t *ids)
{
    ck_assert_int_eq(fmoe_layer_config_validate(cfg), FMOE_STATUS_OK);
    float *scratch = malloc(sizeof(float) * (size_t)fmoe_route_scratch_floats(cfg));
    ck_assert_ptr_nonnull(scratch);
    fmoe_route_rows(cfg, logits, M, ld, bias, w, ids, scratch);
    free(scratch);
}

static void expect_row(const float *w, const int32_t *ids, uint32_t k, const int32_t *want_ids, const double *want_w)
{
    for (uint32_t j = 0; j < k; j++) {
        ck_assert_msg(ids[j] == want_ids[j], "slot %u: id %d, expected %d", j, ids[j], want_ids[j]);
        if (isnan(want_w[j])) {
            ck_assert_msg(isnan(w[j]), "slot %u: weight %.9g, expected NaN", j, (double)w[j]);
            continue;
        }
        double err = fabs((double)w[j] - want_w[j]);
        ck_assert_msg(err <= TOL * fabs(want_w[j]) + 1e-30, "slot %u: weight %.9g, expected %.9g", j, (double)w[j],
                      want_w[j]);
    }
}

/* ---- plain top-k -------------------------------------------------------- */

START_TEST(softmax_topk)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SOFTMAX);
    const float logits[4] = {1.0f, 3.0f, 2.0f, 0.5f};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 1, 4, NULL, w, ids);
    /* softmax(1,3,2,0.5) = (0.0853689, 0.6307955, 0.2320567, 0.0517789) */
    expect_row(w, ids, 2, (const int32_t[]){1, 2}, (const double[]){0.6307955432474668, 0.23205671194331448});

    cfg.renormalize = 1; /* p1/(p1+p2) = 1/(1+e^-1) */
    route(&cfg, logits, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){1, 2}, (const double[]){0.7310585786300049, 0.26894142136999516});
}
END_TEST

START_TEST(sigmoid_topk)
{
    fmoe_layer_config cfg = base_config(5, 3, FMOE_SCORING_SIGMOID);
    const float logits[5] = {-1.0f, 2.0f, 0.5f, 1.5f, -3.0f};
    float w[3];
    int32_t ids[3];
    route(&cfg, logits, 1, 5, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 3, 2},
               (const double[]){0.8807970779778823, 0.8175744761936437, 0.6224593312018546});

    cfg.renormalize = 1;
    route(&cfg, logits, 1, 5, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 3, 2},
               (const double[]){0.37951799225395855, 0.35227662702451085, 0.26820538072153066});
}
END_TEST

START_TEST(sqrtsoftplus_topk)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SQRTSOFTPLUS);
    const float logits[4] = {0.3f, -2.0f, 4.0f, 1.0f};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){2, 3}, (const double[]){2.004532346438393, 1.145976303209723});

    /* renormalize, then scale by rsf = 2 */
    cfg.renormalize = 1;
    cfg.routed_scaling_factor = 2.0f;
    route(&cfg, logits, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){2, 3}, (const double[]){1.2725134696343599, 0.7274865303656401});

    /* Extremes stay finite and accurate: sqrt(softplus(100)) = 10,
     * sqrt(softplus(-100)) = sqrt(log1p(e^-100)) ~ e^-50. */
    const float ext[2] = {-100.0f, 100.0f};
    fmoe_layer_config c2 = base_config(2, 2, FMOE_SCORING_SQRTSOFTPLUS);
    route(&c2, ext, 1, 2, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){1, 0}, (const double[]){10.0, 1.9287498479639178e-22});
}
END_TEST

START_TEST(rsf_without_renormalize)
{
    /* rsf is always applied (vLLM's plain router drops it). */
    fmoe_layer_config cfg = base_config(5, 3, FMOE_SCORING_SIGMOID);
    cfg.routed_scaling_factor = 2.5f;
    const float logits[5] = {-1.0f, 2.0f, 0.5f, 1.5f, -3.0f};
    float w[3];
    int32_t ids[3];
    route(&cfg, logits, 1, 5, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 3, 2},
               (const double[]){2.5 * 0.8807970779778823, 2.5 * 0.8175744761936437, 2.5 * 0.6224593312018546});
}
END_TEST

/* ---- correction bias ---------------------------------------------------- */

START_TEST(correction_bias_selects_but_does_not_weight)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SIGMOID);
    cfg.has_correction_bias = 1;
    const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    const float bias[4] = {0.0f, 0.0f, 0.5f, 0.9f};
    float w[2];
    int32_t ids[2];
    /* s = (0.8808, 0.7311, 0.5, 0.2689); s+b = (0.8808, 0.7311, 1.0, 1.1689):
     * experts 3 then 2 are selected, weighted by their unbiased s, ordered
     * by s+b (so expert 3 comes first although its score is lower). */
    route(&cfg, logits, 1, 4, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){3, 2}, (const double[]){0.2689414213699951, 0.5});

    /* renormalize before rsf: 2.5 * s / (s3 + s2) */
    cfg.renormalize = 1;
    cfg.routed_scaling_factor = 2.5f;
    route(&cfg, logits, 1, 4, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){3, 2}, (const double[]){0.8743885226355472, 1.6256114773644528});

    /* Without the bias the same logits pick 0 and 1. */
    cfg.has_correction_bias = 0;
    cfg.renormalize = 0;
    cfg.routed_scaling_factor = 1.0f;
    route(&cfg, logits, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){0, 1}, (const double[]){0.8807970779778823, 0.7310585786300049});
}
END_TEST

/* ---- grouped top-k ------------------------------------------------------ */

START_TEST(grouped_without_bias_uses_group_max)
{
    /* 8 experts in 4 groups of 2; keep 2 groups; k = 3. Group maxima of the
     * logits (5, 4.5, 4.8, 2) keep groups 0 and 2, so the second and third
     * best experts overall (2 and 3, group 1) are excluded, and expert 5 with
     * logit 0 is picked instead. A top-2-sum group score would have kept
     * groups 1 and 0 instead (softmax sums 0.379 vs 0.329 vs 0.271). */
    fmoe_layer_config cfg = base_config(8, 3, FMOE_SCORING_SOFTMAX);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 4;
    cfg.topk_group = 2;
    const float logits[8] = {5.0f, -1.0f, 4.5f, 4.4f, 4.8f, 0.0f, 1.0f, 2.0f};
    float w[3];
    int32_t ids[3];
    route(&cfg, logits, 1, 8, NULL, w, ids);
    /* weights: softmax over all 8 experts */
    expect_row(w, ids, 3, (const int32_t[]){0, 4, 5},
               (const double[]){0.32771923462598834, 0.26831381576347524, 0.002208154833490764});

    cfg.renormalize = 1;
    route(&cfg, logits, 1, 8, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){0, 4, 5},
               (const double[]){0.547804517249615, 0.44850440494729754, 0.0036910778030875063});
}
END_TEST

START_TEST(grouped_with_bias_uses_top2_sum)
{
    /* sigmoid scores; group 0 holds the globally best expert (s = 0.953) but
     * a weak partner (0.047): top-2 sums of s+b are (1.0, 1.620, 1.854,
     * 0.388), so groups 2 and 1 are kept and expert 0 is excluded. Bias 0.3
     * on expert 4 makes it the first pick; weights are the unbiased s. */
    fmoe_layer_config cfg = base_config(8, 2, FMOE_SCORING_SIGMOID);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 4;
    cfg.topk_group = 2;
    cfg.has_correction_bias = 1;
    const float logits[8] = {3.0f, -3.0f, 1.5f, 1.4f, 1.2f, 1.3f, -1.0f, -2.0f};
    const float bias[8] = {0, 0, 0, 0, 0.3f, 0, 0, 0};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 1, 8, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){4, 2}, (const double[]){0.7685247834990175, 0.8175744761936437});

    cfg.renormalize = 1;
    cfg.routed_scaling_factor = 2.5f;
    route(&cfg, logits, 1, 8, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){4, 2}, (const double[]){1.211344086447551, 1.288655913552449});
}
END_TEST

START_TEST(grouped_single_expert_groups)
{
    /* One expert per group: the group score is that expert's s+b, so the
     * result equals plain biased top-k. s+b = (0.5+0.1, 0.731, 0.269+0.6, 0.881). */
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SIGMOID);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 4;
    cfg.topk_group = 2;
    cfg.has_correction_bias = 1;
    const float logits[4] = {0.0f, 1.0f, -1.0f, 2.0f};
    const float bias[4] = {0.1f, 0.0f, 0.6f, 0.0f};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 1, 4, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){3, 2}, (const double[]){0.8807970779778823, 0.2689414213699951});
}
END_TEST

/* ---- ties --------------------------------------------------------------- */

START_TEST(ties_lower_expert_wins)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SOFTMAX);
    float w[2];
    int32_t ids[2];
    const float flat[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    route(&cfg, flat, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){0, 1}, (const double[]){0.25, 0.25});

    const float pair[4] = {0.0f, 2.0f, 1.0f, 2.0f};
    cfg.scoring = FMOE_SCORING_SIGMOID;
    route(&cfg, pair, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){1, 3}, (const double[]){0.8807970779778823, 0.8807970779778823});

    /* A bias that creates an exact tie in s+b: logits 0 (s = 0.5 each),
     * bias (0.25, 0.5, 0.5, 0.25) -> experts 1 and 2 tie, 1 comes first. */
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float bias[4] = {0.25f, 0.5f, 0.5f, 0.25f};
    cfg.has_correction_bias = 1;
    route(&cfg, zero, 1, 4, bias, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){1, 2}, (const double[]){0.5, 0.5});
}
END_TEST

START_TEST(ties_lower_group_wins)
{
    /* 2 groups of 2, keep 1 group, k = 1. */
    fmoe_layer_config cfg = base_config(4, 1, FMOE_SCORING_SIGMOID);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 2;
    cfg.topk_group = 1;
    float w[1];
    int32_t ids[1];
    /* group maxima tie (expert 1 and expert 2): group 0 wins, so expert 1. */
    const float a[4] = {0.0f, 1.0f, 1.0f, 0.0f};
    route(&cfg, a, 1, 4, NULL, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){1}, (const double[]){0.7310585786300049});

    /* With bias, top-2 sums tie (0.5+0.5 each with zero bias and logits 0,
     * but the experts inside differ only by index): group 0, expert 0. */
    const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    cfg.has_correction_bias = 1;
    route(&cfg, z, 1, 4, bias, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){0}, (const double[]){0.5});

    /* Reversed: group 1 strictly better with the bias sum -> expert 3. */
    const float bias2[4] = {0.0f, 0.0f, 0.25f, 0.5f};
    route(&cfg, z, 1, 4, bias2, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){3}, (const double[]){0.5});
}
END_TEST

/* ---- saturated scores: the logits rank ------------------------------------ */

/* Llama-4's router (transformers Llama4TextMoe / vLLM Llama4MoE): top-1 of
 * the raw logits, weight sigmoid(logit) on the input. sigmoid(30), (35) and
 * (40) all round to 1.0f (1 - sigmoid(30) = 9.4e-14 < 2^-25), so ranking the
 * scores would pick expert 0; the largest logit is expert 1. */
START_TEST(sigmoid_saturated_ranks_logits)
{
    fmoe_layer_config cfg = base_config(3, 1, FMOE_SCORING_SIGMOID);
    cfg.apply_router_weight_on_input = 1;
    float w[3];
    int32_t ids[3];
    const float sat[3] = {30.0f, 40.0f, 35.0f};
    route(&cfg, sat, 1, 3, NULL, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){1}, (const double[]){1.0});

    /* All three slots: ordered by logit, 40, 35, 30. */
    cfg = base_config(3, 3, FMOE_SCORING_SIGMOID);
    route(&cfg, sat, 1, 3, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 2, 0}, (const double[]){1.0, 1.0, 1.0});

    /* True ties of the logits keep the documented rule: lowest id first. */
    const float tie[3] = {35.0f, 40.0f, 40.0f};
    route(&cfg, tie, 1, 3, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 2, 0}, (const double[]){1.0, 1.0, 1.0});

    /* Saturated at the bottom: sigmoid(-120) = 7.7e-53 and sigmoid(-110)
     * = 1.7e-48 are both 0 in f32; -110 (expert 2) ranks above -120. */
    const float low[3] = {-120.0f, 5.0f, -110.0f};
    route(&cfg, low, 1, 3, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){1, 2, 0}, (const double[]){0.9933071490757153, 0.0, 0.0});
}
END_TEST

/* The same for the other scorings, which also keep the order of the logits. */
START_TEST(softmax_sqrtsoftplus_saturated_rank_logits)
{
    float w[3];
    int32_t ids[3];
    /* softmax: exp(-200) = 1.4e-87 and exp(-150) = 7.2e-66 round to 0. */
    fmoe_layer_config cfg = base_config(3, 3, FMOE_SCORING_SOFTMAX);
    const float sm[3] = {0.0f, -200.0f, -150.0f};
    route(&cfg, sm, 1, 3, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){0, 2, 1}, (const double[]){1.0, 0.0, 0.0});

    /* sqrt(softplus(x)) ~ exp(x / 2): exp(-125) = 5.2e-55 and exp(-150) =
     * 7.2e-66 are 0 in f32; sqrt(softplus(0)) = sqrt(ln 2). */
    cfg = base_config(3, 3, FMOE_SCORING_SQRTSOFTPLUS);
    const float sp[3] = {-300.0f, -250.0f, 0.0f};
    route(&cfg, sp, 1, 3, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){2, 1, 0}, (const double[]){0.8325546111576977, 0.0, 0.0});
}
END_TEST

/* Grouped top-k without a bias scores a group by its best logit: groups
 * {30, 0} and {40, 0} both have max score 1.0f; group 1 holds the 40. */
START_TEST(grouped_saturated_ranks_logits)
{
    fmoe_layer_config cfg = base_config(4, 1, FMOE_SCORING_SIGMOID);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 2;
    cfg.topk_group = 1;
    float w[1];
    int32_t ids[1];
    const float a[4] = {30.0f, 0.0f, 40.0f, 0.0f};
    route(&cfg, a, 1, 4, NULL, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){2}, (const double[]){1.0});
}
END_TEST

/* With a correction bias the selection values are s + bias: the scores are
 * ranked, saturated or not (DeepSeek-V3's noaux_tc). sigmoid(30) and
 * sigmoid(40) are both 1.0f; a zero bias leaves them tied: expert 0. */
START_TEST(bias_ranks_scores)
{
    fmoe_layer_config cfg = base_config(3, 1, FMOE_SCORING_SIGMOID);
    cfg.has_correction_bias = 1;
    float w[1];
    int32_t ids[1];
    const float sat[3] = {30.0f, 40.0f, 35.0f};
    const float bias[3] = {0.0f, 0.0f, 0.0f};
    route(&cfg, sat, 1, 3, bias, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){0}, (const double[]){1.0});
}
END_TEST

/* ---- NaN / inf ---------------------------------------------------------- */

START_TEST(nan_inf_rank_lowest)
{
    fmoe_layer_config cfg = base_config(6, 6, FMOE_SCORING_SIGMOID);
    const float logits[6] = {NAN, 1.0f, NAN, 2.0f, -INFINITY, INFINITY};
    float w[6];
    int32_t ids[6];
    route(&cfg, logits, 1, 6, NULL, w, ids);
    /* sigmoid(+inf)=1, sigmoid(2), sigmoid(1), sigmoid(-inf)=0, then NaNs by index */
    expect_row(w, ids, 6, (const int32_t[]){5, 3, 1, 4, 0, 2},
               (const double[]){1.0, 0.8807970779778823, 0.7310585786300049, 0.0, NAN, NAN});

    /* softmax of a row with a NaN is all NaN, but without a bias the
     * logits are ranked: 3, 2, 1 (experts 2, 3, 0), the NaN logit last. */
    fmoe_layer_config sm = base_config(4, 3, FMOE_SCORING_SOFTMAX);
    const float with_nan[4] = {1.0f, NAN, 3.0f, 2.0f};
    route(&sm, with_nan, 1, 4, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){2, 3, 0}, (const double[]){NAN, NAN, NAN});

    /* all -inf under softmax: NaN scores (exp(-inf - -inf)), logits all
     * tie, so the lowest ids. */
    const float ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    route(&sm, ninf, 1, 4, NULL, w, ids);
    expect_row(w, ids, 3, (const int32_t[]){0, 1, 2}, (const double[]){NAN, NAN, NAN});
}
END_TEST

START_TEST(renormalize_epsilon)
{
    /* sigmoid(-inf) = 0 for every chosen expert: the sum is 0, divided by
     * max(0, 1e-20) the weights stay 0 instead of NaN. */
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SIGMOID);
    cfg.renormalize = 1;
    const float logits[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){0, 1}, (const double[]){0.0, 0.0});

    /* A sum below the epsilon is replaced by it: the weights are w / 1e-20.
     * sigmoid(-80) = 1.8048513878454153e-35, sigmoid(-81) = 6.639677199580733e-36. */
    const float tiny[4] = {-81.0f, -80.0f, -1000.0f, -1000.0f};
    route(&cfg, tiny, 1, 4, NULL, w, ids);
    expect_row(w, ids, 2, (const int32_t[]){1, 0},
               (const double[]){1.8048513878454153e-35 / 1e-20, 6.639677199580733e-36 / 1e-20});
}
END_TEST

/* Unique, in-range ids and (grouped) ids from at most topk_group groups,
 * whatever the logits hold. */
static void check_ids_valid(const fmoe_layer_config *cfg, const int32_t *ids)
{
    uint32_t E = cfg->num_experts, k = cfg->top_k;
    for (uint32_t j = 0; j < k; j++) {
        ck_assert_msg(ids[j] >= 0 && (uint32_t)ids[j] < E, "id %d out of range", ids[j]);
        for (uint32_t i = 0; i < j; i++)
            ck_assert_msg(ids[i] != ids[j], "id %d chosen twice", ids[j]);
    }
    if (!cfg->grouped_topk)
        return;
    uint32_t per = E / cfg->num_expert_group, groups_used = 0;
    for (uint32_t g = 0; g < cfg->num_expert_group; g++) {
        int used = 0;
        for (uint32_t j = 0; j < k; j++)
            used |= (uint32_t)ids[j] / per == g;
        groups_used += (uint32_t)used;
    }
    ck_assert_uint_le(groups_used, cfg->topk_group);
}

static float nasty_value(fmoe_rng *r)
{
    switch (fmoe_rng_u64(r) % 8) {
    case 0:
        return NAN;
    case 1:
        return INFINITY;
    case 2:
        return -INFINITY;
    case 3:
        return 0.0f;
    default:
        return fmoe_rng_uniform(r, -50.0f, 50.0f);
    }
}

START_TEST(nan_inf_fuzz_ids_unique)
{
    fmoe_rng r = fmoe_rng_for(11);
    const int32_t scorings[3] = {FMOE_SCORING_SOFTMAX, FMOE_SCORING_SIGMOID, FMOE_SCORING_SQRTSOFTPLUS};
    enum { E = 16, M = 64 };
    float logits[M * E], bias[E], w[M * E];
    int32_t ids[M * E];
    for (int iter = 0; iter < 60; iter++) {
        fmoe_layer_config cfg = base_config(E, 1 + (uint32_t)(fmoe_rng_u64(&r) % 8), scorings[iter % 3]);
        cfg.renormalize = (uint32_t)(iter / 3) % 2;
        int use_bias = (iter / 6) % 2;
        cfg.has_correction_bias = (uint32_t)use_bias;
        if ((iter / 12) % 2) {
            cfg.grouped_topk = 1;
            cfg.num_expert_group = 4;
            cfg.topk_group = 2 + (uint32_t)(fmoe_rng_u64(&r) % 3);
        }
        for (int i = 0; i < M * E; i++)
            logits[i] = nasty_value(&r);
        for (int i = 0; i < E; i++)
            bias[i] = (fmoe_rng_u64(&r) % 4) ? fmoe_rng_uniform(&r, -1.0f, 1.0f) : nasty_value(&r);
        route(&cfg, logits, M, E, use_bias ? bias : NULL, w, ids);
        for (int t = 0; t < M; t++)
            check_ids_valid(&cfg, ids + t * cfg.top_k);
    }
}
END_TEST

START_TEST(rows_use_leading_dimension)
{
    /* Two rows 6 floats apart, only the first 3 of each are logits. */
    fmoe_layer_config cfg = base_config(3, 1, FMOE_SCORING_SIGMOID);
    const float logits[12] = {0.0f, 1.0f, -1.0f, 99.0f, 99.0f, 99.0f, 2.0f, -2.0f, 0.0f, 99.0f, 99.0f, 99.0f};
    float w[2];
    int32_t ids[2];
    route(&cfg, logits, 2, 6, NULL, w, ids);
    expect_row(w, ids, 1, (const int32_t[]){1}, (const double[]){0.7310585786300049});
    expect_row(w + 1, ids + 1, 1, (const int32_t[]){0}, (const double[]){0.8807970779778823});
}
END_TEST

/* ---- random cross-check against an independent router ------------------- */

typedef struct ranked {
    double v;
    int idx;
} ranked;

static int ranked_desc(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->idx - y->idx;
}

/* Straightforward double-precision router (finite inputs only): sort-based,
 * with masking as in vLLM's grouped_topk. Returns the smallest gap between
 * neighbouring sorted values that decide the result, so near-ties that f32
 * could order differently can be skipped. */
static double naive_route(const fmoe_layer_config *cfg, const float *logits, const float *bias, double *w, int *ids)
{
    int E = (int)cfg->num_experts, k = (int)cfg->top_k;
    double s[64], v[64];
    double gap = INFINITY;
    if (cfg->scoring == FMOE_SCORING_SOFTMAX) {
        double mx = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++)
            mx = fmax(mx, logits[e]);
        for (int e = 0; e < E; e++)
            sum += exp(logits[e] - mx);
        for (int e = 0; e < E; e++)
            s[e] = exp(logits[e] - mx) / sum;
    } else if (cfg->scoring == FMOE_SCORING_SIGMOID) {
        for (int e = 0; e < E; e++)
            s[e] = 1.0 / (1.0 + exp(-(double)logits[e]));
    } else {
        for (int e = 0; e < E; e++)
            s[e] = sqrt(log1p(exp((double)logits[e])));
    }
    for (int e = 0; e < E; e++)
        v[e] = s[e] + (bias ? bias[e] : 0.0);

    int eligible[64];
    for (int e = 0; e < E; e++)
        eligible[e] = 1;
    if (cfg->grouped_topk) {
        int G = (int)cfg->num_expert_group, per = E / G;
        ranked gs[64];
        for (int g = 0; g < G; g++) {
            ranked in[64];
            for (int i = 0; i < per; i++)
                in[i] = (ranked){v[g * per + i], i};
            qsort(in, (size_t)per, sizeof in[0], ranked_desc);
            double score = bias ? (per > 1 ? in[0].v + in[1].v : in[0].v) : in[0].v;
            gs[g] = (ranked){score, g};
        }
        qsort(gs, (size_t)G, sizeof gs[0], ranked_desc);
        if ((int)cfg->topk_group < G)
            gap = fmin(gap, gs[cfg->topk_group - 1].v - gs[cfg->topk_group].v);
        for (int e = 0; e < E; e++)
            eligible[e] = 0;
        for (int i = 0; i < (int)cfg->topk_group; i++)
            for (int e = gs[i].idx * per; e < (gs[i].idx + 1) * per; e++)
                eligible[e] = 1;
    }
    ranked all[64];
    int n = 0;
    for (int e = 0; e < E; e++)
        if (eligible[e])
            all[n++] = (ranked){v[e], e};
    qsort(all, (size_t)n, sizeof all[0], ranked_desc);
    for (int j = 0; j < k && j + 1 < n; j++)
        gap = fmin(gap, all[j].v - all[j + 1].v);
    double sum = 0;
    for (int j = 0; j < k; j++) {
        ids[j] = all[j].idx;
        w[j] = s[all[j].idx];
        sum += w[j];
    }
    for (int j = 0; j < k; j++) {
        if (cfg->renormalize)
            w[j] /= fmax(sum, 1e-20);
        w[j] *= cfg->routed_scaling_factor;
    }
    return gap;
}

START_TEST(random_against_naive_router)
{
    fmoe_rng r = fmoe_rng_for(12);
    const int32_t scorings[3] = {FMOE_SCORING_SOFTMAX, FMOE_SCORING_SIGMOID, FMOE_SCORING_SQRTSOFTPLUS};
    enum { E = 64, M = 32 };
    float logits[M * E], bias[E], w[M * 8];
    int32_t ids[M * 8];
    int checked = 0, skipped = 0;
    for (int iter = 0; iter < 48; iter++) {
        fmoe_layer_config cfg = base_config(E, 1 + (uint32_t)(fmoe_rng_u64(&r) % 8), scorings[iter % 3]);
        cfg.renormalize = (uint32_t)(iter / 3) % 2;
        cfg.routed_scaling_factor = (iter / 6) % 2 ? 2.5f : 1.0f;
        int use_bias = (iter / 12) % 2;
        cfg.has_correction_bias = (uint32_t)use_bias;
        if ((iter / 24) % 2) {
            cfg.grouped_topk = 1;
            cfg.num_expert_group = 8;
            cfg.topk_group = 3;
        }
        for (int i = 0; i < M * E; i++)
            logits[i] = 2.0f * fmoe_rng_normal(&r);
        for (int i = 0; i < E; i++)
            bias[i] = fmoe_rng_uniform(&r, -0.2f, 0.2f);
        route(&cfg, logits, M, E, use_bias ? bias : NULL, w, ids);
        for (int t = 0; t < M; t++) {
            double ew[8];
            int eids[8];
            double gap = naive_route(&cfg, logits + t * E, use_bias ? bias : NULL, ew, eids);
            if (gap < 1e-5) { /* f32 may legitimately order a near-tie either way */
                skipped++;
                continue;
            }
            checked++;
            for (uint32_t j = 0; j < cfg.top_k; j++) {
                ck_assert_int_eq(ids[t * cfg.top_k + j], eids[j]);
                ck_assert_msg(fabs(w[t * cfg.top_k + j] - ew[j]) <= 1e-5 * fabs(ew[j]) + 1e-7,
                              "iter %d row %d slot %u: %.9g vs %.9g", iter, t, j, (double)w[t * cfg.top_k + j], ew[j]);
            }
        }
    }
    ck_assert_msg(skipped * 10 < checked, "too many near-ties skipped: %d of %d", skipped, checked + skipped);
}
END_TEST

/* fmoe_reference_route, the public router on tensors: bf16 and f16 logits
 * (exact values) route as their f32 values do, rows follow the logits'
 * row stride, and the hand values: softmax top-2 of {1, 3, 2, 0}
 * renormalized is e^3 / (e^3 + e^2) = 1 / (1 + e^-1) = 0.7310585786 for
 * expert 1 and 0.2689414214 for expert 2; row 1 {5, 1, 1, 4} likewise for
 * experts 0 and 3. The padding between rows (100) would win if it were
 * read as a logit. */
START_TEST(public_route_reads_each_logit_dtype_and_row_stride)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SOFTMAX);
    cfg.renormalize = 1;
    const float f32[12] = {1, 3, 2, 0, 100, 100, 5, 1, 1, 4, 100, 100};
    const uint16_t bf16[12] = {0x3F80, 0x4040, 0x4000, 0,      0x42C8, 0x42C8,
                               0x40A0, 0x3F80, 0x3F80, 0x4080, 0x42C8, 0x42C8};
    const uint16_t f16[12] = {0x3C00, 0x4200, 0x4000, 0,      0x5640, 0x5640,
                              0x4500, 0x3C00, 0x3C00, 0x4400, 0x5640, 0x5640};
    const void *data[3] = {f32, bf16, f16};
    const fmoe_dtype dtypes[3] = {FMOE_DTYPE_F32, FMOE_DTYPE_BF16, FMOE_DTYPE_F16};
    const int32_t want_ids[4] = {1, 2, 0, 3};
    const double want_w[4] = {0.7310585786300049, 0.2689414213699951, 0.7310585786300049, 0.2689414213699951};
    for (int d = 0; d < 3; d++) {
        const int64_t ls[2] = {2, 4}, ks[2] = {2, 2};
        fmoe_tensor logits, tw, ti;
        float w[4] = {-1, -1, -1, -1};
        int32_t ids[4] = {-1, -1, -1, -1};
        ck_assert_int_eq(fmoe_tensor_init(&logits, dtypes[d], 2, ls, (void *)data[d]), FMOE_STATUS_OK);
        logits.strides[0] = 6; /* rows of 4 logits, 6 apart */
        ck_assert_int_eq(fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, w), FMOE_STATUS_OK);
        ck_assert_int_eq(fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, ids), FMOE_STATUS_OK);
        ck_assert_msg(fmoe_reference_route(&cfg, &logits, NULL, &tw, &ti) == FMOE_STATUS_OK, "%s: %s",
                      fmoe_dtype_name(dtypes[d]), fmoe_last_error());
        for (int j = 0; j < 4; j++) {
            ck_assert_msg(ids[j] == want_ids[j], "%s slot %d: id %d, expected %d", fmoe_dtype_name(dtypes[d]), j,
                          ids[j], want_ids[j]);
            ck_assert_msg(fabs(w[j] - want_w[j]) <= TOL * want_w[j], "%s slot %d: %.9g, expected %.9g",
                          fmoe_dtype_name(dtypes[d]), j, (double)w[j], want_w[j]);
        }
    }
}
END_TEST

/* Each tensor the public router is handed is checked before any is read,
 * with the tensor named. */
START_TEST(public_route_refuses_bad_tensors)
{
    fmoe_layer_config cfg = base_config(4, 2, FMOE_SCORING_SOFTMAX);
    float lg[8] = {1, 3, 2, 0, 5, 1, 1, 4}, w[4], bias[8] = {0};
    int32_t lgi[8] = {0}, ids[4];
    const int64_t ls[2] = {2, 4}, ks[2] = {2, 2}, wide[2] = {2, 3}, bs[1] = {4}, bs8[1] = {8};
    fmoe_tensor logits, tw, ti, b;
#define INIT() \
    do { \
        ck_assert_int_eq(fmoe_tensor_init(&logits, FMOE_DTYPE_F32, 2, ls, lg), FMOE_STATUS_OK); \
        ck_assert_int_eq(fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, w), FMOE_STATUS_OK); \
        ck_assert_int_eq(fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, ids), FMOE_STATUS_OK); \
        ck_assert_int_eq(fmoe_tensor_init(&b, FMOE_DTYPE_F32, 1, bs, bias), FMOE_STATUS_OK); \
    } while (0)
#define REFUSED(bias_tensor, message) \
    do { \
        ck_assert_int_eq(fmoe_reference_route(&cfg, &logits, bias_tensor, &tw, &ti), FMOE_STATUS_INVALID_ARGUMENT); \
        ck_assert_str_eq(fmoe_last_error(), message); \
    } while (0)

    INIT();
    ck_assert_int_eq(fmoe_tensor_init(&logits, FMOE_DTYPE_INT32, 2, ls, lgi), FMOE_STATUS_OK);
    REFUSED(NULL, "router_logits: dtype int32, expected f32, bf16 or f16");
    INIT();
    ck_assert_int_eq(fmoe_tensor_init(&logits, FMOE_DTYPE_F32, 2, wide, lg), FMOE_STATUS_OK);
    REFUSED(NULL, "router_logits: expected [*, 4], got f32 [2, 3]");
    INIT();
    logits.strides[1] = 2;
    logits.strides[0] = 8;
    logits.shape[0] = 1;
    REFUSED(NULL, "router_logits: the reference router needs host memory with unit column stride");
    INIT();
    logits.device_kind = FMOE_DEVICE_CUDA;
    REFUSED(NULL, "router_logits: the reference router needs host memory with unit column stride");
    INIT();
    ck_assert_int_eq(fmoe_tensor_init(&tw, FMOE_DTYPE_BF16, 2, ks, w), FMOE_STATUS_OK);
    REFUSED(NULL, "topk_weights: expected f32 [2, 2], got bf16 [2, 2]");
    INIT();
    ck_assert_int_eq(fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, wide, lgi), FMOE_STATUS_OK);
    REFUSED(NULL, "topk_ids: expected int32 [2, 2], got int32 [2, 3]");
    INIT();
    ti.strides[0] = 3; /* rows 3 apart */
    REFUSED(NULL, "topk_weights/topk_ids must be contiguous");
    INIT();
    REFUSED(&b, "correction_bias given but the layer config has has_correction_bias = 0");
    cfg.has_correction_bias = 1;
    INIT();
    REFUSED(NULL, "correction_bias: required when has_correction_bias is set");
    ck_assert_int_eq(fmoe_tensor_init(&b, FMOE_DTYPE_F32, 1, bs8, bias), FMOE_STATUS_OK);
    REFUSED(&b, "correction_bias: expected f32 [4], got f32 [8]");
    INIT();
    b.strides[0] = 2;
    REFUSED(&b, "correction_bias must be contiguous");
    /* The same tensors with a valid bias route; a config the library refuses does not. */
    INIT();
    ck_assert_int_eq(fmoe_reference_route(&cfg, &logits, &b, &tw, &ti), FMOE_STATUS_OK);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[2], 0);
    cfg.top_k = 5; /* more than the 4 experts: the config itself is refused */
    ck_assert_int_eq(fmoe_reference_route(&cfg, &logits, &b, &tw, &ti), FMOE_STATUS_INVALID_ARGUMENT);
#undef REFUSED
#undef INIT
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("routing");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, softmax_topk);
    tcase_add_test(tc, sigmoid_topk);
    tcase_add_test(tc, sqrtsoftplus_topk);
    tcase_add_test(tc, rsf_without_renormalize);
    tcase_add_test(tc, correction_bias_selects_but_does_not_weight);
    tcase_add_test(tc, grouped_without_bias_uses_group_max);
    tcase_add_test(tc, grouped_with_bias_uses_top2_sum);
    tcase_add_test(tc, grouped_single_expert_groups);
    tcase_add_test(tc, ties_lower_expert_wins);
    tcase_add_test(tc, ties_lower_group_wins);
    tcase_add_test(tc, sigmoid_saturated_ranks_logits);
    tcase_add_test(tc, softmax_sqrtsoftplus_saturated_rank_logits);
    tcase_add_test(tc, grouped_saturated_ranks_logits);
    tcase_add_test(tc, bias_ranks_scores);
    tcase_add_test(tc, nan_inf_rank_lowest);
    tcase_add_test(tc, renormalize_epsilon);
    tcase_add_test(tc, nan_inf_fuzz_ids_unique);
    tcase_add_test(tc, rows_use_leading_dimension);
    tcase_add_test(tc, random_against_naive_router);
    tcase_add_test(tc, public_route_reads_each_logit_dtype_and_row_stride);
    tcase_add_test(tc, public_route_refuses_bad_tensors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 21);
}
