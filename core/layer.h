/*
 * core/layer.h - the layer object: its config, the method the registry
 * chose, the parameters the method declared (host buffers owned by the
 * core), and the per-(parameter, expert, shard) record of what was loaded.
 */
#ifndef FMOE_CORE_LAYER_H
#define FMOE_CORE_LAYER_H

#include "core/context.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"

#define FMOE_LAYER_CREATED   0
#define FMOE_LAYER_FINALIZED 1

typedef struct fmoe_param_slot {
    fmoe_param_desc desc; /* copy; desc.name points at `name` */
    char *name;
    fmoe_tensor tensor; /* host buffer, contiguous */
    size_t nbytes;
    /* Loaded bitmap: n_experts x n_shards, 1 = loaded. n_experts is 1 for
     * parameters without an expert axis; n_shards is 2 for a gated W13
     * parameter with a shard axis (w1, w3 halves), else 1. */
    uint8_t *loaded;
    uint32_t n_experts, n_shards;
    int pair; /* a gated W13 per-tensor scale pair [w1, w3] */
} fmoe_param_slot;

struct fmoe_layer {
    fmoe_context *ctx;
    /* Serializes load, finalize and forward on this layer (fusedmoe.h,
     * "Threads"): the instance and the host routing buffers below are
     * per layer, so two threads in one layer would corrupt each other's
     * results silently. Uncontended, it costs well under a microsecond. */
    pthread_mutex_t lock;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    fmoe_selection *selection;
    const fmoe_candidate_rec *chosen;
    const fmoe_method *method;
    void *instance;
    int state;
    uint32_t hidden;     /* after roundup */
    uint32_t inter;      /* per rank, after roundup */
    uint32_t inter_ckpt; /* per rank, as in the checkpoint (I / tp) */
    uint32_t local_experts, global_experts;
    int32_t *expert_map;     /* [global_experts], always filled (identity without EP) */
    fmoe_param_slot *params; /* method params, then core params */
    uint32_t n_params;
    uint32_t n_method_params; /* the first n are handed to the method */
    int32_t routing_bias;     /* index of e_score_correction_bias or -1 */
    /* Host routing buffers for modular methods fed router logits. */
    float *route_w;
    int32_t *route_ids;
    float *route_scratch;
    /* EP (layer_ep.c): the group the layer is bound to (NULL: none) and the
     * rank holding each physical expert [global_experts]. */
    fmoe_ep_group *ep;
    int32_t *expert_owner;
    /* The expert load record [global_experts] (fusedmoe.h
     * fmoe_layer_expert_load); load_on_device: a forward's routing stayed
     * on a device and nobody counted it, so the record is incomplete. */
    uint64_t *load;
    int load_on_device;
    /* The part a device plugin counts (plugin ABI 1.5, fmoe_ep_forward_args
     * .load_counts): u64 [global_experts] on the layer's device, allocated
     * and zeroed at the first EP forward with device routing; load_dev_used
     * once the plugin said it counted. */
    fmoe_tensor load_dev;
    int load_dev_used;
};

/* layer_ep.c: bind a layer being created to opts->ep_group: check and set
 * its config (ep size/rank, max_num_tokens), restrict the selection to the
 * group's plugin and device (opts is updated), build expert_owner. */
fmoe_status fmoe_layer_ep_bind(fmoe_layer *layer, fmoe_layer_options *opts);
/* The checks a method must pass to run on the group (after selection). */
fmoe_status fmoe_layer_ep_check_method(const fmoe_layer *layer);
/* Run a bound layer's collective forward through the group's plugin:
 * m <= max_tokens_per_rank (else refused), m = 0 included. */
fmoe_status fmoe_layer_ep_apply(fmoe_layer *layer, const fmoe_tensor *x, const fmoe_tensor *w, const fmoe_tensor *ids,
                                fmoe_tensor *out, void *stream);
/* Add a forward's host routing to the load record. */
void fmoe_layer_record_load(fmoe_layer *layer, const int32_t *ids, int64_t slots);

/* layer_load.c: allocate (poisoned) buffers and bitmaps for the declared params. */
fmoe_status fmoe_layer_alloc_params(fmoe_layer *layer, const fmoe_param_desc *const *descs, uint32_t n);
void fmoe_layer_free_params(fmoe_layer *layer);
/* FMOE_STATUS_OK when every required slot is loaded; else names what is missing. */
fmoe_status fmoe_layer_check_loaded(const fmoe_layer *layer);

#endif
