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
};

/* layer_load.c: allocate (poisoned) buffers and bitmaps for the declared params. */
fmoe_status fmoe_layer_alloc_params(fmoe_layer *layer, const fmoe_param_desc *const *descs, uint32_t n);
void fmoe_layer_free_params(fmoe_layer *layer);
/* FMOE_STATUS_OK when every required slot is loaded; else names what is missing. */
fmoe_status fmoe_layer_check_loaded(const fmoe_layer *layer);

#endif
