/*
 * tests/cpu/test_cpu_pool.c - the fork/join pool (plugins/cpu/pool.c): every
 * item of every run runs exactly once and has finished when cpu_pool_run
 * returns, over thousands of back-to-back runs of different sizes, with
 * workers that spin and with workers that sleep at once (so they arrive
 * late, in the middle of a later run). A straggler taking an item of the
 * next run under the previous run's view ran that item twice (found in a
 * conformance run); this is the test that would have caught it.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cpu/pool.h"
#include "tests/test_util.h"

static void *test_alloc(void *ctx, size_t size, size_t alignment)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size ? size : 1) == 0 ? p : NULL;
}

static void test_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

#define MAX_ITEMS 300

typedef struct run_state {
    atomic_int count[MAX_ITEMS];
    uint32_t run; /* which run this is (the task checks it sees its own) */
    uint32_t expect;
    atomic_int wrong_run;
    atomic_int bad_worker;
    uint32_t threads;
} run_state;

static void task(void *ctx, uint32_t item, uint32_t worker)
{
    run_state *s = ctx;
    if (item >= MAX_ITEMS || item >= s->expect) {
        atomic_fetch_add(&s->wrong_run, 1);
        return;
    }
    if (worker >= s->threads)
        atomic_fetch_add(&s->bad_worker, 1);
    atomic_fetch_add(&s->count[item], 1);
    /* A little work, more for some items, so runs overlap workers' arrival. */
    volatile uint32_t spin = (item * 2654435761u >> 24) & 0xFF;
    while (spin)
        spin--;
}

static void stress(uint32_t threads, uint64_t spin_ns, uint64_t stream)
{
    fmoe_host h;
    memset(&h, 0, sizeof h);
    h.alloc = test_alloc;
    h.free = test_free;
    cpu_pool *p = cpu_pool_create(&h, threads, spin_ns, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(cpu_pool_size(p), threads);
    fmoe_rng r = fmoe_rng_for(stream);
    /* Two states alternate: a straggler of run k writing into run k+1's
     * counts (or running run k+1's items) shows up as a count of 2 or a
     * wrong-run hit. */
    run_state *st = calloc(2, sizeof *st);
    for (uint32_t run = 0; run < 3000; run++) {
        run_state *s = &st[run & 1];
        uint32_t n = 1 + (uint32_t)(fmoe_rng_u64(&r) % MAX_ITEMS);
        for (uint32_t i = 0; i < MAX_ITEMS; i++)
            atomic_store(&s->count[i], 0);
        s->run = run;
        s->expect = n;
        s->threads = threads;
        if (run % 7 == 0)
            cpu_pool_wake(p);
        cpu_pool_run(p, n, task, s);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_msg(atomic_load(&s->count[i]) == 1,
                          "threads %u spin %llu: run %u of %u items: item %u ran %d times", threads,
                          (unsigned long long)spin_ns, run, n, i, atomic_load(&s->count[i]));
        ck_assert_int_eq(atomic_load(&s->wrong_run), 0);
        ck_assert_int_eq(atomic_load(&s->bad_worker), 0);
    }
    free(st);
    cpu_pool_destroy(p);
}

START_TEST(every_item_once_spinning)
{
    stress(2, 200000000ull, 1);
    stress(4, 200000000ull, 2);
}
END_TEST

START_TEST(every_item_once_sleeping)
{
    /* spin 0: workers sleep between runs and wake (late) into later ones. */
    stress(2, 0, 3);
    stress(3, 0, 4);
    stress(2, 20000, 5); /* 20 us: some runs with spinners, some without */
}
END_TEST

/* Two pools of one context (a shared last-used marker) taking turns, as a
 * model's layers do: the idle pool's workers stop spinning, and both
 * pools' runs still do every item once. */
START_TEST(pools_taking_turns)
{
    fmoe_host h;
    memset(&h, 0, sizeof h);
    h.alloc = test_alloc;
    h.free = test_free;
    atomic_uintptr_t last;
    atomic_init(&last, 0);
    cpu_pool *p[2] = {cpu_pool_create(&h, 2, 200000000ull, &last), cpu_pool_create(&h, 2, 200000000ull, &last)};
    ck_assert(p[0] && p[1]);
    run_state *s = calloc(1, sizeof *s);
    fmoe_rng r = fmoe_rng_for(7);
    for (uint32_t run = 0; run < 2000; run++) {
        uint32_t n = 1 + (uint32_t)(fmoe_rng_u64(&r) % MAX_ITEMS), which = (uint32_t)(fmoe_rng_u64(&r) & 1);
        for (uint32_t i = 0; i < MAX_ITEMS; i++)
            atomic_store(&s->count[i], 0);
        s->expect = n;
        s->threads = 2;
        cpu_pool_run(p[which], n, task, s);
        ck_assert_uint_eq(atomic_load(&last), (uintptr_t)p[which]);
        for (uint32_t i = 0; i < n; i++)
            ck_assert_msg(atomic_load(&s->count[i]) == 1, "run %u on pool %u: item %u ran %d times", run, which, i,
                          atomic_load(&s->count[i]));
        ck_assert_int_eq(atomic_load(&s->wrong_run), 0);
    }
    free(s);
    cpu_pool_destroy(p[0]);
    cpu_pool_destroy(p[1]);
}
END_TEST

START_TEST(single_thread_and_elems)
{
    stress(1, 0, 6);
    fmoe_host h;
    memset(&h, 0, sizeof h);
    h.alloc = test_alloc;
    h.free = test_free;
    cpu_pool *p = cpu_pool_create(&h, 2, 0, NULL);
    run_state *s = calloc(1, sizeof *s);
    s->expect = 5;
    s->threads = 2;
    /* Small element-wise steps run on the caller (worker 0) alone. */
    cpu_pool_run_elems(p, 5, 10, task, s);
    for (uint32_t i = 0; i < 5; i++)
        ck_assert_int_eq(atomic_load(&s->count[i]), 1);
    free(s);
    cpu_pool_destroy(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_item_once_spinning);
    tcase_add_test(tc, every_item_once_sleeping);
    tcase_add_test(tc, pools_taking_turns);
    tcase_add_test(tc, single_thread_and_elems);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
