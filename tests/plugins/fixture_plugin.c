/*
 * tests/plugins/fixture_plugin.c - one source, many test plugins. Each
 * variant is this file compiled with a FIXTURE_* define that makes it
 * misbehave in one way the registry must survive (tests/plugins/meson.build
 * lists them). A well-behaved fixture serves f32/bf16/f16 with the
 * reference method and score FIXTURE_SCORE, so selection tests can rank it
 * against the reference plugin.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/reference/reference.h"
#include "tests/plugins/fixture_scales.h"

#ifndef FIXTURE_NAME
#error "FIXTURE_NAME must be defined"
#endif
#ifndef FIXTURE_ABI_MAJOR
#define FIXTURE_ABI_MAJOR FMOE_ABI_MAJOR
#endif
#ifndef FIXTURE_ABI_MINOR
#define FIXTURE_ABI_MINOR FMOE_ABI_MINOR
#endif
#ifndef FIXTURE_SCORE
#define FIXTURE_SCORE 10
#endif

static fmoe_status fx_init(fmoe_init_args *a)
{
#ifdef FIXTURE_INIT_FAIL
    return a->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "fixture init fails on purpose");
#else
    ref_state *st = a->host->alloc(a->host->ctx, sizeof *st, 0);
    if (!st)
        return a->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = a->host;
    a->host->log(a->host->ctx, FMOE_PLUGIN_LOG_INFO, "fixture initialised");
    a->state = st;
    return FMOE_STATUS_OK;
#endif
}

static void fx_shutdown(void *state)
{
    ref_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

#ifdef FIXTURE_DEVICE
/* A pretend accelerator: "device memory" is host memory the fixture hands
 * out and remembers, so a copy or free of a pointer its allocator did not
 * hand out fails loudly instead of silently working. (One thread: the
 * tests that use it are single-threaded.) */
#define FX_MAX_ALLOCS 256

static struct {
    void *ptr;
    size_t bytes;
} fx_allocs[FX_MAX_ALLOCS];

static fmoe_status fx_alloc(fmoe_memory_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    if (a->device_kind != FMOE_DEVICE_CUDA || a->device_index != 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "fixture device is cuda:0 only");
    for (int i = 0; i < FX_MAX_ALLOCS; i++) {
        if (fx_allocs[i].ptr)
            continue;
        fx_allocs[i].ptr = h->alloc(h->ctx, a->bytes, 256);
        if (!fx_allocs[i].ptr)
            return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device out of memory");
        fx_allocs[i].bytes = a->bytes;
        a->ptr = fx_allocs[i].ptr;
        return FMOE_STATUS_OK;
    }
    return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device holds %d allocations at most",
                        FX_MAX_ALLOCS);
}

/* The allocation `ptr` points into with `bytes` to spare, or -1. */
static int fx_find(const void *ptr, size_t bytes)
{
    for (int i = 0; i < FX_MAX_ALLOCS; i++) {
        const char *base = fx_allocs[i].ptr, *p = ptr;
        if (base && p >= base && p < base + fx_allocs[i].bytes && bytes <= (size_t)(base + fx_allocs[i].bytes - p))
            return i;
    }
    return -1;
}

static void fx_free(fmoe_memory_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    int i = a->ptr ? fx_find(a->ptr, 0) : -1;
    if (i >= 0 && fx_allocs[i].ptr == a->ptr) {
        h->free(h->ctx, fx_allocs[i].ptr);
        fx_allocs[i].ptr = NULL;
    }
}

static fmoe_status fx_copy(fmoe_copy_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    const void *dev = a->direction == FMOE_COPY_TO_DEVICE ? a->dst : a->src;
    if (fx_find(dev, a->bytes) < 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "not fixture device memory of %zu bytes", a->bytes);
    memcpy(a->dst, a->src, a->bytes);
    return FMOE_STATUS_OK;
}

static fmoe_status fx_sync(fmoe_sync_args *a)
{
    (void)a;
    return FMOE_STATUS_OK;
}

static const fmoe_device_memory fx_memory = {
    .struct_size = sizeof(fmoe_device_memory),
    .alloc = fx_alloc,
    .free = fx_free,
    .copy = fx_copy,
    .synchronize = fx_sync,
};
#endif

static fmoe_status fx_probe(fmoe_probe_args *a)
{
    fmoe_device_report *r = a->reports[0];
#ifdef FIXTURE_DEVICE
    r->kind = FMOE_DEVICE_CUDA;
#else
    r->kind = FMOE_DEVICE_CPU;
#endif
    r->index = 0;
#ifdef FIXTURE_NO_DEVICE
    r->available = 0;
    snprintf(r->reason, sizeof r->reason, "fixture has no usable device");
#else
    r->available = 1;
    r->score = FIXTURE_SCORE;
#endif
    snprintf(r->name, sizeof r->name, "fixture cpu");
    snprintf(r->id, sizeof r->id, "cpu");
    a->count = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status fx_query(fmoe_query_args *a)
{
#ifdef FIXTURE_REFUSE
    snprintf(a->reason, sizeof a->reason, "fixture refuses every layer");
    return FMOE_STATUS_UNSUPPORTED;
#else
    if (a->scheme->w_strategy != FMOE_QSTRATEGY_NONE) {
        snprintf(a->reason, sizeof a->reason, "fixture serves unquantized layers only");
        return FMOE_STATUS_UNSUPPORTED;
    }
#ifdef FIXTURE_SCALES
    a->method = &fixture_scales_method;
#else
    a->method = &ref_method_unquantized;
#endif
    a->score = FIXTURE_SCORE;
    snprintf(a->reason, sizeof a->reason, "fixture accepts");
    return FMOE_STATUS_OK;
#endif
}

/* A table with room after it, so the "larger struct_size" variant claims
 * bytes that really exist (a newer plugin built against a longer table). */
static const struct {
    fmoe_plugin table;
    char future_fields[64];
} fx = {
    .table = {
#if defined(FIXTURE_TABLE_SMALL)
        .struct_size = offsetof(fmoe_plugin, probe),
#elif defined(FIXTURE_TABLE_LARGE)
        .struct_size = sizeof(fmoe_plugin) + 64,
#else
        .struct_size = sizeof(fmoe_plugin),
#endif
        .abi_major = FIXTURE_ABI_MAJOR,
        .abi_minor = FIXTURE_ABI_MINOR,
        .name = FIXTURE_NAME,
        .vendor = "fusedmoe tests",
        .version = "0.0.1",
        .build_id = "fixture",
        .init = fx_init,
        .probe = fx_probe,
        .query = fx_query,
        .shutdown = fx_shutdown,
#ifdef FIXTURE_DEVICE
        .memory = &fx_memory,
#endif
    },
};

#ifdef FIXTURE_NO_ENTRY
/* Exported under the wrong name: the loader must say the entry is missing. */
FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry_misspelled(fmoe_entry_args *a);
FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry_misspelled(fmoe_entry_args *a)
#else
FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *a)
#endif
{
#if defined(FIXTURE_ENTRY_CHECKS_MAJOR)
    /* A well-behaved plugin of another major refuses in its entry. */
    if (a->host->abi_major != FIXTURE_ABI_MAJOR)
        return a->host->error_set(a->err, FMOE_STATUS_ABI_MISMATCH, "fixture speaks ABI %d.x, the host %u.%u",
                                  FIXTURE_ABI_MAJOR, a->host->abi_major, a->host->abi_minor);
#endif
    a->plugin = &fx.table;
    return FMOE_STATUS_OK;
}
