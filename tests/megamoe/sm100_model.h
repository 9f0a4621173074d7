/*
 * tests/megamoe/sm100_model.h - the SM100 MegaMoE kernel's data flow run on
 * the host (sm100_model.c), for the test that compares it with the
 * reference plugin. The kernel cannot run here (no SM100 device); this
 * runs its steps in its order on the symmetric buffers of every rank
 * (host.h's layout), with the kernel's own indexing functions
 * (sm100_plan.h) and weight transforms (transform.c), and reads every
 * MMA operand where the kernel's loaders copy it from and every scale
 * where tcgen05.cp puts it (lane b, column a of a 512-byte block's TMEM
 * copy = word 4b + a; row m's scale = byte k of lane m % 32, column m /
 * 32). What it cannot check: the hardware itself (the descriptors' and
 * the swizzle's meaning, tested by value in test_megamoe_sm100_plan).
 */
#ifndef FMOE_TESTS_MEGAMOE_SM100_MODEL_H
#define FMOE_TESTS_MEGAMOE_SM100_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct mm100_model_layer {
    uint32_t experts, hidden, inter, topk, ranks; /* experts over all ranks, linear placement */
    float limit;                                  /* <= 0: no clamp */
    /* the checkpoint's tensors, all experts: [E, 2I, H/2], [E, 2I, H/32], [E, H, I/2], [E, H, I/32] */
    const uint8_t *w13, *s13, *w2, *s2;
} mm100_model_layer;

typedef struct mm100_model_rank {
    uint32_t m;        /* tokens of this rank (<= max_tokens) */
    const uint16_t *x; /* bf16 [m, H] */
    const float *w;    /* [m, topk] */
    const int32_t *ids;
    float *out; /* [m, H]: the bf16 outputs as floats */
} mm100_model_rank;

enum {
    MM100_MODEL_AS_KERNEL = 0,
    MM100_MODEL_BROKEN_TOKEN_SCALES = 1, /* a control: token scales read in row order, not tcgen05.cp's */
};

/* Run one forward of every rank. block_m: 32, 64 or 128. Returns 0, or
 * -1 with the reason. */
int mm100_model_forward(const mm100_model_layer *L, uint32_t max_tokens, uint32_t block_m, mm100_model_rank *ranks,
                        int mode, char *why, size_t cap);

#endif
