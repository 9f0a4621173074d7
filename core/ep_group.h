/*
 * core/ep_group.h - an EP group as the core holds it (fusedmoe.h, "Expert
 * parallelism across devices"): the plugin that serves it, the plugin's own
 * group, and the options every bound layer is checked against. Shared by
 * ep_group.c and layer_ep.c.
 */
#ifndef FMOE_CORE_EP_GROUP_H
#define FMOE_CORE_EP_GROUP_H

#include "core/context.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"

struct fmoe_ep_group {
    fmoe_context *ctx;
    const fmoe_plugin_record *plugin;
    const fmoe_ep_ops *ops;
    void *group;                /* the plugin's */
    fmoe_ep_group_options opts; /* resolved; comm and unique_id cleared */
    uint64_t expert_capacity;   /* fmoe_ep_group_args.expert_capacity */
};

/* The plugin's EP table when the host may use it (negotiated minor >= 3,
 * the field present, every mandatory slot set), else NULL. */
const fmoe_ep_ops *fmoe_ep_ops_of(const fmoe_plugin_record *p);

#endif
