/*
 * core/reference_route.c - fmoe_reference_route: the public face of the
 * reference router (core/routing.c) on tensors.
 */
#include <stdlib.h>

#include "base/error.h"
#include "core/tensor.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/routing.h"

fmoe_status fmoe_reference_route(const fmoe_layer_config *cfg, const fmoe_tensor *logits,
                                 const fmoe_tensor *correction_bias, fmoe_tensor *topk_weights, fmoe_tensor *topk_ids)
{
    fmoe_error_clear();
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    const int64_t any_rows[2] = {-1, cfg->num_experts};
    st = fmoe_tensor_expect(logits, "router_logits", FMOE_DTYPE_INVALID, 2, any_rows);
    if (st != FMOE_STATUS_OK)
        return st;
    if (logits->dtype != FMOE_DTYPE_F32 && logits->dtype != FMOE_DTYPE_BF16 && logits->dtype != FMOE_DTYPE_F16)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "router_logits: dtype %s, expected f32, bf16 or f16",
                              fmoe_dtype_name(logits->dtype));
    if (logits->device_kind != FMOE_DEVICE_CPU || logits->strides[1] != 1)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "router_logits: the reference router needs host memory with unit column stride");
    int64_t m = logits->shape[0];
    const int64_t topk_shape[2] = {m, cfg->top_k};
    if ((st = fmoe_tensor_expect(topk_weights, "topk_weights", FMOE_DTYPE_F32, 2, topk_shape)) != FMOE_STATUS_OK ||
        (st = fmoe_tensor_expect(topk_ids, "topk_ids", FMOE_DTYPE_INT32, 2, topk_shape)) != FMOE_STATUS_OK)
        return st;
    if (!fmoe_tensor_is_contiguous(topk_weights) || !fmoe_tensor_is_contiguous(topk_ids))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "topk_weights/topk_ids must be contiguous");
    const int64_t bias_shape[1] = {cfg->num_experts};
    if (cfg->has_correction_bias) {
        if (!correction_bias)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "correction_bias: required when has_correction_bias is set");
        st = fmoe_tensor_expect(correction_bias, "correction_bias", FMOE_DTYPE_F32, 1, bias_shape);
        if (st != FMOE_STATUS_OK)
            return st;
        if (!fmoe_tensor_is_contiguous(correction_bias))
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "correction_bias must be contiguous");
    } else if (correction_bias) {
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "correction_bias given but the layer config has has_correction_bias = 0");
    }
    float *scratch = malloc((size_t)(cfg->num_experts + fmoe_route_scratch_floats(cfg)) * sizeof *scratch);
    if (!scratch)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    const float *bias = correction_bias ? correction_bias->data : NULL;
    fmoe_route_logits(cfg, logits->data, logits->dtype, m, logits->strides[0], 1, bias, topk_weights->data,
                      topk_ids->data, scratch);
    free(scratch);
    return FMOE_STATUS_OK;
}
