/*
 * plugins/cpu/bgemv.h - one bf16 GEMM of every expert with few rows, through
 * the bgemm.h kernels and the layer's pool: out[p] = in[p] . W[e]^T for the
 * positions p of each expert e (layer.h's grouping), f32 out.
 *
 * Work items are (expert, run of 64-row tiles), about 8 per thread, so a
 * decode step's few experts still spread over every thread; an item
 * streams its tiles once and runs all of the expert's rows through each
 * (16 per kernel call). The epilogue (bias, rounding to the activation
 * dtype) is applied as the sums are written, saving the method a pass.
 */
#ifndef FMOE_PLUGIN_CPU_BGEMV_H
#define FMOE_PLUGIN_CPU_BGEMV_H

#include "plugins/cpu/bgemm.h"
#include "plugins/cpu/pool.h"

typedef struct cpu_bgemv_item {
    uint32_t expert, t0, t1;
} cpu_bgemv_item;

typedef struct cpu_bgemv {
    const cpu_bkernels *kern;
    cpu_bgemv_item *items; /* room for items_cap */
    uint32_t items_cap;    /* cpu_bgemv_items_cap() */
    /* One run. */
    const cpu_bweights *w;
    const uint32_t *start; /* [experts + 1]: expert -> first position */
    const uint16_t *in;    /* bf16 rows by position, in_stride apart */
    size_t in_stride;
    const uint16_t *const *in_rows; /* or NULL: else each position's row (no gather) */
    float *out;                     /* f32 rows by position, out_stride apart */
    size_t out_stride;
    const void *bias; /* NULL, or [experts][N] in bias_dtype: out = round(sum + bias) */
    fmoe_dtype bias_dtype;
    fmoe_dtype round;  /* out rounded to this dtype (FMOE_DTYPE_F32: the f32 sums) */
    uint32_t max_rows; /* experts with more rows are left out (another path's) */
    /* AMX (set at create where the kernel may run, else amx = NULL): experts
     * of CPU_BAMX_MIN_ROWS or more rows take it; their rows are packed into
     * the worker's apack ([pool size][CPU_BMR][apk_stride] bf16, apk_stride
     * >= the padded K of every GEMM run through it, a multiple of 32). */
    const cpu_bkernels *amx;
    uint16_t *apack;
    uint32_t apk_stride;
} cpu_bgemv;

/* From this many rows an expert runs the AMX kernel when there is one: at
 * one or two rows the vdpbf16ps kernels stream as fast and read more
 * tiles at once; from three they are compute-bound on a core. */
#define CPU_BAMX_MIN_ROWS 3

/* Items needed for experts of up to `tiles` tiles when at most `active`
 * experts have rows. */
uint32_t cpu_bgemv_items_cap(uint32_t active, uint32_t tiles);

/* Run it; returns the number of experts it served. */
uint32_t cpu_bgemv_run(cpu_bgemv *g, cpu_pool *pool);

#endif
