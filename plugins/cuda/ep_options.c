/*
 * plugins/cuda/ep_options.c - the EP options of the cuda plugin (ep.h):
 * defaults and parsing, and the transport a group gets from ep_transport
 * and its LSA team. Pure C (tests/cuda/test_cuda_options.c checks them
 * against the manifest, test_cuda_ep_transport.c the values and the pick).
 */
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/ep.h"
#include "plugins/cuda/ep_api.h"

#define TIMEOUT_DEFAULT_MS 30000u
#define TIMEOUT_MAX_MS     3600000u

void fmcu_ep_options_default(fmcu_ep_options *o)
{
    snprintf(o->nccl_library, sizeof o->nccl_library, "libnccl.so.2");
    o->timeout_ms = TIMEOUT_DEFAULT_MS;
    o->transport = FMCU_EP_TRANSPORT_AUTO;
}

const char *fmcu_ep_transport_name(int32_t t)
{
    return t == FMCU_EP_TRANSPORT_LSA ? "lsa" : t == FMCU_EP_TRANSPORT_COLLECTIVE ? "collective" : "auto";
}

int fmcu_ep_transport_pick(int32_t want, uint32_t lsa_ranks, uint32_t size, int32_t *out, char *why, size_t cap)
{
    if (lsa_ranks < 1 || lsa_ranks > size) {
        snprintf(why, cap, "EP group: NCCL reports %u ranks in this rank's NVLink (LSA) team of a group of %u",
                 lsa_ranks, size);
        return -1;
    }
    switch (want) {
    case FMCU_EP_TRANSPORT_AUTO:
        *out = lsa_ranks == size ? FMCU_EP_TRANSPORT_LSA : FMCU_EP_TRANSPORT_COLLECTIVE;
        return 0;
    case FMCU_EP_TRANSPORT_LSA:
        if (lsa_ranks != size) {
            snprintf(why, cap,
                     "EP group: ep_transport=lsa writes peers' memory directly and needs every rank in this rank's "
                     "NVLink domain; %u of the %u ranks are (across nodes use ep_transport=collective or auto, "
                     "docs/EP.md)",
                     lsa_ranks, size);
            return -1;
        }
        *out = want;
        return 0;
    case FMCU_EP_TRANSPORT_COLLECTIVE:
        *out = want;
        return 0;
    default:
        snprintf(why, cap, "EP group: transport %d is not one of auto, lsa, collective", want);
        return -1;
    }
}

int fmcu_ep_options_set(fmcu_ep_options *o, const char *name, const char *value, char *why, size_t cap)
{
    if (strcmp(name, "nccl_library") == 0) {
        if (!value[0] || strlen(value) >= sizeof o->nccl_library) {
            snprintf(why, cap, "option 'nccl_library': expected a library name or path of 1..%zu bytes",
                     sizeof o->nccl_library - 1);
            return -1;
        }
        snprintf(o->nccl_library, sizeof o->nccl_library, "%s", value);
        return 1;
    }
    if (strcmp(name, "ep_timeout_ms") == 0) {
        long long v;
        if (fmoe_option_parse_int(value, 1, TIMEOUT_MAX_MS, &v) != 0) {
            snprintf(why, cap, "option 'ep_timeout_ms': expected an integer from 1 to %u, got '%s'", TIMEOUT_MAX_MS,
                     value);
            return -1;
        }
        o->timeout_ms = (unsigned)v;
        return 1;
    }
    if (strcmp(name, "ep_transport") == 0) {
        static const int32_t kinds[] = {FMCU_EP_TRANSPORT_AUTO, FMCU_EP_TRANSPORT_LSA, FMCU_EP_TRANSPORT_COLLECTIVE};
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (strcmp(value, fmcu_ep_transport_name(kinds[i])) == 0) {
                o->transport = kinds[i];
                return 1;
            }
        snprintf(why, cap, "option 'ep_transport': expected auto, lsa or collective, got '%s'", value);
        return -1;
    }
    return 0;
}
