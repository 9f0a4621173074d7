/*
 * plugins/megamoe/ep_fused_layout.h - the SM90 path's fused EP forward
 * (docs/MEGAMOE.md, "Expert parallelism, fused"): the region of the EP
 * group's NCCL window it uses (fmcu_ep_params.extra_bytes), the same
 * offsets on every rank. T = max_tokens_per_rank, R ranks, k = top_k:
 *
 *   arrive_send[R]  u64   forwards whose rows rank s has written in its window (a release-
 *                         add by s's last send block; only grows)
 *   arrive_comb[R]  u64   forwards whose combine rows rank s has written here
 *   count           u32   tokens this rank passed this forward
 *   x [T, H]        e4m3  this rank's tokens, quantized per 32 (the method's input rule)
 *   xs [T, pitch]   f32   their scales (x 2^6, as the GEMM takes them; mm90_xs_pitch(H))
 *   ids [T, k]      i32   their global physical expert ids
 *   w [T, k]        f32   their routing weights
 *   comb [k, T, H]  bf16  slot j of token t: the expert's output row, written by the
 *                         rank holding that expert (each slot has one writer)
 *   seq             u64   local: forwards completed (the arrival targets)
 *   done [4]        u32   local: blocks of this forward's send (0) and finish (1) that
 *                         finished (the last one signals, then resets it); 2, 3 spare
 *   ids_in [R T, k] i32   local: every rank's ids as gathered here, -1 where masked
 *   w_in [R T, k]   f32   local: their routing weights
 *
 * Peers read x, xs, ids, w and count (the gather) and write comb and the
 * arrival counters; the last four views only this rank touches. Every
 * view starts at a multiple of 256 bytes. Also the two checks on a group
 * the fused forward makes before it takes a forward (ep_fused.c). Plain C:
 * tests/megamoe.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_EP_FUSED_LAYOUT_H
#define FMOE_PLUGIN_MEGAMOE_EP_FUSED_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MM_EPF_ALIGN     256u
#define MM_EPF_MAX_RANKS 64u /* FMCU_EP_MAX_RANKS */

typedef struct mm_epf_layout {
    uint32_t size, max_tokens, hidden, top_k;
    uint32_t xs_pitch; /* floats per row of xs */
    uint64_t arrive_send, arrive_comb, count, x, xs, ids, w, comb, seq, done, ids_in, w_in;
    uint64_t bytes;
} mm_epf_layout;

/* Fill *L; 0, or -1 with the reason: a size outside 1..64, no tokens, H
 * not a multiple of 128, top_k outside 1..32, or more than 2^40 bytes. */
int mm_epf_layout_make(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, mm_epf_layout *L, char *why,
                       size_t cap);

/* 1 when owner[n] is the linear placement of `size` ranks of `local`
 * experts each (owner[i] = i / local, n = size x local): a pair's rank is
 * then its id / local, which the fused kernels take; else 0. */
int mm_epf_linear_placement(const int32_t *owner, uint32_t n, uint32_t size, uint32_t local);

/* 1 when base[0..size) lie one stride apart (base[r] = base[0] + r x
 * (base[1] - base[0]): NCCL's flat window range), which GEMM2's addressing
 * of every rank's comb takes; else 0. */
int mm_epf_one_stride_apart(char *const *base, uint32_t size);

#ifdef __cplusplus
}
#endif
#endif
