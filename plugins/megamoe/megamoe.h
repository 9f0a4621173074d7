/*
 * plugins/megamoe/megamoe.h - the plugin's layer check and method
 * (serve.c, method.c); plugin.c has the entry, options, probe and query.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_H
#define FMOE_PLUGIN_MEGAMOE_H

#include "fusedmoe/plugin.h"
#include "plugins/cuda/ep.h"
#include "plugins/megamoe/host.h"
#include "plugins/megamoe/sm100.h"
#include "plugins/megamoe/sm90.h"

#define MM_SCHEME_KEY "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"

/* What the plugin's device side offers the method (plugin.c fills it with
 * the CUDA runtime and sm90_forward.cu; tests/megamoe with fakes, so the
 * path choice runs without a GPU). NULL in mm_state: the host logic alone
 * (the SM100 plan and transforms; apply refuses). */
typedef struct mm_device_path {
    /* compute capability of device `index`; -1 with the runtime's reason */
    int (*capability)(int index, int *major, int *minor, char *why, size_t cap);
    int (*create)(int device, const mm90_plan *plan, const mm90_host_weights *w, mm90_layer **out, char *why,
                  size_t cap);
    int (*forward)(mm90_layer *l, const mm_call *c, char *why, size_t cap);
    void (*destroy)(mm90_layer *l);
    /* the SM100 kernel (sm100.h); NULL: a build without it */
    int (*create100)(int device, const mm_layout *layout, const mm100_host_weights *w, mm100_layer **out, char *why,
                     size_t cap);
    int (*forward100)(mm100_layer *l, const mm_call *c, char *why, size_t cap);
    void (*destroy100)(mm100_layer *l);
    /* the SM90 path's fused EP forward (sm90.h mm90_ep_*); NULL: EP groups
     * take the transport's dispatch -> apply -> combine */
    int (*ep_dispatch)(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);
    int (*ep_experts)(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);
    int (*ep_combine)(mm90_layer *l, const mm90_ep_call *c, char *why, size_t cap);
} mm_device_path;

/* Per-context state (init). */
typedef struct mm_state {
    const fmoe_host *host;
    uint32_t ring_tokens;       /* option ring_tokens; 0: host.h's rule */
    const mm_device_path *path; /* NULL: host logic only */
    int sm100_unverified;       /* option sm100_unverified: serve the SM100 kernel, which has never run */
    fmcu_ep_options ep_opt;     /* nccl_library, ep_timeout_ms, ep_transport */
    int ep_fused;               /* option ep_fused: EP groups take mm_ep_fused */
} mm_state;

/* 0 if the SM100 kernel's contract covers the layer (scheme, SwiGLU, bf16,
 * no biases, EP divides the experts, sizes; layout.c for the buffer), else
 * -1 with the first reason. `d` gets the buffer dims. */
int mm_layer_supported(const fmoe_layer_config *c, const fmoe_scheme *s, uint32_t ring, mm_dims *d, char *why,
                       size_t cap);

/* 0 if the SM90 path serves the layer: the shared rules (any ep_size: the
 * method masks the pairs of other ranks' experts), H and I multiples of 32
 * and a workspace that fits (sm90_plan.h, into `plan`); else -1, the
 * reason. */
int mm_sm90_layer_supported(const fmoe_layer_config *c, const fmoe_scheme *s, mm90_plan *plan, char *why, size_t cap);

/* The path a layer takes on CUDA device `index`: the shared rules first
 * (so the first rule a layer breaks is named whatever the device), then the
 * device's compute capability: 9.0 -> MM_PATH_SM90 (that path's rules),
 * 10.x -> the SM100 contract, then MM_PATH_SM100 only with the option
 * sm100_unverified (the kernel has never run; else -1, saying so), one
 * rank (EP groups need the peers' windows: -1) and at most
 * MM100_MAX_LOCAL experts; others -1. */
#define MM_PATH_SM90  1
#define MM_PATH_SM100 2
int mm_choose_path(const mm_state *st, const fmoe_layer_config *c, const fmoe_scheme *s, int32_t index, mm90_plan *plan,
                   char *why, size_t cap);

/* The one method. With the SM90 path (mm_state.path set, a 9.0 device):
 * finalize uploads the weights and plans the workspace, apply runs the
 * forward. Otherwise create/finalize do the SM100 host work (buffer plan,
 * weight transforms) and apply refuses. */
extern const fmoe_method mm_method;

/* What an instance of mm_method holds after create (the plan) and finalize
 * (the transformed weights; NULL before): for the kernel launch to come,
 * and for tests/megamoe, which check it against host.h. */
typedef struct mm_weights {
    int sm90;                /* 1: the SM90 path (nothing below is set) */
    const mm_layout *layout; /* the symmetric buffer planned at create */
    const uint8_t *l1;       /* [E_local, 2I, H/2] e2m1 pairs, gate/up interleaved */
    const uint32_t *l1_sf;   /* mm_sf_words(E_local, 2I, H) words */
    const uint32_t *l2_sf;   /* mm_sf_words(E_local, H, I) words */
    const uint8_t *l2;       /* the loaded w2 values, read in place */
} mm_weights;

void mm_instance_weights(const void *instance, mm_weights *out);

/* One forward's call (call.h) from the checked tensors of an apply or an
 * EP forward: x [m, H], weights and ids [m, k], out [m, H], rows strided. */
mm_call mm_call_of(const fmoe_tensor *x, const fmoe_tensor *weights, const fmoe_tensor *ids, fmoe_tensor *out,
                   int32_t expert_base, float swiglu_limit, void *stream);

/* What the fused EP forward (ep_fused.c) needs of an instance: 0 when it
 * runs the SM90 path, finalized, on a device side with the fused forward;
 * else -1 (the transport's path serves it). */
typedef struct mm_ep_view {
    const mm_device_path *path;
    mm90_layer *dev;
    int32_t expert_base; /* global id of local expert 0 */
    uint32_t local;      /* local experts */
    uint32_t max_rows;   /* the workspace's rows (the layer's max_num_tokens) */
    float swiglu_limit;
} mm_ep_view;
int mm_instance_ep_view(const void *instance, mm_ep_view *out);

/* The fused EP forward of the SM90 path (ep_fused.c), handed to the EP ops
 * (plugins/cuda/ep.h fmcu_ep_env.fused). */
extern const fmcu_ep_fused mm_ep_fused;

#endif
