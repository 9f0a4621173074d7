/*
 * plugins/reference/quant.h - what the quantized reference methods share
 * (quant.c): the per-layer instance, parameter declaration, and the
 * create / declare / finalize / apply / apply_logits / destroy calls, which
 * delegate the scheme-specific parts to a refq_family.
 *
 * One family per file (method_fp8.c, method_mx.c, method_nvfp4.c,
 * method_wna16.c, method_int8.c, method_w4a8.c): `declare` checks the
 * layer's sizes against the scheme's rules and adds the parameters of
 * spec/interface.md §8.4; `finalize` does the post-load processing and
 * fills in the instance's weights (refq_matrix) and activation quantizers.
 * docs/REFERENCE-METHODS.md states what each family computes.
 */
#ifndef FMOE_PLUGIN_REFERENCE_QUANT_H
#define FMOE_PLUGIN_REFERENCE_QUANT_H

#include "fusedmoe/kit/refq.h"
#include "plugins/reference/reference.h"

#define REFQ_MAX_PARAMS 16

typedef struct refq_instance refq_instance;

typedef struct refq_family {
    const char *name;
    /* Does the family serve `s`? 1, or 0 with nothing written. */
    int (*serves)(const fmoe_scheme *s);
    /* Does the family compute this layer (activation, dtype, biases...)?
     * 1, or 0 with one line in `why`; NULL: every layer. The query asks it,
     * so that create never refuses what the query accepted. */
    int (*layer_ok)(const fmoe_layer_config *c, char *why, size_t cap);
    fmoe_status (*declare)(refq_instance *in, fmoe_error *err);
    /* params: the loaded tensors in declaration order. */
    fmoe_status (*finalize)(refq_instance *in, const fmoe_tensor *const *params, fmoe_error *err);
    /* The family's own expert loop, or NULL for refq_run (method_megamoe.c:
     * the routing weight goes before GEMM2, which refq_run cannot say). */
    fmoe_status (*run)(refq_instance *in, fmoe_error *err, const fmoe_tensor *x, const float *w, const int32_t *ids,
                       fmoe_tensor *out);
    fmoe_method modular, monolithic; /* create = refq_create, which finds the family again */
} refq_family;

/* The family serving scheme `s`, or NULL. */
const refq_family *refq_family_of(const fmoe_scheme *s);

struct refq_instance {
    const fmoe_host *host;
    const refq_family *family;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    int nvfp4_dequant; /* option nvfp4_globals = "dequant" (ModelOpt names) */
    uint32_t hidden, inter, local_experts, global_experts;
    uint32_t r;          /* w13 halves: 2 gated, 1 not */
    int32_t *expert_map; /* NULL: identity */
    fmoe_param_desc descs[REFQ_MAX_PARAMS];
    const fmoe_param_desc *desc_ptrs[REFQ_MAX_PARAMS];
    uint32_t n_params;
    int32_t bias13, bias2; /* indices of the bias params, or -1 */
    const void *b13, *b2;  /* their data after finalize */
    /* Filled by the family's finalize. */
    refq_matrix w13, w2;
    refq_actq a1, a2;
    float *per_expert[4]; /* arrays the actq/matrix point into, host-allocated */
    const float *correction_bias;
    /* Monolithic routing buffers, sized at create. */
    float *route_w;
    int32_t *route_ids;
    float *route_scratch;
};

/* Declare parameter `name` (a string literal) of every local expert:
 * shape [E_local, d1(, d2)], ndim = 2 or 3 counting the expert axis. */
void refq_param(refq_instance *in, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role, int32_t scale_kind,
                int32_t shard_axis, uint32_t flags, uint32_t ndim, int64_t d1, int64_t d2);

/* A W13 per-tensor value: [E, 2] (w1, w3) when gated, [E] (a scalar per
 * expert) otherwise; W2's is always [E]. */
void refq_param_tensor(refq_instance *in, const char *name, int32_t proj, int32_t role);

/* The biases, when cfg.has_bias (act dtype). Call last. */
void refq_param_biases(refq_instance *in);

/* The loaded tensor of the param declared as `name`, or NULL. */
const fmoe_tensor *refq_get(const refq_instance *in, const fmoe_tensor *const *params, const char *name);

/* A host-allocated array of n floats kept until destroy (slot 0..3). */
float *refq_floats(refq_instance *in, int slot, size_t n);

/* INVALID_ARGUMENT with `fmt` (a size rule broken). */
fmoe_status refq_size_error(refq_instance *in, fmoe_error *err, const char *fmt, ...) FMOE_PRINTF_LIKE(3, 4);

/* Log one line through the host (level FMOE_PLUGIN_LOG_*). */
void refq_log(refq_instance *in, int32_t level, const char *fmt, ...) FMOE_PRINTF_LIKE(3, 4);

/* Shared method calls; create finds the family from the scheme. */
fmoe_status refq_create(fmoe_create_args *a);
fmoe_status refq_declare(fmoe_declare_params_args *a);
fmoe_status refq_finalize(fmoe_finalize_args *a);
fmoe_status refq_apply(fmoe_apply_args *a);
fmoe_status refq_apply_logits(fmoe_apply_logits_args *a);
void refq_destroy(fmoe_destroy_args *a);

/* A family's table: its modular and monolithic methods share the calls
 * above; METHOD names them (the second "METHOD-monolithic"). */
#define REFQ_FAMILY(NAME, METHOD, SERVES, DECLARE, FINALIZE) \
    { \
        .name = NAME, .serves = SERVES, .declare = DECLARE, .finalize = FINALIZE, \
        .modular = {.struct_size = sizeof(fmoe_method), \
                    .name = METHOD, \
                    .flags = FMOE_METHOD_EPLB, \
                    .create = refq_create, \
                    .declare_params = refq_declare, \
                    .finalize = refq_finalize, \
                    .apply = refq_apply, \
                    .destroy = refq_destroy}, \
        .monolithic = \
        {.struct_size = sizeof(fmoe_method), \
         .name = METHOD "-monolithic", \
         .flags = FMOE_METHOD_EPLB | FMOE_METHOD_MONOLITHIC, \
         .create = refq_create, \
         .declare_params = refq_declare, \
         .finalize = refq_finalize, \
         .apply_logits = refq_apply_logits, \
         .destroy = refq_destroy } \
    }

/* The families. */
extern const refq_family refq_family_fp8, refq_family_mxfp8, refq_family_mxfp4, refq_family_nvfp4, refq_family_wna16,
    refq_family_int8, refq_family_w4a8_fp8, refq_family_w4a8_int, refq_family_megamoe;

#endif
