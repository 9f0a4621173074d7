/*
 * plugins/cpu/pool.c - the fork/join pool of pool.h. A run publishes the
 * task with a new generation number and wakes the workers; everyone (the
 * caller included) takes items from an atomic counter; the last one to
 * finish its share signals the caller.
 *
 * Waiting spins briefly before it sleeps, on both sides: a forward is a
 * handful of runs back to back, and waking a sleeping thread (a futex wake,
 * on a VM an IPI to a halted vCPU) cost ~100 us per run on the CI machine,
 * more than a decode step's element-wise phases take. SPIN_NS bounds the
 * spin, so an idle layer's threads sleep and a busy machine loses little.
 * cpu_pool_wake starts the workers spinning ahead of a run, so their
 * wake-up overlaps the caller's own work before it (a forward's first
 * steps).
 */
#include "plugins/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define SPIN_NS 250000 /* 250 us: covers a decode step's element-wise gaps */
/* cpu_pool_run_elems: at most this many values run on the caller alone
 * (a token's row: its quantization or gather). More are worth the pool even
 * in decode: the workers are awake (spinning) by then, and an activation
 * costs ~10 ns a value (exp in double). */
#define INLINE_ELEMS 4096

struct cpu_pool {
    const fmoe_host *host;
    uint32_t size;            /* threads including the caller */
    uint32_t started;         /* workers actually started */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint_fast64_t generation; /* written under mu, read anywhere */
    uint64_t pokes;           /* cpu_pool_wake calls (under mu) */
    atomic_int quit;
    atomic_uint busy;         /* workers still in the current run */
    /* The current run (published before generation moves). */
    cpu_task_fn fn;
    void *ctx;
    uint32_t n_items;
    atomic_uint next;
};

typedef struct worker_arg {
    cpu_pool *pool;
    uint32_t id;
} worker_arg;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spin until done(p, arg) or SPIN_NS pass; 1 if it came true. */
static int spin_until(cpu_pool *p, int (*done)(cpu_pool *, uint64_t), uint64_t arg)
{
    int64_t end = 0;
    for (uint32_t i = 0;; i++) {
        if (done(p, arg))
            return 1;
        cpu_relax();
        if ((i & 63) == 63) { /* the clock every 64 pauses: cheap enough */
            int64_t t = now_ns();
            if (end == 0)
                end = t + SPIN_NS;
            else if (t > end)
                return 0;
        }
    }
}

static int new_run(cpu_pool *p, uint64_t seen)
{
    return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

static int all_done(cpu_pool *p, uint64_t unused)
{
    (void)unused;
    return atomic_load(&p->busy) == 0;
}

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
    uint64_t seen = 0, pokes = 0;
    p->host->free(p->host->ctx, w);
    for (;;) {
        while (!spin_until(p, new_run, seen)) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->quit) && atomic_load(&p->generation) == seen && p->pokes == pokes)
                pthread_cond_wait(&p->wake, &p->mu);
            pokes = p->pokes; /* woken early (cpu_pool_wake): spin again */
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            break;
        seen = atomic_load(&p->generation);
        drain(p, id);
        if (atomic_fetch_sub(&p->busy, 1u) == 1u) {
            /* Under the mutex: the caller checks busy under it before it sleeps. */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
    atomic_init(&p->busy, 0u);
    atomic_init(&p->quit, 0);
    atomic_init(&p->generation, 0u);
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
    atomic_store(&p->quit, 1);
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

void cpu_pool_wake(cpu_pool *p)
{
    if (p->started == 0)
        return;
    pthread_mutex_lock(&p->mu);
    p->pokes++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
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
    /* Publish the run, then move the generation (seq_cst atomics order the
     * plain fields before it for the spinning workers). */
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0u);
    atomic_store(&p->busy, p->started);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->generation, 1u);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    if (!spin_until(p, all_done, 0)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->busy) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void cpu_pool_run_elems(cpu_pool *p, uint32_t n_items, size_t elems, cpu_task_fn fn, void *ctx)
{
    if ((size_t)n_items * elems > INLINE_ELEMS) {
        cpu_pool_run(p, n_items, fn, ctx);
        return;
    }
    for (uint32_t i = 0; i < n_items; i++)
        fn(ctx, i, 0);
}
