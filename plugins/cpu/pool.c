/*
 * plugins/cpu/pool.c - the fork/join pool of pool.h. A run publishes the
 * task, then one 64-bit word holding a new generation number, the run's
 * item count and the next item to take, and wakes the workers;
 * everyone (the caller included) takes items by compare-and-swap on that
 * word, and the run is over when as many items are finished as it has.
 *
 * Why the items and not the workers are counted: waking a sleeping thread
 * on the CI machine's VM takes anywhere from 50 us to 1.6 ms (the other
 * vCPU has to be resumed by the host). Had a run waited for every worker
 * to check in, a decode step's caller would finish GEMM1's items alone and
 * then sit idle until the sleeper arrived; now a late worker finds the
 * word of a newer run (or no items left), takes nothing, and nobody waits
 * for it. Count and next item share the word with the generation so that
 * a straggler's compare-and-swap succeeds only on a view that is entirely
 * the current run's: with the count read separately, a straggler that saw
 * the old word but the new count took an item of the new run before its
 * word was published, and that item then ran twice (a wrong result in
 * about one conformance run in ten).
 *
 * Waiting spins before it sleeps, on both sides: a forward is a handful of
 * runs back to back, and an engine calls its layers every few ms, while a
 * thread that went to sleep costs that wake-up (the plugin's option
 * spin_ms, default 200 ms as Intel OpenMP's KMP_BLOCKTIME; docs/CPU.md).
 * The spin bounds it, so an idle layer's threads sleep, and it yields the
 * CPU every ~1000 pauses, so a spinning thread that the kernel placed on a
 * busy CPU does not keep that CPU's other thread from running.
 * cpu_pool_wake starts sleeping workers spinning ahead of a run, so their
 * wake-up overlaps the caller's own work before it.
 */
#include "plugins/cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* cpu_pool_run_elems: a step of at most this many units (about 1 ns each:
 * a value of a vectorized step) runs on the caller alone, ~16 us. Why not
 * more threads for it: a worker that the host preempts while it holds an
 * item keeps the whole step waiting (on the CI machine's VM, 50-200 us
 * outliers in one decode step of three), and a decode step's activation or
 * combine is a few thousand values. */
#define INLINE_ELEMS 16384

struct cpu_pool {
    const fmoe_host *host;
    uint32_t size;    /* threads including the caller */
    uint32_t started; /* workers actually started */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int64_t spin_ns;             /* how long waiting threads spin before they sleep */
    atomic_uintptr_t *last_used; /* shared by a context's pools: the pool that ran last */
    atomic_uint_fast64_t word;   /* run word: generation | item count | next item (below) */
    uint64_t pokes;              /* cpu_pool_wake calls (under mu) */
    atomic_int quit;
    atomic_uint finished; /* items of the current run done */
    /* The current run's task (published before its word; read only by a
     * thread holding one of its items, which the next run waits for). */
    cpu_task_fn fn;
    void *ctx;
    uint32_t base; /* item index of this part of a cpu_pool_run */
};

/* The run word: generation (16 bits, wraps; only "changed" matters), item
 * count (24 bits), next item (24 bits). A run of more items is handed out
 * in parts of RUN_MAX. */
#define RUN_BITS 24
#define RUN_MAX  ((1u << RUN_BITS) - 1)
static uint64_t word_gen(uint64_t w)
{
    return w >> (2 * RUN_BITS);
}
static uint32_t word_count(uint64_t w)
{
    return (uint32_t)(w >> RUN_BITS) & RUN_MAX;
}
static uint32_t word_next(uint64_t w)
{
    return (uint32_t)w & RUN_MAX;
}

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

/* Spin until done(p, arg) or p->spin_ns pass; 1 if it came true. */
static int spin_until(cpu_pool *p, int (*done)(cpu_pool *, uint64_t), uint64_t arg, int worker)
{
    int64_t end = 0;
    for (uint32_t i = 0;; i++) {
        if (done(p, arg))
            return 1;
        cpu_relax();
        if ((i & 63) == 63) { /* the clock every 64 pauses: cheap enough */
            int64_t t = now_ns();
            if (end == 0)
                end = t + p->spin_ns;
            else if (t > end)
                return 0;
            /* Another pool of the context ran since: its layer is the one
             * being called, leave the CPU to it. */
            if (worker && p->last_used && atomic_load(p->last_used) != (uintptr_t)p)
                return 0;
        }
        /* Every ~1000 pauses (some 10-40 us), let another thread of this CPU
         * run: the kernel often wakes a worker on the waker's own CPU (the
         * other one is idle, halted), and a spinning worker there would keep
         * the caller it waits for off the CPU until the spin ends. */
        if ((i & 1023) == 1023)
            sched_yield();
    }
}

static uint64_t generation(cpu_pool *p)
{
    return word_gen(atomic_load(&p->word));
}

static int new_run(cpu_pool *p, uint64_t seen)
{
    return generation(p) != seen || atomic_load(&p->quit);
}

static int all_done(cpu_pool *p, uint64_t n)
{
    return atomic_load(&p->finished) >= n;
}

/* Take and run items of run `gen` until it has none left (or is over). */
static void drain(cpu_pool *p, uint64_t gen, uint32_t id)
{
    for (;;) {
        uint64_t w = atomic_load(&p->word);
        uint32_t n = word_count(w), i = word_next(w);
        if (word_gen(w) != gen || i >= n)
            return;
        if (!atomic_compare_exchange_weak(&p->word, &w, w + 1))
            continue;
        /* Item i of the run whose word this was: its task stays as it is
         * until the item is finished. */
        p->fn(p->ctx, p->base + i, id);
        if (atomic_fetch_add(&p->finished, 1u) + 1 == n) {
            /* Under the mutex: the caller checks under it before it sleeps. */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
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
        while (!spin_until(p, new_run, seen, 1)) {
            pthread_mutex_lock(&p->mu);
            while (!atomic_load(&p->quit) && generation(p) == seen && p->pokes == pokes)
                pthread_cond_wait(&p->wake, &p->mu);
            pokes = p->pokes; /* woken early (cpu_pool_wake): spin again */
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            break;
        seen = generation(p);
        drain(p, seen, id);
    }
    return NULL;
}

cpu_pool *cpu_pool_create(const fmoe_host *h, uint32_t threads, uint64_t spin_ns, atomic_uintptr_t *last_used)
{
    cpu_pool *p = h->alloc(h->ctx, sizeof *p, 0);
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->host = h;
    p->size = threads ? threads : 1;
    p->spin_ns = spin_ns > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)spin_ns;
    p->last_used = last_used;
    atomic_init(&p->word, 0u);
    atomic_init(&p->finished, 0u);
    atomic_init(&p->quit, 0);
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
    if (p->last_used)
        atomic_store(p->last_used, (uintptr_t)p);
    pthread_mutex_lock(&p->mu);
    p->pokes++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

uint32_t cpu_pool_size(const cpu_pool *p)
{
    return p->started + 1;
}

/* Items base .. base + n - 1 (n <= RUN_MAX) as one run. */
static void run_part(cpu_pool *p, uint32_t base, uint32_t n, cpu_task_fn fn, void *ctx)
{
    /* Publish the task, then the word (seq_cst atomics order the task before
     * it). The previous part is over: every item finished, so no thread
     * still runs its task. */
    p->fn = fn;
    p->ctx = ctx;
    p->base = base;
    atomic_store(&p->finished, 0u);
    uint64_t gen = (generation(p) + 1) & 0xFFFF;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->word, gen << (2 * RUN_BITS) | (uint64_t)n << RUN_BITS);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, gen, 0);
    if (!spin_until(p, all_done, n, 0)) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->finished) < n)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void cpu_pool_run(cpu_pool *p, uint32_t n_items, cpu_task_fn fn, void *ctx)
{
    if (n_items == 0)
        return;
    if (p->last_used && p->started)
        atomic_store(p->last_used, (uintptr_t)p);
    if (p->started == 0 || n_items == 1) {
        for (uint32_t i = 0; i < n_items; i++)
            fn(ctx, i, 0);
        return;
    }
    for (uint64_t base = 0; base < n_items; base += RUN_MAX)
        run_part(p, (uint32_t)base, n_items - base < RUN_MAX ? (uint32_t)(n_items - base) : RUN_MAX, fn, ctx);
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
