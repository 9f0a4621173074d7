/*
 * plugins/cuda/sm100_layout.h - the host logic of the native SM100 (sm_100a)
 * block-scaled path (sm100_gemm.cu): where the scale factors, the GEMM
 * inputs and each expert's problem live, how activations are quantized, and
 * when the path is chosen. Pure C; the functions marked FMCU_SM100_HD are
 * compiled into the device code too, so the unit test
 * (tests/cuda/test_sm100_layout.c) checks exactly what the kernels compute.
 *
 * The GEMM is CUTLASS's sm100 block-scaled grouped GEMM, one group per local
 * expert: D_e[M_e, N] (f32) = alpha_e * A_e[M_e, K] x W_e[N, K]^T, A and W
 * e2m1 codes (K-contiguous, element 2i in the low nibble, the checkpoint's
 * packing) with one scale per `vec` K elements: NVFP4 e4m3 per 16, MXFP4
 * ue8m0 per 32.
 *
 * Scale factors (spec/formats.md §2.5). The tensor core reads the scales of
 * a [rows, sf_cols] matrix in 128 x 4 atoms of 512 bytes, rows padded to
 * 128 and columns to 4:
 *
 *   offset(m, kb) = ((m/128) * ceil(sf_cols/4) + kb/4) * 512
 *                   + (m%32) * 16 + ((m/32)%4) * 4 + kb%4
 *
 * Weights: each expert's [N, K/vec] is swizzled at finalize (padding 0).
 * Activations: the plan sorts the pairs by expert (offsets[e] .. offsets[e+1]
 * are expert e's rows, M_e of them); the staging kernel quantizes sorted row
 * p into packed codes at row p and its scales into expert e's own swizzled
 * matrix, which starts at row
 *
 *   fmcu_sm100_group_sf_row(offsets[e], e) = 128 * (e + offsets[e] / 128)
 *
 * of one scale buffer: a closed form, so no prefix sum over the padded
 * sizes is needed on the device, and the groups never overlap
 * (start[e+1] - start[e] >= 128 * ceil(M_e / 128); all of them end within
 * fmcu_sm100_a_sf_rows(rows, E) = 128 * (E + rows / 128) rows).
 */
#ifndef FMOE_PLUGIN_CUDA_SM100_LAYOUT_H
#define FMOE_PLUGIN_CUDA_SM100_LAYOUT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define FMCU_SM100_HD static inline __host__ __device__
#else
#define FMCU_SM100_HD static inline
#endif

#define FMCU_SM100_NVFP4 1 /* e2m1 x e4m3 per 16, per-expert globals (W4A4) */
#define FMCU_SM100_MXFP4 2 /* e2m1 x ue8m0 per 32, OCP activation scales (W4A4) */

#define FMCU_SM100_ATOM_ROWS  128 /* rows of a scale atom */
#define FMCU_SM100_ATOM_COLS  4   /* scale columns of a scale atom */
#define FMCU_SM100_ATOM_BYTES 512
#define FMCU_SM100_K_ALIGN    32 /* K of each GEMM: 16-byte rows of codes (TMA) */

/* ------------------------------------------------------------------------ */
/* Scale-factor layout                                                       */
/* ------------------------------------------------------------------------ */

FMCU_SM100_HD int64_t fmcu_sm100_sf_offset(int64_t m, int64_t kb, int64_t sf_cols)
{
    const int64_t k_tiles = (sf_cols + 3) / 4;
    return ((m / 128) * k_tiles + kb / 4) * FMCU_SM100_ATOM_BYTES + (m % 32) * 16 + ((m / 32) % 4) * 4 + kb % 4;
}

/* Bytes of a swizzled [rows, sf_cols] matrix: rows to 128, columns to 4. */
FMCU_SM100_HD int64_t fmcu_sm100_sf_bytes(int64_t rows, int64_t sf_cols)
{
    return (rows + 127) / 128 * 128 * ((sf_cols + 3) / 4 * 4);
}

/* First row of expert e's activation scales in the shared buffer. */
FMCU_SM100_HD int64_t fmcu_sm100_group_sf_row(int64_t row0, uint32_t e)
{
    return 128 * ((int64_t)e + row0 / 128);
}

/* Rows of the activation scale buffer for `rows` sorted rows over `experts`. */
FMCU_SM100_HD int64_t fmcu_sm100_a_sf_rows(int64_t rows, uint32_t experts)
{
    return 128 * ((int64_t)experts + rows / 128);
}

/* ------------------------------------------------------------------------ */
/* One expert's problem                                                      */
/* ------------------------------------------------------------------------ */

/* Expert e of a projection with n weight rows and k columns: its GEMM
 * sizes and where its operands start (bytes into the packed activation
 * codes, the activation scales, the packed weights [E, n, k/2] and the
 * swizzled weight scales [E][sf_bytes(n, k/vec)]; elements into D
 * [rows, n] f32). Leading dimensions: k for A and W (elements), n for D. */
typedef struct fmcu_sm100_group {
    int32_t m, n, k;
    int64_t a_off, sfa_off, b_off, sfb_off, d_off;
} fmcu_sm100_group;

FMCU_SM100_HD fmcu_sm100_group fmcu_sm100_group_at(uint32_t n, uint32_t k, uint32_t vec, uint32_t e, int32_t row0,
                                                   int32_t rows)
{
    fmcu_sm100_group g;
    const int64_t sf_cols = k / vec;
    g.m = rows;
    g.n = (int32_t)n;
    g.k = (int32_t)k;
    g.a_off = (int64_t)row0 * (k / 2);
    g.sfa_off = fmcu_sm100_group_sf_row(row0, e) * ((sf_cols + 3) / 4 * 4);
    g.b_off = (int64_t)e * n * (k / 2);
    g.sfb_off = (int64_t)e * fmcu_sm100_sf_bytes(n, sf_cols);
    g.d_off = (int64_t)row0 * n;
    return g;
}

/* ------------------------------------------------------------------------ */
/* Activation quantization (the staging kernel), bit for bit the core's      */
/* fmoe_nvfp4_quantize (QUANT convention) and fmoe_mxfp4_quantize (OCP)      */
/* ------------------------------------------------------------------------ */

/* fmoe_fp4_e2m1_encode: RNE, saturating at 6, sign of zero kept, NaN -> +6. */
FMCU_SM100_HD uint32_t fmcu_sm100_e2m1_encode(float x)
{
    if (x != x)
        return 0x7;
    uint32_t s = signbit(x) ? 8u : 0u;
    float a = fabsf(x);
    uint32_t c = a <= 0.25f   ? 0
                 : a < 0.75f  ? 1
                 : a <= 1.25f ? 2
                 : a < 1.75f  ? 3
                 : a <= 2.5f  ? 4
                 : a < 3.5f   ? 5
                 : a <= 5.0f  ? 6
                              : 7;
    return s | c;
}

/* fmoe_fp8_e4m3fn_encode: RNE, |x| > 448 and inf saturate to 448, NaN ->
 * 0x7F | sign, sign of zero kept. Exact steps only (frexp, ldexp, rint on
 * values with few bits), so host and device agree. */
FMCU_SM100_HD uint32_t fmcu_sm100_e4m3_encode(float x)
{
    uint32_t s = signbit(x) ? 0x80u : 0u;
    if (x != x)
        return s | 0x7Fu;
    float a = fabsf(x);
    if (a >= 464.0f) /* 448 + half a step and above (inf too): saturate */
        return s | 0x7Eu;
    if (a < 0.015625f) {             /* below 2^-6: subnormal steps of 2^-9 */
        float q = rintf(a * 512.0f); /* 0..8; 8 is the smallest normal */
        return s | (uint32_t)q;
    }
    int e;
    float f = frexpf(a, &e);       /* a = f * 2^e, f in [0.5, 1) */
    float q = rintf(ldexpf(f, 4)); /* 8..16: 1.mmm in eighths */
    uint32_t mant = (uint32_t)q;
    int ex = e - 1; /* a = (mant / 8) * 2^ex */
    if (mant == 16) {
        mant = 8;
        ex++;
    }
    if (ex > 8 || (ex == 8 && mant > 15))
        return s | 0x7Eu;
    uint32_t code = ((uint32_t)(ex + 7) << 3) | (mant - 8);
    return s | (code > 0x7Eu ? 0x7Eu : code);
}

/* Exact value of an e4m3fn byte (NaN for 0x7F / 0xFF). */
FMCU_SM100_HD float fmcu_sm100_e4m3_decode(uint32_t b)
{
    uint32_t e = (b >> 3) & 0xF, m = b & 7;
    float v;
    if ((b & 0x7F) == 0x7F)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9);
    else
        v = ldexpf((float)(8 + m), (int)e - 10);
    return (b & 0x80) ? -v : v;
}

/* One NVFP4 block of 16 (fmoe_nvfp4_quantize, QUANT convention, g = gq):
 * codes packed into 8 bytes (element 2i low nibble), returns the e4m3 scale. */
FMCU_SM100_HD uint32_t fmcu_sm100_nvfp4_block(const float x[16], float gq, uint8_t packed[8])
{
    float vmax = 0.0f;
    for (int i = 0; i < 16; i++) {
        float m = fabsf(x[i]);
        if (m > vmax)
            vmax = m;
    }
    const float rcp_g = 1.0f / gq;
    const uint32_t sf = fmcu_sm100_e4m3_encode(gq * (vmax * (1.0f / 6.0f)));
    const float sfq = fmcu_sm100_e4m3_decode(sf);
    const float out = sfq != 0.0f ? 1.0f / (sfq * rcp_g) : 0.0f;
    for (int i = 0; i < 16; i += 2)
        packed[i / 2] = (uint8_t)(fmcu_sm100_e2m1_encode(x[i] * out) | fmcu_sm100_e2m1_encode(x[i + 1] * out) << 4);
    return sf;
}

/* The scale an MXFP4 scale byte stands for: 2^(byte - 127), 2^-127 for 0. */
FMCU_SM100_HD float fmcu_sm100_mxfp4_scale(uint32_t byte)
{
    return byte == 0 ? ldexpf(1.0f, -127) : ldexpf(1.0f, (int)byte - 127);
}

/* One MXFP4 block of 32 (fmoe_mxfp4_quantize, OCP recipe): scale byte
 * clamp(floor(log2 amax) - 2 + 127, 0, 254) (0 for zero and subnormal
 * amax), codes e2m1(x / 2^(byte - 127)) packed into 16 bytes; returns the
 * scale byte. */
FMCU_SM100_HD uint32_t fmcu_sm100_mxfp4_block(const float x[32], uint8_t packed[16])
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        float m = fabsf(x[i]);
        if (m > amax)
            amax = m;
    }
    int e;
    (void)frexpf(amax, &e); /* amax = f * 2^e, f in [0.5, 1): floor(log2) = e - 1 */
    int byte = amax == 0.0f || amax < 1.17549435e-38f ? 0 : (e - 1) - 2 + 127;
    if (isinf(amax)) /* the f32 exponent field 255, minus 2 */
        byte = 253;
    byte = byte < 0 ? 0 : byte > 254 ? 254 : byte;
    const float s = fmcu_sm100_mxfp4_scale((uint32_t)byte);
    for (int i = 0; i < 32; i += 2)
        packed[i / 2] = (uint8_t)(fmcu_sm100_e2m1_encode(x[i] / s) | fmcu_sm100_e2m1_encode(x[i + 1] / s) << 4);
    return (uint32_t)byte;
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                 */
/* ------------------------------------------------------------------------ */

/* Whether a layer of FMCU_Q_* `quant` (cuda_api.h) runs natively on a device
 * of compute capability major.minor: sm_100a code runs on 10.x only (not
 * 9.x, not 12.x), for NVFP4 and MXFP4 W4A4, with hidden and
 * per-rank intermediate sizes multiples of FMCU_SM100_K_ALIGN. Returns the
 * FMCU_SM100_* format, or 0. */
int fmcu_sm100_native(int quant, int major, int minor, uint32_t hidden, uint32_t inter);

/* The workspace of the path: one allocation, buffers at these offsets (each
 * 256-byte aligned). rows = max_tokens * top_k. The staged GEMM input (GEMM1's,
 * then GEMM2's) as packed codes and swizzled scales, D in f32, the
 * per-expert argument arrays (args_bytes, from sm100_gemm.cu) and CUTLASS's
 * workspace of each GEMM (gemm13_bytes, gemm2_bytes). */
typedef struct fmcu_sm100_ws {
    size_t a_codes, a_sf, d, args13, args2, gemm13, gemm2, total;
    size_t a_sf_bytes; /* bytes of the scale buffer (padding zeroed per call where read) */
} fmcu_sm100_ws;

void fmcu_sm100_workspace_layout(uint64_t rows, uint32_t experts, uint32_t hidden, uint32_t inter, int gated,
                                 uint32_t vec, size_t args_bytes, size_t gemm13_bytes, size_t gemm2_bytes,
                                 fmcu_sm100_ws *ws);

/* Weight scales [experts, rows, sf_cols] (linear, as the checkpoint) ->
 * each expert's swizzled matrix, back to back (experts *
 * fmcu_sm100_sf_bytes(rows, sf_cols) bytes, padding 0). */
void fmcu_sm100_swizzle_weight_sf(uint32_t experts, uint32_t rows, uint32_t sf_cols, const uint8_t *linear,
                                  uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
