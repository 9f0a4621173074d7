/*
 * plugins/rocm/plugin.c - entry point, probe and query of the AMD Instinct
 * backend (docs/ROCM.md).
 *
 * The probe loads the HIP runtime with dlopen (hip_runtime.h), so the
 * plugin loads everywhere and reports "no AMD GPU" with the reason where
 * there is none. The compute path (HIP kernels) is not written yet: every
 * device is reported unavailable and every query is refused, saying so.
 * The host logic the kernels will use (fnuz.h, shuffle.h, sorting.h,
 * expert_mask.h) is built and unit-tested (tests/rocm).
 *
 * Options: none yet; init refuses any it is given.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/plugin.h"
#include "plugins/rocm/probe.h"

typedef struct rocm_state {
    const fmoe_host *host;
} rocm_state;

static fmoe_status rocm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    if (a->n_options > 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "option '%s': the rocm plugin declares no options (docs/ROCM.md)",
                            a->options[0] && a->options[0]->key ? a->options[0]->key : "?");
    rocm_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    st->host = h;
    a->state = st;
    return FMOE_STATUS_OK;
}

static void rocm_shutdown(void *state)
{
    rocm_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status rocm_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    fmro_hip_api api;
    char why[256];
    int loaded = fmro_hip_load(fmro_hip_library_names, &api, why, sizeof why) == 0;
    a->count = fmro_probe_reports(loaded ? &api : NULL, why, a->reports, a->capacity);
    return FMOE_STATUS_OK;
}

static fmoe_status rocm_query(fmoe_query_args *a)
{
    if (a->device_kind != FMOE_DEVICE_ROCM)
        snprintf(a->reason, sizeof a->reason, "runs on AMD GPUs only (ROCm); and its %s", FMRO_NOT_IMPLEMENTED);
    else
        snprintf(a->reason, sizeof a->reason, "%.60s: %s", a->scheme_key ? a->scheme_key : "?", FMRO_NOT_IMPLEMENTED);
    return FMOE_STATUS_UNSUPPORTED;
}

static const fmoe_plugin rocm_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "rocm",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = rocm_init,
    .probe = rocm_probe,
    .query = rocm_query,
    .shutdown = rocm_shutdown,
};

FMOE_DEFINE_PLUGIN_ENTRY(rocm_plugin)
