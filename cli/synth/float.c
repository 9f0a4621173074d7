/*
 * cli/synth/float.c - unquantized checkpoints (f32, bf16, f16): the float
 * weights stored in the scheme's dtype, round to nearest even, as a
 * checkpoint saved in that dtype holds them.
 */
#include "cli/synth/family.h"

#include <stddef.h>

#include "cli/halfconv.h"

static int float_serves(const fmoe_scheme *s)
{
    return s->w_strategy == FMOE_QSTRATEGY_NONE && s->a_strategy == FMOE_QSTRATEGY_NONE &&
           cli_is_float_storage(s->w_dtype);
}

static fmoe_status float_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                  uint32_t k)
{
    fmoe_dtype dt = synth_scheme(ck)->w_dtype;
    void *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, dt, 2, n, k);
    if (!q)
        return FMOE_STATUS_OUT_OF_MEMORY;
    cli_store_floats(dt, q, w, (size_t)n * k);
    return FMOE_STATUS_OK;
}

const synth_family synth_family_float = {"float", float_serves, NULL, float_quantize};
