/*
 * plugins/megamoe/plugin.c - entry point, options, probe and query of the
 * MegaMoE backend (docs/MEGAMOE.md).
 *
 * Probe: compute capability 10.x is the SM100 path (DeepGEMM's design:
 * tcgen05 block-scaled FP8 x FP4 MMA), 9.0 the SM90 path (FP4 decoded to
 * FP8 in registers, wgmma); without a driver or device one slot, score 0,
 * with the runtime's reason. Query: neither kernel exists yet, so every
 * layer is refused with the reason (the first rule it breaks, else "not
 * implemented yet"): the plugin never claims a layer it cannot run.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/device.h"
#include "plugins/megamoe/megamoe.h"

#define ARCH_SCORE 100

static fmoe_status mm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    uint32_t ring = 0;
    for (uint32_t i = 0; i < a->n_options; i++) {
        const fmoe_option *o = a->options[i];
        long long v = 0;
        if (strcmp(o->key, "ring_tokens") == 0 && fmoe_option_parse_int(o->value, 0, 1ll << 30, &v) == 0 &&
            v % MM_TOKEN_ALIGN == 0) {
            ring = (uint32_t)v;
            continue;
        }
        if (strcmp(o->key, "ring_tokens") == 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "option 'ring_tokens' = \"%s\": expected 0 (our rule) or a multiple of %u up to 2^30",
                                o->value, MM_TOKEN_ALIGN);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "unknown option '%s' (the megamoe plugin takes: ring_tokens)", o->key);
    }
    mm_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    st->host = h;
    st->ring_tokens = ring;
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
        return "SM100 path (tcgen05 FP8 x FP4)";
    if (major == 9 && minor == 0)
        return "SM90 path (FP4 decoded to FP8, wgmma)";
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
    int count = mm_device_count(why, sizeof why);
    if (count <= 0) {
        no_device(a->reports[0], why);
        a->count = 1;
        return FMOE_STATUS_OK;
    }
    uint32_t n = (uint32_t)count < a->capacity ? (uint32_t)count : a->capacity;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_device_report *r = a->reports[i];
        mm_device dev;
        r->kind = FMOE_DEVICE_CUDA;
        r->index = (int32_t)i;
        if (mm_device_query((int)i, &dev, why, sizeof why) != 0) {
            r->available = 0;
            r->score = 0;
            snprintf(r->name, sizeof r->name, "CUDA device %u", i);
            snprintf(r->reason, sizeof r->reason, "%s", why);
            continue;
        }
        const char *path = path_of(dev.major, dev.minor);
        snprintf(r->name, sizeof r->name, "%.127s", dev.name);
        snprintf(r->arch, sizeof r->arch, "sm_%d%d (%d SMs)", dev.major, dev.minor, dev.sms);
        snprintf(r->id, sizeof r->id, "%s", dev.pci_id);
        r->available = path != NULL;
        r->score = path ? ARCH_SCORE : 0;
        if (path)
            snprintf(r->reason, sizeof r->reason, "%s; its kernel is not implemented yet (every layer is refused)",
                     path);
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
    mm_dims d;
    if (a->device_kind != FMOE_DEVICE_CUDA) {
        snprintf(a->reason, sizeof a->reason, "MegaMoE runs on CUDA devices only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (mm_layer_supported(a->config, a->scheme, st->ring_tokens, &d, a->reason, sizeof a->reason) != 0)
        return FMOE_STATUS_UNSUPPORTED;
    snprintf(a->reason, sizeof a->reason,
             "MegaMoE: the layer fits the kernel's contract, but the SM100 and SM90 kernels are not implemented yet");
    return FMOE_STATUS_UNSUPPORTED;
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
};

FMOE_DEFINE_PLUGIN_ENTRY(mm_plugin)
