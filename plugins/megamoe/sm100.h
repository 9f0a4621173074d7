/*
 * plugins/megamoe/sm100.h - the C boundary of the SM100 kernel
 * (sm100_forward.cu, CUDA C++17, compiled by nvcc for sm_100a). Plain C
 * types only; every function returns 0, or -1 with one line in `why`.
 *
 * The kernel has been compiled, never run: no SM100 device was at hand
 * (docs/MEGAMOE.md says what that means for serving it).
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM100_H
#define FMOE_PLUGIN_MEGAMOE_SM100_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/megamoe/call.h"
#include "plugins/megamoe/host.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm100_layer mm100_layer;

/* The weights in the kernel's layout (host memory, method.c's finalize:
 * transform.c), for `local` experts. */
typedef struct mm100_host_weights {
    const uint8_t *l1;     /* [local, 2I, H/2] e2m1 pairs, gate/up interleaved by 8 */
    const uint32_t *l1_sf; /* mm_sf_words(local, 2I, H) */
    const uint8_t *l2;     /* [local, H, I/2] */
    const uint32_t *l2_sf; /* mm_sf_words(local, H, I) */
} mm100_host_weights;

/* Allocate the symmetric buffer (ranks == 1: a plain allocation, zeroed
 * once) and upload the weights, on `device` (synchronous: finalize). An
 * EP group's buffer (peers' windows) is not wired yet: ranks > 1 refused. */
int mm100_create(int device, const mm_layout *layout, const mm100_host_weights *w, mm100_layer **out, char *why,
                 size_t cap);

/* Queue one forward: the inputs quantized into the buffer, then the
 * persistent layer kernel. No allocation, no host synchronization. */
int mm100_forward(mm100_layer *l, const mm_call *c, char *why, size_t cap);

void mm100_destroy(mm100_layer *l);

#ifdef __cplusplus
}
#endif

#endif
