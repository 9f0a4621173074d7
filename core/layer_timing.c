/*
 * core/layer_timing.c - timing a device layer through its plugin (fusedmoe.h:
 * fmoe_layer_time_replays, fmoe_layer_device_copy_rate; plugin ABI 1.2;
 * fmoe_layer_device_read_rate, ABI 1.4).
 *
 * A benchmark that does not link the device runtime cannot capture graphs
 * or read device events itself, and a host clock around launch + wait
 * measures the launches, not the kernels. The plugin does both its way;
 * the core checks the arguments, that the negotiated minor and the table
 * carry the slot, and reports an error of the caller's enqueue (the usual
 * cause of a failed capture) as that, not as a plugin failure.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "core/layer.h"
#include "fusedmoe/fusedmoe.h"

/* The slot's table, or NULL when the layer's plugin does not offer it:
 * the negotiated minor must be `minor` (the slot's \since) or newer. */
static const fmoe_device_memory *timing_table(const fmoe_layer *layer, uint32_t minor, size_t slot_end)
{
    const fmoe_plugin_record *p = layer->chosen->plugin;
    const fmoe_plugin *t = p->table;
    if (layer->chosen->device_kind == FMOE_DEVICE_CPU || p->abi_minor < minor || !t || !FMOE_HAS_FIELD(t, memory) ||
        !t->memory)
        return NULL;
    return t->memory->struct_size >= slot_end ? t->memory : NULL;
}

static fmoe_status not_offered(const fmoe_layer *layer, const char *verb, const char *what, uint32_t minor,
                               const char *instead)
{
    return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                          "plugin %s does not %s %s:%d (%s needs plugin ABI 1.%u fmoe_device_memory.%s); %s",
                          layer->chosen->plugin->name, verb, fmoe_device_kind_name(layer->chosen->device_kind),
                          layer->chosen->device_index, what, minor, what, instead);
}

/* The caller's enqueue, wrapped so that its first failure is kept. */
typedef struct enqueue_box {
    fmoe_enqueue_fn fn;
    void *ctx;
    fmoe_status status;
    char message[512];
} enqueue_box;

static fmoe_status boxed_enqueue(void *ctx, uint32_t index, void *stream)
{
    enqueue_box *b = ctx;
    fmoe_status st = b->fn(b->ctx, index, stream);
    if (st != FMOE_STATUS_OK && b->status == FMOE_STATUS_OK) {
        b->status = st;
        snprintf(b->message, sizeof b->message, "forward %u: %s", index, fmoe_last_error());
    }
    return st;
}

FMOE_API fmoe_status fmoe_layer_time_replays(fmoe_layer *layer, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                                             fmoe_enqueue_fn enqueue, void *ctx, double *seconds)
{
    fmoe_error_clear();
    if (!layer || !enqueue || !seconds || n_graphs == 0 || reps == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_layer_time_replays: layer, enqueue and seconds are required, n_graphs and reps "
                              "at least 1");
    const fmoe_device_memory *m = timing_table(layer, 2, FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, time_replays));
    if (!m || !m->time_replays)
        return not_offered(layer, "time", "time_replays", 2, "time with a host clock instead");
    enqueue_box box = {.fn = enqueue, .ctx = ctx, .status = FMOE_STATUS_OK};
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_replay_args a = {.struct_size = sizeof a,
                          .err = &err,
                          .state = layer->chosen->plugin->plugin_state,
                          .device_kind = layer->chosen->device_kind,
                          .device_index = layer->chosen->device_index,
                          .n_graphs = n_graphs,
                          .warmup = warmup,
                          .reps = reps,
                          .enqueue = boxed_enqueue,
                          .ctx = &box,
                          .seconds = seconds};
    fmoe_status st = m->time_replays(&a);
    if (box.status != FMOE_STATUS_OK)
        return fmoe_error_set(box.status, "timing replays on %s: %s", layer->chosen->plugin->name, box.message);
    if (st != FMOE_STATUS_OK)
        return fmoe_error_set(st, "%s time_replays failed (%s): %s", layer->chosen->plugin->name, fmoe_status_name(st),
                              fmoe_plugin_error_text(&err, "no message"));
    for (uint32_t r = 0; r < reps; r++)
        if (!(seconds[r] >= 0.0))
            return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s time_replays reported replay %u took %g s",
                                  layer->chosen->plugin->name, r, seconds[r]);
    return FMOE_STATUS_OK;
}

/* One rate slot (copy_rate or read_rate; the same arguments), its reply
 * checked: a rate that is not a positive number below 1 PB/s is a plugin
 * bug, not a floor. */
static fmoe_status device_rate(fmoe_layer *layer, const char *what, uint32_t minor, size_t slot_end, int read,
                               uint64_t bytes, uint32_t reps, double *bytes_per_second)
{
    fmoe_error_clear();
    if (!layer || !bytes_per_second || bytes == 0 || reps == 0)
        return fmoe_error_set(
            FMOE_STATUS_INVALID_ARGUMENT,
            "fmoe_layer_device_%s: layer and bytes_per_second are required, bytes and reps at least 1", what);
    const fmoe_device_memory *m = timing_table(layer, minor, slot_end);
    fmoe_status (*fn)(fmoe_copy_rate_args *) = !m ? NULL : read ? m->read_rate : m->copy_rate;
    if (!fn)
        return not_offered(layer, "measure", what, minor,
                           read ? "use its copy rate instead" : "time with a host clock instead");
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_copy_rate_args a = {.struct_size = sizeof a,
                             .err = &err,
                             .state = layer->chosen->plugin->plugin_state,
                             .device_kind = layer->chosen->device_kind,
                             .device_index = layer->chosen->device_index,
                             .bytes = bytes,
                             .reps = reps};
    fmoe_status st = fn(&a);
    if (st != FMOE_STATUS_OK)
        return fmoe_error_set(st, "%s %s failed (%s): %s", layer->chosen->plugin->name, what, fmoe_status_name(st),
                              fmoe_plugin_error_text(&err, "no message"));
    if (!(a.bytes_per_second > 0.0) || a.bytes_per_second > 1e15)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s %s reported %g bytes/s", layer->chosen->plugin->name, what,
                              a.bytes_per_second);
    *bytes_per_second = a.bytes_per_second;
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_layer_device_copy_rate(fmoe_layer *layer, uint64_t bytes, uint32_t reps,
                                                 double *bytes_per_second)
{
    return device_rate(layer, "copy_rate", 2, FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, copy_rate), 0, bytes, reps,
                       bytes_per_second);
}

FMOE_API fmoe_status fmoe_layer_device_read_rate(fmoe_layer *layer, uint64_t bytes, uint32_t reps,
                                                 double *bytes_per_second)
{
    return device_rate(layer, "read_rate", 4, FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, read_rate), 1, bytes, reps,
                       bytes_per_second);
}
