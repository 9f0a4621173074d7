/*
 * cli/run_weights.h - the synthetic checkpoint `run` loads into a layer.
 *
 * The checkpoint is what a Hugging Face MoE checkpoint would hold, full and
 * unsharded: per expert, w1 and w3 [I, H] (gate/up; w1 only when not gated),
 * w2 [H, I], and with biases w1/w3 [I] and w2 [H]; every weight drawn
 * N(0,1)/sqrt(fan_in). It is loaded through fmoe_layer_load expert by
 * expert with *global* expert ids, so the library does the EP selection,
 * EPLB replication and TP narrowing exactly as for a real checkpoint.
 * (Without EPLB, experts the rank's expert map says it does not hold are
 * not even drawn: the loader would not take them.)
 */
#ifndef FMOE_CLI_RUN_WEIGHTS_H
#define FMOE_CLI_RUN_WEIGHTS_H

#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

typedef struct run_checkpoint {
    uint64_t seed;
    const fmoe_layer_config *cfg;
    /* e_score_correction_bias [num_experts] f32 when cfg has one, else NULL:
     * the routing in `run` uses the same values. */
    const float *correction_bias;
} run_checkpoint;

/* Load every parameter `layer` declared and finalize it. `who` names the
 * layer in errors ("selected", "reference"). Returns a CLI exit code, after
 * reporting any error. */
int run_load_layer(fmoe_layer *layer, const char *who, const run_checkpoint *ck);

#endif
