/*
 * cli/run_weights.h - the synthetic checkpoint `run` (and `bench`) loads
 * into a layer: cli/synth's, for any scheme it can make.
 *
 * The checkpoint is what a Hugging Face MoE checkpoint would hold, full and
 * unsharded: per expert, w1 and w3 [I, H] (gate/up; w1 only when not gated),
 * w2 [H, I], and with biases w1/w3 [I] and w2 [H]; every weight drawn
 * N(0,1)/sqrt(fan_in) and, for a quantized scheme, quantized into the
 * tensors its checkpoints store (scales, zero points, g_idx, calibrated
 * static input scales; cli/synth/synth.h). It is loaded through
 * fmoe_layer_load expert by expert with *global* expert ids, so the library
 * does the EP selection, EPLB replication and TP narrowing exactly as for a
 * real checkpoint. (Without EPLB, experts the rank's expert map says it does
 * not hold are not even made: the loader would not take them.)
 */
#ifndef FMOE_CLI_RUN_WEIGHTS_H
#define FMOE_CLI_RUN_WEIGHTS_H

#include <stdint.h>

#include "cli/synth/synth.h"
#include "fusedmoe/fusedmoe.h"

typedef struct run_checkpoint {
    uint64_t seed;
    const fmoe_layer_config *cfg;
    /* e_score_correction_bias [num_experts] f32 when cfg has one, else NULL:
     * the routing in `run` uses the same values. */
    const float *correction_bias;
    /* The scheme; NULL: the one the layer was created for. */
    const fmoe_scheme *scheme;
} run_checkpoint;

/* Make the checkpoint for `layer` (its scheme unless ck->scheme is set;
 * only the experts its EP rank holds when every per-expert parameter is
 * indexed by local experts). Returns a CLI exit code, after reporting any
 * error (a scheme cli/synth cannot make: CLI_EXIT_CONFIG). */
int run_build_checkpoint(fmoe_layer *layer, const char *who, const run_checkpoint *ck, synth_ckpt **out);

/* Load every parameter `layer` declared from `built` and finalize it. `who`
 * names the layer in errors ("selected", "reference"). Returns a CLI exit
 * code, after reporting any error. */
int run_load_built(fmoe_layer *layer, const char *who, const synth_ckpt *built);

/* run_build_checkpoint + run_load_built. */
int run_load_layer(fmoe_layer *layer, const char *who, const run_checkpoint *ck);

#endif
