/*
 * plugins/cpu/qgemm.h - int8 dot-product kernels of the CPU plugin, one
 * file per ISA (qgemm_portable.c, qgemm_avx2.c, qgemm_avx512.c), and the
 * repacked weight layout they read (qprep.c builds it at finalize).
 *
 * Weights: one projection of every local expert, N output rows of K
 * columns, cut into tiles of CPU_NR = 16 rows; inside a tile the rows are
 * interleaved four K values at a time, so one 64-byte load holds 4 values
 * of each of the 16 rows (vpdpbusd's layout: 16 int32 lanes, each the dot
 * of 4 byte pairs):
 *
 *   int8  [K/4][16 rows][4 bytes]     byte j of row r at step s: w[r][4s + j]
 *   int4  [K/8][16 rows][4 bytes]     low nibble: w[r][8s + j] + 8,
 *                                     high nibble: w[r][8s + 4 + j] + 8
 *
 * K is padded with zero weights (to a multiple of 4, or 8 for int4), N
 * with zero rows. Per tile and K group: f32 scales gscale[G][16] and
 * integer row sums wsum[G][16] = sum_k w (the correction terms below).
 * int4 stays packed (half the bytes to stream in decode) and is unpacked in
 * registers with a mask and a shift.
 *
 * Activations: rows of kp int8 values (padded with 0). What a kernel
 * computes for each of mr rows and the tile's 16 outputs:
 *
 *   int8:  out[m][n] = gscale[0][n] * (float)(sum_k a[m][k] * w[n][k])
 *          with a in [-127, 127] (symmetric per-token quantization never
 *          produces -128; the AVX2 kernel relies on it)
 *   int4:  out[m][n] = sum_g gscale[g][n] * (float)(sum_{k in g} (a[m][k] + off[m]) * w[n][k])
 *          summed over the groups in order (one group for per-channel)
 *
 * How the ISAs get the integer sums without overflow or saturation:
 *   - int4: the unsigned nibble u = w + 8 in [0, 15] times the signed
 *     activation: sum u*a = sum w*a + 8*sum a, so
 *     sum (a + off)*w = sum u*a - 8*qsum[m][g] + off[m]*wsum[g][n]
 *     (qsum: the activation row's sum per group, computed when quantizing).
 *     With vpmaddubsw a pair is at most 2*15*128 < 32767: no saturation.
 *     (The VNNI kernel computes wsum itself from the nibbles, sum(u) -
 *     8 * group, and reads bf16 scales when gscale16 is set: it streams
 *     nibbles and bf16 scales only, as the checkpoint stores them.)
 *   - int8, VNNI: vpdpbusd wants u8 x s8: a + 128 in [1, 255] times w,
 *     minus 128*wsum[n]; vpdpbusd (not ...ds) never saturates.
 *   - int8, AVX2: vpmaddubsw(|w|, sign(a, w)): |w| <= 128 and
 *     |a| <= 127, so a pair is at most 2*128*127 = 32512: no saturation.
 */
#ifndef FMOE_PLUGIN_CPU_QGEMM_H
#define FMOE_PLUGIN_CPU_QGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cpu/cpu.h"

#define CPU_NR     16
#define CPU_MR_MAX 8

/* One kernel call: a tile of 16 weight rows against mr activation rows. */
typedef struct cpu_qtile {
    const uint8_t *w;                 /* the tile: kp*16 bytes (int8) or kp*8 (int4) */
    const float *gscale;              /* [groups][16] */
    const uint16_t *gscale16;         /* NULL, or the same scales as bf16 (exact), [groups][16]:
                                         half the bytes for a kernel to stream */
    const int32_t *wsum;              /* [groups][16] */
    uint32_t kp;                      /* padded K */
    uint32_t group, groups;           /* int4: K values per group (multiple of 8), count; int8: kp, 1 */
    uint32_t mr;                      /* 1 .. the kernel set's mr */
    const int8_t *a[CPU_MR_MAX];      /* activation rows, kp values */
    int32_t off[CPU_MR_MAX];          /* int4: added to every activation of the row */
    const int32_t *qsum[CPU_MR_MAX];  /* int4: [groups] sums of the row's activations */
    const int32_t *qcorr[CPU_MR_MAX]; /* int4, optional (all mr or none): the rows' cpu_qcorr
                                         words, which let the VNNI kernel apply the group
                                         correction in one vpdpwssd */
    const uint8_t *ahead;             /* NULL, or a later tile of the same size: the SIMD
                                         kernels prefetch it into L2 as they go, a second
                                         memory stream besides their own (qgemm_*.c) */
    float out[CPU_MR_MAX][CPU_NR];    /* out */
} cpu_qtile;

typedef void (*cpu_qtile_fn)(cpu_qtile *t);

typedef struct cpu_kernels {
    const char *name;
    uint32_t mr;     /* rows per call it handles best (<= CPU_MR_MAX) */
    cpu_qtile_fn i8; /* int8 weights */
    cpu_qtile_fn i4; /* packed int4 weights */
} cpu_kernels;

extern const cpu_kernels cpu_kernels_portable;
#if defined(__x86_64__)
extern const cpu_kernels cpu_kernels_avx2;
extern const cpu_kernels cpu_kernels_avx512_vnni;
#endif

/* The kernel set of an ISA (CPU_ISA_*); portable for anything unknown. */
const cpu_kernels *cpu_kernels_for(int isa);

/* ------------------------------------------------------------------------ */
/* Repacked weights and activation quantization (qprep.c)                   */
/* ------------------------------------------------------------------------ */

typedef struct cpu_qweights {
    int int4;               /* 1: packed int4, 0: int8 */
    uint32_t experts, n, k; /* logical sizes */
    uint32_t kp, tiles;     /* padded K; ceil(n / 16) */
    uint32_t group, groups; /* K values per group (kp when one group), count */
    size_t tile_bytes;
    uint8_t *w;         /* [experts][tiles][tile_bytes] */
    float *gscale;      /* [experts][tiles][groups][16] */
    uint16_t *gscale16; /* the same as bf16 when every scale is one exactly (int4 groups), else NULL */
    int32_t *wsum;      /* [experts][tiles][groups][16] */
} cpu_qweights;

/* int8 weights [E, N, K] with one f32 scale per row [E, N]. 0, or -1 (no memory). */
int cpu_qweights_int8(cpu_qweights *q, uint32_t E, uint32_t N, uint32_t K, const int8_t *w, const float *row_scale,
                      cpu_alloc_fn alloc, void *ctx);
/* int4 values held in int8 [E, N, K] (each in [-8, 7]), scales f32 [E, N, G]
 * with G = K / group (group = K: per channel; else a multiple of 8).
 * 0, -1 (no memory) or -2 (a value out of range). */
int cpu_qweights_int4(cpu_qweights *q, uint32_t E, uint32_t N, uint32_t K, uint32_t group, const int8_t *w,
                      const float *scales, cpu_alloc_fn alloc, void *ctx);
/* The tile of expert e, tile t. */
const uint8_t *cpu_qweights_tile(const cpu_qweights *q, uint32_t e, uint32_t t);
const float *cpu_qweights_gscale(const cpu_qweights *q, uint32_t e, uint32_t t);
const uint16_t *cpu_qweights_gscale16(const cpu_qweights *q, uint32_t e, uint32_t t); /* NULL without */
const int32_t *cpu_qweights_wsum(const cpu_qweights *q, uint32_t e, uint32_t t);

/* Per-token symmetric int8 (vLLM dynamic_scaled_int8_quant, as the
 * reference): s = amax/127, q = clamp(rint(x * 127/amax)); q[n..kp) = 0.
 * A row with a non-finite value gets q = 0 and scale NaN (its outputs are
 * NaN, as the reference's). */
void cpu_quant_sym(const float *x, uint32_t n, uint32_t kp, int8_t *q, float *scale);
/* The int4 group correction of qgemm.h, -8 qsum[g] - 8 group off + off sum(u),
 * as two 16-bit factors the VNNI kernel multiplies with (sum(u), 8) in one
 * vpdpwssd: qcorr[g] = off (low half) | (-qsum[g] - group off) (high half).
 * Exact where both fit 16 bits, which cpu_qcorr_fits(group) guarantees
 * (|qsum| <= 128 group, |off| <= 128: groups of at most 64 values). */
static inline int cpu_qcorr_fits(uint32_t group)
{
    return group <= 64;
}
void cpu_qcorr(int32_t off, const int32_t *qsum, uint32_t groups, uint32_t group, int32_t *qcorr);

/* KleidiAI qai8dx per row (fmoe_w4a8_quantize_activations): x ~ (q + off) * scale;
 * q[n..kp) = 0; qsum[g] = sum of q over each group of `group` values. */
void cpu_quant_asym(const float *x, uint32_t n, uint32_t kp, uint32_t group, int8_t *q, int32_t *off, float *scale,
                    int32_t *qsum);

#endif
