/*
 * cli/synth/fp8.c - FP8 weights per tensor, per channel or per N x K block
 * (compressed-tensors / Fp8Config / DeepSeek), e4m3fn (or the scheme's fp8
 * type), as a producer writes them:
 *   tensor:  weight [n, k], weight_scale = amax / fp8_max (a scalar per
 *            projection, so w1 and w3 get different scales and a backend's
 *            W13 requantization to one scale is exercised);
 *   channel: weight_scale [n, 1] = row amax / fp8_max;
 *   block:   weight_scale [ceil(n/bn), ceil(k/bk)] by
 *            fmoe_fp8_quantize_blocks (f32 rule, or powers of two stored as
 *            UE8M0 for `scale-ue8m0`: DeepGEMM checkpoints);
 * plus, with static per-tensor activations, input_scale = amax / fp8_max
 * of the calibration batch at that GEMM's input (x for w1 and w3, the
 * activation for w2), per expert.
 */
#include "cli/synth/family.h"

#include <float.h>
#include <stdlib.h>

static int fp8_type(fmoe_dtype d)
{
    return d == FMOE_DTYPE_FP8_E4M3FN || d == FMOE_DTYPE_FP8_E4M3FNUZ || d == FMOE_DTYPE_FP8_E5M2;
}

static int fp8_serves(const fmoe_scheme *s)
{
    if (!fp8_type(s->w_dtype))
        return 0;
    if (s->w_strategy == FMOE_QSTRATEGY_BLOCK)
        return s->w_scale_dtype == FMOE_DTYPE_F32 || s->w_scale_dtype == FMOE_DTYPE_UE8M0;
    return (s->w_strategy == FMOE_QSTRATEGY_TENSOR || s->w_strategy == FMOE_QSTRATEGY_CHANNEL) &&
           s->w_scale_dtype == FMOE_DTYPE_F32;
}

static int fp8_static(const fmoe_scheme *s)
{
    return s->a_strategy == FMOE_QSTRATEGY_TENSOR && !s->a_dynamic;
}

/* amax / fp8_max, kept a positive normal f32 (a dead expert's amax is tiny). */
static float scale_of(float amax, float fmax)
{
    float s = amax / fmax;
    return s >= FLT_MIN ? s : FLT_MIN;
}

static fmoe_status fp8_quantize(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                                uint32_t k)
{
    const fmoe_scheme *s = synth_scheme(ck);
    fmoe_dtype fp8 = s->w_dtype;
    float fmax = fmoe_fp8_max(fp8);
    uint8_t *q = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT, fp8, 2, n, k);
    if (!q)
        return FMOE_STATUS_OUT_OF_MEMORY;
    fmoe_status st = FMOE_STATUS_OK;
    if (s->w_strategy == FMOE_QSTRATEGY_TENSOR) {
        float sc = scale_of(synth_amax(w, (size_t)n * k), fmax);
        st = fmoe_fp8_quantize(fp8, fmax, sc, w, (int64_t)n * k, q);
        if (st == FMOE_STATUS_OK)
            st = synth_add_scalar(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, sc);
    } else if (s->w_strategy == FMOE_QSTRATEGY_CHANNEL) {
        float *sc = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_F32, 2, n, 1);
        if (!sc)
            return FMOE_STATUS_OUT_OF_MEMORY;
        for (uint32_t r = 0; r < n && st == FMOE_STATUS_OK; r++) {
            sc[r] = scale_of(synth_amax(w + (size_t)r * k, k), fmax);
            st = fmoe_fp8_quantize(fp8, fmax, sc[r], w + (size_t)r * k, k, q + (size_t)r * k);
        }
    } else {
        int ue8m0 = s->w_scale_dtype == FMOE_DTYPE_UE8M0;
        uint32_t bn = s->w_block_n, bk = s->w_block_k, rn = (n + bn - 1) / bn, rk = (k + bk - 1) / bk;
        float *sc = ue8m0 ? malloc((size_t)rn * rk * sizeof *sc)
                          : synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_F32, 2, rn, rk);
        if (!sc)
            return ue8m0 ? synth_why(ck, FMOE_STATUS_OUT_OF_MEMORY, "out of memory") : FMOE_STATUS_OUT_OF_MEMORY;
        st = fmoe_fp8_quantize_blocks(fp8, fmax, ue8m0 ? FMOE_FP8_SCALE_UE8M0 : FMOE_FP8_SCALE_F32, n, k, bn, bk, w, q,
                                      sc);
        if (ue8m0 && st == FMOE_STATUS_OK) {
            uint8_t *b = synth_add(ck, x->e, shard, FMOE_ROLE_WEIGHT_SCALE, FMOE_DTYPE_UE8M0, 2, rn, rk);
            for (size_t i = 0; b && i < (size_t)rn * rk; i++)
                b[i] = fmoe_ue8m0_encode_floor(sc[i]); /* exact: the rule gives powers of two */
            st = b ? st : FMOE_STATUS_OUT_OF_MEMORY;
        }
        if (ue8m0)
            free(sc);
    }
    if (st == FMOE_STATUS_OUT_OF_MEMORY)
        return st;
    if (st != FMOE_STATUS_OK)
        return synth_why(ck, st, "fp8 quantization of a [%u, %u] weight failed", n, k);
    if (fp8_static(s))
        st = synth_add_scalar(ck, x->e, shard, FMOE_ROLE_INPUT_SCALE,
                              scale_of(shard == FMOE_SHARD_W2 ? x->a_amax : x->x_amax, fmax));
    return st;
}

const synth_family synth_family_fp8 = {"fp8", fp8_serves, fp8_static, fp8_quantize};
