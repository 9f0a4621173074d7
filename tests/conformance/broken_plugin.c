/*
 * tests/conformance/broken_plugin.c - one source, several plugins that are
 * wrong on purpose, each in one way `fusedmoe conform` must catch
 * (tests/conformance/meson.build lists them with the case that must fail):
 *
 *   BROKEN_WRONG_RESULTS  apply scales the routing weights by 1.25
 *   BROKEN_WRITE_PAST     apply writes one byte past the end of out
 *   BROKEN_STRUCT_SIZE    probe fills memory_bytes whatever struct_size the
 *                         host gave the report (an older host's is shorter)
 *   BROKEN_OVERCLAIM      query accepts every layer, create refuses all but silu
 *   BROKEN_EXPORTS        exports a second symbol (built without the version script)
 *   BROKEN_ONE_ELEMENT    one element of every output of >= 2048 elements is
 *                         3x the suite's bound off, the rest exact (caught
 *                         without a manifest [[tolerance]], passed with one:
 *                         test_tolerance.py)
 *
 * Otherwise it is the reference method (plugins/reference), served on the CPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/reference/reference.h"

#ifndef BROKEN_NAME
#error "BROKEN_NAME must be defined"
#endif

static fmoe_method broken_method;

#ifdef BROKEN_WRONG_RESULTS
static fmoe_status broken_apply(fmoe_apply_args *a)
{
    const fmoe_tensor *w = a->topk_weights;
    size_t n = (size_t)(w->shape[0] * w->shape[1]);
    float *scaled = malloc((n + 1) * sizeof(float));
    if (!scaled)
        return FMOE_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        scaled[i] = ((const float *)w->data)[i] * 1.25f;
    fmoe_tensor sw = *w;
    sw.data = scaled;
    fmoe_apply_args b = *a;
    b.topk_weights = &sw;
    fmoe_status st = ref_method_unquantized.apply(&b);
    free(scaled);
    return st;
}
#endif

#ifdef BROKEN_WRITE_PAST
static size_t dtype_bytes(fmoe_dtype d)
{
    return d == FMOE_DTYPE_F32 ? 4 : 2;
}

static fmoe_status broken_apply(fmoe_apply_args *a)
{
    fmoe_status st = ref_method_unquantized.apply(a);
    const fmoe_tensor *o = a->out;
    size_t bytes = (size_t)(o->shape[0] * o->shape[1]) * dtype_bytes(o->dtype);
    ((unsigned char *)o->data)[bytes] = 0x5A;
    return st;
}
#endif

#ifdef BROKEN_ONE_ELEMENT
#include "fusedmoe/kit/half.h"

static fmoe_status broken_apply(fmoe_apply_args *a)
{
    fmoe_status st = ref_method_unquantized.apply(a);
    const fmoe_tensor *o = a->out;
    if (st != FMOE_STATUS_OK || o->shape[0] * o->shape[1] < 2048)
        return st;
    /* 3x the suite's bound for the output dtype (atol = rtol: f32 1e-4,
     * f16 3e-3, bf16 2e-2): one element only, so the NMSE gate still holds. */
    double bound = o->dtype == FMOE_DTYPE_F32 ? 1e-4 : o->dtype == FMOE_DTYPE_F16 ? 3e-3 : 2e-2;
    float x = fmoe_load_float(o->data, o->dtype, 0);
    fmoe_store_float(o->data, o->dtype, 0, (float)(x + 3.0 * bound * (1.0 + fabs(x))));
    return st;
}
#endif

#ifdef BROKEN_OVERCLAIM
static fmoe_status broken_create(fmoe_create_args *a)
{
    if (a->config->activation != FMOE_ACT_SILU)
        return FMOE_STATUS_UNSUPPORTED;
    return ref_method_unquantized.create(a);
}
#endif

static fmoe_status br_init(fmoe_init_args *a)
{
    ref_state *st = a->host->alloc(a->host->ctx, sizeof *st, 0);
    if (!st)
        return a->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = a->host;
    broken_method = ref_method_unquantized;
#if defined(BROKEN_WRONG_RESULTS) || defined(BROKEN_WRITE_PAST) || defined(BROKEN_ONE_ELEMENT)
    broken_method.apply = broken_apply;
#endif
#ifdef BROKEN_OVERCLAIM
    broken_method.create = broken_create;
#endif
    a->state = st;
    return FMOE_STATUS_OK;
}

static void br_shutdown(void *state)
{
    ref_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status br_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = 1;
    snprintf(r->name, sizeof r->name, "broken cpu");
    snprintf(r->id, sizeof r->id, "cpu");
#ifdef BROKEN_STRUCT_SIZE
    r->memory_bytes = 1u << 30; /* without FMOE_HAS_FIELD(r, memory_bytes) */
#else
    if (FMOE_HAS_FIELD(r, memory_bytes))
        r->memory_bytes = 1u << 30;
#endif
    a->count = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status br_query(fmoe_query_args *a)
{
#ifndef BROKEN_OVERCLAIM
    if (a->scheme->w_strategy != FMOE_QSTRATEGY_NONE || a->device_kind != FMOE_DEVICE_CPU) {
        snprintf(a->reason, sizeof a->reason, "serves unquantized layers on the CPU only");
        return FMOE_STATUS_UNSUPPORTED;
    }
#endif
    a->method = &broken_method;
    a->score = 1;
    snprintf(a->reason, sizeof a->reason, "broken on purpose");
    return FMOE_STATUS_OK;
}

static const fmoe_plugin br_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = BROKEN_NAME,
    .vendor = "fusedmoe tests",
    .version = "0.0.1",
    .build_id = "broken",
    .init = br_init,
    .probe = br_probe,
    .query = br_query,
    .shutdown = br_shutdown,
};

#ifdef BROKEN_EXPORTS
/* A second exported function: a symbol clash waiting to happen. */
FMOE_PLUGIN_EXPORT int broken_helper(void);
FMOE_PLUGIN_EXPORT int broken_helper(void)
{
    return 42;
}
#endif

FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *a)
{
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_entry_args, plugin) || !a->host)
        return FMOE_STATUS_INVALID_ARGUMENT;
    const fmoe_host *h = a->host;
    if (h->abi_major != FMOE_ABI_MAJOR || h->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_host, free))
        return h->struct_size >= FMOE_STRUCT_SIZE_UPTO(fmoe_host, error_set) && h->error_set
                   ? h->error_set(a->err, FMOE_STATUS_ABI_MISMATCH, "broken plugin speaks ABI %d.x", FMOE_ABI_MAJOR)
                   : FMOE_STATUS_ABI_MISMATCH;
    a->plugin = &br_plugin;
    return FMOE_STATUS_OK;
}
