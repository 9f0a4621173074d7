/*
 * cli/synth/nvfp4.c - NVFP4 checkpoints (fp4:tgroup16:scale-fp8e4m3), as
 * llm-compressor writes them (compressed-tensors nvfp4-pack-quantized):
 *   weight_packed        [n, k/2] e2m1 pairs
 *   weight_scale         [n, k/16] e4m3fn block scales
 *   weight_global_scale  the quant multiplier g = 448*6 / amax; gate and up
 *                        share one (amax over both, llm-compressor fuses
 *                        them), w2 has its own
 *   input_global_scale   W4A4 only: 448*6 / amax of the calibration batch
 *                        at that GEMM's input, per expert
 * all through fmoe_nvfp4_quantize. The loader (synth.c) gives the ModelOpt
 * names (`*_weight_scale_2`, `*_input_scale`) the dequant value 1/g.
 */
#include "cli/synth/family.h"

#include <stddef.h>

#define GROUP 16

static int nvfp4_serves(const fmoe_scheme *s)
{
    return s->w_dtype == FMOE_DTYPE_FP4_E2M1X2 && s->w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP &&
           s->w_group_size == GROUP && s->w_scale_dtype == FMOE_DTYPE_FP8_E4M3FN;
}

static int nvfp4_a4(const fmoe_scheme *s)
{
    return s->a_strategy != FMOE_QSTRATEGY_NONE;
}

/* 448*6 / amax with amax kept where the quotient is finite. */
static float global_of(float amax)
{
    return fmoe_nvfp4_global_from_amax(amax > 1e-30f ? amax : 1e-30f);
}

static fmoe_status nvfp4_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                  uint32_t k)
{
    if (k % GROUP)
        return synth_why(ck, FMOE_STATUS_INVALID_ARGUMENT, "NVFP4: K = %u is not a multiple of %u", k, GROUP);
    float amax;
    if (shard == FMOE_SHARD_W2) {
        amax = synth_amax(w, (size_t)n * k);
    } else {
        amax = synth_amax(x->w1, (size_t)n * k);
        if (x->w3) {
            float a3 = synth_amax(x->w3, (size_t)n * k);
            amax = a3 > amax ? a3 : amax;
        }
    }
    float g = global_of(amax);
    uint8_t *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, FMOE_DTYPE_FP4_E2M1X2, 2, n, k / 2);
    uint8_t *sf = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_FP8_E4M3FN, 2, n, k / GROUP);
    if (!q || !sf)
        return FMOE_STATUS_OUT_OF_MEMORY;
    fmoe_status st = fmoe_nvfp4_quantize(n, k, w, g, FMOE_NVFP4_GLOBAL_QUANT, q, sf);
    if (st == FMOE_STATUS_OK)
        st = synth_add_scalar(ck, x->e, shard, FMOE_ROLE_WEIGHT_GLOBAL_SCALE, g);
    if (st == FMOE_STATUS_OK && nvfp4_a4(synth_scheme(ck)))
        st = synth_add_scalar(ck, x->e, shard, FMOE_ROLE_INPUT_GLOBAL_SCALE,
                              global_of(shard == FMOE_SHARD_W2 ? x->a_amax : x->x_amax));
    return st;
}

const synth_family synth_family_nvfp4 = {"nvfp4", nvfp4_serves, nvfp4_a4, nvfp4_quantize};
