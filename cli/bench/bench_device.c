/*
 * cli/bench/bench_device.c - timing a layer that runs on a device, through
 * its plugin (plugin ABI 1.2; fusedmoe.h fmoe_layer_time_replays and
 * fmoe_layer_device_copy_rate; ABI 1.4 fmoe_layer_device_read_rate), for
 * `fusedmoe bench`.
 *
 * A host clock around "launch, then wait" measures launch latency as much
 * as the kernels, and with microsecond-scale decode layers that is most of
 * it. The plugin records each forward once (CUDA: a graph per routing set)
 * and replays the records in turn, timing each on the device; the routing
 * sets rotate so the experts of one replay are not still in the device's
 * cache from the previous one.
 */
#include <stdlib.h>

#include "cli/bench/bench.h"
#include "cli/cli.h"

typedef struct replay_ctx {
    fmoe_layer *layer;
    const fmoe_tensor *x;
    fmoe_tensor *out;
    const fmoe_tensor *const *w, *const *ids;
} replay_ctx;

static fmoe_status enqueue_forward(void *ctx, uint32_t index, void *stream)
{
    const replay_ctx *c = ctx;
    fmoe_forward_args a = {.struct_size = sizeof a,
                           .x = c->x,
                           .out = c->out,
                           .topk_weights = c->w[index],
                           .topk_ids = c->ids[index],
                           .stream = stream};
    return fmoe_layer_forward(c->layer, &a);
}

static int cmp_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_device_median(fmoe_layer *layer, const fmoe_tensor *x, fmoe_tensor *out, const fmoe_tensor *const *w,
                           const fmoe_tensor *const *ids, uint32_t n_sets, uint32_t iters)
{
    double *t = malloc(iters * sizeof *t);
    if (!t) {
        cli_error("out of memory");
        return -1;
    }
    replay_ctx c = {layer, x, out, w, ids};
    fmoe_status st = fmoe_layer_time_replays(layer, n_sets, 2 * n_sets, iters, enqueue_forward, &c, t);
    if (st != FMOE_STATUS_OK) {
        free(t);
        if (st == FMOE_STATUS_UNSUPPORTED)
            return -2;
        cli_fail(st, "timing on the device");
        return -1;
    }
    qsort(t, iters, sizeof *t, cmp_seconds);
    double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    return med;
}

/* A rate slot's value, 0 when the plugin does not offer it, -1 after
 * reporting its failure: a device that cannot measure its own floor is not
 * benchmarked against a guess. */
static double rate_or_error(fmoe_status st, double rate, const char *what)
{
    if (st == FMOE_STATUS_OK)
        return rate;
    if (st == FMOE_STATUS_UNSUPPORTED)
        return 0.0;
    cli_fail(st, what);
    return -1.0;
}

double bench_device_copy_rate(fmoe_layer *layer)
{
    /* 1 GiB each way: past any device cache, short enough to repeat. */
    double rate = 0.0;
    fmoe_status st = fmoe_layer_device_copy_rate(layer, 1ull << 30, 10, &rate);
    return rate_or_error(st, rate, "the device copy rate");
}

double bench_device_read_rate(fmoe_layer *layer)
{
    /* At least 1 GiB (the plugin enlarges it past its caches), best of 10. */
    double rate = 0.0;
    fmoe_status st = fmoe_layer_device_read_rate(layer, 1ull << 30, 10, &rate);
    return rate_or_error(st, rate, "the device read rate");
}
