/* cli/synth/parallel.c - the synthesizer's parallel loop (see parallel.h). */
#include "cli/synth/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_uint pretend_cpus;

void synth_pretend_cpus(uint32_t n)
{
    atomic_store(&pretend_cpus, n);
}

uint32_t synth_online_cpus(void)
{
    uint32_t p = atomic_load(&pretend_cpus);
    if (p)
        return p;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1u : n > 4096 ? 4096u : (uint32_t)n;
}

uint32_t synth_workers(uint32_t requested, size_t items, double item_work, double min_work)
{
    uint32_t w = synth_online_cpus();
    if (requested && requested < w)
        w = requested;
    if (items < w)
        w = (uint32_t)items;
    double by_work = min_work > 0 ? (double)items * item_work / min_work : (double)w;
    if (by_work < w)
        w = (uint32_t)by_work;
    return w ? w : 1u;
}

typedef struct loop {
    int (*fn)(void *ctx, size_t item, uint32_t worker);
    void *ctx;
    size_t items;
    atomic_size_t next;
    atomic_int stop;
} loop;

typedef struct worker_arg {
    loop *l;
    uint32_t id;
} worker_arg;

static void run_items(loop *l, uint32_t id)
{
    while (!atomic_load(&l->stop)) {
        size_t item = atomic_fetch_add(&l->next, 1);
        if (item >= l->items)
            break;
        if (l->fn(l->ctx, item, id) != 0)
            atomic_store(&l->stop, 1);
    }
}

static void *worker_main(void *p)
{
    worker_arg *a = p;
    run_items(a->l, a->id);
    return NULL;
}

uint32_t synth_parallel_for(uint32_t workers, size_t items, int (*fn)(void *ctx, size_t item, uint32_t worker),
                            void *ctx)
{
    loop l = {.fn = fn, .ctx = ctx, .items = items};
    atomic_init(&l.next, 0);
    atomic_init(&l.stop, 0);
    uint32_t extra = workers > 1 ? workers - 1 : 0, started = 0;
    pthread_t *tid = extra ? malloc(extra * sizeof *tid) : NULL;
    worker_arg *args = extra ? malloc(extra * sizeof *args) : NULL;
    if (!tid || !args)
        extra = 0; /* everything on the caller */
    for (uint32_t i = 0; i < extra; i++) {
        args[started] = (worker_arg){&l, started + 1};
        if (pthread_create(&tid[started], NULL, worker_main, &args[started]) != 0)
            break; /* the others take its share */
        started++;
    }
    run_items(&l, 0);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
    free(args);
    return started + 1;
}
