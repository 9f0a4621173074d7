/*
 * plugins/megamoe/call.h - one forward's arguments, as both device paths
 * take them (sm90.h, sm100.h): plain C, all pointers on the layer's device.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_CALL_H
#define FMOE_PLUGIN_MEGAMOE_CALL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Row strides in elements. x and out bf16 [m, H]; weights f32 and ids i32
 * [m, topk] (global physical ids; outside [0, experts): masked). */
typedef struct mm_call {
    const void *x;
    int64_t x_ld;
    const float *weights;
    int64_t weights_ld;
    const int32_t *ids;
    int64_t ids_ld;
    void *out;
    int64_t out_ld;
    uint32_t m;          /* <= the layer's max tokens (the caller checks) */
    int32_t expert_base; /* the SM90 path on an EP rank: global id of local expert 0 (ep_rank x local
                            experts; linear placement), ids outside [base, base + experts) masked; the
                            SM100 kernel routes global ids itself and ignores it */
    float swiglu_limit;  /* <= 0: no clamp */
    void *stream;        /* cudaStream_t; NULL: the legacy stream */
} mm_call;

#ifdef __cplusplus
}
#endif

#endif
