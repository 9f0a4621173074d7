/*
 * core/quant/quant.h - how a quantization_config becomes a scheme, inside
 * core/quant/:
 *
 *   config.json --quant_config.c--> one quant_method (method_*.c), parsed once
 *   module name --method->resolve--> qspec (weights + input args + format)
 *   qspec       --select.c---------> canonical fmoe_scheme, or the error of
 *                                    spec/interface.md §9.3 for it
 *
 * Each quant_method reads its own keys and translates them into the
 * compressed-tensors vocabulary (qargs.h); only select.c knows which
 * combinations a fused MoE layer can run.
 */
#ifndef FMOE_CORE_QUANT_QUANT_H
#define FMOE_CORE_QUANT_QUANT_H

#include <jansson.h>

#include "core/quant/qargs.h"
#include "core/quant/qjson.h"
#include "fusedmoe/fusedmoe.h"

/* What one module (one projection of one expert) is quantized as. */
typedef struct qspec {
    int quantized; /* 0: the module is not quantized (ignored, excluded, untargeted) */
    qargs weights;
    int has_input; /* 0: activations are not quantized */
    qargs input;
    const char *format; /* compressed-tensors format in effect; NULL for None */
    /* DeepSeek-V4 (fp8 config, expert_dtype "fp4"): MXFP4 experts computed
     * on FP8 group-32 activations, a pairing only that reader states (a
     * compressed-tensors config asking for it keeps vLLM's refusal). */
    int mxfp4_fp8;
} qspec;

/*
 * A quant_method reader. `parse` reads the quantization_config object
 * (the path of `j` points at it) into a state it owns; `resolve` answers
 * for one module name, with an unprefixed message on failure (the caller
 * adds source and module); `destroy` frees the state (NULL is fine).
 */
typedef struct quant_method {
    const char *name;
    fmoe_status (*parse)(qjson *j, const json_t *qcfg, void **state);
    fmoe_status (*resolve)(const void *state, const char *module, qspec *out);
    void (*destroy)(void *state);
    /* Optional: keys outside quantization_config that change what the
     * experts are (DeepSeek-V4's top-level expert_dtype), read from the
     * config's root after parse; the path of `j` is the root. */
    fmoe_status (*model_keys)(qjson *j, const json_t *root, void *state);
} quant_method;

extern const quant_method fmoe_qm_compressed_tensors; /* method_ct.c */
extern const quant_method fmoe_qm_fp8;                /* method_fp8.c */
extern const quant_method fmoe_qm_modelopt;           /* method_modelopt.c */
extern const quant_method fmoe_qm_gptq;               /* method_gptq.c */
extern const quant_method fmoe_qm_mxfp4;              /* method_mxfp4.c */

/* The MoE method selection tree (select.c): the canonical scheme of a
 * module resolved to `spec`, or UNSUPPORTED with vLLM's reason (no
 * prefix). An unquantized module gets `unquantized_dtype` (F32/BF16/F16).
 * `out` is written whole, and only on success. */
fmoe_status fmoe_quant_select(const qspec *spec, fmoe_dtype unquantized_dtype, fmoe_scheme *out);

#endif
