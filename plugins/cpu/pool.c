/*
 * plugins/cpu/pool.c - the fork/join pool of pool.h. A run publishes the
 * task under the mutex with a new generation number and wakes the
 * workers; everyone (the caller included) takes items from an atomic
 * counter; the last one to finish its share signals the caller.
 */
#include "plugins/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct cpu_pool {
    const fmoe_host *host;
    uint32_t size;            /* threads including the caller */
    uint32_t started;         /* workers actually started */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation;
    int quit;
    uint32_t busy;            /* workers still in the current run */
    /* The current run. */
    cpu_task_fn fn;
    void *ctx;
    uint32_t n_items;
    atomic_uint next;
};

typedef struct worker_arg {
    cpu_pool *pool;
    uint32_t id;
} worker_arg;

static void drain(cpu_pool *p, uint32_t id)
{
    for (;;) {
        uint32_t i = atomic_fetch_add(&p->next, 1u);
        if (i >= p->n_items)
            return;
        p->fn(p->ctx, i, id);
    }
}

static void *worker_main(void *arg)
{
    worker_arg *w = arg;
    cpu_pool *p = w->pool;
    uint32_t id = w->id;
    uint64_t seen = 0;
    p->host->free(p->host->ctx, w);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cpu_pool *cpu_pool_create(const fmoe_host *h, uint32_t threads)
{
    cpu_pool *p = h->alloc(h->ctx, sizeof *p, 0);
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->host = h;
    p->size = threads ? threads : 1;
    atomic_init(&p->next, 0u);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (p->size > 1) {
        p->threads = h->alloc(h->ctx, sizeof(pthread_t) * (p->size - 1), 0);
        if (!p->threads) {
            cpu_pool_destroy(p);
            return NULL;
        }
    }
    for (uint32_t i = 1; i < p->size; i++) {
        worker_arg *w = h->alloc(h->ctx, sizeof *w, 0);
        if (!w) {
            cpu_pool_destroy(p);
            return NULL;
        }
        w->pool = p;
        w->id = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, w) != 0) {
            h->free(h->ctx, w);
            cpu_pool_destroy(p);
            return NULL;
        }
        p->started++;
    }
    return p;
}

void cpu_pool_destroy(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    const fmoe_host *h = p->host;
    h->free(h->ctx, p->threads);
    h->free(h->ctx, p);
}

uint32_t cpu_pool_size(const cpu_pool *p)
{
    return p->started + 1;
}

void cpu_pool_run(cpu_pool *p, uint32_t n_items, cpu_task_fn fn, void *ctx)
{
    if (n_items == 0)
        return;
    if (p->started == 0 || n_items == 1) {
        for (uint32_t i = 0; i < n_items; i++)
            fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0u);
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
