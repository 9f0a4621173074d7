/*
 * core/routing.c - the reference router (see fusedmoe/kit/routing.h and
 * docs/ROUTING.md for the statement of the math).
 *
 * One row at a time:
 *   1. scores s[e] from the logits (softmax / sigmoid / sqrt-softplus);
 *   2. selection values: v[e] = s[e] + bias[e] with a bias (it only steers
 *      selection); without one, v[e] = logits[e] (see rank_by_logits);
 *   3. grouped top-k only: score the groups from v, mark the experts of the
 *      topk_group best groups eligible;
 *   4. k times: take the eligible expert with the best v (repeated arg-max,
 *      so slots come out in descending order and ties go to the lower id);
 *   5. weights = unbiased s of the chosen experts, renormalized, scaled.
 *
 * "Best" is one ordering used everywhere (experts and groups): a number beats
 * NaN, a larger number beats a smaller one, and among equals the lower index
 * wins. Because the arg-max walks indices upwards and only replaces on a
 * strict win, equal values and all-NaN rows both fall to the lowest index,
 * and an expert once taken is never taken again: ids are unique and in range
 * whatever the logits hold.
 *
 * Only libc/libm: this file is linked into plugins that do not link
 * libfusedmoe.
 */
#include "fusedmoe/kit/routing.h"

#include "fusedmoe/kit/half.h"

#include <math.h>
#include <stddef.h>

/* Renormalization divides by max(sum, this): a row whose chosen scores are
 * all (near) zero yields zeros instead of inf/NaN (vLLM's sqrtsoftplus path). */
#define RENORM_EPSILON 1e-20

/* 1 if a ranks strictly above b: numbers above NaN, then larger first. */
static int ranks_above(float a, float b)
{
    if (isnan(a))
        return 0;
    if (isnan(b))
        return 1;
    return a > b;
}

/* Index in [0, n) of the best value among those with eligible[i] != 0, or -1
 * if none is eligible. Lower index wins ties (strict comparison). */
static int64_t best_index(const float *values, const float *eligible, int64_t n)
{
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
        if (eligible[i] == 0.0f)
            continue;
        if (best < 0 || ranks_above(values[i], values[best]))
            best = i;
    }
    return best;
}

/* Scores are evaluated in double and rounded once to f32, so the oracle's
 * scores are the correctly rounded f32 values (kernels' expf approximations
 * are judged against these), and tiny results such as sqrt(softplus(-100))
 * ~ 2e-22 keep their digits instead of passing through an f32 subnormal.
 *
 * Softmax: the max skips NaN so a single NaN logit does not hide the others'
 * shift; NaN/inf still propagate through IEEE arithmetic (a NaN or +inf
 * logit makes the whole row NaN, as in torch). */
static void scores_softmax(const float *logits, int64_t n, float *s)
{
    double max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - max);
    for (int64_t i = 0; i < n; i++)
        s[i] = (float)(exp((double)logits[i] - max) / sum);
}

static float sigmoid_score(float x)
{
    return (float)(1.0 / (1.0 + exp(-(double)x)));
}

/* sqrt(softplus(x)), softplus written as max(x,0) + log1p(exp(-|x|)) so it
 * neither overflows for large x nor loses digits for very negative x. */
static float sqrt_softplus_score(float x)
{
    if (isnan(x))
        return x;
    double d = x;
    double softplus = (d > 0.0 ? d : 0.0) + log1p(exp(-fabs(d)));
    return (float)sqrt(softplus);
}

/* 1 if ranking the logits ranks the scores the same way: the three scoring
 * functions keep the order of the logits, so with no bias added the logits
 * themselves can be ranked. They must be: distinct logits can round to
 * equal f32 scores (sigmoid gives 1.0f for every logit above ~17, softmax
 * and sqrt-softplus give 0 far below the maximum), and transformers ranks
 * the logits where its model code takes the top-k before the scoring
 * (Llama-4: top-k of the logits, then sigmoid). Ranking the scores would
 * give such ties to the lowest id instead of the largest logit. Only true
 * ties of the logits fall back to the lowest id. */
static int rank_by_logits(int32_t scoring)
{
    return scoring == FMOE_SCORING_SOFTMAX || scoring == FMOE_SCORING_SIGMOID || scoring == FMOE_SCORING_SQRTSOFTPLUS;
}

static void scores_compute(int32_t scoring, const float *logits, int64_t n, float *s)
{
    switch (scoring) {
    case FMOE_SCORING_SOFTMAX:
        scores_softmax(logits, n, s);
        return;
    case FMOE_SCORING_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            s[i] = sigmoid_score(logits[i]);
        return;
    case FMOE_SCORING_SQRTSOFTPLUS:
        for (int64_t i = 0; i < n; i++)
            s[i] = sqrt_softplus_score(logits[i]);
        return;
    default:
        /* Unreachable for a validated config; NaN makes misuse visible. */
        for (int64_t i = 0; i < n; i++)
            s[i] = NAN;
        return;
    }
}

/* Group score without bias: the group's best value (NaN only if all are NaN). */
static float group_score_max(const float *v, int64_t n)
{
    float best = v[0];
    for (int64_t i = 1; i < n; i++)
        if (ranks_above(v[i], best))
            best = v[i];
    return best;
}

/* Group score with bias: the sum of the group's two best values (ordered as
 * everywhere else), or the single value of a one-expert group. */
static float group_score_top2(const float *v, int64_t n)
{
    if (n == 1)
        return v[0];
    int64_t first = 0;
    for (int64_t i = 1; i < n; i++)
        if (ranks_above(v[i], v[first]))
            first = i;
    int64_t second = first == 0 ? 1 : 0;
    for (int64_t i = 0; i < n; i++)
        if (i != first && ranks_above(v[i], v[second]))
            second = i;
    return v[first] + v[second];
}

/* Mark eligible[e] = 1 for the experts of the topk_group best groups, 0 for
 * the others. gscore and gtaken hold num_expert_group floats each. */
static void groups_select(const fmoe_layer_config *cfg, const float *v, int use_top2, float *eligible, float *gscore,
                          float *gtaken)
{
    int64_t n_groups = cfg->num_expert_group;
    int64_t per_group = (int64_t)cfg->num_experts / n_groups;

    for (int64_t g = 0; g < n_groups; g++) {
        const float *gv = v + g * per_group;
        gscore[g] = use_top2 ? group_score_top2(gv, per_group) : group_score_max(gv, per_group);
        gtaken[g] = 1.0f; /* "available" for best_index */
    }
    for (int64_t e = 0; e < (int64_t)cfg->num_experts; e++)
        eligible[e] = 0.0f;
    for (uint32_t r = 0; r < cfg->topk_group; r++) {
        int64_t g = best_index(gscore, gtaken, n_groups);
        if (g < 0)
            break; /* topk_group > num_expert_group: rejected by validation */
        gtaken[g] = 0.0f;
        for (int64_t e = g * per_group; e < (g + 1) * per_group; e++)
            eligible[e] = 1.0f;
    }
}

/* Weights of one row from the unbiased scores of the chosen experts. */
static void weights_finish(const fmoe_layer_config *cfg, float *w, uint32_t k)
{
    if (cfg->renormalize) {
        double sum = 0.0;
        for (uint32_t j = 0; j < k; j++)
            sum += w[j];
        /* Written as a comparison (not fmax) so that a NaN sum stays NaN. */
        if (sum < RENORM_EPSILON)
            sum = RENORM_EPSILON;
        for (uint32_t j = 0; j < k; j++)
            w[j] = (float)(w[j] / sum);
    }
    for (uint32_t j = 0; j < k; j++)
        w[j] *= cfg->routed_scaling_factor;
}

int64_t fmoe_route_scratch_floats(const fmoe_layer_config *cfg)
{
    int64_t groups = cfg->grouped_topk ? (int64_t)cfg->num_expert_group : 1;
    /* scores, selection values, eligibility; group scores, group availability */
    return 3 * (int64_t)cfg->num_experts + 2 * groups;
}

static void route_one_row(const fmoe_layer_config *cfg, const float *logits, const float *bias, float *w, int32_t *ids,
                          float *scratch)
{
    int64_t n = cfg->num_experts;
    float *s = scratch;
    float *v = s + n;
    float *eligible = v + n;
    float *gscore = eligible + n;
    float *gtaken = gscore + (cfg->grouped_topk ? cfg->num_expert_group : 1);

    scores_compute(cfg->scoring, logits, n, s);
    const float *ranked = !bias && rank_by_logits(cfg->scoring) ? logits : s;
    for (int64_t e = 0; e < n; e++)
        v[e] = bias ? s[e] + bias[e] : ranked[e];

    if (cfg->grouped_topk) {
        groups_select(cfg, v, bias != NULL, eligible, gscore, gtaken);
    } else {
        for (int64_t e = 0; e < n; e++)
            eligible[e] = 1.0f;
    }

    for (uint32_t j = 0; j < cfg->top_k; j++) {
        int64_t e = best_index(v, eligible, n);
        if (e < 0) { /* only for a config validation would reject (k too large) */
            ids[j] = -1;
            w[j] = 0.0f;
            continue;
        }
        eligible[e] = 0.0f;
        ids[j] = (int32_t)e;
        w[j] = s[e];
    }
    weights_finish(cfg, w, cfg->top_k);
}

void fmoe_route_rows(const fmoe_layer_config *cfg, const float *logits, int64_t M, int64_t ld, const float *bias,
                     float *topk_w, int32_t *topk_ids, float *scratch)
{
    int64_t k = cfg->top_k;
    for (int64_t t = 0; t < M; t++)
        route_one_row(cfg, logits + t * ld, bias, topk_w + t * k, topk_ids + t * k, scratch);
}

void fmoe_route_logits(const fmoe_layer_config *cfg, const void *logits, fmoe_dtype dtype, int64_t M, int64_t ld,
                       int64_t cs, const float *bias, float *topk_w, int32_t *topk_ids, float *scratch)
{
    int64_t e = cfg->num_experts, k = cfg->top_k;
    float *row = scratch;
    /* One row at a time: any dtype and layout, no full f32 copy. */
    for (int64_t t = 0; t < M; t++) {
        for (int64_t j = 0; j < e; j++)
            row[j] = fmoe_load_float(logits, dtype, t * ld + j * cs);
        fmoe_route_rows(cfg, row, 1, e, bias, topk_w + t * k, topk_ids + t * k, row + e);
    }
}
