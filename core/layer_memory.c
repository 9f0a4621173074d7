/*
 * core/layer_memory.c - tensors on a layer's device (fusedmoe.h:
 * fmoe_layer_tensor_alloc / _free / _copy, fmoe_layer_synchronize).
 *
 * A host layer gets malloc'd memory; a device layer borrows its plugin's
 * allocator and copies (plugin ABI 1.1, fmoe_device_memory), so tools and
 * applications that never link the device runtime can still feed a GPU
 * layer. The table is used only when the negotiated minor is at least 1
 * and the plugin's table is large enough to hold it.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/layer.h"
#include "core/tensor.h"
#include "fusedmoe/fusedmoe.h"

/* Memory is host memory for these devices. */
static int is_host(int32_t kind)
{
    return kind == FMOE_DEVICE_CPU;
}

static const fmoe_device_memory *memory_of(const fmoe_layer *layer)
{
    const fmoe_plugin_record *p = layer->chosen->plugin;
    const fmoe_plugin *t = p->table;
    if (p->abi_minor < 1 || !t || !FMOE_HAS_FIELD(t, memory) || !t->memory)
        return NULL;
    const fmoe_device_memory *m = t->memory;
    if (m->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, synchronize) || !m->alloc || !m->free || !m->copy ||
        !m->synchronize)
        return NULL;
    return m;
}

static fmoe_status no_memory(const fmoe_layer *layer)
{
    return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                          "plugin %s lends no device memory for %s:%d (plugin ABI 1.1 fmoe_device_memory); allocate "
                          "with the device runtime instead",
                          layer->chosen->plugin->name, fmoe_device_kind_name(layer->chosen->device_kind),
                          layer->chosen->device_index);
}

static fmoe_status plugin_failed(const fmoe_layer *layer, const char *call, fmoe_status st, const fmoe_error *err)
{
    return fmoe_error_set(st == FMOE_STATUS_OK ? FMOE_STATUS_PLUGIN_ERROR : st, "%s memory %s failed (%s): %s",
                          layer->chosen->plugin->name, call, fmoe_status_name(st),
                          fmoe_plugin_error_text(err, "no message"));
}

FMOE_API fmoe_status fmoe_layer_tensor_alloc(fmoe_layer *layer, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape,
                                             fmoe_tensor *out)
{
    fmoe_error_clear();
    if (!layer || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_tensor_alloc: layer and out are required");
    fmoe_status st = fmoe_tensor_init(out, dtype, ndim, shape, NULL);
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t numel = fmoe_tensor_numel(out);
    size_t bytes = (size_t)(numel > 0 ? numel : 1) * fmoe_dtype_size(dtype);
    int32_t kind = layer->chosen->device_kind, index = layer->chosen->device_index;
    if (is_host(kind)) {
        out->data = malloc(bytes);
        if (!out->data)
            return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory for a %zu-byte tensor", bytes);
        return FMOE_STATUS_OK;
    }
    const fmoe_device_memory *m = memory_of(layer);
    if (!m)
        return no_memory(layer);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_memory_args a = {.struct_size = sizeof a,
                          .err = &err,
                          .state = layer->chosen->plugin->plugin_state,
                          .device_kind = kind,
                          .device_index = index,
                          .bytes = bytes};
    st = m->alloc(&a);
    if (st != FMOE_STATUS_OK || !a.ptr)
        return plugin_failed(layer, "alloc", st == FMOE_STATUS_OK ? FMOE_STATUS_PLUGIN_ERROR : st, &err);
    out->data = a.ptr;
    out->device_kind = kind;
    out->device_index = index;
    return FMOE_STATUS_OK;
}

FMOE_API void fmoe_layer_tensor_free(fmoe_layer *layer, fmoe_tensor *t)
{
    if (!layer || !t || !t->data)
        return;
    if (is_host(t->device_kind)) {
        free(t->data);
    } else {
        const fmoe_device_memory *m = memory_of(layer);
        fmoe_error err;
        fmoe_plugin_error_reset(&err);
        fmoe_memory_args a = {.struct_size = sizeof a,
                              .err = &err,
                              .state = layer->chosen->plugin->plugin_state,
                              .device_kind = t->device_kind,
                              .device_index = t->device_index,
                              .ptr = t->data};
        if (m)
            m->free(&a);
    }
    t->data = NULL;
}

FMOE_API fmoe_status fmoe_layer_tensor_copy(fmoe_layer *layer, fmoe_tensor *dst, const fmoe_tensor *src)
{
    fmoe_error_clear();
    if (!layer || !dst || !src)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_tensor_copy: layer, dst and src are required");
    fmoe_status st = fmoe_tensor_expect(src, "copy source", src->dtype, src->ndim, NULL);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_expect(dst, "copy destination", src->dtype, src->ndim, src->shape);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!fmoe_tensor_is_contiguous(src) || !fmoe_tensor_is_contiguous(dst))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_tensor_copy: both tensors must be contiguous");
    size_t bytes = (size_t)fmoe_tensor_numel(src) * fmoe_dtype_size(src->dtype);
    int host_src = is_host(src->device_kind), host_dst = is_host(dst->device_kind);
    if (bytes == 0)
        return FMOE_STATUS_OK;
    if (host_src && host_dst) {
        memmove(dst->data, src->data, bytes);
        return FMOE_STATUS_OK;
    }
    const fmoe_tensor *dev = host_dst ? src : dst;
    if (!host_src && !host_dst)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "fmoe_layer_tensor_copy: device to device copies are not "
                                                       "offered; one side must be host memory");
    if (dev->device_kind != layer->chosen->device_kind || dev->device_index != layer->chosen->device_index)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_layer_tensor_copy: the device tensor is on %s:%d, the "
                              "layer on %s:%d",
                              fmoe_device_kind_name(dev->device_kind), dev->device_index,
                              fmoe_device_kind_name(layer->chosen->device_kind), layer->chosen->device_index);
    const fmoe_device_memory *m = memory_of(layer);
    if (!m)
        return no_memory(layer);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_copy_args a = {.struct_size = sizeof a,
                        .err = &err,
                        .state = layer->chosen->plugin->plugin_state,
                        .device_kind = dev->device_kind,
                        .device_index = dev->device_index,
                        .direction = host_src ? FMOE_COPY_TO_DEVICE : FMOE_COPY_FROM_DEVICE,
                        .dst = dst->data,
                        .src = src->data,
                        .bytes = bytes};
    st = m->copy(&a);
    return st == FMOE_STATUS_OK ? st : plugin_failed(layer, "copy", st, &err);
}

FMOE_API fmoe_status fmoe_layer_synchronize(fmoe_layer *layer, void *stream)
{
    fmoe_error_clear();
    if (!layer)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_synchronize: layer is NULL");
    if (is_host(layer->chosen->device_kind))
        return FMOE_STATUS_OK;
    const fmoe_device_memory *m = memory_of(layer);
    if (!m)
        return no_memory(layer);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_sync_args a = {.struct_size = sizeof a,
                        .err = &err,
                        .state = layer->chosen->plugin->plugin_state,
                        .device_kind = layer->chosen->device_kind,
                        .device_index = layer->chosen->device_index,
                        .stream = stream};
    fmoe_status st = m->synchronize(&a);
    return st == FMOE_STATUS_OK ? st : plugin_failed(layer, "synchronize", st, &err);
}
