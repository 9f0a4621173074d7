/*
 * fusedmoe/kit/routing.h - the reference router (spec/interface.md §4): scores,
 * plain / biased / grouped top-k, renormalization and scaling, in f32 on the
 * host. Pure functions: the caller validated the config (layer_config.c).
 *
 * Semantics (docs/ROUTING.md has the full statement and where we depart from vLLM):
 *  - scores s = softmax(logits) | sigmoid(logits) | sqrt(softplus(logits)), f32;
 *  - selection on s + correction bias when given, else on the logits (the
 *    scorings keep their order; f32 scores can tie where logits do not),
 *    weights taken from the *unbiased* s;
 *  - grouped top-k: group score = the group's best logit without bias, the
 *    sum of the top two of (s + bias) with bias (the whole group if it has
 *    one expert); keep the topk_group best groups, then top-k inside them;
 *  - ties (of the values ranked) go to the lower index (expert or group);
 *    NaN ranks below every number, so ids are unique and in [0, E)
 *    whatever the logits;
 *  - slots are ordered by selection value, descending (ties: lower id first);
 *  - renormalize: w /= max(sum(w), 1e-20); then w *= routed_scaling_factor
 *    (always applied, unlike vLLM's FusedTopKRouter which drops it).
 */
#ifndef FMOE_KIT_ROUTING_H
#define FMOE_KIT_ROUTING_H

#include <stdint.h>

#include "fusedmoe/common.h"

/* logits: M rows of cfg->num_experts floats, row stride `ld` elements.
 * bias: [num_experts] or NULL (must be non-NULL iff cfg->has_correction_bias).
 * Writes topk_w[M*k] and topk_ids[M*k] (logical expert ids, row-major).
 * scratch: at least fmoe_route_scratch_floats(cfg) floats. */
void fmoe_route_rows(const fmoe_layer_config *cfg, const float *logits, int64_t M, int64_t ld, const float *bias,
                     float *topk_w, int32_t *topk_ids, float *scratch);

/* Scratch floats fmoe_route_rows needs (independent of M). */
int64_t fmoe_route_scratch_floats(const fmoe_layer_config *cfg);

/* The same for logits stored as F32, BF16 or F16 with row stride `ld` and
 * column stride `cs` (elements): each row is converted to f32 and routed.
 * scratch: at least num_experts + fmoe_route_scratch_floats(cfg) floats. */
void fmoe_route_logits(const fmoe_layer_config *cfg, const void *logits, fmoe_dtype dtype, int64_t M, int64_t ld,
                       int64_t cs, const float *bias, float *topk_w, int32_t *topk_ids, float *scratch);

#endif
