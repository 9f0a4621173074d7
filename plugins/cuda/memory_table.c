/*
 * plugins/cuda/memory_table.c - the device-memory table of the plugins on
 * the CUDA runtime (memory_table.h): argument checks, then runtime.cu's and
 * timing.cu's functions, their one-line reasons passed on.
 */
#include <stdio.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/memory_table.h"

/* The plugin's host table: the first member of its state (memory_table.h). */
static const fmoe_host *host_of(const void *state)
{
    return *(const fmoe_host *const *)state;
}

static fmoe_status mem_alloc(fmoe_memory_args *a)
{
    char why[200];
    if (a->device_kind != FMOE_DEVICE_CUDA)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "alloc: not a CUDA device");
    if (fmcu_malloc(a->device_index, &a->ptr, a->bytes, why, sizeof why) != 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "%s", why);
    return FMOE_STATUS_OK;
}

static void mem_free(fmoe_memory_args *a)
{
    if (a->device_kind == FMOE_DEVICE_CUDA)
        fmcu_free(a->device_index, a->ptr);
}

static fmoe_status mem_copy(fmoe_copy_args *a)
{
    char why[200];
    if (a->device_kind != FMOE_DEVICE_CUDA ||
        (a->direction != FMOE_COPY_TO_DEVICE && a->direction != FMOE_COPY_FROM_DEVICE))
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                            "copy: not a CUDA device, or a direction other than to or from it");
    if (fmcu_copy(a->device_index, a->direction == FMOE_COPY_TO_DEVICE, a->dst, a->src, a->bytes, a->stream, why,
                  sizeof why) != 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static fmoe_status mem_sync(fmoe_sync_args *a)
{
    char why[200];
    if (a->device_kind != FMOE_DEVICE_CUDA)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "synchronize: not a CUDA device");
    if (fmcu_synchronize(a->device_index, a->stream, why, sizeof why) != 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

/* time_replays hands timing.cu the caller's enqueue through this. */
typedef struct enqueue_call {
    fmoe_enqueue_fn fn;
    void *ctx;
} enqueue_call;

static int call_enqueue(void *ctx, uint32_t index, void *stream)
{
    const enqueue_call *c = ctx;
    return c->fn(c->ctx, index, stream) == FMOE_STATUS_OK ? 0 : -1;
}

static fmoe_status time_replays(fmoe_replay_args *a)
{
    char why[256];
    if (a->device_kind != FMOE_DEVICE_CUDA || !a->enqueue || !a->seconds || a->n_graphs == 0)
        return host_of(a->state)->error_set(
            a->err, FMOE_STATUS_INVALID_ARGUMENT,
            "time_replays: a CUDA device, an enqueue function, a seconds array and 1 graph or more are required");
    enqueue_call c = {a->enqueue, a->ctx};
    if (fmcu_time_replays(a->device_index, a->n_graphs, a->warmup, a->reps, call_enqueue, &c, a->seconds, why,
                          sizeof why) != 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

/* copy_rate and read_rate: the benchmark's memory floor takes the higher. */
static fmoe_status device_rate(fmoe_copy_rate_args *a, int read)
{
    char why[256];
    if (a->device_kind != FMOE_DEVICE_CUDA || a->bytes == 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                            "%s: a CUDA device and 1 byte or more are required",
                                            read ? "read_rate" : "copy_rate");
    int rc = read ? fmcu_read_rate(a->device_index, a->bytes, a->reps, &a->bytes_per_second, why, sizeof why)
                  : fmcu_copy_rate(a->device_index, a->bytes, a->reps, &a->bytes_per_second, why, sizeof why);
    if (rc != 0)
        return host_of(a->state)->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static fmoe_status copy_rate(fmoe_copy_rate_args *a)
{
    return device_rate(a, 0);
}

static fmoe_status read_rate(fmoe_copy_rate_args *a)
{
    return device_rate(a, 1);
}

const fmoe_device_memory fmcu_memory_table = {
    .struct_size = sizeof(fmoe_device_memory),
    .alloc = mem_alloc,
    .free = mem_free,
    .copy = mem_copy,
    .synchronize = mem_sync,
    .time_replays = time_replays,
    .copy_rate = copy_rate,
    .read_rate = read_rate,
};
