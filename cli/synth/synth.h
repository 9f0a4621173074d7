/*
 * cli/synth/synth.h - synthetic checkpoints for `fusedmoe run` and
 * `fusedmoe conform`: random float weights, quantized the way a checkpoint
 * producer (llm-compressor / compressed-tensors, ModelOpt, GPTQ) would,
 * into exactly the tensors the layer's scheme stores; then loaded into any
 * number of layers through the public fmoe_layer_load.
 *
 * The checkpoint is full and unsharded, per expert and projection, as a
 * Hugging Face checkpoint holds it: w1 / w3 (gate / up) [I, H] (w3 only
 * when gated) and w2 [H, I], biases w1 / w3 [I] and w2 [H], plus the
 * scheme's side tensors (scales, global scales, zero points, g_idx, static
 * input scales). Loading goes by *global* expert id and shard (W1 / W3 /
 * W2), so the library does the EP selection, EPLB replication and TP
 * narrowing as for a real checkpoint. Two layers loaded from one checkpoint
 * hold identical tensors; two checkpoints built from one spec are identical.
 *
 * Float values: every weight N(0,1)/sqrt(fan_in) and never exactly zero,
 * each tensor from its own stream keyed by (seed, tensor, expert)
 * (cli/rng.h; normal.h draws the values), so a value depends only on the
 * seed and what it is - not on how many threads build the experts
 * (parallel.h), each expert on one of them. Static
 * activation scales are calibrated per expert on a random batch of
 * activations run through that expert's float weights, as a producer's
 * calibration pass does.
 *
 * One file per scheme family (float.c, fp8.c, mx.c, nvfp4.c, wna16.c,
 * int8.c, w4a8.c) behind the dispatcher synth.c, whose families are called
 * from several threads at once, each on its own expert; a scheme without one is
 * UNSUPPORTED, with a reason. Only the public codecs of
 * include/fusedmoe/formats.h quantize.
 */
#ifndef FMOE_CLI_SYNTH_H
#define FMOE_CLI_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

typedef struct synth_spec {
    uint64_t seed;
    /* Sizes (intermediate_size is the full, unsharded I), gating, bias and
     * the activation the calibration runs. TP/EP fields are ignored: the
     * checkpoint holds every expert, unsharded. */
    const fmoe_layer_config *cfg;
    const fmoe_scheme *scheme;
    /* The routing correction bias [num_experts] f32 a layer may declare
     * (role ROUTING_BIAS); NULL: drawn like any other whole parameter. */
    const float *correction_bias;
    /* This expert's float weights and biases are scaled by 1e-23 before
     * quantization (spec/testing.md §6 #4); -1: none. */
    int32_t dead_expert;
    /* 1: build only the experts cfg's EP rank holds (by its expert map;
     * ignored with EPLB), so layers of other ranks cannot load from it.
     * 0: every expert. */
    uint32_t local_only;
    /* Workers building experts in parallel: at most this many, one per
     * online CPU (0: one per online CPU), fewer for a small layer. The
     * checkpoint is the same for any number. */
    uint32_t threads;
} synth_spec;

typedef struct synth_ckpt synth_ckpt;

/* Whether a synthesizer serves scheme s: 1, or 0 with the reason in why. */
int synth_supports(const fmoe_scheme *s, char *why, size_t cap);

/* Build the checkpoint of `spec` (the spec's pointers are not kept).
 * FMOE_STATUS_OK; UNSUPPORTED when no synthesizer serves the scheme;
 * OUT_OF_MEMORY; the reason in why. */
fmoe_status synth_build(const synth_spec *spec, synth_ckpt **out, char *why, size_t cap);
void synth_free(synth_ckpt *ck);

/* Load every parameter `layer` declared from the checkpoint (not
 * finalize). Per-expert parameters are matched by (projection, role), never
 * by name; float tensors are converted to the declared float dtype. A
 * declared parameter the scheme's checkpoint has no tensor for, or holds in
 * another non-float dtype, is UNSUPPORTED naming it; a load the library
 * refuses returns its status. The reason in why. */
fmoe_status synth_load(fmoe_layer *layer, const synth_ckpt *ck, char *why, size_t cap);

/* The checkpoint's tensors in the order synth_load meets them (expert by
 * expert, each expert's as its family added them): for tests and tools
 * that look at the bytes. i < synth_tensor_count(ck). */
typedef struct synth_tensor_info {
    uint32_t expert;
    int32_t shard, role; /* FMOE_SHARD_*, FMOE_ROLE_* */
    fmoe_dtype dtype;
    uint32_t ndim; /* 0: a scalar */
    int64_t shape[2];
    const void *data;
    size_t bytes;
} synth_tensor_info;

size_t synth_tensor_count(const synth_ckpt *ck);
void synth_tensor_get(const synth_ckpt *ck, size_t i, synth_tensor_info *out);

/* The float weights expert e of `spec` is quantized from (dead-expert
 * scaling included; every expert, local_only notwithstanding): w1, w3 [I, H] (w3 untouched when not gated), w2 [H, I],
 * b13 [2I] (gate then up), b2 [H]; any pointer may be NULL. For a caller
 * that wants the unquantized output. */
void synth_expert_floats(const synth_spec *spec, uint32_t e, float *w1, float *w3, float *w2, float *b13, float *b2);

#endif
