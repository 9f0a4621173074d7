/*
 * cli/bench/bench.h - `fusedmoe bench`: time one backend's MoE layer on a
 * grid of model shapes and token counts against the physical floor of this
 * machine, measured in the same run (spec/performance.md; docs/BENCH.md).
 *
 * Device backends get their tensors from the plugin's allocator and are
 * timed by the plugin (bench_device.c); host backends by a host clock.
 */
#ifndef FMOE_CLI_BENCH_H
#define FMOE_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cli/cli.h"

/* A model's MoE layer shape. */
typedef struct bench_shape {
    char name[48];
    uint32_t experts, top_k, hidden, inter;
} bench_shape;

/* "qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-v3", or
 * "E,k,H,I". Returns 0, or -1 for an unknown name. */
int bench_shape_parse(const char *text, bench_shape *out);

/* The named shapes, for help and defaults. */
extern const bench_shape bench_named_shapes[];
extern const size_t bench_n_named_shapes;

/* Read bandwidth of this machine in bytes/s: `threads` threads each
 * sweeping its share of `bytes` of memory (well past the last-level cache)
 * as several interleaved streams with the widest vector loads the CPU and
 * OS enable, best of `reps` (docs/BENCH.md, "The floor"). */
double bench_read_bandwidth(size_t bytes, int threads, int reps);

/* The buffer for it: 4x the last-level cache, at least 512 MiB. */
size_t bench_read_bytes(void);

/* How it reads, in words, for the record ("avx512 loads, 8 streams ..."). */
const char *bench_read_method(void);

/* Median seconds of `iters` forwards on the layer's device, timed by its
 * plugin (plugin ABI 1.2): forward i reads routing set i % n_sets, each
 * recorded once and replayed. -2 when the plugin does not time (use a host
 * clock), -1 after an error (reported). */
double bench_device_median(fmoe_layer *layer, const fmoe_tensor *x, fmoe_tensor *out, const fmoe_tensor *const *w,
                           const fmoe_tensor *const *ids, uint32_t n_sets, uint32_t iters);

/* The device's copy rate in bytes/s (read + written) as its plugin
 * measures it, 0 when the plugin does not, -1 after an error (reported). */
double bench_device_copy_rate(fmoe_layer *layer);

/* The device's pure read rate in bytes/s (a read-only streaming kernel,
 * plugin ABI 1.4), 0 when the plugin does not measure it, -1 after an
 * error (reported). */
double bench_device_read_rate(fmoe_layer *layer);

/* The rate a device's memory floor divides by: the higher of its read and
 * copy rates (0: not measured); *source (may be NULL) names it: "device
 * read", "device copy", or "none" when neither is known (bench_floor.c). */
double bench_memory_rate(double copy_rate, double read_rate, const char **source);

/* A point's floor in seconds: max(bytes / rate, flops / peak_flops), each
 * term left out when its rate is 0; 0 when neither is known. */
double bench_floor_seconds(double bytes, double rate, double flops, double peak_flops);

/* Bytes of one local expert's parameters (weights, scales, zero points...)
 * as `layer` declared them; with `streamed`, int4 weights held in int8
 * count at half a byte (what a kernel must stream at least). */
double bench_expert_bytes(const fmoe_layer *layer, const fmoe_scheme *s, int streamed);

/* An EP layer's floor (`bench --gpus`): the most distinct experts one rank
 * holds among those ids[count] touch, with the linear placement (expert e
 * on rank e / (experts / ranks)); ids outside [0, experts) are empty
 * slots. 0 when experts is not a multiple of ranks (or out of memory). */
uint32_t bench_busiest_rank_experts(const int32_t *ids, size_t count, uint32_t experts, uint32_t ranks);

/* A --json record's header (bench_record.c): command, date (UTC), seed,
 * scheme and backend (null for NULL). NULL when out of memory. */
json_t *bench_record_new(const char *command, uint64_t seed, const char *scheme_key, const char *backend);

/* Write `root` (consumed) to path, indented, keys in insertion order.
 * CLI_EXIT_OK, or CLI_EXIT_CONFIG after reporting. */
int bench_record_write(json_t *root, const char *path);

#endif
