/*
 * plugins/reference/reference.h - the reference backend: the oracle math
 * of core/ (routing.c, activation.c, reference_experts.c) served through
 * the plugin ABI like any vendor backend. Lowest score (1), so any real
 * backend that accepts a layer wins over it.
 */
#ifndef FMOE_PLUGIN_REFERENCE_H
#define FMOE_PLUGIN_REFERENCE_H

#include "fusedmoe/plugin.h"

/* Per-context plugin state (from init). */
typedef struct ref_state {
    const fmoe_host *host; /* this context's host services */
    int monolithic;        /* option monolithic = "true": route inside apply_logits */
    int nvfp4_dequant;     /* option nvfp4_globals = "dequant": NVFP4 global factors are
                              dequant scales under ModelOpt names (default "quant":
                              compressed-tensors quant multipliers) */
} ref_state;

/* The unquantized method (modular and monolithic flavours). */
extern const fmoe_method ref_method_unquantized;
extern const fmoe_method ref_method_unquantized_monolithic;

/* The quantized methods (quant.h): the method serving scheme `s`, or NULL. */
const fmoe_method *ref_quant_method(const fmoe_scheme *s, int monolithic);

#endif
