/*
 * plugins/megamoe/megamoe.h - the plugin's layer check and method
 * (serve.c, method.c); plugin.c has the entry, options, probe and query.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_H
#define FMOE_PLUGIN_MEGAMOE_H

#include "fusedmoe/plugin.h"
#include "plugins/megamoe/host.h"

#define MM_SCHEME_KEY "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"

/* Per-context state (init). */
typedef struct mm_state {
    const fmoe_host *host;
    uint32_t ring_tokens; /* option ring_tokens; 0: host.h's rule */
} mm_state;

/* 0 if the kernel's contract covers the layer (scheme, SwiGLU, bf16, no
 * biases, EP divides the experts, sizes; layout.c for the buffer), else -1
 * with the first reason. `d` gets the buffer dims. */
int mm_layer_supported(const fmoe_layer_config *c, const fmoe_scheme *s, uint32_t ring, mm_dims *d, char *why,
                       size_t cap);

/* The one method: create/finalize do the host work (buffer plan, weight
 * transforms); apply refuses until a kernel exists. */
extern const fmoe_method mm_method;

/* What an instance of mm_method holds after create (the plan) and finalize
 * (the transformed weights; NULL before): for the kernel launch to come,
 * and for tests/megamoe, which check it against host.h. */
typedef struct mm_weights {
    const mm_layout *layout; /* the symmetric buffer planned at create */
    const uint8_t *l1;       /* [E_local, 2I, H/2] e2m1 pairs, gate/up interleaved */
    const uint32_t *l1_sf;   /* mm_sf_words(E_local, 2I, H) words */
    const uint32_t *l2_sf;   /* mm_sf_words(E_local, H, I) words */
    const uint8_t *l2;       /* the loaded w2 values, read in place */
} mm_weights;

void mm_instance_weights(const void *instance, mm_weights *out);

#endif
