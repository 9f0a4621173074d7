/*
 * tests/reference_quant/model.h - internals shared by the harness files:
 * the quantized test layer (checkpoint tensors + dequantized weights) and
 * the float64 model.
 */
#ifndef FMOE_TEST_REFQ_MODEL_H
#define FMOE_TEST_REFQ_MODEL_H

#include "tests/reference_quant/harness.h"

#define TQ_FP8      1 /* tensor / channel / block */
#define TQ_MXFP8    2
#define TQ_MXFP4    3
#define TQ_NVFP4    4
#define TQ_WNA16    5
#define TQ_INT8     6
#define TQ_W4A8_FP8 7
#define TQ_W4A8_INT 8

/* One checkpoint tensor: name, global expert, shard, data (owned). */
typedef struct tq_ck {
    char name[48];
    int32_t expert, shard;
    fmoe_dtype dtype;
    uint32_t ndim;
    int64_t shape[2];
    void *data;
} tq_ck;

typedef struct tq_layer tq_layer;
typedef void (*tq_quant_fn)(tq_layer *L, int e, int shard, const float *w, uint32_t N, uint32_t K, double *deq);

struct tq_layer {
    const qcase *c;
    fmoe_scheme s;
    int fam;
    uint32_t r; /* 2 gated, 1 not */
    tq_quant_fn quant;
    float *w13, *w2, *b13, *b2; /* original: [E, rI, H], [E, H, I], [E, rI], [E, H] */
    double *d13, *d2;           /* what the oracle must multiply */
    tq_ck *cks;
    int n, cap;
    /* per expert (and half) side data */
    float *wscale;           /* FP8 tensor: [E, 2] weight scales */
    uint8_t **wq;            /* FP8 tensor: [E, 2] the bytes (owned by cks) */
    float *sin13, *sin2;     /* FP8 static input scales [E, 2], [E] */
    float *gw13, *gw2;       /* NVFP4 weight quant multipliers [E, 2], [E] */
    float *ga13, *ga2;       /* NVFP4 input quant multipliers [E, 2], [E] */
    int32_t *gidx13, *gidx2; /* act-order [E, H], [E, I_full] */
};

void tq_add(tq_layer *L, const char *suffix, int32_t expert, int32_t shard, fmoe_dtype dtype, uint32_t ndim, int64_t d0,
            int64_t d1, void *data);
void tq_quantize_expert(tq_layer *L, int e);
tq_quant_fn tq_quantizer(int fam);
float tq_bf16(float f);

#endif
