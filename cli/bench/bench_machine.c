/*
 * cli/bench/bench_machine.c - what this machine can do, measured by the
 * same command that times the backend: read bandwidth (the decode floor)
 * and the CPU's name for the record. Named shapes live here too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench/bench.h"

const bench_shape bench_named_shapes[] = {
    {"mixtral-8x7b", 8, 2, 4096, 14336},
    {"gpt-oss-120b", 128, 4, 2880, 2880},
    {"qwen3-30b-a3b", 128, 8, 2048, 768},
    {"deepseek-v3", 256, 8, 7168, 2048},
};
const size_t bench_n_named_shapes = sizeof bench_named_shapes / sizeof bench_named_shapes[0];

int bench_shape_parse(const char *text, bench_shape *out)
{
    for (size_t i = 0; i < bench_n_named_shapes; i++) {
        if (strcmp(text, bench_named_shapes[i].name) == 0) {
            *out = bench_named_shapes[i];
            return 0;
        }
    }
    unsigned e, k, h, in;
    char tail;
    if (sscanf(text, "%u,%u,%u,%u%c", &e, &k, &h, &in, &tail) != 4 || !e || !k || k > e || !h || !in)
        return -1;
    *out = (bench_shape){.experts = e, .top_k = k, .hidden = h, .inter = in};
    snprintf(out->name, sizeof out->name, "%u,%u,%u,%u", e, k, h, in);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct sweep {
    const uint64_t *data;
    size_t n;
    uint64_t sum; /* kept so the reads cannot be optimized away */
} sweep;

/* The read is libc's memchr for a byte the buffer does not hold: glibc
 * picks its widest vector loads for this CPU at run time, which a portable
 * C loop (built for baseline x86-64) does not reach - it measured half the
 * bandwidth here. The buffer holds 0x5A everywhere; we look for 0xA5. */
static void *sweep_run(void *arg)
{
    sweep *s = arg;
    const void *hit = memchr(s->data, 0xA5, s->n * sizeof *s->data);
    s->sum = hit != NULL;
    return NULL;
}

double bench_read_bandwidth(size_t bytes, int threads, int reps)
{
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf || threads < 1 || threads > 256)
        return free(buf), 0.0;
    memset(buf, 0x5A, n * sizeof *buf); /* touches every page; not zeros */
    sweep parts[256];
    pthread_t tid[256];
    double best = 0;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int t = 0; t < threads; t++) {
            size_t lo = n * (size_t)t / (size_t)threads, hi = n * (size_t)(t + 1) / (size_t)threads;
            parts[t] = (sweep){buf + lo, hi - lo, 0};
            if (t > 0)
                pthread_create(&tid[t], NULL, sweep_run, &parts[t]);
        }
        sweep_run(&parts[0]);
        for (int t = 1; t < threads; t++)
            pthread_join(tid[t], NULL);
        double dt = now_s() - t0;
        for (int t = 0; t < threads; t++)
            sink ^= parts[t].sum;
        if (dt > 0 && (double)bytes / dt > best)
            best = (double)(n * sizeof *buf) / dt;
    }
    free(buf);
    /* memchr found nothing (sink 0); a hit would mean the sweep stopped early. */
    return sink ? 0.0 : best;
}

