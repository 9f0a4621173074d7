/*
 * plugins/cuda/plugin.c - entry point, probe and query of the CUDA backend.
 *
 * Probe asks the statically linked CUDA runtime for the devices. Without a
 * driver or a GPU it reports one CUDA slot, unavailable, score 0, with the
 * runtime's reason: never an error, never an abort (plugin ABI R7).
 */
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/cuda_plugin.h"
#include "plugins/cuda/layout.h"
#include "plugins/cuda/memory_table.h"

#define DEVICE_SCORE 100 /* above the reference (1) and portable CPU backends */
/* MXFP4 x FP8 here is the unfused composition (issue 36): the megamoe plugin
 * serves the same scheme at the device score and is the one to pick when both
 * serve; this stays the answer where megamoe refuses, and `--backend cuda`
 * names it for comparison (docs/CUDA.md "MXFP4 x FP8"). */
#define MX_A8_SCORE 90

/* The build's code objects: sm_90a, and sm_100a unless built with
 * -Dsm100=false (meson defines FMCU_SM100). */
#ifndef FMCU_SM100
#define FMCU_SM100 1
#endif

int fmcu_arch_supported(int major, int minor)
{
    (void)minor;
    return major == 9 || (FMCU_SM100 && major == 10);
}

/* Options (options.h): every one the host passes is parsed here; one not
 * given keeps the plugin's default (a plugin loaded without its manifest
 * gets only the user's options). */
static fmoe_status cuda_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    fmcu_options opt;
    fmcu_ep_options ep_opt;
    char why[256];
    fmcu_options_default(&opt);
    fmcu_ep_options_default(&ep_opt);
    for (uint32_t i = 0; i < a->n_options; i++) {
        const char *k = a->options[i]->key, *v = a->options[i]->value;
        const int ep = fmcu_ep_options_set(&ep_opt, k, v, why, sizeof why);
        if (ep < 0 || (ep == 0 && fmcu_options_set(&opt, k, v, why, sizeof why) != 0))
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    }
    fmcu_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    st->opt = opt;
    st->ep_opt = ep_opt;
    a->state = st;
    return FMOE_STATUS_OK;
}

static void cuda_shutdown(void *state)
{
    fmcu_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static void versions_text(char *buf, size_t cap)
{
    int drv, rt;
    fmcu_versions(&drv, &rt);
    snprintf(buf, cap, "driver %d.%d, runtime %d.%d", drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
}

static fmoe_status cuda_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    int count = 0;
    char why[200] = "the CUDA runtime sees no device";
    if (fmcu_device_count(&count, why, sizeof why) != 0 || count == 0) {
        fmoe_device_report *r = a->reports[0];
        r->kind = FMOE_DEVICE_CUDA;
        r->index = 0;
        r->available = 0;
        r->score = 0;
        snprintf(r->name, sizeof r->name, "no CUDA device");
        snprintf(r->arch, sizeof r->arch, "none");
        snprintf(r->id, sizeof r->id, "none");
        versions_text(r->driver, sizeof r->driver);
        snprintf(r->reason, sizeof r->reason, "%s", why);
        a->count = 1;
        return FMOE_STATUS_OK;
    }
    uint32_t n = (uint32_t)count < a->capacity ? (uint32_t)count : a->capacity;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_device_report *r = a->reports[i];
        fmcu_device_info info;
        r->kind = FMOE_DEVICE_CUDA;
        r->index = (int32_t)i;
        if (fmcu_device_query((int)i, &info, why, sizeof why) != 0) {
            r->available = 0;
            r->score = 0;
            snprintf(r->name, sizeof r->name, "CUDA device %u", i);
            snprintf(r->reason, sizeof r->reason, "%s", why);
            continue;
        }
        snprintf(r->name, sizeof r->name, "%s", info.name);
        snprintf(r->arch, sizeof r->arch, "sm_%d%d%s (%d SMs)", info.major, info.minor, info.major >= 9 ? "a" : "",
                 info.multiprocessors);
        snprintf(r->id, sizeof r->id, "%s", info.pci_id);
        versions_text(r->driver, sizeof r->driver);
        if (FMOE_HAS_FIELD(r, memory_bytes)) /* an older host's report may end before it */
            r->memory_bytes = info.memory_bytes;
        if (fmcu_arch_supported(info.major, info.minor)) {
            r->available = 1;
            r->score = DEVICE_SCORE;
            snprintf(r->reason, sizeof r->reason, "bf16 and fp8 W8A8 grouped GEMMs (mma.sync), GPU routing");
        } else {
            r->available = 0;
            r->score = 0;
            snprintf(r->reason, sizeof r->reason, "compute capability %d.%d: built for %s only", info.major, info.minor,
                     FMCU_SM100 ? "sm_90a and sm_100a" : "sm_90a (-Dsm100=false)");
        }
    }
    a->count = n;
    return FMOE_STATUS_OK;
}

static fmoe_status cuda_query(fmoe_query_args *a)
{
    if (a->device_kind != FMOE_DEVICE_CUDA) {
        snprintf(a->reason, sizeof a->reason, "runs on CUDA devices only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    char why[200];
    int quant = fmcu_scheme_quant(a->scheme, why, sizeof why);
    if (quant < 0) {
        snprintf(a->reason, sizeof a->reason, "%s: %s", a->scheme_key, why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    const fmoe_layer_config *cfg = a->config;
    uint32_t tp = cfg->tp_size ? cfg->tp_size : 1;
    uint32_t inter = cfg->intermediate_size / tp;
    if (fmcu_check_config(cfg, a->scheme, cfg->hidden_size, inter, why, sizeof why) != 0) {
        snprintf(a->reason, sizeof a->reason, "%s", why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    const int on_group = FMOE_HAS_FIELD(a, ep_group) && a->ep_group != NULL;
    a->method = fmcu_method_on_device(quant, on_group, a->device_index, cfg->hidden_size, inter);
    a->score = quant == FMCU_Q_MXFP4_A8 ? MX_A8_SCORE : DEVICE_SCORE;
    snprintf(a->reason, sizeof a->reason, "%s: grouped mma.sync GEMMs, fused activation, GPU routing", a->method->name);
    return FMOE_STATUS_OK;
}

/* What the EP ops (ep.c) take from this plugin's state. */
fmcu_ep_env fmcu_ep_env_of(const void *plugin_state)
{
    const fmcu_state *st = plugin_state;
    return (fmcu_ep_env){st->host, &st->ep_opt, NULL}; /* no fused forward: dispatch -> apply -> combine */
}

static const fmoe_plugin cuda_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "cuda",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = FMCU_BUILD_ID,
    .init = cuda_init,
    .probe = cuda_probe,
    .query = cuda_query,
    .shutdown = cuda_shutdown,
    .memory = &fmcu_memory_table, /* memory_table.c: shared with the megamoe plugin */
    .ep = &fmcu_ep_ops,
};

FMOE_DEFINE_PLUGIN_ENTRY(cuda_plugin)
