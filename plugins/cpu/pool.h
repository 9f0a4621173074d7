/*
 * plugins/cpu/pool.h - a small fork/join thread pool, one per layer.
 *
 * Created at `create` (threads started then, never in apply); cpu_pool_run
 * hands out items 0..n-1 to the caller and the workers through an atomic
 * counter and returns when every item is done. One run at a time per pool
 * (the host serializes calls on one layer). Worker ids are 0 (the caller)
 * to size-1, so per-worker scratch can be indexed by them.
 */
#ifndef FMOE_PLUGIN_CPU_POOL_H
#define FMOE_PLUGIN_CPU_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/plugin.h"

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_task_fn)(void *ctx, uint32_t item, uint32_t worker);

/* A pool of `threads` (>= 1; 1 = no extra thread) whose idle threads spin
 * up to spin_ns before they sleep (waiting workers, and the caller waiting
 * for the last item); NULL on failure. last_used (may be NULL) is shared
 * by the pools of one plugin context: each run marks its pool there, and a
 * pool's idle workers stop spinning once another pool ran - a model has a
 * layer (and a pool) per MoE block, and only the latest one's workers are
 * worth keeping awake. */
cpu_pool *cpu_pool_create(const fmoe_host *h, uint32_t threads, uint64_t spin_ns, atomic_uintptr_t *last_used);
void cpu_pool_destroy(cpu_pool *p);
uint32_t cpu_pool_size(const cpu_pool *p);
void cpu_pool_run(cpu_pool *p, uint32_t n_items, cpu_task_fn fn, void *ctx);

/* Get sleeping workers spinning for a run that comes soon (they sleep
 * again if none does): their wake-up overlaps the caller's work meanwhile. */
void cpu_pool_wake(cpu_pool *p);

/* The same for element-wise steps of `elems` work units per item (about a
 * nanosecond each: a value of a vectorized step; count a costlier value as
 * several): run on the caller alone when the whole step is small (a decode
 * step's few rows), where handing it out would cost more than the work. */
void cpu_pool_run_elems(cpu_pool *p, uint32_t n_items, size_t elems, cpu_task_fn fn, void *ctx);

#endif
