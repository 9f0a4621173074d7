/*
 * plugins/rocm/layout.h - the rocm plugin's host-side decisions, plain C so
 * CI (no GPU) unit-tests them (tests/rocm/test_layout.c):
 *
 *   which schemes and layer configs the kernels serve, and why not (the
 *   query's refusals);
 *   the parameters each method declares: the reference methods' names,
 *   dtypes and shapes (docs/REFERENCE-METHODS.md), so the same checkpoints
 *   load;
 *   the padded sizes the pre-shuffle needs and the workspace of a forward
 *   of up to max_num_tokens tokens, sized once at create.
 */
#ifndef FMOE_PLUGINS_ROCM_LAYOUT_H
#define FMOE_PLUGINS_ROCM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/plugin.h"
#include "plugins/rocm/ws.h"

#define FMRO_MAX_PARAMS 8
#define FMRO_MAX_TOP_K  255 /* moe_sorting's 8-bit slot */

/* FMRO_Q_* of a scheme, or -1 with the reason. */
int fmro_scheme_quant(const fmoe_scheme *s, char *why, size_t cap);

/* Can the kernels run this layer (validated config)? 0, or -1 with the
 * reason. Also refuses what AITER's fused_moe does not do (non-gated
 * experts, activations other than SiLU/GELU/gpt-oss SwiGLU, top-k > 1 with
 * the router weight on the input, EPLB replicas). */
int fmro_check_config(const fmoe_layer_config *cfg, const fmoe_scheme *s, char *why, size_t cap);

/* The parameters, in the reference's order: descs[0..*n). -1 (why) when a
 * block size does not fit the layer (vLLM's validate_fp8_block_shape). */
int fmro_declare(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter,
                 uint32_t local_experts, fmoe_param_desc descs[FMRO_MAX_PARAMS], uint32_t *n, char *why, size_t cap);

uint32_t fmro_pad(uint32_t n);

/* quant FMRO_Q_*; group: the block scheme's 1 x group input groups. 0, or
 * -1 (why) when the sizes overflow. */
int fmro_workspace_layout(uint32_t max_tokens, uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t local_experts,
                          int32_t quant, uint32_t group, fmro_ws *ws, char *why, size_t cap);

#endif /* FMOE_PLUGINS_ROCM_LAYOUT_H */
