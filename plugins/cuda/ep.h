/*
 * plugins/cuda/ep.h - expert parallelism in the CUDA plugin: the
 * fmoe_ep_ops table (plugin ABI 1.3, docs/EP.md) over the transport of
 * ep_api.h, and its three options:
 *
 *   nccl_library    string  the NCCL shared library to dlopen
 *                           ("libnccl.so.2": the loader's search path)
 *   ep_timeout_ms   int     the bound of every wait on peers (joining,
 *                           dispatch, combine), 1..3600000
 *   ep_transport    enum    auto | lsa | collective: how tokens move
 *                           (ep_api.h); auto picks lsa when every rank is
 *                           in this rank's NVLink domain, else collective
 */
#ifndef FMOE_PLUGIN_CUDA_EP_H
#define FMOE_PLUGIN_CUDA_EP_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/plugin.h"

typedef struct fmcu_ep_options {
    char nccl_library[512];
    unsigned timeout_ms;
    int transport; /* FMCU_EP_TRANSPORT_* */
} fmcu_ep_options;

void fmcu_ep_options_default(fmcu_ep_options *o);
/* 1 when `name` is one of these options and was set, 0 when it is not one
 * of them, -1 with why for a bad value. */
int fmcu_ep_options_set(fmcu_ep_options *o, const char *name, const char *value, char *why, size_t cap);

struct fmcu_ep;

/* A plugin's own forward of a whole EP layer (megamoe: dispatch, experts
 * and combine fused over the window's extra region), tried before the
 * transport's dispatch -> apply -> combine. `ep` is the group's transport
 * (ep_api.h), the rest the checked arguments of fmoe_ep_ops.forward.
 * FMOE_STATUS_UNSUPPORTED, with nothing queued and no error set: not this
 * layer (another plugin's method, a path without the fused form, a
 * placement it does not take); the transport's path runs instead. */
typedef struct fmcu_ep_fused {
    /* extra window bytes a group of these sizes needs (fmcu_ep_params) */
    uint64_t (*extra_bytes)(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k);
    fmoe_status (*forward)(struct fmcu_ep *ep, fmoe_ep_forward_args *a);
} fmcu_ep_fused;

/* What the ops take from the plugin state the host hands them: the host
 * table and the options above. ep.c (the ops) and the transport under it
 * know nothing else of a plugin, so every plugin whose methods run on these
 * groups compiles them in (cuda; megamoe: docs/MEGAMOE.md "Expert
 * parallelism") and defines this for its own state type. */
typedef struct fmcu_ep_env {
    const fmoe_host *host;
    const fmcu_ep_options *opt;
    const fmcu_ep_fused *fused; /* the plugin's own forward, or NULL: the transport's path only */
} fmcu_ep_env;
fmcu_ep_env fmcu_ep_env_of(const void *plugin_state);

/* The table a plugin hands the host (fmoe_plugin.ep). */
extern const fmoe_ep_ops fmcu_ep_ops;

#endif
