/*
 * plugins/rocm/plugin.c - entry point, init, probe, query and device
 * memory of the AMD Instinct backend (docs/ROCM.md), and of its NVIDIA
 * test build (FMRO_TEST_CUDA: the same sources, plugin "rocm_cuda" on
 * CUDA devices, so the conformance suite runs the kernels on an H100).
 *
 * The plugin links no GPU runtime. The AMD build probes through the HIP
 * runtime by dlopen (hip_runtime.h) and loads its kernel library
 * (kernel_lib.h) in init only when the runtime sees a GPU, so on a
 * machine without one nothing of ROCm is initialized. The test build
 * loads its kernel library (static cudart inside) in init and probes
 * through it.
 *
 * Options: none; init refuses any it is given.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/plugin.h"
#include "plugins/rocm/kernel_lib.h"
#include "plugins/rocm/layout.h"
#include "plugins/rocm/probe.h"
#include "plugins/rocm/rocm_plugin.h"

static void load_kernels(fmro_state *st)
{
#if defined(FMRO_HAVE_KERNELS)
#if !defined(FMRO_TEST_CUDA)
    /* Only where the HIP runtime sees a device: a CI machine with the
     * runtime installed and no GPU never initializes it further. */
    fmro_hip_api api;
    int count = 0;
    if (fmro_hip_load(fmro_hip_library_names, &api, st->kernels_why, sizeof st->kernels_why) != 0)
        return;
    if (api.get_device_count(&count) != FMRO_HIP_SUCCESS || count <= 0) {
        snprintf(st->kernels_why, sizeof st->kernels_why, "no AMD GPU: the kernel library was not loaded");
        return;
    }
#endif
    st->k = fmro_kernel_lib_load(FMRO_KERNELS_FILE, st->kernels_why, sizeof st->kernels_why);
#else
    snprintf(st->kernels_why, sizeof st->kernels_why, "%s", FMRO_NO_KERNELS);
#endif
}

static fmoe_status rocm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    if (a->n_options > 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "option '%s': the " FMRO_PLUGIN_NAME " plugin declares no options (docs/ROCM.md)",
                            a->options[0] && a->options[0]->key ? a->options[0]->key : "?");
    fmro_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    load_kernels(st);
    a->state = st;
    return FMOE_STATUS_OK;
}

static void rocm_shutdown(void *state)
{
    fmro_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

#if defined(FMRO_TEST_CUDA)
/* The test build: CUDA devices through the kernel library. */
static fmoe_status rocm_probe(fmoe_probe_args *a)
{
    fmro_state *st = a->state;
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    int count = 0;
    char why[256] = "";
    fmoe_device_report *r = a->reports[0];
    if (!st->k || st->k->device_count(&count, why, sizeof why) != 0 || count <= 0) {
        r->kind = FMOE_DEVICE_CUDA;
        r->available = 0;
        r->score = 0;
        snprintf(r->name, sizeof r->name, "no NVIDIA GPU");
        snprintf(r->reason, sizeof r->reason, "no NVIDIA GPU: %.200s",
                 !st->k   ? st->kernels_why
                 : why[0] ? why
                          : "the CUDA runtime sees no device");
        a->count = 1;
        return FMOE_STATUS_OK;
    }
    uint32_t n = (uint32_t)count < a->capacity ? (uint32_t)count : a->capacity;
    for (uint32_t i = 0; i < n; i++) {
        fmro_device_info info;
        r = a->reports[i];
        r->kind = FMOE_DEVICE_CUDA;
        r->index = (int32_t)i;
        if (st->k->device_info((int)i, &info, why, sizeof why) != 0) {
            r->available = 0;
            r->score = 0;
            snprintf(r->reason, sizeof r->reason, "%.200s", why);
            continue;
        }
        r->available = 1;
        r->score = FMRO_PROBE_SCORE;
        snprintf(r->name, sizeof r->name, "%s", info.name);
        snprintf(r->arch, sizeof r->arch, "%.40s (wave %d)", info.arch, info.warp_size);
        snprintf(r->id, sizeof r->id, "%s", info.pci_id);
        snprintf(r->driver, sizeof r->driver, "CUDA runtime %d, driver %d", info.runtime_version, info.driver_version);
        snprintf(r->reason, sizeof r->reason,
                 "NVIDIA test build of the rocm plugin's HIP sources (non-MFMA path), for conformance only");
        if (FMOE_HAS_FIELD(r, memory_bytes))
            r->memory_bytes = info.memory_bytes;
    }
    a->count = n;
    return FMOE_STATUS_OK;
}
#else
static fmoe_status rocm_probe(fmoe_probe_args *a)
{
    fmro_state *st = a->state;
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    fmro_hip_api api;
    char why[256];
    int loaded = fmro_hip_load(fmro_hip_library_names, &api, why, sizeof why) == 0;
    a->count = fmro_probe_reports(loaded ? &api : NULL, why, st->k ? NULL : st->kernels_why, a->reports, a->capacity);
    return FMOE_STATUS_OK;
}
#endif

static fmoe_status rocm_query(fmoe_query_args *a)
{
    fmro_state *st = a->state;
    char why[200];
    if (a->device_kind != FMRO_DEVICE_KIND) {
        snprintf(a->reason, sizeof a->reason, "runs on %s GPUs only",
                 FMRO_DEVICE_KIND == FMOE_DEVICE_ROCM ? "AMD (ROCm)" : "NVIDIA (the test build)");
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (a->ep_group) {
        snprintf(a->reason, sizeof a->reason, "no EP groups: EP is mask mode on one device per rank");
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (!st->k) {
        snprintf(a->reason, sizeof a->reason, "%.250s", st->kernels_why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (fmro_check_config(a->config, a->scheme, why, sizeof why) != 0) {
        snprintf(a->reason, sizeof a->reason, "%.60s: %.190s", a->scheme_key ? a->scheme_key : "?", why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    a->method = &fmro_method;
    a->score = FMRO_SCORE;
    snprintf(a->reason, sizeof a->reason, "%s", "non-MFMA 2-stage kernels (moe_sorting, fnuz fp8, 16x16 pre-shuffle)");
    return FMOE_STATUS_OK;
}

/* Device memory for callers without the runtime (docs/PLUGIN-ABI.md §6a). */
static fmoe_status memory_refuse(const fmro_state *st, fmoe_error *err, int32_t kind)
{
    if (kind != FMRO_DEVICE_KIND)
        return st->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "device kind %d is not this plugin's", kind);
    return st->host->error_set(err, FMOE_STATUS_UNSUPPORTED, "%s", st->kernels_why);
}

static fmoe_status mem_alloc(fmoe_memory_args *a)
{
    fmro_state *st = a->state;
    char why[256];
    if (!st->k || a->device_kind != FMRO_DEVICE_KIND)
        return memory_refuse(st, a->err, a->device_kind);
    if (st->k->alloc(a->device_index, &a->ptr, a->bytes, why, sizeof why) != 0)
        return st->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "%s", why);
    return FMOE_STATUS_OK;
}

static void mem_free(fmoe_memory_args *a)
{
    fmro_state *st = a->state;
    if (st->k && a->ptr && a->device_kind == FMRO_DEVICE_KIND)
        st->k->release(a->device_index, a->ptr);
}

static fmoe_status mem_copy(fmoe_copy_args *a)
{
    fmro_state *st = a->state;
    char why[256];
    if (!st->k || a->device_kind != FMRO_DEVICE_KIND)
        return memory_refuse(st, a->err, a->device_kind);
    if (a->direction != FMOE_COPY_TO_DEVICE && a->direction != FMOE_COPY_FROM_DEVICE)
        return st->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "copy direction %d", a->direction);
    if (st->k->copy(a->device_index, a->direction == FMOE_COPY_TO_DEVICE, a->dst, a->src, a->bytes, a->stream, why,
                    sizeof why) != 0)
        return st->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static fmoe_status mem_sync(fmoe_sync_args *a)
{
    fmro_state *st = a->state;
    char why[256];
    if (!st->k || a->device_kind != FMRO_DEVICE_KIND)
        return memory_refuse(st, a->err, a->device_kind);
    if (st->k->synchronize(a->device_index, a->stream, why, sizeof why) != 0)
        return st->host->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static const fmoe_device_memory rocm_memory = {
    .struct_size = sizeof(fmoe_device_memory),
    .alloc = mem_alloc,
    .free = mem_free,
    .copy = mem_copy,
    .synchronize = mem_sync,
};

static const fmoe_plugin rocm_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = FMRO_PLUGIN_NAME,
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = rocm_init,
    .probe = rocm_probe,
    .query = rocm_query,
    .shutdown = rocm_shutdown,
    .memory = &rocm_memory,
};

FMOE_DEFINE_PLUGIN_ENTRY(rocm_plugin)
