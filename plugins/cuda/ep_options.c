/*
 * plugins/cuda/ep_options.c - the EP options of the cuda plugin (ep.h):
 * defaults and parsing, pure C (tests/cuda/test_cuda_options.c checks them
 * against the manifest).
 */
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/ep.h"

#define TIMEOUT_DEFAULT_MS 30000u
#define TIMEOUT_MAX_MS     3600000u

void fmcu_ep_options_default(fmcu_ep_options *o)
{
    snprintf(o->nccl_library, sizeof o->nccl_library, "libnccl.so.2");
    o->timeout_ms = TIMEOUT_DEFAULT_MS;
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
    return 0;
}
