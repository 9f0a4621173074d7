/*
 * cli/conform/layers.h - building, feeding and checking layers through the
 * public API, shared by the support, test and stress modes.
 *
 * Weights are a synthetic Hugging Face checkpoint made by the scheme's
 * generator (cli/synth: per expert w1/w3 [I,H], w2 [H,I], optional biases,
 * N(0,1)/sqrt(fan_in), each tensor from its own stream keyed by (seed,
 * tensor, expert), quantized into the scheme's checkpoint tensors) and
 * loaded with fmoe_layer_load by global expert id, so the library does EP
 * selection, EPLB replication and TP narrowing. Two layers built from one
 * seed hold the same tensors; cf_build once and cf_load_built into several
 * layers saves the quantization.
 */
#ifndef FMOE_CLI_CONFORM_LAYERS_H
#define FMOE_CLI_CONFORM_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/conform/schemes.h"
#include "fusedmoe/fusedmoe.h"

typedef struct cf_weights {
    uint64_t seed;
    const fmoe_layer_config *cfg;
    const cf_scheme *cs;
    const float *correction_bias; /* [num_experts] or NULL */
    int32_t dead_expert;          /* this expert's weights scaled by 1e-23; -1: none */
} cf_weights;

/* fmoe_layer_create pinned to plugin `backend` (and a device, or
 * FMOE_DEVICE_ANY). The library's status; fmoe_last_error says why. */
fmoe_status cf_create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme, const char *backend,
                      int32_t dev_kind, int32_t dev_index, fmoe_layer **out);

/* The checkpoint of `w` (w->cfg's sizes, unsharded). FMOE_STATUS_OK, or a
 * status with the reason in `why` (UNSUPPORTED: no generator). */
fmoe_status cf_build(const cf_weights *w, synth_ckpt **out, char *why, size_t cap);

/* Load every declared parameter from `ck` and finalize. FMOE_STATUS_OK, or
 * a status with the reason in `why`. */
fmoe_status cf_load_built(fmoe_layer *layer, const synth_ckpt *ck, char *why, size_t cap);

/* cf_build + cf_load_built. */
fmoe_status cf_load(fmoe_layer *layer, const cf_weights *w, char *why, size_t cap);

/* One forward's inputs: x [M,H] (act dtype), logits [M,E], the correction
 * bias and the routing (fmoe_reference_route, ids mapped to EPLB replicas). */
typedef struct cf_inputs {
    int64_t m;
    void *x;
    float *xf; /* x as f32 (before rounding to the act dtype) */
    float *logits;
    float *bias;
    float *topk_w;
    int32_t *topk_ids;
    fmoe_tensor tx, tlogits, tw, tids;
} cf_inputs;

/* Draw and route. 0, or -1 with `why`. */
int cf_inputs_make(const fmoe_layer_config *cfg, int64_t m, uint64_t seed, cf_inputs *in, char *why, size_t cap);
/* Re-store x after editing in->xf. */
void cf_inputs_store_x(const fmoe_layer_config *cfg, cf_inputs *in);
void cf_inputs_free(cf_inputs *in);

/* One checked forward: out is NaN-poisoned with a canary after it; on OK
 * `out_f32` [M*H] holds the result and *guard_ok says whether the canary
 * survived. use_logits: give router logits (the backend or the core
 * routes); else top-k, falling back to logits for a monolithic method. A
 * layer on a device gets every tensor in its memory (fmoe_layer_tensor_*,
 * each followed by the canary), out poisoned there before the call and all
 * of it copied back after; a modular method there gets top-k routing (the
 * core routes only host logits). Otherwise a status, and `why` says what
 * failed. */
fmoe_status cf_forward(fmoe_layer *layer, const fmoe_layer_config *cfg, const cf_inputs *in, int use_logits,
                       float *out_f32, int *guard_ok, char *why, size_t cap);

/* 1 when conform can give `layer` its tensors: a host layer, or a device
 * layer whose plugin lends device memory (plugin ABI 1.1); else 0 with
 * `why` (the case is UNSUPPORTED: nothing could be tested). */
int cf_layer_fed(fmoe_layer *layer, char *why, size_t cap);

/* Compare got with ref over rows not masked (skip_row[t] != 0 skips token
 * t; may be NULL). 1 pass, 0 fail with a one-line reason in `why`: an
 * element not written (still NaN) or NaN/inf, the worst element outside
 * |got-ref| <= atol + rtol|ref|, or NMSE above the gate. */
int cf_compare(const float *got, const float *ref, int64_t m, uint32_t h, const unsigned char *skip_row,
               const cf_tolerance *tol, char *why, size_t cap);

#endif
