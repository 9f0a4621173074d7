/*
 * tests/plugins/fixture_scales.h - the parameters fixture_scales declares,
 * in declaration order, shared by the fixture and the loader test.
 */
#ifndef FMOE_TEST_FIXTURE_SCALES_H
#define FMOE_TEST_FIXTURE_SCALES_H

#include "fusedmoe/plugin.h"

#define FS_GROUP 2 /* group size of the group-scale parameters */

enum {
    FS_W13_TENSOR,     /* [E, 2] per-tensor pair (w1, w3) */
    FS_W2_TENSOR,      /* [E] per-tensor scalar */
    FS_W13_CHANNEL,    /* [E, 2I, 1], TP-narrowed rows */
    FS_W2_CHANNEL,     /* [E, H, 1], not sharded */
    FS_W13_GROUP,      /* [E, 2I, H/g] */
    FS_W2_GROUP,       /* [E, H, I/g], narrowed along axis 1 */
    FS_W13_TRANSPOSED, /* [E, H/g, 2I], checkpoint [I, H/g] */
    FS_W2_FULL,        /* [E, I_full/g, H], act-order: never narrowed */
    FS_W13_INPUT,      /* [E] one input scale shared by w1 and w3 */
    FS_N_PARAMS
};

extern const fmoe_method fixture_scales_method;

#endif
