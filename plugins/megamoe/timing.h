/*
 * plugins/megamoe/timing.h - device timing for `fusedmoe bench`
 * (sm90_timing.cu; plugin ABI 1.2 time_replays and copy_rate). Plain C;
 * 0, or -1 with the CUDA call that failed in `why`.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_TIMING_H
#define FMOE_PLUGIN_MEGAMOE_TIMING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Capture enqueue(ctx, i, stream) for i < n_graphs into CUDA graphs, replay
 * them warmup times untimed, then reps times (graph r % n_graphs), each
 * timed by events: seconds[reps]. enqueue returns 0 or -1. */
int mm90_time_replays(int device, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                      int (*enqueue)(void *ctx, uint32_t index, void *stream), void *ctx, double *seconds, char *why,
                      size_t cap);

/* Best device-to-device copy rate over reps copies of `bytes`, counting
 * bytes read and written. */
int mm90_copy_rate(int device, uint64_t bytes, uint32_t reps, double *bytes_per_second, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
