/*
 * plugins/megamoe/ep_fused.c - the fused EP forward of the SM90 path, as
 * the EP ops (plugins/cuda/ep.c) take it (fmcu_ep_fused): the group's
 * window gets the region of ep_fused_layout.h, and a forward of a megamoe
 * SM90 layer on an lsa group runs sm90_ep.cu's send/gather, the method's
 * route and GEMMs, and push/finish, instead of the transport's dispatch,
 * apply and combine (docs/MEGAMOE.md "Expert parallelism, fused").
 *
 * Not taken (FMOE_STATUS_UNSUPPORTED, nothing queued; the transport's path
 * runs): another plugin's method, an instance without the SM90 path, a
 * group without the region (the collective transport), windows NCCL did
 * not map one stride apart, a high_throughput
 * group (its forward applies the method to the rows received, counted on
 * the host, and refuses graph capture: docs/EP.md), or a placement
 * other than the linear one (rank r holds physical experts [r L, (r+1) L):
 * a pair's rank is then its id / L, which the kernels take).
 *
 * The group's dispatch setting (activation, fp8_token, fp8_block) does not
 * apply here: the rows travel as this method's own input, e4m3 with a
 * UE8M0 scale per 32, quantized from the bf16 rows by the method's rule,
 * so the output is what dispatch = activation gives through the transport.
 */
#include <stdint.h>
#include <stdio.h>

#include "plugins/cuda/ep_api.h"
#include "plugins/megamoe/megamoe.h"

static uint64_t extra_bytes(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k)
{
    mm_epf_layout L;
    char why[256];
    /* sizes the fused form cannot take get no region (and the transport) */
    return mm_epf_layout_make(size, max_tokens, hidden, top_k, &L, why, sizeof why) == 0 ? L.bytes : 0;
}

static fmoe_status fused_forward(struct fmcu_ep *ep, fmoe_ep_forward_args *a)
{
    mm_ep_view v;
    fmcu_ep_extra ex;
    if (a->method != &mm_method || mm_instance_ep_view(a->instance, &v) != 0 || fmcu_ep_extra_of(ep, &ex) != 0 ||
        ex.mode != FMOE_EP_MODE_LOW_LATENCY || !mm_epf_one_stride_apart(ex.base, ex.size) ||
        a->x->dtype != FMOE_DTYPE_BF16 ||
        !mm_epf_linear_placement(a->expert_owner, a->num_global_experts, ex.size, v.local))
        return FMOE_STATUS_UNSUPPORTED;
    const fmcu_ep_env env = fmcu_ep_env_of(a->state);
    const fmoe_host *h = env.host;
    char why[512];
    const fmoe_layer_config *cfg = a->config;
    mm_epf_layout L;
    if (mm_epf_layout_make(ex.size, ex.max_tokens, cfg->hidden_size, cfg->top_k, &L, why, sizeof why) != 0)
        return FMOE_STATUS_UNSUPPORTED;
    if (L.bytes > ex.bytes || (uint64_t)L.size * L.max_tokens > v.max_rows)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL,
                            "MegaMoE fused EP: the group's region holds %llu bytes, the forward needs %llu; the "
                            "layer's workspace %u rows, the group %u x %u",
                            (unsigned long long)ex.bytes, (unsigned long long)L.bytes, v.max_rows, L.size,
                            L.max_tokens);
    const int64_t m = a->x->shape[0];
    if (m > (int64_t)L.max_tokens)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP group: %lld tokens on rank %u; the group holds at most %u per rank "
                            "(max_tokens_per_rank): refused, not truncated",
                            (long long)m, ex.rank, L.max_tokens);
    if (((uintptr_t)a->out->data % 16) || (a->out->strides[0] % 8))
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "EP group: out must be 16-byte aligned with a row stride that is a multiple of 8 "
                            "elements");
    mm90_ep_call c = {.c = mm_call_of(a->x, a->topk_weights, a->topk_ids, a->out, v.expert_base, v.swiglu_limit,
                                      a->stream),
                      .L = L,
                      .rank = ex.rank,
                      .num_global = a->num_global_experts,
                      .timeout_ns = ex.timeout_ns,
                      .fail = ex.fail,
                      .load = FMOE_HAS_FIELD(a, load_recorded) ? a->load_counts : NULL};
    for (uint32_t r = 0; r < L.size; r++)
        c.base[r] = ex.base[r];
    const int rc = fmcu_ep_timing_mark(ep, 0, a->stream, why, sizeof why) == 0 &&
                           v.path->ep_dispatch(v.dev, &c, why, sizeof why) == 0 &&
                           fmcu_ep_timing_mark(ep, 1, a->stream, why, sizeof why) == 0 &&
                           v.path->ep_experts(v.dev, &c, why, sizeof why) == 0 &&
                           fmcu_ep_timing_mark(ep, 2, a->stream, why, sizeof why) == 0 &&
                           v.path->ep_combine(v.dev, &c, why, sizeof why) == 0 &&
                           fmcu_ep_timing_mark(ep, 3, a->stream, why, sizeof why) == 0
                       ? 0
                       : -1;
    if (rc != 0)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    if (c.load)
        a->load_recorded = 1;
    return FMOE_STATUS_OK;
}

const fmcu_ep_fused mm_ep_fused = {.extra_bytes = extra_bytes, .forward = fused_forward};
