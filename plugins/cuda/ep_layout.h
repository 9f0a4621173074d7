/*
 * plugins/cuda/ep_layout.h - the symmetric buffer of a CUDA EP group: what
 * every rank holds at the same offsets, so that a rank writes into a peer's
 * buffer at the offset it would use in its own (docs/EP.md, "CUDA").
 *
 * Receiving side (each rank, indexed by the source rank s):
 *   disp_arrive[s]  u64  blocks of s's dispatch that finished writing here
 *   comb_arrive[s]  u64  blocks of s's combine that finished writing here
 *   count[s]        i32  tokens s passed this forward
 *   x[s][t]         row  token t of s (activation dtype, or e4m3 codes)
 *   scale[s][t][g]  f32  its FP8 scales (one per token, or per 1x128 group)
 *   ids[s][t][k]    i32  its global physical expert ids (all k of them)
 *   w[s][t][k]      f32  its routing weights
 *   comb_y[s][t]    row  the sum, on rank s, of token t's experts held
 *                        there (activation dtype): written by s when this
 *                        rank owns token t
 * Every slot is sized for max_tokens_per_rank, so no forward needs the
 * counts on the host (LOW_LATENCY: graph-capturable). Arrival counters only
 * grow: a forward's n-th use waits for n x blocks.
 *
 * Plain C: unit-tested without a GPU (tests/cuda/test_cuda_ep_layout.c).
 */
#ifndef FMOE_PLUGIN_CUDA_EP_LAYOUT_H
#define FMOE_PLUGIN_CUDA_EP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks one group may have: peers' bases travel as a kernel argument. */
#define FMCU_EP_MAX_RANKS 64
/* Alignment of every region (a 16-byte row load needs 16; 256 keeps
 * regions on separate cache-line groups). */
#define FMCU_EP_ALIGN 256

typedef struct fmcu_ep_layout {
    uint32_t size, max_tokens, hidden, top_k;
    int32_t act_dtype, dispatch;
    uint32_t x_row_bytes;    /* bytes of one dispatched row */
    uint32_t scales_per_row; /* 0, 1 (FP8_TOKEN) or hidden / 128 (FP8_BLOCK) */
    uint32_t y_row_bytes;    /* bytes of one combined row (activation dtype) */
    uint64_t disp_arrive, comb_arrive, count, x, scale, ids, w, comb_y; /* offsets */
    uint64_t bytes;                                                     /* the whole buffer */
} fmcu_ep_layout;

/* Fill *L for a group; 0, or -1 with the reason (a size rule, or bytes
 * beyond 2^40). act_dtype is FMOE_DTYPE_BF16 or F16; dispatch an
 * FMOE_EP_DISPATCH_* (FP8_BLOCK needs hidden % 128 == 0). */
int fmcu_ep_layout_make(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, int32_t act_dtype,
                        int32_t dispatch, fmcu_ep_layout *L, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
