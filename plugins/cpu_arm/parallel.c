/*
 * plugins/cpu_arm/parallel.c - a parallel for over work items: the caller
 * and up to threads-1 POSIX threads take items from one atomic counter
 * (items are uneven: experts get different numbers of tokens). Threads live
 * for one call; no pool outlives apply, so nothing runs between calls and
 * instances on different threads never share workers.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "plugins/cpu_arm/cpu_arm.h"

#define MAX_THREADS 64

typedef struct job {
    carm_task_fn fn;
    void *ctx;
    uint32_t items;
    atomic_uint next;
} job;

typedef struct worker {
    job *j;
    uint32_t index;
} worker;

static void drain(job *j, uint32_t index)
{
    for (;;) {
        uint32_t item = atomic_fetch_add(&j->next, 1u);
        if (item >= j->items)
            return;
        j->fn(j->ctx, index, item);
    }
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    drain(w->j, w->index);
    return NULL;
}

void carm_parallel(uint32_t threads, uint32_t items, carm_task_fn fn, void *ctx)
{
    job j = {.fn = fn, .ctx = ctx, .items = items};
    atomic_init(&j.next, 0u);
    uint32_t n = threads < items ? threads : items;
    n = n > MAX_THREADS ? MAX_THREADS : n;
    pthread_t tid[MAX_THREADS];
    worker ws[MAX_THREADS];
    uint32_t started = 0;
    for (uint32_t i = 1; i < n; i++) {
        ws[i] = (worker){.j = &j, .index = i};
        if (pthread_create(&tid[i], NULL, run_worker, &ws[i]) != 0)
            break;
        started = i;
    }
    drain(&j, 0);
    for (uint32_t i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
}
