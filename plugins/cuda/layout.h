/*
 * plugins/cuda/layout.h - the CUDA plugin's host-side decisions, pure C and
 * free of CUDA so that CI (no GPU) unit-tests them (tests/cuda/):
 *
 *   which schemes and layer configs the plugin serves, and why not;
 *   the parameters a method declares (the reference methods' names, dtypes
 *   and shapes, so the same checkpoints load: docs/REFERENCE-METHODS.md);
 *   the workspace: every buffer a forward of up to max_num_tokens needs,
 *   sized once at create (the forward allocates nothing);
 *   the GEMM row tile for a call of m tokens and the grid bound it implies.
 */
#ifndef FMOE_PLUGIN_CUDA_LAYOUT_H
#define FMOE_PLUGIN_CUDA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FMCU_MAX_PARAMS 10
/* Limits of the kernels (checked by fmcu_check_config). */
#define FMCU_MAX_LOGICAL_EXPERTS 1024 /* routing keeps one row's scores in shared memory */
#define FMCU_MAX_TOP_K           32
#define FMCU_K_ALIGN             16 /* H and I: 16-byte rows of fp8, 32-byte rows of bf16 */
#define FMCU_GEMM_BK_BYTES       64 /* K bytes per pipeline stage; block_k must be a multiple in elements */

/* The method family a scheme maps to: FMCU_Q_* (cuda_api.h), or -1 with
 * the reason in `why`. */
int fmcu_scheme_quant(const fmoe_scheme *s, char *why, size_t cap);

/* Can the kernels run this layer (validated config, padded per-rank sizes)?
 * 0, or -1 with the reason. */
int fmcu_check_config(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter, char *why,
                      size_t cap);

/* The parameters of the method serving `s` for this layer, in declaration
 * order (the reference plugin's order): descs[0..*n). Names are string
 * literals. -1 (with `why`) when a block size does not fit the layer. */
int fmcu_declare(const fmoe_layer_config *cfg, const fmoe_scheme *s, uint32_t hidden, uint32_t inter,
                 uint32_t local_experts, fmoe_param_desc descs[FMCU_MAX_PARAMS], uint32_t *n, char *why, size_t cap);

/* Byte offsets of the workspace buffers (256-byte aligned). */
typedef struct fmcu_ws {
    size_t topk_w, topk_ids;   /* [Mmax*k] f32 / i32: routing of the call (device copy), physical ids */
    size_t topk_ids_logical;   /* [Mmax*k] i32: the router's logical ids (topk_ids_out) */
    size_t pair_local;         /* [Mmax*k] i32: local expert of each (token, slot), or -1 */
    size_t offsets;            /* [E_local + 1] i32 */
    size_t plan_sync;          /* [E_local + 1] i32, zeroed at create: the wide plan's counts, then its done counter */
    size_t plan_cursor;        /* [E_local] i32: the wide plan's next free sorted position per expert */
    size_t sorted;             /* [Mmax*k] i32: pair ids grouped by expert */
    size_t tiles;              /* [max_tiles] int2: (expert, first sorted position) */
    size_t n_tiles;            /* i32 */
    size_t amax;               /* [2] u32: dynamic per-tensor amax of GEMM1 / GEMM2 inputs */
    size_t grid_sync;          /* [2] u32, zeroed at create: the one-launch decode's grid barrier */
    size_t gg_sched;           /* [2] i32, zeroed at create: our grouped GEMM's tile counter (grouped_gemm.h) */
    size_t x_stage, out_stage; /* [Mmax, H] act dtype: host x/out staged */
    size_t a1, a1_scale;       /* GEMM1 input [Mmax, H] (bf16 or fp8) and its scales */
    size_t act;                /* [Mmax*k, I] act dtype: GEMM1 output after the activation */
    size_t a2, a2_scale;       /* GEMM2 input [Mmax*k, I] fp8 and its scales (fp8 schemes) */
    size_t y;                  /* [Mmax*k, H] act dtype: GEMM2 output per pair */
    size_t logits_stage;       /* [Mmax, E_logical] f32: host logits staged */
    /* The Hopper prefill path (prefill.h): GEMM operands in expert-sorted order. */
    size_t pf_a1;       /* [Mmax*k, H] GEMM1 input, bf16 or fp8 */
    size_t pf_a1_scale; /* [Mmax*k * groups] f32 activation scales (per row, or per 1 x block_k group) */
    size_t pf_h;        /* [Mmax*k, 2I] bf16: GEMM1 output */
    size_t pf_pos;      /* [Mmax*k] i32: sorted position of each pair */
    size_t pf_args;     /* per-expert grouped-GEMM problems, pointers, strides (FMCU_PF_ARGS_*) */
    size_t pf_scalars;  /* FMCU_PF_SCALARS bytes: amaxes and dynamic per-tensor scales */
    size_t pf_cutlass;  /* FMCU_PF_CUTLASS_WS bytes: the CUTLASS kernels' workspace (TMA descriptors) */
    size_t total;
} fmcu_ws;

/* Sizes of the prefill path's fixed buffers (prefill_sm90.cu checks that
 * its arrays and the CUTLASS workspace fit). */
#define FMCU_PF_ARGS_PER_EXPERT 512
#define FMCU_PF_ARGS_FIXED      1024
#define FMCU_PF_SCALARS         256
#define FMCU_PF_CUTLASS_WS      ((size_t)1 << 20)

/* quant: FMCU_Q_*; block_k: BLOCK's group (else ignored). */
void fmcu_workspace_layout(uint32_t max_tokens, uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t local_experts,
                           uint32_t logical_experts, int32_t quant, uint32_t block_k, fmcu_ws *ws);

/* GEMM row tile (16, 32 or 64) for m tokens: small tiles when the experts
 * see few rows each (decode), large ones when they see many (prefill). */
uint32_t fmcu_row_tile(int64_t m, uint32_t top_k, uint32_t local_experts);

/* Upper bound on the row tiles of a call: every expert's last tile may be
 * partial, and at most min(pairs, E_local) experts hold any. Decreasing in
 * row_tile: the workspace sized for 16 serves 32 and 64. */
int64_t fmcu_max_tiles(int64_t pairs, uint32_t local_experts, uint32_t row_tile);

#ifdef __cplusplus
}
#endif
#endif
