/*
 * cli/synth/parallel.h - a parallel loop for building synthetic
 * checkpoints: POSIX threads, nothing of the CLI.
 *
 * Items are handed out in order to whichever worker is free, so a result
 * must depend only on its item, never on the worker or the order items
 * finish in: each item writes its own output, and what needs an order is
 * put together by the caller afterwards.
 */
#ifndef FMOE_CLI_SYNTH_PARALLEL_H
#define FMOE_CLI_SYNTH_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

/* CPUs online (at least 1), or what synth_pretend_cpus set. */
uint32_t synth_online_cpus(void);

/* For tests: count n CPUs online from now on (0: ask the system again),
 * so that a test on a small machine still runs several workers. */
void synth_pretend_cpus(uint32_t n);

/* How many workers synth_parallel_for runs for `items` items of about
 * `item_work` units each: at most `requested` (0: no limit), one per online
 * CPU, one per item, and one per `min_work` units of the whole (so that a
 * small job does not pay for starting threads); at least 1. */
uint32_t synth_workers(uint32_t requested, size_t items, double item_work, double min_work);

/* fn(ctx, item, worker) for every item in [0, items), on `workers` workers
 * (worker 0 is the caller; workers are numbered below `workers`, so a
 * worker may own per-worker scratch). A nonzero return stops the handing out
 * of further items (those already running finish). A worker that cannot be
 * started leaves its share to the others. Returns the number of workers that
 * ran. */
uint32_t synth_parallel_for(uint32_t workers, size_t items, int (*fn)(void *ctx, size_t item, uint32_t worker),
                            void *ctx);

#endif
