/*
 * cli/synth/family.h - what the dispatcher (synth.c) and the scheme
 * families (one file each) share.
 *
 * A family turns one projection of one expert - float weights [n, k] as the
 * checkpoint stores them (w1 / w3: [I, H], w2: [H, I]) - into the tensors a
 * producer of its scheme writes for it, each added with synth_add under the
 * role (FMOE_ROLE_*) the loader matches declared parameters by. Per-tensor
 * values are scalars (ndim 0).
 */
#ifndef FMOE_CLI_SYNTH_FAMILY_H
#define FMOE_CLI_SYNTH_FAMILY_H

#include "cli/synth/synth.h"

/* One expert being quantized. */
typedef struct synth_expert {
    uint32_t e;       /* global logical id */
    uint32_t h, i, r; /* hidden, full intermediate, W13 halves (2 gated, 1 not) */
    const float *w1, *w3, *w2;
    /* Calibration (when the family's `calibrates` says so): max |x| over the expert's
     * calibration batch, and max |act(x W13^T + b13)| (the GEMM2 input). */
    float x_amax, a_amax;
} synth_expert;

typedef struct synth_family {
    const char *name;
    int (*serves)(const fmoe_scheme *s);
    /* Whether s needs x_amax / a_amax (static activation scales); NULL: never. */
    int (*calibrates)(const fmoe_scheme *s);
    /* Add the tensors of projection `shard` (FMOE_SHARD_W1/W3/W2), float
     * weights w [n, k]. OK, or a status with synth_why set. */
    fmoe_status (*quantize)(synth_ckpt *ck, const synth_expert *x, int32_t shard, const float *w, uint32_t n,
                            uint32_t k);
} synth_family;

extern const synth_family synth_family_float, synth_family_fp8, synth_family_mxfp8, synth_family_mxfp4,
    synth_family_nvfp4, synth_family_wna16, synth_family_int8, synth_family_w4a8;

/* The scheme and seed being built. */
const fmoe_scheme *synth_scheme(const synth_ckpt *ck);
uint64_t synth_seed(const synth_ckpt *ck);

/* A zeroed buffer for tensor (expert, shard, role) of `dtype` and shape
 * [d0] (ndim 1), [d0, d1] (ndim 2) or a scalar (ndim 0); NULL when out of
 * memory (synth_why is set). */
void *synth_add(synth_ckpt *ck, uint32_t expert, int32_t shard, int32_t role, fmoe_dtype dtype, uint32_t ndim,
                int64_t d0, int64_t d1);
/* A scalar f32 tensor holding v. */
fmoe_status synth_add_scalar(synth_ckpt *ck, uint32_t expert, int32_t shard, int32_t role, float v);

/* Record why building failed; returns st. */
fmoe_status synth_why(synth_ckpt *ck, fmoe_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Helpers. */
float synth_amax(const float *x, size_t n);
/* Round to the storage dtype (F32/BF16/F16) and back: the value a
 * checkpoint that stores it in `dt` holds. */
float synth_round_to(fmoe_dtype dt, float v);
/* Store n f32 scales as `dt` (F32/BF16/F16) into dst. */
void synth_store_scales(fmoe_dtype dt, void *dst, const float *src, size_t n);
/* A random act-order g_idx (GPTQ desc_act): groups of exactly g columns,
 * columns permuted, from stream (seed, name, expert). */
void synth_gidx(uint64_t seed, const char *name, uint32_t expert, int32_t *gidx, uint32_t k, uint32_t g);

/* Integer quantization of rows [n, k] with groups of g columns along k
 * (g = k: one per row); `gidx` (NULL: k / g) names each column's group.
 * Symmetric: s = amax/qmax, q = clamp(rint(w/s)); asym: s = (max-min)/(2^bits-1)
 * with min/max including 0, zp = clamp(rint(-min/s) + qmin) and
 * q = clamp(rint(w/s) + zp). Scales are first rounded to the storage dtype
 * `sd` (the checkpoint holds them there). q [n, k], scales and zp [n, G]
 * (zp may be NULL when symmetric). A zero group gets scale 1. OK, or
 * OUT_OF_MEMORY. */
fmoe_status synth_int_quantize(uint32_t n, uint32_t k, uint32_t g, const int32_t *gidx, int bits, int asym,
                               fmoe_dtype sd, const float *w, int8_t *q, float *scales, int8_t *zp);

#endif
