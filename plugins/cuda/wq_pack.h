/*
 * plugins/cuda/wq_pack.h - the layout of the 4-bit and int weights on the
 * device (FMCU_Q_WNA16, MXFP4, NVFP4, NVFP4_A4) and the host code that
 * builds it once at finalize. Pure C, no CUDA: CI unit-tests it
 * (tests/cuda/test_cuda_wq_pack.c).
 *
 * Weights. One expert's matrix [N, K] (N output rows, K reduction columns,
 * the checkpoint's orientation after unpacking) is stored as N rows of
 * Kp / 32 chunks (Kp = K rounded up to 32, or the act-order padded K
 * below); a chunk holds 32 columns in the order the mma.sync m16n8k16 B
 * fragment consumes them, so that lane (g, c4) of a warp reads its whole
 * share of a chunk with one 4-byte (4-bit codes) or 8-byte (int8) load:
 *
 *   position p = 8 * c4 + i (i = 0..7) holds column
 *   k = 16 * (i >> 2) + 8 * ((i >> 1) & 1) + 2 * c4 + (i & 1)
 *
 * i.e. the lane's b0/b1 registers of the first k16 step, then of the
 * second. int8: byte p (chunk = 32 bytes). 4-bit codes (chunk = 16 bytes):
 * the lane's 4 bytes, read as a little-endian 32-bit word, hold position
 * i at nibble 4 * (i & 1) + (i >> 1) (fmcu_wq_nibble), so that the pair of
 * one bf16 register (positions 2 j, 2 j + 1) sits at bits 4 j and 4 j + 16
 * and comes out with one shift and one masked OR into both halves of a
 * packed constant, with no byte permute (docs/CUDA.md, "4-bit and int
 * weights"). Padding columns hold the code of zero.
 *
 * Codes. int4: value + 8 (0..15); int8: the signed value; e2m1: the code.
 * The kernel forms (value - zero point) or e2m1 * block scale, both exact
 * in bf16 (and f16), as the MMA operand.
 *
 * Act-order (g_idx). The reference sorts K by group (stable, refq's
 * fmoe_gidx_sort) and permutes the GEMM input the same way. Here each
 * group's run of sorted columns is then padded to a multiple of 16 (zero
 * weights; the input gather writes 0 there), so every k16 MMA step lies in
 * one group and the group's partial sum can be scaled once in f32 (int
 * scales times values are not exact in bf16). kgrp[kp / 16] names that
 * group; src[kp] the sorted column (or -1), perm_pad[kp] the original
 * input column (or -1). Kp is the same for all experts (the largest, to
 * 32): an expert's tail is padding in its last group.
 */
#ifndef FMOE_PLUGIN_CUDA_WQ_PACK_H
#define FMOE_PLUGIN_CUDA_WQ_PACK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FMCU_WQ_CHUNK 32 /* K columns per chunk (two k16 MMA steps) */

/* Weight formats of the kernel (wq_gemm.cu). */
#define FMCU_WQ_INT4 0
#define FMCU_WQ_INT8 1
#define FMCU_WQ_FP4  2

/* One projection (W13 or W2) on the device. */
typedef struct fmcu_wq_proj {
    const void *w;        /* [E, N, Kp/32] chunks (bytes: fmcu_wq_chunk_bytes) */
    const float *scale;   /* INT: [E, N, groups] f32; FP4: [E, N, Kp/block] decoded block scales */
    const uint8_t *sf8;   /* FP4: [E, N, Kp/block] the checkpoint's scale codes (ue8m0 or e4m3fn; 0 in
                           * padding): what the stream kernel reads, a quarter of the f32 bytes */
    const int8_t *zero;   /* INT asymmetric: [E, N, groups] (bias removed), else NULL */
    const uint16_t *kgrp; /* act-order: [E, Kp/16] group of each k16 step, else NULL */
    const int32_t *perm;  /* act-order: [E, Kp] input column of each padded column, -1: zero */
    const float *out_mul; /* NVFP4: [E] f32 multiplier of the accumulator (1/g_w, W4A4 also 1/g_in), else NULL */
    const float *in_glob; /* NVFP4 W4A4: [E] the activation quant multiplier g_in */
    uint32_t k;           /* K of the checkpoint */
    uint32_t kp;          /* padded K (multiple of 32) */
    uint32_t groups;      /* INT: scale groups per row; FP4: Kp / block */
    uint32_t group;       /* INT without act-order: columns per group (K for channelwise) */
    uint32_t mx_fold;     /* MXFP4: 1 when every scale code is <= 128 (scales <= 2), so that the stream
                           * kernel folds 2^126 into them (wq_stream.cu, SF_MX); 0 when not or unknown */
} fmcu_wq_proj;

typedef struct fmcu_wq {
    int32_t format;     /* FMCU_WQ_* */
    uint32_t fp4_block; /* FP4: 16 (NVFP4) or 32 (MXFP4) */
    fmcu_wq_proj w13, w2;
    /* Per-pair GEMM inputs [max_tokens * top_k, kp] act dtype (act-order
     * gather, W4A4 quantization), allocated at finalize; NULL if unused. */
    void *a1, *a2;
    /* The prefill path's bf16 weights of dq_experts experts at a time
     * (prefill_dequant.h: e2m1 formats, compute capability 9.x), allocated
     * at finalize from the option prefill_dequant_mib
     * (fmcu_wq_dequant_experts); NULL and 0 when the layer does not use it. */
    void *dq;
    uint32_t dq_experts;
} fmcu_wq;

/* Bytes of one chunk of 32 columns. */
size_t fmcu_wq_chunk_bytes(int32_t format);

/* Whether the weight-streaming kernel (wq_stream.cu) serves projection w of
 * this format: one MMA there takes each of a quad's lanes from a different
 * chunk of the same row, spanning 128 columns (4-bit) or 64 (int8), so an
 * int scale group must cover whole spans (group a multiple of the span, or
 * one group); act-order's 16-column runs are the tiled kernel's. K % 8 == 0
 * (16-byte activation loads). FP4 scales are folded into the operand. */
int fmcu_wq_stream_serves(int32_t format, const fmcu_wq_proj *w);

/* Whether the wgmma kernel (wq_wgmma.cu, sm_90a) serves projection w of
 * this format with activations act_dtype on a device of compute capability
 * major.x: int4 with one scale group or groups of a multiple of 128
 * columns (one promotion per 128-column stage), or e2m1 with its scale
 * codes and bf16 activations (the bit-moving dequantization is bf16's); no
 * act-order; K % 8 == 0 (16-byte copies of token rows). */
int fmcu_wq_wgmma_serves(int32_t format, int32_t act_dtype, int major, const fmcu_wq_proj *w);

/* Whether the wgmma weight stream (wq_ring.cu) serves projection w of
 * `experts` experts of `rows` rows: what fmcu_wq_wgmma_serves accepts, with
 * every row's first scale at a 32-bit offset (experts * rows * groups <
 * 2^32: the kernel keeps them in 32 bits for registers). */
int fmcu_wq_ring_serves(int32_t format, int32_t act_dtype, int major, uint32_t experts, uint32_t rows,
                        const fmcu_wq_proj *w);

/* Token rows per tile of the wgmma kernel (the plan's row tile). 64 at
 * every size: two CTAs then share an SM, one dequantizing while the other's
 * wgmmas run, which beat tiles of 128 (one CTA an SM) at Qwen3-30B-A3B
 * M = 8192 by 26% for int4 g128 (3776.7 -> 2797.4 us on an H200) and 25%
 * for MXFP4; Mixtral-8x7B int4 g128 M = 8192 lost 3.5% (19822 -> 20529).
 * bench/cuda/RESULTS.md at a920f9d, "4-bit weights: the wgmma form". */
#define FMCU_WQ_WGMMA_TILE 64

/* Row tile of the plan for the wgmma weight stream (wq_ring.cu): up to 64
 * pairs of an expert on wgmma's N side (n8 slices), so that a call of a
 * few dozen rows an expert reads and dequantizes each weight once. */
#define FMCU_WQ_RING_TILE 64

/* Slabs of 16 weight rows per CTA of the stream kernel (4, 2 or 1): the
 * most that still gives every SM about 4 CTAs (tiles x slabs / S CTAs).
 * More slabs a CTA means each warp streams more of K (fewer, longer CTAs,
 * no partial sums to add); fewer spreads few experts over all SMs. */
uint32_t fmcu_wq_stream_slabs(int64_t tiles, uint32_t slabs, int sms);

/* The prefill path's dequantized experts (prefill_dequant.h): how many
 * experts' bf16 W13 [rows13, H] or W2 [H, I] fit `mib` MiB at once, at most
 * E and FMCU_WQ_DQ_MAX_EXPERTS (a run is one grouped-GEMM launch, which
 * serves at most that many: grouped_gemm.h's FMCU_GG_MAX_EXPERTS, kept
 * equal by a static_assert in prefill_sm90.cu); 0 when not one does or mib
 * is 0 (no scratch). */
#define FMCU_WQ_DQ_MAX_EXPERTS 1024
uint32_t fmcu_wq_dequant_experts(uint32_t rows13, uint32_t hidden, uint32_t inter, uint32_t experts, uint32_t mib);
/* Bytes of one expert's slot in that scratch: the larger of its bf16 W13 and W2. */
uint64_t fmcu_wq_dequant_expert_bytes(uint32_t rows13, uint32_t hidden, uint32_t inter);

/* Column (0..31) of a chunk at fragment position p, and its inverse. */
uint32_t fmcu_wq_frag_col(uint32_t p);
uint32_t fmcu_wq_frag_pos(uint32_t col);

/* 4-bit codes: the nibble (0..31, low nibble of byte 0 first) of a chunk
 * that holds fragment position p. */
uint32_t fmcu_wq_nibble(uint32_t p);

/* Rows of codes [rows, k] (one byte a code: int4 0..15, e2m1 0..15, int8 any)
 * into chunks [rows, kp/32] in fragment order; columns k..kp hold `pad`.
 * src_col: NULL, or [kp] the column of codes each padded column takes
 * (-1: pad), for act-order. kp % 32 == 0, kp >= k (without src_col). */
void fmcu_wq_pack(int32_t format, uint32_t rows, uint32_t k, uint32_t kp, const uint8_t *codes, const int32_t *src_col,
                  uint8_t pad, uint8_t *out);

/* Act-order: padded width of one expert whose sorted group ids are
 * sorted_gidx[k] (non-decreasing): each group's run rounded up to 16. */
uint32_t fmcu_wq_actorder_width(uint32_t k, const int32_t *sorted_gidx);

/* Act-order tables of one expert for the common padded width kp (>= its
 * own width, a multiple of 32): src[kp] sorted column or -1, perm_pad[kp]
 * = perm[src] or -1, kgrp[kp/16]. -1 if kp is too small. */
int fmcu_wq_actorder_tables(uint32_t k, const int32_t *sorted_gidx, const int32_t *perm, uint32_t kp, int32_t *src,
                            int32_t *perm_pad, uint16_t *kgrp);

/* ------------------------------------------------------------------------ */
/* Finalize on the host: one projection built from the checkpoint's tensors */
/* ------------------------------------------------------------------------ */

/* Host arrays of one projection (malloc'd; fmcu_wq_host_free), the
 * fmcu_wq_proj fields before upload. */
typedef struct fmcu_wq_host {
    uint8_t *w;
    size_t w_bytes;
    float *scale;
    size_t scale_count;
    uint8_t *sf8;   /* FP4: [E, N, kp/block] scale codes, else NULL */
    int8_t *zero;   /* or NULL */
    uint16_t *kgrp; /* act-order, [E, kp/16] */
    int32_t *perm;  /* act-order, [E, kp] */
    uint32_t experts, rows, k, kp, groups, group;
    uint32_t mx_fold; /* fmcu_wq_proj.mx_fold */
} fmcu_wq_host;

/* WNA16 (vLLM's pack-quantized layout, as the reference's method_wna16.c
 * reads it): words [E, K/pf, N] int32 (transposed), scales [E, G, N] of
 * sdtype (FMOE_DTYPE_F32/BF16/F16), zp_words [E, G, N/pf] or NULL, g_idx
 * [E, K] or NULL. groups G, group g (K for channelwise). 0, or -1 with the
 * reason in why (out of memory, g_idx out of range). */
int fmcu_wq_build_int(uint32_t experts, uint32_t rows, uint32_t k, int32_t bits, uint32_t groups, uint32_t group,
                      const uint32_t *words, const void *scales, int32_t sdtype, const uint32_t *zp_words,
                      const int32_t *g_idx, fmcu_wq_host *out, char *why, size_t cap);

/* MXFP4 / NVFP4: packed [E, N, K/2] e2m1 pairs, block scales [E, N, K/block]
 * (ue8m0 when mx, else e4m3fn), decoded to f32 [E, N, kp/block] (scale) and
 * kept as codes [E, N, kp/block] (sf8; padding blocks hold code 0). */
int fmcu_wq_build_fp4(uint32_t experts, uint32_t rows, uint32_t k, uint32_t block, int mx, const uint8_t *packed,
                      const uint8_t *sf, fmcu_wq_host *out, char *why, size_t cap);

void fmcu_wq_host_free(fmcu_wq_host *h);

/* Row n of expert e as the kernel sees it, back in the checkpoint's column
 * order: out[k] = dequantized weight (int: (q - zp) * scale; fp4: e2m1 *
 * block scale, NVFP4's global not applied). For tests. */
void fmcu_wq_host_row(const fmcu_wq_host *h, int32_t format, uint32_t fp4_block, uint32_t e, uint32_t n, float *out);

#ifdef __cplusplus
}
#endif
#endif
