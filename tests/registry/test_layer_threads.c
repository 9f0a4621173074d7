/*
 * tests/registry/test_layer_threads.c - one layer, forwarded from several
 * threads at once (fusedmoe.h, "Threads"): every result must equal, bit for
 * bit, the result of the same input forwarded alone. Each thread has its
 * own input and output; what they share is the layer (its instance and its
 * host routing buffers), which the library serializes per layer. Without
 * that lock the router-logits path mixes one thread's routing into the
 * other's output. CI runs this under ThreadSanitizer too (tools/test.sh),
 * which reports the race even when the bits happen to come out right.
 *
 * A plain program (TAP on stdout), not a Check suite: Check's fork-per-test
 * adds nothing here and confuses ThreadSanitizer.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusedmoe/fusedmoe.h"

#define E       8
#define K       2
#define H       64
#define I       32
#define M       48
#define THREADS 4
#define ROUNDS  60

typedef struct job {
    fmoe_layer *layer;
    float x[M][H];
    float logits[M][E];
    float want[M][H];
    float got[M][H];
    int mismatches;
    int errors;
} job;

static uint64_t rng_state;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static int forward(fmoe_layer *layer, float x[M][H], float logits[M][E], float out[M][H])
{
    fmoe_tensor tx, tl, ty;
    const int64_t mh[2] = {M, H}, me[2] = {M, E};
    fmoe_tensor_init(&tx, FMOE_DTYPE_F32, 2, mh, x);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, me, logits);
    fmoe_tensor_init(&ty, FMOE_DTYPE_F32, 2, mh, out);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &tx, .router_logits = &tl, .out = &ty};
    return fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK ? 0 : -1;
}

static void *run(void *p)
{
    job *j = p;
    for (int r = 0; r < ROUNDS; r++) {
        memset(j->got, 0xff, sizeof j->got); /* NaN: a forward that writes nothing is caught */
        if (forward(j->layer, j->x, j->logits, j->got) != 0) {
            j->errors++;
            continue;
        }
        j->mismatches += memcmp(j->got, j->want, sizeof j->got) != 0;
    }
    return NULL;
}

static fmoe_layer *make_layer(fmoe_context *ctx)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = E;
    cfg.top_k = K;
    cfg.hidden_size = H;
    cfg.intermediate_size = I;
    cfg.act_dtype = FMOE_DTYPE_F32;
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer *layer = NULL;
    if (fmoe_layer_create(ctx, &cfg, &s, NULL, &layer) != FMOE_STATUS_OK)
        return NULL;
    static float w1[I][H], w3[I][H], w2[H][I];
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < I; i++)
            for (int h = 0; h < H; h++) {
                w1[i][h] = uniform() / sqrtf(H);
                w3[i][h] = uniform() / sqrtf(H);
                w2[h][i] = uniform() / sqrtf(I);
            }
        const int64_t ih[2] = {I, H}, hi[2] = {H, I};
        fmoe_tensor t;
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, w1);
        int bad = fmoe_layer_load(layer, "w13_weight", e, FMOE_SHARD_W1, &t, NULL) != FMOE_STATUS_OK;
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, ih, w3);
        bad |= fmoe_layer_load(layer, "w13_weight", e, FMOE_SHARD_W3, &t, NULL) != FMOE_STATUS_OK;
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, hi, w2);
        bad |= fmoe_layer_load(layer, "w2_weight", e, FMOE_SHARD_W2, &t, NULL) != FMOE_STATUS_OK;
        if (bad)
            return NULL;
    }
    return fmoe_layer_finalize(layer) == FMOE_STATUS_OK ? layer : NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s REFERENCE_MANIFEST\n", argv[0]);
        return 2;
    }
    uint64_t seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    rng_state = seed;
    printf("TAP version 13\n1..2\n# seed %llu\n", (unsigned long long)seed);
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    const char *files[] = {argv[1]};
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    o.isolated = 1;
    fmoe_context *ctx = NULL;
    fmoe_layer *layer = NULL;
    if (fmoe_context_create(&o, &ctx) != FMOE_STATUS_OK || !(layer = make_layer(ctx))) {
        printf("not ok 1 - set up: %s\n", fmoe_last_error());
        return 1;
    }
    static job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t].layer = layer;
        for (int m = 0; m < M; m++) {
            for (int h = 0; h < H; h++)
                jobs[t].x[m][h] = uniform();
            for (int e = 0; e < E; e++)
                jobs[t].logits[m][e] = 3.0f * uniform();
        }
        if (forward(layer, jobs[t].x, jobs[t].logits, jobs[t].want) != 0) {
            printf("not ok 1 - serial forward %d: %s\n", t, fmoe_last_error());
            return 1;
        }
    }
    int distinct = memcmp(jobs[0].want, jobs[1].want, sizeof jobs[0].want) != 0;
    printf("%s 1 - the threads' inputs give different outputs (else a mix-up could not show)\n",
           distinct ? "ok" : "not ok");
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, run, &jobs[t]);
    int mismatches = 0, errors = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        mismatches += jobs[t].mismatches;
        errors += jobs[t].errors;
    }
    int ok = mismatches == 0 && errors == 0;
    printf("%s 2 - %d threads x %d concurrent forwards on one layer equal the serial results "
           "(%d mismatches, %d errors)\n",
           ok ? "ok" : "not ok", THREADS, ROUNDS, mismatches, errors);
    if (!ok || !distinct)
        printf("# seed %llu\n", (unsigned long long)seed);
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
    return ok && distinct ? 0 : 1;
}
