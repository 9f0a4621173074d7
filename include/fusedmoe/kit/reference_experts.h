/*
 * fusedmoe/kit/reference_experts.h - the reference (oracle) expert computation for
 * unquantized weights (spec/interface.md §6, vLLM torch_experts):
 *
 *   for token t, slot j, e = topk_ids[t,j]:
 *     skip (contribute 0) if e < 0, e >= E_global, or expert_map[e] == -1
 *     h  = round_act(x_t . W13[l]^T (+ b13[l]))      f32 accumulation
 *     a  = round_act(act(h))
 *     y  = round_act(a . W2[l]^T (+ b2[l] if tp_rank == 0))
 *     out_t = round_act( sum_j f32(y_j) * topk_w[t,j] )
 *   apply_router_weight_on_input (k == 1): x_t = round_act(x_t * w[t,0]) first
 *   and out_t = round_act(y_0) (no second weighting).
 *
 * round_act rounds to the activation dtype: the points where a kernel
 * stores a tensor of that dtype. b2 is added by TP rank 0 only, so summing
 * the ranks' partial outputs adds it exactly once.
 */
#ifndef FMOE_KIT_REFERENCE_EXPERTS_H
#define FMOE_KIT_REFERENCE_EXPERTS_H

#include <stdint.h>

#include "fusedmoe/common.h"

typedef struct fmoe_ref_problem {
    const fmoe_layer_config *cfg; /* validated */
    uint32_t hidden;              /* H: width of x/out and of the weights */
    uint32_t inter;               /* I per rank */
    uint32_t local_experts;
    uint32_t global_experts;   /* physical */
    const int32_t *expert_map; /* [global_experts] local index or -1; NULL: identity */
    /* Weights, contiguous, dtype w_dtype (F32/BF16/F16):
     * w13 [E_local, r*I, H] (r = 2 if gated), w2 [E_local, H, I],
     * b13 [E_local, r*I] and b2 [E_local, H] when cfg->has_bias (else NULL). */
    fmoe_dtype w_dtype;
    const void *w13, *w2, *b13, *b2;
    /* Activations (cfg->act_dtype). */
    int64_t m;
    const void *x;
    int64_t x_ld; /* row stride in elements */
    void *out;
    int64_t out_ld;
    const float *topk_w;     /* [M, k] contiguous */
    const int32_t *topk_ids; /* [M, k] contiguous, global physical ids */
} fmoe_ref_problem;

/* 0 on success, -1 if scratch memory could not be allocated. */
int fmoe_ref_experts_unquantized(const fmoe_ref_problem *p);

#endif
