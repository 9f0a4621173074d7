/*
 * plugins/megamoe/sm90.h - the C boundary of the SM90 path's device side
 * (sm90_forward.cu, CUDA C++17, compiled by nvcc for sm_90a). Plain C types
 * only; every function returns 0, or -1 with one line in `why` naming the
 * CUDA call that failed. Nothing here throws, aborts or prints.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_SM90_H
#define FMOE_PLUGIN_MEGAMOE_SM90_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/megamoe/call.h"
#include "plugins/megamoe/sm90_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm90_layer mm90_layer;

/* The loaded parameters (host memory, the checkpoint's layout). */
typedef struct mm90_host_weights {
    const uint8_t *w13, *w13_sf, *w2, *w2_sf;
} mm90_host_weights;

/* Allocate the plan's two buffers on `device` and upload the weights
 * (synchronous: finalize). */
int mm90_create(int device, const mm90_plan *plan, const mm90_host_weights *w, mm90_layer **out, char *why, size_t cap);

/* Queue one forward on the call's stream: no allocation, no host sync. */
int mm90_forward(mm90_layer *l, const mm_call *c, char *why, size_t cap);

void mm90_destroy(mm90_layer *l);

#ifdef __cplusplus
}
#endif

#endif
