/*
 * tests/cli/test_synth.c - the synthetic checkpoints of cli/synth: the
 * normal values they start from (moments, tails, never zero), the parallel
 * loop, and that a checkpoint is the same bytes however many threads build
 * it, with values whose statistics are what the scheme's quantizer should
 * give (bf16, fp8 per channel / block / tensor with calibration, W4A8
 * packed and Arm int8-held, and the other families for the bytes).
 *
 * Seeds come from the run's seed (tests/test_util.h), printed on failure.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/halfconv.h"
#include "cli/synth/normal.h"
#include "cli/synth/parallel.h"
#include "cli/synth/synth.h"
#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"
#include "tests/test_util.h"

static uint64_t seed_for(uint64_t stream)
{
    fmoe_rng r = fmoe_rng_for(stream);
    return fmoe_rng_u64(&r) & 0xffffffffull;
}

/* --- the normal values ------------------------------------------------------ */

START_TEST(test_normal_moments)
{
    const size_t n = 1u << 21;
    uint64_t seed = seed_for(1);
    float *v = malloc(n * sizeof *v), *again = malloc(n * sizeof *again);
    ck_assert(v && again);
    synth_fill_normal(v, n, 1.0f, seed, "w1", 3);
    double s1 = 0, s2 = 0, s4 = 0;
    size_t zeros = 0, within1 = 0, beyond3 = 0, beyond_r = 0;
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        ck_assert_msg(isfinite(x), "value %zu not finite (seed %llu)", i, (unsigned long long)seed);
        zeros += x == 0.0;
        s1 += x;
        s2 += x * x;
        s4 += x * x * x * x;
        within1 += fabs(x) < 1.0;
        beyond3 += fabs(x) > 3.0;
        beyond_r += fabs(x) > 3.6541528853610088; /* drawn by the tail path */
    }
    double mean = s1 / n, var = s2 / n - mean * mean, kurt = (s4 / n) / (var * var);
    ck_assert_msg(zeros == 0, "%zu zeros (seed %llu)", zeros, (unsigned long long)seed);
    /* Six standard errors: mean sd 1/sqrt(n), variance sd sqrt(2/n), kurtosis sd sqrt(24/n). */
    ck_assert_msg(fabs(mean) < 6.0 / sqrt((double)n), "mean %g (seed %llu)", mean, (unsigned long long)seed);
    ck_assert_msg(fabs(var - 1.0) < 6.0 * sqrt(2.0 / n), "variance %g (seed %llu)", var, (unsigned long long)seed);
    ck_assert_msg(fabs(kurt - 3.0) < 6.0 * sqrt(24.0 / n), "kurtosis %g (seed %llu)", kurt, (unsigned long long)seed);
    /* P(|x| < 1) = 0.682689, P(|x| > 3) = 0.0026998, P(|x| > R) = 2.58e-4. */
    double p1 = (double)within1 / n, p3 = (double)beyond3 / n, pr = (double)beyond_r / n;
    ck_assert_msg(fabs(p1 - 0.682689) < 6.0 * sqrt(0.2166 / n), "P(|x|<1) = %g (seed %llu)", p1,
                  (unsigned long long)seed);
    ck_assert_msg(fabs(p3 - 0.0026998) < 6.0 * sqrt(0.0027 / n), "P(|x|>3) = %g (seed %llu)", p3,
                  (unsigned long long)seed);
    ck_assert_msg(fabs(pr - 2.58e-4) < 6.0 * sqrt(2.58e-4 / n), "P(|x|>R) = %g (seed %llu)", pr,
                  (unsigned long long)seed);

    /* A stream is a function of (seed, name, index), and scale only scales. */
    synth_fill_normal(again, n, 0.5f, seed, "w1", 3);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(again[i] == 0.5f * v[i], "value %zu differs on a second draw (seed %llu)", i,
                      (unsigned long long)seed);
    synth_fill_normal(again, 1000, 1.0f, seed, "w1", 4);
    ck_assert_msg(memcmp(again, v, 1000 * sizeof *v) != 0, "experts 3 and 4 share a stream");
    synth_fill_normal(again, 1000, 1.0f, seed, "w3", 3);
    ck_assert_msg(memcmp(again, v, 1000 * sizeof *v) != 0, "w1 and w3 share a stream");
    /* Any prefix is the same values: an odd count ends the same way. */
    synth_fill_normal(again, 1001, 1.0f, seed, "w1", 3);
    ck_assert(memcmp(again, v, 1000 * sizeof *v) == 0);
    /* A dead expert's tiny scale still gives no zero. */
    synth_fill_normal(again, n, 1e-23f / 64.0f, seed, "w2", 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(again[i] != 0.0f, "a tiny-scale value is zero (seed %llu)", (unsigned long long)seed);
    free(v);
    free(again);
}
END_TEST

/* --- the parallel loop --------------------------------------------------------- */

typedef struct loop_ctx {
    atomic_int *count;
    uint32_t *worker_of;
    uint32_t workers;
    size_t stop_at;
} loop_ctx;

static int count_item(void *ctx, size_t item, uint32_t worker)
{
    loop_ctx *c = ctx;
    atomic_fetch_add(&c->count[item], 1);
    c->worker_of[item] = worker;
    return item == c->stop_at;
}

START_TEST(test_parallel_for)
{
    enum { ITEMS = 5000 };
    atomic_int *count = calloc(ITEMS, sizeof *count);
    uint32_t *worker_of = calloc(ITEMS, sizeof *worker_of);
    ck_assert(count && worker_of);
    for (uint32_t workers = 1; workers <= 9; workers += 4) {
        for (size_t i = 0; i < ITEMS; i++)
            atomic_init(&count[i], 0);
        loop_ctx c = {count, worker_of, workers, (size_t)-1};
        uint32_t ran = synth_parallel_for(workers, ITEMS, count_item, &c);
        ck_assert_uint_eq(ran, workers);
        for (size_t i = 0; i < ITEMS; i++) {
            ck_assert_msg(atomic_load(&count[i]) == 1, "item %zu ran %d times with %u workers", i,
                          atomic_load(&count[i]), workers);
            ck_assert_uint_lt(worker_of[i], workers);
        }
    }
    /* A nonzero return stops handing out items (those running may finish). */
    for (size_t i = 0; i < ITEMS; i++)
        atomic_init(&count[i], 0);
    loop_ctx c = {count, worker_of, 1, 10};
    synth_parallel_for(1, ITEMS, count_item, &c);
    for (size_t i = 0; i < ITEMS; i++)
        ck_assert_int_eq(atomic_load(&count[i]), i <= 10);

    /* Worker counts: caller's cap, the CPUs, the items, the work. */
    synth_pretend_cpus(16);
    ck_assert_uint_eq(synth_workers(0, 256, 1e7, 1e6), 16);
    ck_assert_uint_eq(synth_workers(4, 256, 1e7, 1e6), 4);
    ck_assert_uint_eq(synth_workers(0, 5, 1e7, 1e6), 5);
    ck_assert_uint_eq(synth_workers(0, 256, 1e3, 1e6), 1);
    ck_assert_uint_eq(synth_workers(0, 0, 1e3, 1e6), 1);
    synth_pretend_cpus(0);
    ck_assert_uint_ge(synth_online_cpus(), 1);
    free(count);
    free(worker_of);
}
END_TEST

/* --- checkpoints ------------------------------------------------------------------ */

#define E    8
#define H    256
#define I    256
#define DEAD 5

static synth_ckpt *build(const char *key, uint64_t seed, uint32_t threads, int bias)
{
    fmoe_scheme s = {.struct_size = sizeof s};
    ck_assert_msg(fmoe_scheme_parse(key, &s) == FMOE_STATUS_OK, "%s: %s", key, fmoe_last_error());
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = E;
    c.top_k = 2;
    c.hidden_size = H;
    c.intermediate_size = I;
    c.act_dtype = FMOE_DTYPE_BF16;
    c.gated = 1;
    c.has_bias = bias;
    synth_spec spec = {.seed = seed, .cfg = &c, .scheme = &s, .dead_expert = DEAD, .threads = threads};
    synth_ckpt *ck = NULL;
    char why[768] = "";
    fmoe_status st = synth_build(&spec, &ck, why, sizeof why);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s (seed %llu, %u threads): %s", key, (unsigned long long)seed, threads, why);
    return ck;
}

static void assert_same(const synth_ckpt *a, const synth_ckpt *b, const char *key, uint64_t seed, uint32_t threads)
{
    size_t n = synth_tensor_count(a);
    ck_assert_msg(n == synth_tensor_count(b), "%s: %zu tensors with 1 thread, %zu with %u (seed %llu)", key, n,
                  synth_tensor_count(b), threads, (unsigned long long)seed);
    for (size_t i = 0; i < n; i++) {
        synth_tensor_info x, y;
        synth_tensor_get(a, i, &x);
        synth_tensor_get(b, i, &y);
        ck_assert_msg(x.expert == y.expert && x.shard == y.shard && x.role == y.role && x.dtype == y.dtype &&
                          x.ndim == y.ndim && x.shape[0] == y.shape[0] && x.shape[1] == y.shape[1] &&
                          x.bytes == y.bytes,
                      "%s: tensor %zu described differently with %u threads (seed %llu)", key, i, threads,
                      (unsigned long long)seed);
        ck_assert_msg(memcmp(x.data, y.data, x.bytes) == 0,
                      "%s: tensor %zu (expert %u, shard %d, role %d) differs with %u threads (seed %llu)", key, i,
                      x.expert, x.shard, x.role, threads, (unsigned long long)seed);
    }
}

static const char *const KEYS[] = {
    "bf16",
    "fp8e4m3:channel/fp8e4m3:token:dynamic",
    "fp8e4m3:block128x128/fp8e4m3:group128:dynamic",
    "fp8e4m3:tensor/fp8e4m3:tensor",
    "int4:group128/fp8e4m3:token:dynamic",
    "int4:group32:scale-bf16/int8:token:dynamic:asym",
    "fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic",
    "fp4:group32:scale-ue8m0",
    "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic",
    "int4:group32:asym",
    "int4:group32:actorder",
    "int8:channel/int8:token:dynamic",
};
#define NKEYS (int)(sizeof KEYS / sizeof KEYS[0])

/* Same bytes with 1, 3 and 8 workers (the machine made to count 8 CPUs),
 * and with the default (one per CPU). */
START_TEST(test_threads_same_bytes)
{
    const char *key = KEYS[_i];
    uint64_t seed = seed_for(100 + (uint64_t)_i);
    int bias = _i % 2;
    synth_pretend_cpus(8);
    synth_ckpt *one = build(key, seed, 1, bias);
    ck_assert_uint_gt(synth_tensor_count(one), 0);
    const uint32_t threads[] = {3, 8, 0};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        synth_ckpt *many = build(key, seed, threads[t], bias);
        assert_same(one, many, key, seed, threads[t]);
        synth_free(many);
    }
    synth_pretend_cpus(0);
    /* Another seed, other bytes. */
    synth_ckpt *other = build(key, seed + 1, 0, bias);
    synth_tensor_info x, y;
    synth_tensor_get(one, 0, &x);
    synth_tensor_get(other, 0, &y);
    ck_assert_msg(x.bytes == y.bytes && memcmp(x.data, y.data, x.bytes) != 0, "%s: seeds %llu and %llu agree", key,
                  (unsigned long long)seed, (unsigned long long)seed + 1);
    synth_free(other);
    synth_free(one);
}
END_TEST

/* Moments of a weight's dequantized values, expert by expert. */
typedef struct moments {
    double n, s1, s2;
    size_t zeros;
} moments;

static void add(moments *m, double v)
{
    m->n++;
    m->s1 += v;
    m->s2 += v * v;
    m->zeros += v == 0.0;
}

/* Tensor (expert, shard, role) of ck; 0 when there is none. */
static int find(const synth_ckpt *ck, uint32_t expert, int32_t shard, int32_t role, synth_tensor_info *out)
{
    for (size_t i = 0; i < synth_tensor_count(ck); i++) {
        synth_tensor_get(ck, i, out);
        if (out->expert == expert && out->shard == shard && out->role == role)
            return 1;
    }
    return 0;
}

/* Tensor i dequantized as floats [rows, cols] when it is a weight (its
 * scale per tensor, row, group or block), else NULL. */
static float *dequantize(const synth_ckpt *ck, size_t i, const char *key, int64_t *rows, int64_t *cols)
{
    synth_tensor_info w, s;
    synth_tensor_get(ck, i, &w);
    if (w.role != FMOE_ROLE_WEIGHT)
        return NULL;
    int64_t n = w.shape[0], k = w.dtype == FMOE_DTYPE_INT32 ? w.shape[1] * 8 : w.shape[1];
    float *out = malloc((size_t)(n * k) * sizeof *out), *sc = NULL;
    ck_assert(out);
    int64_t srows = 1, scols = 1; /* scale grid: srows x scols blocks over [n, k] */
    if (w.dtype != FMOE_DTYPE_BF16) {
        ck_assert_msg(find(ck, w.expert, w.shard, FMOE_ROLE_WEIGHT_SCALE, &s), "%s: a weight without a scale", key);
        srows = s.ndim == 2 ? s.shape[0] : 1;
        scols = s.ndim == 2 ? s.shape[1] : 1;
        sc = malloc((size_t)(srows * scols) * sizeof *sc);
        ck_assert(sc);
        cli_load_floats(s.dtype, sc, s.data, (size_t)(srows * scols));
    }
#define SCALE(r, c) sc[((r)*srows / n) * scols + (c)*scols / k]
    if (w.dtype == FMOE_DTYPE_BF16) {
        cli_load_floats(w.dtype, out, w.data, (size_t)(n * k));
    } else if (w.dtype == FMOE_DTYPE_FP8_E4M3FN) {
        const uint8_t *q = w.data;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++)
                out[r * k + c] = fmoe_fp8_decode(w.dtype, q[r * k + c]) * SCALE(r, c);
    } else if (w.dtype == FMOE_DTYPE_INT8 || w.dtype == FMOE_DTYPE_INT32) {
        int8_t *q = malloc((size_t)(n * k));
        ck_assert(q);
        if (w.dtype == FMOE_DTYPE_INT32)
            ck_assert(fmoe_int_unpack_int32(4, n * k, w.data, q) == FMOE_STATUS_OK);
        else
            memcpy(q, w.data, (size_t)(n * k));
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++) {
                ck_assert_msg(q[r * k + c] >= -8 && q[r * k + c] <= 7, "%s: int4 value %d", key, q[r * k + c]);
                out[r * k + c] = (float)q[r * k + c] * SCALE(r, c);
            }
        free(q);
    } else {
        ck_abort_msg("%s: no dequantizer for %s here", key, fmoe_dtype_name(w.dtype));
    }
#undef SCALE
    free(sc);
    *rows = n;
    *cols = k;
    return out;
}

/* Each live expert's w1 / w3 / w2 dequantized: mean 0 and variance
 * 1 / fan_in within bounds (quantization adds a little), few zeros; the
 * dead expert's values tiny. */
START_TEST(test_statistics)
{
    static const char *const keys[] = {
        "bf16",
        "fp8e4m3:channel/fp8e4m3:token:dynamic",
        "fp8e4m3:block128x128/fp8e4m3:group128:dynamic",
        "fp8e4m3:tensor/fp8e4m3:tensor",
        "int4:group128/fp8e4m3:token:dynamic",
        "int4:group32:scale-bf16/int8:token:dynamic:asym",
    };
    const char *key = keys[_i];
    uint64_t seed = seed_for(200 + (uint64_t)_i);
    synth_ckpt *ck = build(key, seed, 0, 0);
    int int4 = strncmp(key, "int4", 4) == 0;
    size_t weights = 0;
    for (size_t i = 0; i < synth_tensor_count(ck); i++) {
        int64_t n, k;
        float *v = dequantize(ck, i, key, &n, &k);
        if (!v)
            continue;
        synth_tensor_info t;
        synth_tensor_get(ck, i, &t);
        weights++;
        moments m = {0};
        for (int64_t j = 0; j < n * k; j++)
            add(&m, v[j]);
        free(v);
        double mean = m.s1 / m.n, var = m.s2 / m.n - mean * mean, want = 1.0 / (double)k;
        if (t.expert == DEAD) {
            /* (a block scale's floor may round it all to zero) */
            ck_assert_msg(var < 1e-40, "%s: the dead expert's variance is %g (seed %llu)", key, var,
                          (unsigned long long)seed);
            continue;
        }
        /* Six standard errors, plus the quantizer's own noise: int4's step
         * is about amax/7 of a group (variance + 1/12 step^2, under 4%), fp8's
         * relative error a few %. */
        double slack = 6.0 * sqrt(2.0 / m.n) + (int4 ? 0.05 : 0.01);
        ck_assert_msg(fabs(mean) < 6.0 * sqrt(want / m.n), "%s: expert %u shard %d mean %g (want 0 +- %g, seed %llu)",
                      key, t.expert, t.shard, mean, 6.0 * sqrt(want / m.n), (unsigned long long)seed);
        ck_assert_msg(fabs(var / want - 1.0) < slack,
                      "%s: expert %u shard %d variance %g, want %g within %.1f%% (seed %llu)", key, t.expert, t.shard,
                      var, want, 100 * slack, (unsigned long long)seed);
        /* Zeros only where rounding puts values below half a step. */
        ck_assert_msg(m.zeros < m.n * (int4 ? 0.3 : 0.01), "%s: %zu of %.0f values are zero (seed %llu)", key, m.zeros,
                      m.n, (unsigned long long)seed);
    }
    ck_assert_uint_eq(weights, 3 * E);
    synth_free(ck);
}
END_TEST

static Suite *synth_suite(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_normal_moments);
    tcase_add_test(tc, test_parallel_for);
    tcase_add_loop_test(tc, test_threads_same_bytes, 0, NKEYS);
    tcase_add_loop_test(tc, test_statistics, 0, 6);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(synth_suite(), 2 + NKEYS + 6);
}
