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
    long ep_timeout_ms;    /* option ep_timeout_ms: the bound of every EP wait (ep.h) */
} ref_state;

/* The unquantized method (modular and monolithic flavours). */
extern const fmoe_method ref_method_unquantized;
extern const fmoe_method ref_method_unquantized_monolithic;

/* The quantized methods (quant.h): the method serving scheme `s`, or NULL. */
const fmoe_method *ref_quant_method(const fmoe_scheme *s, int monolithic);
/* 1 if that method computes layer `c`, else 0 with the reason in `why`. */
int ref_quant_layer_ok(const fmoe_scheme *s, const fmoe_layer_config *c, char *why, size_t cap);

#endif
