/*
 * plugins/cuda/timing.h - device timing for tools without the CUDA runtime
 * (timing.cu; plugin ABI 1.2 time_replays and copy_rate, 1.4 read_rate).
 * Plain C, and nothing of the cuda plugin's methods: the megamoe plugin
 * compiles timing.cu in too (docs/MEGAMOE.md). Each returns 0, or -1 with
 * the CUDA call that failed in `err`.
 */
#ifndef FMOE_PLUGIN_CUDA_TIMING_H
#define FMOE_PLUGIN_CUDA_TIMING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Capture enqueue(ctx, i, stream) for i < n_graphs into CUDA graphs,
 * replay warmup + reps times (graph r % n_graphs) with events around each
 * timed replay: seconds[reps]. enqueue returns 0 or -1. */
int fmcu_time_replays(int device, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                      int (*enqueue)(void *ctx, uint32_t index, void *stream), void *ctx, double *seconds, char *err,
                      size_t cap);
/* Best device-to-device copy rate over reps copies of `bytes` (read + written). */
int fmcu_copy_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err, size_t cap);
/* Best pure read rate over reps reads of a buffer of at least `bytes` (8x the
 * L2 at least) by a read-only streaming kernel, bytes read per second. */
int fmcu_read_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
