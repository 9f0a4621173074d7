/*
 * plugins/cuda/ep_without_nccl.c - the EP transport (ep_api.h) of a build
 * whose CUDA toolkit has no nccl.h: every group is refused with the reason,
 * and single-device layers are unaffected (meson.build picks this file).
 */
#include <stdio.h>

#include "plugins/cuda/ep_api.h"

#define WHY "this cuda plugin was built without nccl.h (NCCL's header, shipped with CUDA 13): no EP groups"

int fmcu_ep_unique_id(const char *nccl_library, uint8_t *out, uint32_t cap, uint32_t *length, char *why, size_t cap_why)
{
    (void)nccl_library, (void)out, (void)cap, (void)length;
    snprintf(why, cap_why, WHY);
    return -1;
}

int fmcu_ep_create(const fmcu_ep_params *p, fmcu_ep **out, char *why, size_t cap)
{
    (void)p;
    *out = NULL;
    snprintf(why, cap, WHY);
    return -1;
}

/* Never reached without a group; defined for the linker. */
void fmcu_ep_destroy(fmcu_ep *ep)
{
    (void)ep;
}

void fmcu_ep_rows_of(const fmcu_ep *ep, fmcu_ep_rows *r)
{
    (void)ep;
    *r = (fmcu_ep_rows){0};
}

static int refuse(char *why, size_t cap)
{
    snprintf(why, cap, WHY);
    return -1;
}

int fmcu_ep_check(fmcu_ep *ep, char *why, size_t cap)
{
    (void)ep;
    return refuse(why, cap);
}

int fmcu_ep_set_owner(fmcu_ep *ep, const int32_t *owner, uint32_t n, void *stream, char *why, size_t cap)
{
    (void)ep, (void)owner, (void)n, (void)stream;
    return refuse(why, cap);
}

int fmcu_ep_dispatch(fmcu_ep *ep, const void *x, int64_t x_ld, const int32_t *ids, const float *w, int64_t m,
                     uint64_t *load, void *stream, int64_t *rows, char *why, size_t cap)
{
    (void)ep, (void)x, (void)x_ld, (void)ids, (void)w, (void)m, (void)load, (void)stream, (void)rows;
    return refuse(why, cap);
}

int fmcu_ep_combine(fmcu_ep *ep, void *out, int64_t out_ld, const int32_t *ids, int64_t m, void *stream, char *why,
                    size_t cap)
{
    (void)ep, (void)out, (void)out_ld, (void)ids, (void)m, (void)stream;
    return refuse(why, cap);
}

int fmcu_ep_mark_experts_done(fmcu_ep *ep, void *stream, char *why, size_t cap)
{
    (void)ep, (void)stream;
    return refuse(why, cap);
}

int fmcu_ep_timing(fmcu_ep *ep, int reset, uint64_t *forwards, double *dispatch_s, double *experts_s, double *combine_s,
                   char *why, size_t cap)
{
    (void)ep, (void)reset, (void)forwards, (void)dispatch_s, (void)experts_s, (void)combine_s;
    return refuse(why, cap);
}

int fmcu_ep_extra_of(const fmcu_ep *ep, fmcu_ep_extra *out)
{
    (void)ep, (void)out;
    return -1;
}

int fmcu_ep_timing_mark(fmcu_ep *ep, int phase, void *stream, char *why, size_t cap)
{
    (void)ep, (void)phase, (void)stream;
    return refuse(why, cap);
}
