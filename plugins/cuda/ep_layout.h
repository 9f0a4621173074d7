/*
 * plugins/cuda/ep_layout.h - the buffers of a CUDA EP group (docs/EP.md,
 * "CUDA"): one receive buffer per rank, with the same offsets on every
 * rank, and (collective transport only) a local send staging buffer.
 *
 * Everything a source rank s sends to a destination in one phase is one
 * contiguous CHUNK, sized for max_tokens_per_rank (T) tokens:
 *
 *   dispatch chunk (disp_chunk bytes; offsets c_* inside it)
 *     count        i32  tokens s passed this forward (16 bytes reserved)
 *     x[t]         row  token t of s (activation dtype, or e4m3 codes)
 *     scale[t][g]  f32  its FP8 scales (one per token, or per 1x128 group)
 *     ids[t][k]    i32  its global physical expert ids (all k of them)
 *     w[t][k]      f32  its routing weights
 *   combine chunk (comb_chunk bytes)
 *     y[t]         row  the sum, on the sending rank, of token t's experts
 *                       held there (activation dtype)
 *
 * Receive buffer (each rank; the NCCL window of the lsa transport, a plain
 * device buffer of the collective one):
 *   disp_arrive[s]  u64  blocks of s's dispatch that finished writing here (lsa)
 *   comb_arrive[s]  u64  blocks of s's combine that finished writing here (lsa)
 *   disp[s]         the dispatch chunk from source s
 *   comb[s]         the combine chunk from rank s (y of this rank's tokens)
 * Send staging (collective; the lsa transport writes peers' receive
 * buffers directly instead):
 *   send_disp[r]    this rank's dispatch chunk for destination r
 *   send_comb[r]    its combine chunk for destination r
 * So both transports run the same kernels: the dispatch and combine-send
 * kernels write through a per-destination table of chunk addresses (a
 * peer's receive buffer, or the staging), and the collective transport then
 * moves chunk r of the staging to rank r with ncclSend/ncclRecv, whose sizes
 * match because every chunk has the fixed size above. Its own chunk a rank
 * writes straight into its receive buffer in both.
 *
 * Every slot is sized for T, so no forward needs the counts on the host
 * (LOW_LATENCY: graph-capturable). Arrival counters only grow: a forward's
 * n-th use waits for n x blocks.
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

/* Ranks one group may have: the per-destination chunk addresses travel as
 * a kernel argument. */
#define FMCU_EP_MAX_RANKS 64
/* Alignment of every region and chunk (a 16-byte row load needs 16; 256
 * keeps chunks on separate cache-line groups). */
#define FMCU_EP_ALIGN 256
/* Alignment of the parts inside a chunk (16: one uint4 row access). */
#define FMCU_EP_PART_ALIGN 16

typedef struct fmcu_ep_layout {
    uint32_t size, max_tokens, hidden, top_k;
    int32_t act_dtype, dispatch;
    uint32_t x_row_bytes;    /* bytes of one dispatched row */
    uint32_t scales_per_row; /* 0, 1 (FP8_TOKEN) or hidden / 128 (FP8_BLOCK) */
    uint32_t y_row_bytes;    /* bytes of one combined row (activation dtype) */
    /* one dispatch chunk: offsets inside it, and its size */
    uint64_t c_count, c_x, c_scale, c_ids, c_w, disp_chunk;
    uint64_t comb_chunk; /* one combine chunk (y at its start) */
    /* the receive buffer: offsets, and its size */
    uint64_t disp_arrive, comb_arrive, disp, comb, bytes;
    /* the collective transport's send staging: offsets, and its size */
    uint64_t send_disp, send_comb, staging_bytes;
} fmcu_ep_layout;

/* Fill *L for a group; 0, or -1 with the reason (a size rule, or bytes
 * beyond 2^40). act_dtype is FMOE_DTYPE_BF16 or F16; dispatch an
 * FMOE_EP_DISPATCH_* (FP8_BLOCK needs hidden % 128 == 0). */
int fmcu_ep_layout_make(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, int32_t act_dtype,
                        int32_t dispatch, fmcu_ep_layout *L, char *why, size_t cap);

/* Bytes one rank sends (= receives) per forward with the collective
 * transport: a dispatch chunk and a combine chunk to each of the size - 1
 * other ranks, whatever the tokens passed. */
uint64_t fmcu_ep_collective_bytes(const fmcu_ep_layout *L);

#ifdef __cplusplus
}
#endif
#endif
