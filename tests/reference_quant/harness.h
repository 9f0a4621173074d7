/*
 * tests/reference_quant/harness.h - one quantized layer checked end to end
 * through the public API and the reference plugin:
 *
 *   1. random float weights (never zero), quantized by a test-side quantizer
 *      built from the public codecs (fusedmoe/formats.h) into the tensors a
 *      checkpoint holds, per expert and shard (w1, w3, w2), unsharded;
 *   2. for every TP or EP rank: fmoe_layer_create, fmoe_layer_load of every
 *      tensor (the loader narrows / skips), fmoe_layer_finalize,
 *      fmoe_layer_forward with random routing; the ranks' outputs summed;
 *   3. compared with an independent float64 model of each rank that
 *      dequantizes the weights (harness.c, its own loops) and fake-quantizes
 *      the GEMM inputs, summed the same way; and, loosely, with the f64
 *      model on the original float weights without any quantization.
 */
#ifndef FMOE_TEST_REFQ_HARNESS_H
#define FMOE_TEST_REFQ_HARNESS_H

#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"
#include "tests/test_util.h"

typedef struct qcase {
    const char *key; /* scheme key */
    uint32_t E, H, I, topk, M;
    int gated; /* default 1 via qcase_init */
    int bias;
    int on_input;      /* apply_router_weight_on_input (topk must be 1) */
    uint32_t tp, ep;   /* ranks to run and sum (1 = unsharded) */
    int skew;          /* w1 / w3 quantized with different tensor scales */
    int invalid_ids;   /* some routed ids are -1 or out of range */
    int monolithic;    /* context option monolithic = true; routing by logits */
    int nvfp4_dequant; /* context option nvfp4_globals = "dequant" */
    double loose;      /* bound on ||ref - unquantized|| / ||unquantized|| */
} qcase;

/* Defaults: E=4, H=I=64, topk=2, M=8, gated, TP=EP=1, loose 0.15. */
qcase qcase_init(const char *key);

/* Run the case with the run's seed mixed with `stream` (ck_assert on every
 * failure, messages name the seed). Returns the relative error against the
 * unquantized model. */
double qcase_run_seeded(const qcase *c, uint64_t seed, uint64_t stream);

/* One unsharded run with a deliberately broken scale (every f32 w13 weight
 * scale x2 on its way into the layer) compared with the unbroken model:
 * returns the max difference relative to max|out|, which must be large. */
double qcase_run_broken_seeded(const qcase *c, uint64_t seed, uint64_t stream);

/* The seed lives in the test's translation unit (test_util.h). */
static inline double qcase_run(const qcase *c, uint64_t stream)
{
    return qcase_run_seeded(c, fmoe_test_seed(), stream);
}

static inline double qcase_run_broken(const qcase *c, uint64_t stream)
{
    return qcase_run_broken_seeded(c, fmoe_test_seed(), stream);
}

/* A context that loads only the reference plugin, with `options` TOML lines
 * under [plugins.reference.options] (NULL: none). */
fmoe_context *refq_context(const char *options);

/* TOML text added to the configuration of every context refq_context makes
 * (NULL: none): another backend's options when a test builds the harness
 * with that backend's manifest (tests/cpu/test_cpu_quant.c). */
extern const char *refq_config_extra;

/* fmoe_layer_create for (cfg, key); returns the status, layer in *out. */
fmoe_status refq_create_layer(fmoe_context *ctx, const fmoe_layer_config *cfg, const char *key, fmoe_layer **out);

#endif
