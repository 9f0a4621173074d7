/*
 * cli/bench/bench_ep.h - `fusedmoe bench --gpus N`: the layer on an EP group
 * (cli/bench/bench_ep.c says what is timed and how).
 */
#ifndef FMOE_CLI_BENCH_EP_H
#define FMOE_CLI_BENCH_EP_H

#include <stddef.h>
#include <stdint.h>

#include "cli/bench/bench.h"
#include "fusedmoe/fusedmoe.h"

typedef struct bench_ep_opts {
    uint32_t gpus;
    const char *backend;
    int32_t dispatch, mode;
    uint32_t max_tokens;    /* the group's max_tokens_per_rank; 0: each M */
    const uint32_t *tokens; /* per rank */
    size_t n_tokens;
    uint32_t iters;
    uint64_t seed;
} bench_ep_opts;

typedef struct bench_ep_point {
    bench_shape shape;
    uint32_t m; /* tokens per rank */
    double layer_us;
    /* The slowest rank's median CUDA-graph replay of a low-latency forward
     * (device events, no launch overhead); have_graph 0 where any rank did
     * not replay (a host plugin, high_throughput). */
    int have_graph;
    double graph_us;
    /* The memory floor (device plugins): the weights of the rank that holds
     * the most experts the routing touches, slowest_rank_experts of them,
     * streamed once at the device's rate (the higher of read and copy,
     * measured on one device); have_floor 0 where no rate is measured. */
    int have_floor;
    double floor_us;
    uint32_t slowest_rank_experts;
    int have_split; /* the plugin measured its phases on every rank */
    double dispatch_us, experts_us, combine_us;
} bench_ep_point;

/* Every token count of one shape (its full expert count, spread over the
 * ranks); points appended. Returns an exit code after reporting. */
int bench_ep_shape(fmoe_context *ctx, const bench_ep_opts *o, const bench_shape *shape, const fmoe_scheme *scheme,
                   bench_ep_point *pts, size_t *n_pts);

void bench_ep_print(const bench_ep_opts *o, const bench_ep_point *pts, size_t n);

/* The record of a --gpus run as JSON (docs/EP.md, `bench --gpus`): the
 * command, date, seed, scheme, backend, the group (ranks, dispatch, mode,
 * max_tokens_per_rank, forwards per replayed graph) and every point, the
 * times in µs (null where not measured). An exit code after reporting. */
int bench_ep_write_json(const char *path, const bench_ep_opts *o, const bench_ep_point *pts, size_t n,
                        const char *scheme_key, const char *command);

#endif
