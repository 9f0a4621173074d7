/*
 * plugins/cpu_arm/kernels.h - the packed int4 weight layout and the W4A8
 * micro-kernels that read it (one ISA per file: kernel_portable.c,
 * kernel_dotprod.c, kernel_i8mm.c).
 *
 * Packed weights (pack.c). One projection of one expert, N rows x K columns
 * of int4 values w in [-8, 7], is cut into row blocks of CARM_NR = 8 rows
 * (rows past N are zero) and, along K, into `groups` groups of `bl` columns
 * (channelwise: one group, bl = K rounded up to 16 with zero columns;
 * groupwise: the scheme's group size, a multiple of 32). A row block is
 * `groups` consecutive group records of carm_group_bytes(bl) bytes:
 *
 *   bl/16 chunks of 64 bytes, chunk c covering columns k0 = 16c .. 16c+15
 *   of the group; rows are taken in pairs p = 0..3 (rows 2p, 2p+1) and
 *       byte 16p + 8r + i  (r = 0, 1; i = 0..7) holds row 2p+r:
 *         low nibble  = w[k0 + i]        (two's complement int4)
 *         high nibble = w[k0 + 8 + i]
 *     so sign-extending the low nibbles of one 16-byte pair gives the
 *     2 x 8 int8 matrix [row 2p, k0..7 | row 2p+1, k0..7] that SMMLA takes
 *     as its right operand, and that SDOT takes against an 8-byte
 *     activation slice duplicated into both halves (the high nibbles:
 *     columns k0+8..15);
 *   8 int32  sum over the group's columns of w, per row (for the
 *            activation zero point: sum (q + o) w = sum q w + o sum w);
 *   8 float  the weight scale of each row for this group.
 *
 * This is KleidiAI's idea (qsi4c32p with kr/sr = 8: one RHS layout shared
 * by the dotprod GEMV and the i8mm GEMM kernels, row sums precomputed),
 * laid out for this plugin: scales in f32 for every scale dtype (bf16 and
 * f16 widen exactly), and channelwise and groupwise one format.
 *
 * Activations: each GEMM input row is int8 [kp] (kp = K rounded up to 16;
 * the padding is zero and meets zero weights) with an int32 offset o and a
 * f32 scale s from fmoe_w4a8_quantize_activations: x ~ (q + o) * s.
 *
 * Contract of every kernel, bit for bit the same on every ISA:
 *
 *   out[i * 8 + j] = F(i, j) for i < m, j < 8, where
 *   F = 0; for g in 0 .. groups-1 (in order):
 *         acc = sum_{k in g} (a_i[k] + o_i) * w_j[k]          exact, int32
 *         F   = F + (float)acc * scale_j[g]   (product rounded, then the sum)
 *
 * which is fmoe_w4a8_matmul's (formats.h) value before the activation
 * scale. The caller multiplies by s_i, adds the bias and rounds.
 * |acc| < 2^31 for K < 2^20.
 */
#ifndef FMOE_PLUGIN_CPU_ARM_KERNELS_H
#define FMOE_PLUGIN_CPU_ARM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define CARM_NR 8  /* rows of a packed block */
#define CARM_KC 16 /* columns of a packed chunk; kp and bl are multiples */

/* Bytes of one group record of a row block. */
static inline size_t carm_group_bytes(uint32_t bl)
{
    return (size_t)bl * CARM_NR / 2 + CARM_NR * (sizeof(int32_t) + sizeof(float));
}

/* m >= 1 rows of activations (a[i] points at kp int8 values, o[i] their
 * offset), one packed row block `w` of `groups` groups of bl columns:
 * out [m][8] as in the contract above. */
typedef void (*carm_kernel_fn)(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                               uint32_t bl, float *out);

/* Instruction-set levels, lowest first. */
#define CARM_ISA_PORTABLE 0 /* C */
#define CARM_ISA_DOTPROD  1 /* Armv8.2 SDOT (FEAT_DotProd) */
#define CARM_ISA_I8MM     2 /* Armv8.6 SMMLA (FEAT_I8MM) */
#define CARM_ISA_COUNT    3

void carm_kernel_portable(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                          uint32_t bl, float *out);
#if defined(__aarch64__)
void carm_kernel_dotprod(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                         uint32_t bl, float *out);
void carm_kernel_i8mm(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                      uint32_t bl, float *out);
#endif

/* The kernel of an ISA level (portable for a level this build lacks). */
carm_kernel_fn carm_kernel(int isa);

/* "portable", "dotprod", "i8mm". */
const char *carm_isa_name(int isa);

/* The best level the CPU and OS offer (getauxval AT_HWCAP / AT_HWCAP2). */
int carm_isa_detect(void);

/* Level of a name ("portable", "dotprod", "i8mm"), or -1. */
int carm_isa_parse(const char *name);

#endif
