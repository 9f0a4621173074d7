/*
 * tests/plugins/fixture_plugin.c - one source, many test plugins. Each
 * variant is this file compiled with a FIXTURE_* define that makes it
 * misbehave in one way the registry must survive (tests/plugins/meson.build
 * lists them). A well-behaved fixture serves f32/bf16/f16 with the
 * reference method and score FIXTURE_SCORE, so selection tests can rank it
 * against the reference plugin.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* The reference's state first (its methods read it), then what the fixture
 * received: tests read the options back from the probe's device notes. */
typedef struct fx_state {
    ref_state ref;
    char options[200];
} fx_state;

#ifdef FIXTURE_ROUNDUP
static const fmoe_host *fx_roundup_host; /* set at init: roundup_sizes has no state */
#endif

static fmoe_status fx_init(fmoe_init_args *a)
{
#ifdef FIXTURE_INIT_FAIL
    return a->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "fixture init fails on purpose");
#else
    fx_state *st = a->host->alloc(a->host->ctx, sizeof *st, 0);
    if (!st)
        return a->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->ref.host = a->host;
#ifdef FIXTURE_ROUNDUP
    fx_roundup_host = a->host;
#endif
    size_t len = 0;
    for (uint32_t i = 0; i < a->n_options && len < sizeof st->options; i++) {
        int n = snprintf(st->options + len, sizeof st->options - len, "%s%s=%s", i ? "," : "", a->options[i]->key,
                         a->options[i]->value);
        len += n > 0 ? (size_t)n : 0;
    }
    a->host->log(a->host->ctx, FMOE_PLUGIN_LOG_INFO, "fixture initialised");
    a->state = st;
    return FMOE_STATUS_OK;
#endif
}

/* Logs, so tests see that every successful init is paired with a shutdown
 * (FIXTURE_PROBE_FAIL: even when the probe fails after init). */
static void fx_shutdown(void *state)
{
    fx_state *st = state;
    if (st) {
        const fmoe_host *h = st->ref.host;
        h->log(h->ctx, FMOE_PLUGIN_LOG_INFO, "fixture shut down");
        h->free(h->ctx, st);
    }
}

#ifdef FIXTURE_DEVICE
/* A pretend accelerator: "device memory" is host memory the fixture hands
 * out and remembers, so a copy or free of a pointer its allocator did not
 * hand out fails loudly instead of silently working. The table is locked:
 * conform's stress mode feeds several layers from several threads. */
#define FX_MAX_ALLOCS 256

static struct {
    void *ptr;
    size_t bytes;
} fx_allocs[FX_MAX_ALLOCS];
static pthread_mutex_t fx_allocs_lock = PTHREAD_MUTEX_INITIALIZER;

static void *fx_take_slot(const fmoe_host *h, size_t bytes, int *full)
{
    void *p = NULL;
    *full = 1;
    pthread_mutex_lock(&fx_allocs_lock);
    for (int i = 0; i < FX_MAX_ALLOCS && *full; i++) {
        if (fx_allocs[i].ptr)
            continue;
        *full = 0;
        p = h->alloc(h->ctx, bytes, 256);
        fx_allocs[i].ptr = p;
        fx_allocs[i].bytes = bytes;
    }
    pthread_mutex_unlock(&fx_allocs_lock);
    return p;
}

static fmoe_status fx_alloc(fmoe_memory_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    if (a->device_kind != FMOE_DEVICE_CUDA || a->device_index != 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "fixture device is cuda:0 only");
    int full;
    a->ptr = fx_take_slot(h, a->bytes, &full);
    if (full)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device holds %d allocations at most",
                            FX_MAX_ALLOCS);
    if (!a->ptr)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device out of memory");
    return FMOE_STATUS_OK;
}

/* The allocation `ptr` points into with `bytes` to spare, or -1 (the
 * caller holds fx_allocs_lock). */
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
    pthread_mutex_lock(&fx_allocs_lock);
    int i = a->ptr ? fx_find(a->ptr, 0) : -1;
    if (i >= 0 && fx_allocs[i].ptr == a->ptr) {
        h->free(h->ctx, fx_allocs[i].ptr);
        fx_allocs[i].ptr = NULL;
    }
    pthread_mutex_unlock(&fx_allocs_lock);
}

static fmoe_status fx_copy(fmoe_copy_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    const void *dev = a->direction == FMOE_COPY_TO_DEVICE ? a->dst : a->src;
    pthread_mutex_lock(&fx_allocs_lock);
    int found = fx_find(dev, a->bytes);
    pthread_mutex_unlock(&fx_allocs_lock);
    if (found < 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "not fixture device memory of %zu bytes", a->bytes);
    memcpy(a->dst, a->src, a->bytes);
    return FMOE_STATUS_OK;
}

static fmoe_status fx_sync(fmoe_sync_args *a)
{
    (void)a;
    return FMOE_STATUS_OK;
}

/* Timing (ABI 1.2), the pretend way: the device has no graphs, so a
 * "record" is the index and a replay calls the host's enqueue again; the
 * clock is the host's. The stream handed to enqueue is a token of ours. */
static char fx_stream_token;

static double fx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fmoe_status fx_time_replays(fmoe_replay_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    if (a->device_kind != FMOE_DEVICE_CUDA || a->n_graphs == 0 || !a->enqueue || !a->seconds)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "fixture device: bad time_replays arguments");
    for (uint32_t i = 0; i < a->n_graphs; i++) /* "capture" */
        if (a->enqueue(a->ctx, i, &fx_stream_token) != FMOE_STATUS_OK)
            return h->error_set(a->err, FMOE_STATUS_PLUGIN_ERROR, "fixture device: forward %u failed under capture", i);
    for (uint32_t r = 0; r < a->warmup + a->reps; r++) {
        double t0 = fx_now();
        if (a->enqueue(a->ctx, r % a->n_graphs, &fx_stream_token) != FMOE_STATUS_OK)
            return h->error_set(a->err, FMOE_STATUS_PLUGIN_ERROR, "fixture device: replay %u failed", r);
        if (r >= a->warmup)
            a->seconds[r - a->warmup] = fx_now() - t0;
    }
    return FMOE_STATUS_OK;
}

/* FIXTURE_FIXED_RATES: rates known to the test (copy 2 GB/s, read 3 GB/s),
 * so `fusedmoe bench` can be checked to take the higher one for its floor. */
#define FX_FIXED_COPY_RATE 2e9
#define FX_FIXED_READ_RATE 3e9

static fmoe_status fx_copy_rate(fmoe_copy_rate_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
#ifdef FIXTURE_FIXED_RATES
    if (a->device_kind != FMOE_DEVICE_CUDA || a->bytes == 0 || a->reps == 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "fixture device: bad copy_rate arguments");
    a->bytes_per_second = FX_FIXED_COPY_RATE;
    return FMOE_STATUS_OK;
#endif
    size_t bytes = a->bytes < (16u << 20) ? (size_t)a->bytes : (16u << 20); /* a pretend device is small */
    char *src = h->alloc(h->ctx, bytes, 256), *dst = h->alloc(h->ctx, bytes, 256);
    if (!src || !dst || a->reps == 0) {
        h->free(h->ctx, src);
        h->free(h->ctx, dst);
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device: no memory for copy_rate");
    }
    memset(src, 0x5a, bytes);
    double best = 0.0;
    for (uint32_t r = 0; r < a->reps; r++) {
        double t0 = fx_now();
        memcpy(dst, src, bytes);
        double dt = fx_now() - t0;
        if (dt > 0 && 2.0 * (double)bytes / dt > best)
            best = 2.0 * (double)bytes / dt;
    }
    a->bytes_per_second = best > 0 ? best : 1.0;
    h->free(h->ctx, src);
    h->free(h->ctx, dst);
    return FMOE_STATUS_OK;
}

/* Read rate (ABI 1.4), the pretend way: XOR-fold a buffer of the pretend
 * device's size with the host clock; the fold is checked, so the reads
 * cannot be dropped. */
static fmoe_status fx_read_rate(fmoe_copy_rate_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    if (a->device_kind != FMOE_DEVICE_CUDA || a->bytes == 0 || a->reps == 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "fixture device: bad read_rate arguments");
#ifdef FIXTURE_FIXED_RATES
    a->bytes_per_second = FX_FIXED_READ_RATE;
    return FMOE_STATUS_OK;
#else
    size_t bytes = a->bytes < (16u << 20) ? (size_t)a->bytes / 16 * 16 : (16u << 20);
    uint64_t *buf = bytes ? h->alloc(h->ctx, bytes, 256) : NULL;
    if (!buf)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "fixture device: no memory for read_rate");
    memset(buf, 0x5a, bytes);
    buf[0] = 0; /* an odd count of 0x5a words: the fold is 0x5a.. */
    double best = 0.0;
    uint64_t fold = 0;
    for (uint32_t r = 0; r < a->reps; r++) {
        double t0 = fx_now();
        uint64_t x0 = 0, x1 = 0;
        for (size_t i = 0; i < bytes / 8; i += 2)
            x0 ^= buf[i], x1 ^= buf[i + 1];
        double dt = fx_now() - t0;
        fold = x0 ^ x1;
        if (dt > 0 && (double)bytes / dt > best)
            best = (double)bytes / dt;
    }
    h->free(h->ctx, buf);
    if (fold != 0x5a5a5a5a5a5a5a5aull)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "fixture device: read fold %llx",
                            (unsigned long long)fold);
    a->bytes_per_second = best > 0 ? best : 1.0;
    return FMOE_STATUS_OK;
#endif
}

static const fmoe_device_memory fx_memory = {
    .struct_size = sizeof(fmoe_device_memory),
    .alloc = fx_alloc,
    .free = fx_free,
    .copy = fx_copy,
    .synchronize = fx_sync,
    .time_replays = fx_time_replays,
    .copy_rate = fx_copy_rate,
    .read_rate = fx_read_rate,
};
#endif

#ifdef FIXTURE_WRITE_PAST
/* The reference's apply, then one element written past the end of out (in
 * the fixture's device memory): conform must see it there too. */
static fmoe_status fx_apply_write_past(fmoe_apply_args *a)
{
    fmoe_status st = ref_method_unquantized.apply(a);
    const fmoe_tensor *o = a->out;
    size_t esize = o->dtype == FMOE_DTYPE_F32 ? 4 : 2;
    memset((unsigned char *)o->data + (size_t)(o->shape[0] * o->shape[1]) * esize, 0x5A, esize);
    return st;
}
#endif

#ifdef FIXTURE_BAD_PARAM
/* Declares one more parameter after the reference's, broken in the way
 * FIXTURE_BAD_PARAM names (tests/registry/test_layer.c): the host must
 * refuse each naming this plugin, never allocate or load by it.
 *   0  four axes of 2^20: the element count (2^80) overflows int64
 *   1  a NULL descriptor          2  struct_size too small
 *   3  no name                    4  the core's reserved name
 *   5  a dtype without storage    6  ndim 0
 *   7  an empty axis              8  per_expert 2
 *   9  per_expert of 1000 experts 10 shard_axis past the slice
 *   11 an unknown role            12 a transposed 3-D slice
 *   13 the name of the first parameter again */
static fmoe_param_desc fx_bad_desc = {.struct_size = sizeof(fmoe_param_desc),
                                      .name = "extra",
                                      .dtype = FMOE_DTYPE_F32,
                                      .ndim = 2,
                                      .shape = {4, 8},
                                      .projection = FMOE_PROJ_NONE,
                                      .role = FMOE_ROLE_WEIGHT,
                                      .shard_axis = -1};
static const fmoe_param_desc *fx_bad_list[16];

static fmoe_status fx_declare_bad(fmoe_declare_params_args *a)
{
    fmoe_status st = ref_method_unquantized.declare_params(a);
    if (st != FMOE_STATUS_OK || a->n_params >= 15 || a->n_params == 0)
        return st;
    fmoe_param_desc *d = &fx_bad_desc;
    switch (FIXTURE_BAD_PARAM) {
    case 0:
        d->name = "huge";
        d->ndim = 4;
        for (int i = 0; i < 4; i++)
            d->shape[i] = 1 << 20;
        break;
    case 2:
        d->struct_size = 8;
        break;
    case 3:
        d->name = "";
        break;
    case 4:
        d->name = "e_score_correction_bias";
        break;
    case 5:
        d->dtype = FMOE_DTYPE_INT4;
        break;
    case 6:
        d->ndim = 0;
        break;
    case 7:
        d->shape[1] = 0;
        break;
    case 8:
        d->per_expert = 2;
        break;
    case 9:
        d->per_expert = 1;
        d->shape[0] = 1000;
        break;
    case 10:
        d->shard_axis = 2;
        break;
    case 11:
        d->role = FMOE_ROLE_ROUTING_BIAS;
        break;
    case 12:
        d->ndim = 3;
        d->shape[2] = 2;
        d->flags = FMOE_PARAM_TRANSPOSED;
        break;
    case 13:
        d->name = a->params[0]->name;
        break;
    default:
        break;
    }
    for (uint32_t i = 0; i < a->n_params; i++)
        fx_bad_list[i] = a->params[i];
    fx_bad_list[a->n_params] = FIXTURE_BAD_PARAM == 1 ? NULL : d;
    a->params = fx_bad_list;
    a->n_params++;
    return FMOE_STATUS_OK;
}
#endif

#ifdef FIXTURE_ROUNDUP
/* roundup_sizes that breaks its contract (tests/registry/test_layer.c):
 * 1 shrinks the intermediate size by one, 2 fails with a message. The host
 * must refuse the layer naming the plugin and method. */
static fmoe_status fx_roundup(fmoe_roundup_args *a)
{
    if (FIXTURE_ROUNDUP == 2)
        return fx_roundup_host->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "fixture cannot pad");
    a->intermediate_per_rank -= 1;
    return FMOE_STATUS_OK;
}
#endif

#if defined(FIXTURE_WRITE_PAST) || defined(FIXTURE_BAD_PARAM) || defined(FIXTURE_ROUNDUP)
#define FIXTURE_VARIANT_METHOD
/* The reference's method with the one entry this variant breaks. */
static fmoe_method fx_variant_method;
static pthread_once_t fx_variant_once = PTHREAD_ONCE_INIT;

static void fx_variant_init(void)
{
    fx_variant_method = ref_method_unquantized;
#if defined(FIXTURE_WRITE_PAST)
    fx_variant_method.apply = fx_apply_write_past;
#elif defined(FIXTURE_BAD_PARAM)
    fx_variant_method.declare_params = fx_declare_bad;
#else
    fx_variant_method.roundup_sizes = fx_roundup;
#endif
}
#endif

#ifdef FIXTURE_EP
/* A pretend EP transport on the pretend device: groups of one rank, whose
 * forward applies the method to the rank's own tokens and counts the
 * expert load record on the "device" (plugin ABI 1.5 load_counts), so the
 * core's device-record plumbing runs without a GPU
 * (tests/registry/test_layer.c, device_ep_load_record). */
static int fx_ep_group_token;

static fmoe_status fx_ep_unique_id(fmoe_ep_unique_id_args *a)
{
    a->bytes[0] = 1;
    a->length = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status fx_ep_group_create(fmoe_ep_group_args *a)
{
    const fmoe_host *h = ((const ref_state *)a->state)->host;
    if (a->size != 1)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "fixture EP groups have one rank, not %u", a->size);
    a->group = &fx_ep_group_token;
    a->expert_capacity = a->max_tokens_per_rank;
    return FMOE_STATUS_OK;
}

static void fx_ep_group_destroy(fmoe_ep_group_destroy_args *a)
{
    (void)a;
}

static fmoe_status fx_ep_forward(fmoe_ep_forward_args *a)
{
    const int64_t m = a->x->shape[0], k = a->topk_ids->shape[1];
    if (m > 0) {
        fmoe_apply_args ap = {.struct_size = sizeof ap,
                              .err = a->err,
                              .instance = a->instance,
                              .x = a->x,
                              .topk_weights = a->topk_weights,
                              .topk_ids = a->topk_ids,
                              .out = a->out,
                              .stream = a->stream};
        fmoe_status st = a->method->apply(&ap);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    if (FMOE_HAS_FIELD(a, load_recorded) && a->load_counts) {
        const int32_t *ids = a->topk_ids->data;
        for (int64_t i = 0; i < m * k; i++)
            if (ids[i] >= 0 && (uint32_t)ids[i] < a->num_global_experts)
                a->load_counts[ids[i]]++;
        a->load_recorded = 1;
    }
    return FMOE_STATUS_OK;
}

static const fmoe_ep_ops fx_ep = {.struct_size = sizeof fx_ep,
                                  .unique_id = fx_ep_unique_id,
                                  .group_create = fx_ep_group_create,
                                  .group_destroy = fx_ep_group_destroy,
                                  .forward = fx_ep_forward};
#endif

static fmoe_status fx_probe(fmoe_probe_args *a)
{
#ifdef FIXTURE_PROBE_FAIL
    return ((const fx_state *)a->state)
        ->ref.host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "fixture probe fails on purpose");
#endif
    if (a->capacity < 1) /* conform's abi/probe-no-room */
        return FMOE_STATUS_OK;
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
#ifndef FIXTURE_NO_DEVICE
    snprintf(r->reason, sizeof r->reason, "options: %s", ((const fx_state *)a->state)->options);
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
#if defined(FIXTURE_SCALES)
    a->method = &fixture_scales_method;
#elif defined(FIXTURE_VARIANT_METHOD)
    pthread_once(&fx_variant_once, fx_variant_init);
    a->method = &fx_variant_method;
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
    .table =
        {
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
#ifdef FIXTURE_EP
            .ep = &fx_ep,
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
#if defined(FIXTURE_DEVICE)
    /* Run through conform, so every rule of the entry holds: args with
     * room for `plugin`, a host of this major with alloc/free. */
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_entry_args, plugin) || !a->host)
        return FMOE_STATUS_INVALID_ARGUMENT;
    const fmoe_host *h = a->host;
    if (h->abi_major != FIXTURE_ABI_MAJOR || h->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_host, free))
        return h->struct_size >= FMOE_STRUCT_SIZE_UPTO(fmoe_host, error_set) && h->error_set
                   ? h->error_set(a->err, FMOE_STATUS_ABI_MISMATCH, "fixture speaks ABI %d.x, the host %u.%u",
                                  FIXTURE_ABI_MAJOR, h->abi_major, h->abi_minor)
                   : FMOE_STATUS_ABI_MISMATCH;
#elif defined(FIXTURE_ENTRY_CHECKS_MAJOR)
    /* A well-behaved plugin of another major refuses in its entry. */
    if (a->host->abi_major != FIXTURE_ABI_MAJOR)
        return a->host->error_set(a->err, FMOE_STATUS_ABI_MISMATCH, "fixture speaks ABI %d.x, the host %u.%u",
                                  FIXTURE_ABI_MAJOR, a->host->abi_major, a->host->abi_minor);
#endif
    a->plugin = &fx.table;
    return FMOE_STATUS_OK;
}
