/*
 * plugins/cpu/bgemm.h - bf16 x bf16 -> f32 kernels for a few activation
 * rows against one expert's weights (decode: M <= 16 rows per expert),
 * one file per ISA (bgemm_portable.c, bgemm_avx2.c, bgemm_avx512.c,
 * bgemm_avx512bf16.c), and the weight layout they read (bprep.c).
 *
 * Layout: oneDNN's BA16a64b2a for a weights matrix [K, N] - the layout its
 * bf16 matmul (brgemm, AMX) prefers - so one copy of the weights serves
 * these kernels and oneDNN's prefill primitives. One projection of one
 * expert, N output rows of K values, is cut into tiles of CPU_BNR = 64
 * rows; inside a tile the rows are interleaved two K values at a time:
 *
 *   tile [kp/2][64 rows][2]     value j of row r at pair step s: w[r][2s + j]
 *
 * kp = K rounded up to CPU_BKP (32, oneDNN's K block), N to 64; padding is
 * zeros. One pair step of a tile is 256 bytes: four 64-byte lines holding
 * rows 0-15, 16-31, 32-47, 48-63, each lane a (w[r][2s], w[r][2s+1]) pair -
 * vdpbf16ps's operand, and for the widening kernels the odd value is the
 * lane's high half as an f32 (mask) and the even one its low half (shift).
 *
 * What a kernel computes for activation row m and tile row n, in f32:
 *
 *   acc = +0
 *   for s = 0 .. ceil(K/2) - 1:                      (ascending)
 *       acc = acc + w[n][2s+1] * a[m][2s+1]          (a[m][K] = 0 when K is odd)
 *       acc = acc + w[n][2s]   * a[m][2s]
 *   out[m][n] = acc
 *
 * which is vdpbf16ps's order (odd element first, each step rounded). The
 * product of two bf16 values is exact in f32, so an FMA and a multiply-add
 * give the same sum: every ISA's kernel returns the same bits, except where
 * a value is subnormal (vdpbf16ps treats subnormal inputs and outputs as
 * zero; the widening kernels do not). The reference sums in plain K order
 * in f32; the difference is accumulation order only.
 */
#ifndef FMOE_PLUGIN_CPU_BGEMM_H
#define FMOE_PLUGIN_CPU_BGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cpu/cpu.h"

#define CPU_BNR 64 /* output rows per tile */
#define CPU_BKP 32 /* K is padded to a multiple of this */
#define CPU_BMR 16 /* activation rows per kernel call, at most */
#define CPU_BNT 4  /* tiles per kernel call, at most */

/* One kernel call: nt tiles (of one expert) against mr activation rows.
 * Several tiles per call are several memory streams in flight: one
 * stream per thread reads ~23 GB/s on the CI machine, four ~30 (as fast as
 * bench's floor); the SIMD kernels run the nt tiles side by side and
 * prefetch ahead in each. */
typedef struct cpu_btile {
    const uint16_t *w[CPU_BNT];           /* the tiles: kp/2 steps of 64 pairs each */
    uint32_t nt;                          /* 1 .. CPU_BNT */
    uint32_t k;                           /* K (the pairs read: ceil(K/2)) */
    uint32_t mr;                          /* 1 .. CPU_BMR */
    const uint16_t *a[CPU_BMR];           /* activation rows, K bf16 values each */
    const uint16_t *ahead;                /* NULL, or the tile the next call reads
                                             first: the SIMD kernels prefetch its
                                             start as this call ends (AVX2: in step,
                                             into L2), so the stream runs on warm */
    const uint16_t *apk;                  /* AMX kernel only (nt = 1): the mr rows packed
                                             apk_stride values apart, K zero-padded to a
                                             multiple of 32 (the others read a[]) */
    uint32_t apk_stride;                  /* a multiple of 32 */
    float out[CPU_BNT][CPU_BMR][CPU_BNR]; /* out: every tile's 64 rows (padding rows give 0) */
} cpu_btile;

typedef void (*cpu_btile_fn)(cpu_btile *t);

typedef struct cpu_bkernels {
    const char *name;
    cpu_btile_fn tile;
} cpu_bkernels;

extern const cpu_bkernels cpu_bkernels_portable;
#if defined(__x86_64__)
extern const cpu_bkernels cpu_bkernels_avx2;
extern const cpu_bkernels cpu_bkernels_avx512;
extern const cpu_bkernels cpu_bkernels_avx512_bf16;
/* AMX-BF16 (bgemm_amx.c): one tile per call, 1..16 rows packed in apk;
 * only where cpu_amx_enable() succeeded. */
extern const cpu_bkernels cpu_bkernels_amx;
#endif

/* The kernel set of an ISA (CPU_ISA_*): avx512_vnni widens with AVX-512F,
 * avx512_bf16 uses vdpbf16ps; portable for anything unknown. */
const cpu_bkernels *cpu_bkernels_for(int isa);

/* Weight bytes per K block: the SIMD kernels hold the accumulators of a
 * few activation rows in registers, so with more rows they run a block of
 * the nt tiles (32 KiB, in L1 after the first group of rows) once per
 * group, keeping the partial sums in `out` between blocks (the order above
 * is kept). */
#define CPU_BKBLOCK_BYTES 32768

/* ------------------------------------------------------------------------ */
/* The repacked weights (bprep.c)                                            */
/* ------------------------------------------------------------------------ */

typedef struct cpu_bweights {
    uint32_t experts, n, k; /* logical sizes */
    uint32_t kp, tiles;     /* K padded to CPU_BKP; ceil(n / 64) */
    size_t expert_elems;    /* tiles * 64 * kp: one expert, = oneDNN's size / 2 */
    uint16_t *w;            /* [experts][tiles][kp/2][64][2] */
} cpu_bweights;

/* bf16 weights [E, N, K] (row-major, the checkpoint's layout) into tiles.
 * 0, or -1 (no memory). */
int cpu_bweights_pack(cpu_bweights *b, uint32_t E, uint32_t N, uint32_t K, const uint16_t *w, cpu_alloc_fn alloc,
                      void *ctx);
/* Expert e's weights (all its tiles, oneDNN's BA16a64b2a [K, N]). */
uint16_t *cpu_bweights_expert(const cpu_bweights *b, uint32_t e);
/* Tile t of expert e. */
const uint16_t *cpu_bweights_tile(const cpu_bweights *b, uint32_t e, uint32_t t);

#endif
