/*
 * fusedmoe/formats.h - bit-exact codecs for the quantized formats of fused
 * MoE checkpoints and kernels (spec/formats.md; docs/FORMATS.md explains each
 * format, the storage conventions and where we depart from vLLM).
 *
 *   FP8 e4m3fn / e4m3fnuz / e5m2    scalars, static and dynamic (per-tensor,
 *                                    per-token, 1x128 group, 128x128 block)
 *                                    quantization, FN->FNUZ, W13 requantization
 *   FP4 e2m1                         scalars, nibble packing
 *   UE8M0                            power-of-two scales, int32 packing
 *   NVFP4                            16-element blocks, e4m3 block scales,
 *                                    f32 global scale (both conventions)
 *   MXFP4                            32-element blocks, UE8M0 scales
 *   int4 / int8 in int32 words       GPTQ and compressed-tensors packing,
 *                                    group scales, act-order g_idx
 *   W4A8                             dynamic per-row asymmetric int8
 *                                    activations x int4 weights (KleidiAI)
 *
 * Rules that hold for every function here:
 *  - Arithmetic is IEEE binary32 with round-to-nearest-even, one operation at
 *    a time, in the order each contract writes it (no fused multiply-add, no
 *    excess precision): the results are the same bits on every host and are
 *    checked against independent tables (tools/gen_golden.py).
 *  - Encoders never produce NaN from a finite or infinite input: they saturate
 *    to the largest finite value of the format ("sat"). NaN inputs follow the
 *    per-format rule written next to each encoder.
 *  - Arrays are dense and row-major unless a layout is spelled out. The caller
 *    owns every buffer; nothing is allocated or kept, except that
 *    fmoe_gidx_sort allocates and frees its own scratch.
 *  - Functions returning fmoe_status return FMOE_STATUS_INVALID_ARGUMENT (and
 *    write nothing) for a bad dtype, size or shape, and never set error text:
 *    these codecs run inside plugins that do not link libfusedmoe.
 *  - Activations in BF16/F16 are converted to f32 by the caller first; every
 *    such conversion is exact, so the f32 entry points lose nothing.
 *
 * Pure C11; depends on fusedmoe/common.h only.
 */
#ifndef FUSEDMOE_FORMATS_H
#define FUSEDMOE_FORMATS_H

#include "fusedmoe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef FMOE_API
#if defined(_WIN32)
#define FMOE_API
#else
#define FMOE_API __attribute__((visibility("default")))
#endif
#endif

/* ------------------------------------------------------------------------ */
/* FP8 scalars (spec/formats.md §1.1).                                       */
/*                                                                          */
/*             bias  max finite       NaN               inf      zeros       */
/*  e4m3fn      7    448   (0x7E)     0x7F, 0xFF        none     0x00, 0x80  */
/*  e4m3fnuz    8    240   (0x7F)     0x80 only         none     0x00 only   */
/*  e5m2       15    57344 (0x7B)     0x7D-0x7F (+sign) 0x7C/FC  0x00, 0x80  */
/*                                                                          */
/* Encoders: round to nearest, ties to even, directly from f32 (no detour   */
/* through f16); |x| above the max finite value (and +-inf) saturates to    */
/* +-max. The sign of a zero result is kept (-0 -> 0x80) except in e4m3fnuz,*/
/* which has no -0 and gives 0x00. NaN -> 0x7F|sign (e4m3fn), 0x80          */
/* (e4m3fnuz), 0x7E|sign (e5m2).                                            */
/* Decoders are exact; NaN codes give a quiet NaN with the code's sign,     */
/* e5m2 0x7C/0xFC give +-inf.                                               */
/* ------------------------------------------------------------------------ */

FMOE_API uint8_t fmoe_fp8_e4m3fn_encode(float x);
FMOE_API float fmoe_fp8_e4m3fn_decode(uint8_t b);
FMOE_API uint8_t fmoe_fp8_e4m3fnuz_encode(float x);
FMOE_API float fmoe_fp8_e4m3fnuz_decode(uint8_t b);
FMOE_API uint8_t fmoe_fp8_e5m2_encode(float x);
FMOE_API float fmoe_fp8_e5m2_decode(uint8_t b);

/* The same, chosen by dtype (FMOE_DTYPE_FP8_E4M3FN, _E4M3FNUZ, _E5M2).
 * Another dtype: encode gives 0, decode gives NaN. */
FMOE_API uint8_t fmoe_fp8_encode(fmoe_dtype fp8, float x);
FMOE_API float fmoe_fp8_decode(fmoe_dtype fp8, uint8_t b);

/* Largest finite value of an FP8 dtype: 448, 240 or 57344; 0 for any other
 * dtype. (vLLM quantizes dynamically to 224, not 240, on FNUZ platforms;
 * that is a choice of the caller, passed as `fp8_max` below.) */
FMOE_API float fmoe_fp8_max(fmoe_dtype fp8);

/* ------------------------------------------------------------------------ */
/* FP8 quantization with a given scale (spec §1.2, §1.4).                    */
/* ------------------------------------------------------------------------ */

/* Static quantization with the dequant scale `scale`:
 *   q[i] = encode(clamp(x[i] / scale, -fp8_max, +fp8_max))
 * (division, as vLLM's kernels; the clamp keeps NaN). fp8_max must be in
 * (0, fmoe_fp8_max(fp8)] and scale finite and > 0. */
FMOE_API fmoe_status fmoe_fp8_quantize(fmoe_dtype fp8, float fp8_max, float scale, const float *x, int64_t n,
                                       uint8_t *q);

/* x[i] = decode(q[i]) * scale. */
FMOE_API fmoe_status fmoe_fp8_dequantize(fmoe_dtype fp8, float scale, const uint8_t *q, int64_t n, float *x);

/* vLLM normalize_e4m3fn_to_e4m3fnuz (spec §1.3), in place: every 0x80 in
 * q[0..n) (e4m3fn -0, but NaN in e4m3fnuz) becomes 0x00, the other bytes are
 * kept and from now on read as e4m3fnuz (which decodes every one of them to
 * exactly half its e4m3fn value), and every scales[i] is doubled, so that
 * decode_fnuz(q) * 2s == decode_fn(q) * s bit for bit. Call it again with
 * q = NULL, n = 0 for the static input scales, which double too.
 * 0x7F/0xFF (NaN in e4m3fn) are kept and become +-240; vLLM does the same. */
FMOE_API void fmoe_fp8_e4m3fn_to_fnuz(uint8_t *q, int64_t n, float *scales, int64_t num_scales);

/* ------------------------------------------------------------------------ */
/* FP8 dynamic quantization: one scale per block of a matrix (spec §1.2,     */
/* §1.4, §3.3). Block shapes: per-tensor (rows x cols), per-token (1 x cols),*/
/* DeepSeek activations (1 x 128), DeepSeek weights (128 x 128), DeepGEMM /  */
/* MegaMoE activations (1 x 32).                                             */
/* ------------------------------------------------------------------------ */

/* How a block's dequant scale s is derived from amax = max |x| over the block
 * (NaN elements are skipped by the max). */
#define FMOE_FP8_SCALE_F32 1 /* s = max(amax / fp8_max, 1 / (fp8_max * 512))   (vLLM) */
#define FMOE_FP8_SCALE_UE8M0 \
    2 /* s = 2^ceil(log2(max(amax, 1e-4) / fp8_max)), \
         exponent clamped to [-126, 127]   (DeepGEMM) */

/* The scale of one block with maximum magnitude `amax` under `rule`, every
 * step in f32 as written above (the UE8M0 power of two is the one
 * fmoe_ue8m0_encode_ceil picks). NaN for an unknown rule. */
FMOE_API float fmoe_fp8_dynamic_scale(float amax, float fp8_max, int32_t rule);

/* Quantize x[rows, cols] block by block: blocks of block_rows x block_cols
 * (the last block row/column may be partial), scale s per block from its amax
 * by `rule`, q = encode(clamp(x / s, +-fp8_max)).
 * scales: [ceil(rows / block_rows), ceil(cols / block_cols)], row-major, the
 * dequant multipliers (DeepSeek's `weight_scale_inv` is this, not its inverse).
 * rows, cols, block sizes > 0; fp8_max in (0, fmoe_fp8_max(fp8)]. */
FMOE_API fmoe_status fmoe_fp8_quantize_blocks(fmoe_dtype fp8, float fp8_max, int32_t rule, int64_t rows, int64_t cols,
                                              int64_t block_rows, int64_t block_cols, const float *x, uint8_t *q,
                                              float *scales);

/* x[r, c] = decode(q[r, c]) * scales[r / block_rows, c / block_cols]. */
FMOE_API fmoe_status fmoe_fp8_dequantize_blocks(fmoe_dtype fp8, int64_t rows, int64_t cols, int64_t block_rows,
                                                int64_t block_cols, const uint8_t *q, const float *scales, float *x);

/* Per-tensor W13 requantization of one expert to a single scale (spec §1.5,
 * vLLM process_fp8_weight_tensor_strategy_moe): q holds the gate shard
 * q[0 .. shard_elems) with dequant scale shard_scales[0] and the up shard
 * q[shard_elems .. 2*shard_elems) with shard_scales[1]. With
 * s = max(shard_scales[0], shard_scales[1]), every byte of shard i becomes
 *   encode(clamp(decode(q) * shard_scales[i] / s, +-fp8_max))
 * in place, and *scale_out = s. Computed in f32; vLLM dequantizes in fp16,
 * which can round a product differently (see docs/FORMATS.md). Bytes of the
 * shard whose scale is s come back unchanged unless they exceed fp8_max.
 * Both scales finite and > 0. */
FMOE_API fmoe_status fmoe_fp8_requantize_w13(fmoe_dtype fp8, float fp8_max, int64_t shard_elems, uint8_t *q,
                                             const float shard_scales[2], float *scale_out);

/* ------------------------------------------------------------------------ */
/* FP4 e2m1 (spec §2.1, §2.2): 1 sign bit (bit 3), 2 exponent bits (bias 1), */
/* 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no inf, no NaN.    */
/* A code is the low 4 bits of a uint8_t.                                    */
/* ------------------------------------------------------------------------ */

/* Round to nearest, ties to even (0.25->0, 0.75->1, 1.25->1, 1.75->2,
 * 2.5->2, 3.5->4, 5->4), saturating at +-6 (inf too), sign of zero kept
 * (-0.1 -> 0x8), as PTX cvt.rn.satfinite.e2m1x2.f32. NaN -> 0x7 (+6). */
FMOE_API uint8_t fmoe_fp4_e2m1_encode(float x);

/* DeepGEMM's reference rounding (spec §2.1): code = number of midpoints
 * {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} strictly below |x|, so ties go toward
 * zero and large values saturate to 6; the sign bit is set only for x < 0
 * with a nonzero code (never -0). NaN -> 0x0. */
FMOE_API uint8_t fmoe_fp4_e2m1_encode_ties_to_zero(float x);

/* Exact value of the low 4 bits of `code` (0x8 gives -0.0). */
FMOE_API float fmoe_fp4_e2m1_decode(uint8_t code);

/* Two codes per byte, element 2i in the low nibble and 2i+1 in the high one:
 * packed[i] = (codes[2i] & 0xF) | (codes[2i+1] & 0xF) << 4, ceil(n/2) bytes;
 * for odd n the last high nibble is 0. unpack is the inverse (n codes out). */
FMOE_API void fmoe_fp4_pack(const uint8_t *codes, int64_t n, uint8_t *packed);
FMOE_API void fmoe_fp4_unpack(const uint8_t *packed, int64_t n, uint8_t *codes);

/* ------------------------------------------------------------------------ */
/* UE8M0 power-of-two scales (spec §3.1-§3.3): value 2^(b - 127), no sign,   */
/* no zero, no inf; 0xFF is NaN.                                             */
/* ------------------------------------------------------------------------ */

/* b in 1..254: 2^(b-127) (bits b << 23); b = 0: 2^-127 (the f32 subnormal
 * 0x00400000, where vLLM/DeepGEMM's shift gives 0.0); b = 255: NaN (where the
 * shift gives +inf). */
FMOE_API float fmoe_ue8m0_decode(uint8_t b);

/* The smallest power of two >= |x|, as DeepGEMM's ceil_to_ue8m0: the f32
 * exponent field of |x|, plus 1 if any mantissa bit is set, clamped to
 * [1, 254]. So 0 and f32 subnormals give 1 (2^-126), values above 2^127 and
 * inf give 254, NaN gives 254. The sign of x is ignored. */
FMOE_API uint8_t fmoe_ue8m0_encode_ceil(float x);

/* The f32 exponent field of |x| (bits >> 23, sign dropped): exact for powers
 * of two 2^-127..2^127 (DeepGEMM's pack_ue8m0_to_int), the largest power of two
 * <= |x| for other normals, 0 for zero and subnormals, 255 for inf and NaN. */
FMOE_API uint8_t fmoe_ue8m0_encode_floor(float x);

/* Four scale bytes per 32-bit word, little-endian: byte j (bits 8j..8j+7) of
 * word w is exps[4w + j] (spec §3.3, DeepGEMM / MegaMoE x_sf). ceil(n/4)
 * words; the bytes past n in the last word are 0. unpack writes n bytes. */
FMOE_API void fmoe_ue8m0_pack_int32(const uint8_t *exps, int64_t n, uint32_t *words);
FMOE_API void fmoe_ue8m0_unpack_int32(const uint32_t *words, int64_t n, uint8_t *exps);

/* DeepGEMM's MN-major, TMA-aligned packed scale layout (spec §7.1, E16):
 * exps [mn, sf_k] row-major -> words [ceil(sf_k/4), align4(mn)] where word
 * (w, m) packs exps[m, 4w .. 4w+3] as fmoe_ue8m0_pack_int32 does; rows
 * m >= mn and bytes past sf_k are 0. Words written:
 * fmoe_ue8m0_mn_major_words(mn, sf_k). mn, sf_k > 0. */
FMOE_API int64_t fmoe_ue8m0_mn_major_words(int64_t mn, int64_t sf_k);
FMOE_API fmoe_status fmoe_ue8m0_pack_mn_major(int64_t mn, int64_t sf_k, const uint8_t *exps, uint32_t *words);

/* ------------------------------------------------------------------------ */
/* NVFP4 (spec §2.3, §2.4): rows of e2m1 codes packed two per byte along K,  */
/* one e4m3fn block scale per 16 elements, one f32 global factor.            */
/* ------------------------------------------------------------------------ */

/* Which number the caller holds as the global factor (spec §2.3):
 *  QUANT:   the quant multiplier g = 448*6/amax, large; compressed-tensors
 *           `weight_global_scale` / `input_global_scale`.
 *  DEQUANT: 1/g, small; ModelOpt `weight_scale_2` / `input_scale`, and vLLM's
 *           internal `w13_weight_scale_2` / `a13_scale`. */
#define FMOE_NVFP4_GLOBAL_QUANT   1
#define FMOE_NVFP4_GLOBAL_DEQUANT 2

/* g = (448 * 6) / amax in f32 (the compressed-tensors calibration; amax 10
 * gives 268.79998779). amax must be > 0. */
FMOE_API float fmoe_nvfp4_global_from_amax(float amax);

/* Quantize x[rows, cols] (cols % 16 == 0) as vLLM's kernel and its
 * ref_nvfp4_quant do, in f32 (g = global, or 1/global for DEQUANT):
 *   vmax  = max |x| over the block (NaN skipped)
 *   sf    = e4m3fn_encode(g * (vmax * (1/6)))        saturates at 448
 *   out   = sf == 0 ? 0 : 1 / (decode(sf) * (1/g))
 *   code  = e2m1_encode(x * out)                     RNE, saturates at 6
 * packed [rows, cols/2] (fmoe_fp4_pack order), block_scales [rows, cols/16]
 * e4m3fn bytes in the linear (not swizzled) layout. global finite and > 0. */
FMOE_API fmoe_status fmoe_nvfp4_quantize(int64_t rows, int64_t cols, const float *x, float global, int32_t convention,
                                         uint8_t *packed, uint8_t *block_scales);

/* x = e2m1(code) * (decode(sf) / g)        QUANT   (vLLM dequantize_to_dtype)
 * x = e2m1(code) * (decode(sf) * global)   DEQUANT (global = 1/g as stored)
 * A NaN block scale (0x7F/0xFF) gives NaN for its 16 elements. */
FMOE_API fmoe_status fmoe_nvfp4_dequantize(int64_t rows, int64_t cols, const uint8_t *packed,
                                           const uint8_t *block_scales, float global, int32_t convention, float *x);

/* ------------------------------------------------------------------------ */
/* Swizzled block-scale layout of CUTLASS / cuBLASLt / FlashInfer (spec      */
/* §2.5): a [rows, sf_cols] scale matrix padded to rows % 128 == 0 and        */
/* sf_cols % 4 == 0 (padding 0), stored as [rows/128, sf_cols/4, 32, 4, 4].   */
/* Same for NVFP4 (16-element blocks) and MXFP8 (32-element blocks).          */
/* ------------------------------------------------------------------------ */

/* Byte offset of scale (m, kb):
 *   ((m/128)*ceil(sf_cols/4) + kb/4)*512 + (m%32)*16 + ((m/32)%4)*4 + kb%4 */
FMOE_API int64_t fmoe_blockscale_swizzle_offset(int64_t m, int64_t kb, int64_t sf_cols);
/* Bytes of the padded, swizzled matrix: align128(rows) * align4(sf_cols). */
FMOE_API int64_t fmoe_blockscale_swizzled_bytes(int64_t rows, int64_t sf_cols);
/* linear [rows, sf_cols] -> swizzled (fmoe_blockscale_swizzled_bytes). */
FMOE_API fmoe_status fmoe_blockscale_swizzle(int64_t rows, int64_t sf_cols, const uint8_t *linear, uint8_t *swizzled);

/* ------------------------------------------------------------------------ */
/* MXFP4 (spec §3.1, §3.3): e2m1 codes, one UE8M0 scale per 32 elements.     */
/* ------------------------------------------------------------------------ */

/* How the block scale and the codes are chosen (amax = max |x| of the block,
 * NaN skipped):
 *  OCP:      scale byte = clamp(floor(log2(amax)) - 2 + 127, 0, 254), 0 for
 *            amax == 0 (OCP MX v1.0: emax(e2m1) = 2); codes
 *            fmoe_fp4_e2m1_encode(x / 2^(byte-127)): RNE, saturating.
 *  DEEPGEMM: scale byte = fmoe_ue8m0_encode_ceil(max(amax, 1e-4) / 6)
 *            (per_token_cast_to_fp4); codes
 *            fmoe_fp4_e2m1_encode_ties_to_zero(x / 2^(byte-127)).
 * For amax = 7 OCP picks 2^0 (7 saturates to 6), DeepGEMM 2^1 (3.5 -> 3). */
#define FMOE_MXFP4_RECIPE_OCP      1
#define FMOE_MXFP4_RECIPE_DEEPGEMM 2

/* x[rows, cols] (cols % 32 == 0) -> packed [rows, cols/2] (fmoe_fp4_pack
 * order), scales [rows, cols/32] UE8M0 bytes. */
FMOE_API fmoe_status fmoe_mxfp4_quantize(int64_t rows, int64_t cols, int32_t recipe, const float *x, uint8_t *packed,
                                         uint8_t *scales);

/* x = e2m1(code) * fmoe_ue8m0_decode(scale): exact; scale byte 0 scales by
 * 2^-127 (f32 subnormals), byte 255 makes the whole block NaN. */
FMOE_API fmoe_status fmoe_mxfp4_dequantize(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *scales,
                                           float *x);

/* ------------------------------------------------------------------------ */
/* int4 / int8 weights packed in 32-bit words (spec §4.1-§4.3; GPTQ and      */
/* compressed-tensors `pack-quantized`). Values are the signed integers      */
/* [-8, 7] / [-128, 127]; stored = value + 8 / + 128 (uint4b8, uint8b128),   */
/* pf = 32/bits per word, element j*pf + i at bits [i*bits, i*bits + bits)   */
/* of word j. Words are uint32_t; the checkpoint's int32 is the same bits.   */
/* bits is 4 or 8.                                                           */
/* ------------------------------------------------------------------------ */

/* Along the contiguous axis (compressed-tensors weight_packed [N, K/pf]):
 * n values (n % pf == 0) -> n/pf words. A value out of range is rejected. */
FMOE_API fmoe_status fmoe_int_pack_int32(int32_t bits, int64_t n, const int8_t *values, uint32_t *words);
FMOE_API fmoe_status fmoe_int_unpack_int32(int32_t bits, int64_t n, const uint32_t *words, int8_t *values);

/* Along rows (GPTQ qweight): values [k, n] (k % pf == 0) -> words [k/pf, n],
 * word (j, c) holding values (j*pf + i, c). */
FMOE_API fmoe_status fmoe_int_pack_int32_rows(int32_t bits, int64_t k, int64_t n, const int8_t *values,
                                              uint32_t *words);
FMOE_API fmoe_status fmoe_int_unpack_int32_rows(int32_t bits, int64_t k, int64_t n, const uint32_t *words,
                                                int8_t *values);

/* Symmetric dequantization of values [n, k] (row n = output channel):
 *   w[r, c] = (float)values[r, c] * scales[r * scale_stride_row + g(c) * scale_stride_group]
 * g(c) = g_idx[c] when g_idx is non-NULL (act-order), else c / group_size;
 * group_size <= 0 means one group per row (channelwise). num_groups bounds
 * g (each g_idx entry must be in [0, num_groups)). Strides in elements:
 * compressed-tensors scales [N, G] are (G, 1), GPTQ scales [G, N] are (1, N).
 * Scales stored as f16/bf16 are converted by the caller (exactly). */
FMOE_API fmoe_status fmoe_int_dequantize(int64_t n, int64_t k, const int8_t *values, const float *scales,
                                         int64_t scale_stride_row, int64_t scale_stride_group, int64_t group_size,
                                         const int32_t *g_idx, int64_t num_groups, float *w);

/* Act-order sort (spec §4.3, vLLM marlin_sort_g_idx): perm = a stable argsort
 * of g_idx[0..k) (equal groups keep their original order), and
 * g_idx_sorted[i] = g_idx[perm[i]] (may be NULL). Row i of the repacked
 * weight is original row perm[i]; activation column i is A[:, perm[i]].
 * Every entry must be in [0, num_groups). FMOE_STATUS_OUT_OF_MEMORY if the
 * scratch (num_groups counters) cannot be allocated. */
FMOE_API fmoe_status fmoe_gidx_sort(int64_t k, const int32_t *g_idx, int64_t num_groups, int32_t *perm,
                                    int32_t *g_idx_sorted);

/* ------------------------------------------------------------------------ */
/* W4A8, Arm KleidiAI style (spec §5): dynamic asymmetric int8 activations   */
/* per row (qai8dx) x symmetric int4 weights per channel or per group.       */
/* ------------------------------------------------------------------------ */

/* Per row of x[rows, k] (k > 0), in f32 exactly as KleidiAI's
 * kai_lhs_quant_pack_qai8dxp_f32 (and PyTorch's reference kernel):
 *   rmin = min(0, min x), rmax = max(0, max x)
 *   s0   = rmin == rmax ? 1 : 255 / (rmax - rmin)            quant multiplier
 *   zp   = (-128 + rmin*s0) + (127 + rmax*s0) > 0 ? -128 - rmin*s0 : 127 - rmax*s0
 *   nzp  = rint(clamp(zp, -128, 127))                         ties to even
 *   q    = clamp(round(x * s0) + nzp, -128, 127)              round: half away from 0
 * offsets[r] = -nzp, scales[r] = 1/s0 (the dequant scale): x ~ (q + offset) * scale.
 * A row holding a NaN or inf has no range: its codes are 0, its offset 0 and
 * its scale NaN, so it dequantizes to NaN and no other row is touched. */
FMOE_API fmoe_status fmoe_w4a8_quantize_activations(int64_t rows, int64_t k, const float *x, int8_t *q,
                                                    int32_t *offsets, float *scales);

/* x[r, c] = (float)(q[r, c] + offsets[r]) * scales[r]. */
FMOE_API fmoe_status fmoe_w4a8_dequantize_activations(int64_t rows, int64_t k, const int8_t *q, const int32_t *offsets,
                                                      const float *scales, float *x);

/* int4 weights [n, k] with values in [-8, 7] (k even) -> uint8 [n, k/2], the
 * input format of KleidiAI's packers and of PyTorch _dyn_quant_pack_4bit_weight:
 * nibble = value + 8, element 2i in the low nibble. unpack is the inverse. */
FMOE_API fmoe_status fmoe_w4a8_pack_weights(int64_t n, int64_t k, const int8_t *w, uint8_t *packed);
FMOE_API fmoe_status fmoe_w4a8_unpack_weights(int64_t n, int64_t k, const uint8_t *packed, int8_t *w);

/* Reference W4A8 matmul out[m, n] = sum_k x[m, k] * W[n, k], from the
 * quantized operands (q, offsets, scales of fmoe_w4a8_quantize_activations;
 * packed weights [n, k/2]):
 *  channelwise (group_size == k): scale dtype F32, w_scales [n];
 *    acc = sum_k (q + offset) * w  (integer), out = ((float)acc * w_scales[n]) * scales[m]
 *  groupwise (group_size % 32 == 0, k % group_size == 0, group_size < k):
 *    scale dtype BF16 (uint16_t bits), w_scales [n, k/group_size];
 *    f = 0; for each group b in order: f += (float)acc_b * bf16(w_scales[n, b]);
 *    out = f * scales[m]
 * Other scale dtypes are rejected (PyTorch silently falls back to a different
 * blob when they are wrong; we refuse). */
FMOE_API fmoe_status fmoe_w4a8_matmul(int64_t m, int64_t n, int64_t k, const int8_t *q, const int32_t *offsets,
                                      const float *scales, const uint8_t *w_packed, int64_t group_size,
                                      const void *w_scales, fmoe_dtype w_scale_dtype, float *out);

#ifdef __cplusplus
}
#endif
#endif /* FUSEDMOE_FORMATS_H */
