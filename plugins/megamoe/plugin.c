/*
 * plugins/megamoe/plugin.c - entry point, options, probe and query of the
 * MegaMoE backend (docs/MEGAMOE.md).
 *
 * Probe: compute capability 9.0 is the SM90 path, which runs (e2m1
 * decoded to e4m3 in the GEMM, FP8 wgmma, a few launches per forward;
 * sm90_forward.cu; on one device or an EP group, whose ops and transport
 * are the cuda plugin's, compiled in: fmoe_plugin.ep, with this plugin's
 * fused forward on NVLink groups: ep_fused.c); 10.x the SM100 path (DeepGEMM's design:
 * tcgen05 block-scaled FP8 x FP4 MMA; sm100_forward.cu), built, never run and not served yet; without a
 * driver or device one slot, score 0, with the runtime's reason. Query
 * (serve.c mm_choose_path): the first rule a layer breaks, then the
 * device's path; it hands out the method on 9.0, and on 10.x only with the
 * option sm100_unverified, so by default the plugin never claims a layer
 * it has not run. Memory (ABI 1.1): the CUDA runtime's, lent
 * to callers that do not link it (conform, bench, run); timing (ABI 1.2:
 * graph replays, the copy rate; 1.4: the read rate) for bench (the cuda
 * plugin's timing.cu, compiled in).
 */
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/memory_table.h"
#include "plugins/megamoe/device.h"
#include "plugins/megamoe/megamoe.h"
#include "plugins/megamoe/sm90.h"

#define ARCH_SCORE 100

static const mm_device_path device_path = {
    .capability = mm_device_capability,
    .create = mm90_create,
    .forward = mm90_forward,
    .destroy = mm90_destroy,
    .create100 = mm100_create,
    .forward100 = mm100_forward,
    .destroy100 = mm100_destroy,
    .ep_dispatch = mm90_ep_dispatch,
    .ep_experts = mm90_ep_experts,
    .ep_combine = mm90_ep_combine,
};

static fmoe_status mm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    uint32_t ring = 0;
    int sm100 = 0, fused = 1;
    fmcu_ep_options ep_opt;
    fmcu_ep_options_default(&ep_opt);
    for (uint32_t i = 0; i < a->n_options; i++) {
        const fmoe_option *o = a->options[i];
        long long v = 0;
        char why[256];
        const int ep = fmcu_ep_options_set(&ep_opt, o->key, o->value, why, sizeof why);
        if (ep < 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
        if (ep > 0)
            continue;
        if (strcmp(o->key, "ring_tokens") == 0 && fmoe_option_parse_int(o->value, 0, 1ll << 30, &v) == 0 &&
            v % MM_TOKEN_ALIGN == 0) {
            ring = (uint32_t)v;
            continue;
        }
        if (strcmp(o->key, "sm100_unverified") == 0) {
            if (fmoe_option_parse_bool(o->value, &sm100) != 0)
                return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                    "option 'sm100_unverified' = \"%s\": expected true or false", o->value);
            continue;
        }
        if (strcmp(o->key, "ep_fused") == 0) {
            if (fmoe_option_parse_bool(o->value, &fused) != 0)
                return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                    "option 'ep_fused' = \"%s\": expected true or false", o->value);
            continue;
        }
        if (strcmp(o->key, "ring_tokens") == 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "option 'ring_tokens' = \"%s\": expected 0 (our rule) or a multiple of %u up to 2^30",
                                o->value, MM_TOKEN_ALIGN);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "unknown option '%s' (the megamoe plugin takes: ring_tokens, sm100_unverified, ep_fused, "
                            "nccl_library, ep_timeout_ms, ep_transport)",
                            o->key);
    }
    mm_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    st->host = h;
    st->ring_tokens = ring;
    st->path = &device_path;
    st->sm100_unverified = sm100;
    st->ep_fused = fused;
    st->ep_opt = ep_opt;
    a->state = st;
    return FMOE_STATUS_OK;
}

static void mm_shutdown(void *state)
{
    mm_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static const char *path_of(int major, int minor)
{
    if (major == 10)
        return "SM100 path (tcgen05 FP8 x FP4): its kernel is built but has never run; served only with the option "
               "sm100_unverified = true, else not served yet";
    if (major == 9 && minor == 0)
        return "SM90 path (e2m1 decoded to e4m3 in the GEMM, FP8 wgmma; one device or an EP group, whose dispatch "
               "and combine run fused with the GEMMs over NVLink)";
    return NULL;
}

static void no_device(fmoe_device_report *r, const char *why)
{
    r->kind = FMOE_DEVICE_CUDA;
    r->index = 0;
    r->available = 0;
    r->score = 0;
    snprintf(r->name, sizeof r->name, "no CUDA device");
    snprintf(r->arch, sizeof r->arch, "none");
    snprintf(r->id, sizeof r->id, "none");
    snprintf(r->reason, sizeof r->reason, "%s", why);
}

static fmoe_status mm_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    char why[200] = "";
    int count = 0;
    if (fmcu_device_count(&count, why, sizeof why) != 0 || count <= 0) {
        if (count <= 0 && !why[0])
            snprintf(why, sizeof why, "the CUDA runtime sees no device");
        no_device(a->reports[0], why);
        a->count = 1;
        return FMOE_STATUS_OK;
    }
    uint32_t n = (uint32_t)count < a->capacity ? (uint32_t)count : a->capacity;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_device_report *r = a->reports[i];
        fmcu_device_info dev;
        r->kind = FMOE_DEVICE_CUDA;
        r->index = (int32_t)i;
        if (fmcu_device_query((int)i, &dev, why, sizeof why) != 0) {
            r->available = 0;
            r->score = 0;
            snprintf(r->name, sizeof r->name, "CUDA device %u", i);
            snprintf(r->reason, sizeof r->reason, "%s", why);
            continue;
        }
        const char *path = path_of(dev.major, dev.minor);
        snprintf(r->name, sizeof r->name, "%.127s", dev.name);
        snprintf(r->arch, sizeof r->arch, "sm_%d%d (%d SMs)", dev.major, dev.minor, dev.multiprocessors);
        snprintf(r->id, sizeof r->id, "%s", dev.pci_id);
        r->available = path != NULL;
        r->score = path ? ARCH_SCORE : 0;
        if (path)
            snprintf(r->reason, sizeof r->reason, "%s", path);
        else
            snprintf(r->reason, sizeof r->reason, "compute capability %d.%d: MegaMoE has paths for 10.x and 9.0 only",
                     dev.major, dev.minor);
    }
    a->count = n;
    return FMOE_STATUS_OK;
}

static fmoe_status mm_query(fmoe_query_args *a)
{
    const mm_state *st = a->state;
    if (!st)
        return FMOE_STATUS_INTERNAL;
    if (a->device_kind != FMOE_DEVICE_CUDA) {
        snprintf(a->reason, sizeof a->reason, "MegaMoE runs on CUDA devices only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    mm90_plan plan;
    const int path = mm_choose_path(st, a->config, a->scheme, a->device_index, &plan, a->reason, sizeof a->reason);
    if (path != MM_PATH_SM90 && path != MM_PATH_SM100)
        return FMOE_STATUS_UNSUPPORTED;
    a->method = &mm_method;
    a->score = ARCH_SCORE;
    if (path == MM_PATH_SM100) {
        snprintf(a->reason, sizeof a->reason,
                 "MegaMoE SM100 kernel (tcgen05, one persistent launch): never run on hardware, served because "
                 "sm100_unverified = true");
        return FMOE_STATUS_OK;
    }
    snprintf(a->reason, sizeof a->reason,
             "MegaMoE SM90 path: FP8 x MXFP4 mma.sync GEMMs, SwiGLU + requant, combine (%llu MiB workspace, not "
             "fused yet)",
             (unsigned long long)(plan.work_bytes >> 20));
    return FMOE_STATUS_OK;
}

/* What the EP ops (the cuda plugin's ep.c, compiled in) take from this
 * plugin's state. */
fmcu_ep_env fmcu_ep_env_of(const void *plugin_state)
{
    const mm_state *st = plugin_state;
    return (fmcu_ep_env){st->host, &st->ep_opt, st->ep_fused ? &mm_ep_fused : NULL};
}

static const fmoe_plugin mm_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "megamoe",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = mm_init,
    .probe = mm_probe,
    .query = mm_query,
    .shutdown = mm_shutdown,
    .memory = &fmcu_memory_table, /* memory_table.c: shared with the cuda plugin */
    .ep = &fmcu_ep_ops,
};

FMOE_DEFINE_PLUGIN_ENTRY(mm_plugin)
