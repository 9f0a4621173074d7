/*
 * plugins/megamoe/host.h - the plain-C host logic of the MegaMoE backend
 * (docs/MEGAMOE.md), no GPU needed and unit-tested in tests/megamoe:
 *
 *   layout.c     the symmetric buffer: every view's offset and size, the
 *                token alignment (384) and our ring-size rule;
 *   transform.c  the weights into the kernel's layout, once at finalize:
 *                L1 gate/up 8-row interleave, UE8M0 scales packed 4 per
 *                int32 MN-major, the UTCCP transpose of 128-row blocks;
 *   placement.c  per-rank local experts with EPLB replicas (p % logical)
 *                and the token check against the buffer's size.
 *
 * Facts: spec/formats.md §7.3 (DeepGEMM 54e2261 layout/mega_moe.cuh,
 * csrc/apis/mega.hpp, deep_gemm/mega/__init__.py), E17. Every function
 * returns 0, or -1 with one line in `why` naming the rule that failed.
 */
#ifndef FMOE_PLUGIN_MEGAMOE_HOST_H
#define FMOE_PLUGIN_MEGAMOE_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MM_GROUP        32u  /* elements per UE8M0 scale (recipe (1, 1, 32)) */
#define MM_TOKEN_ALIGN  384u /* lcm of the kernel's BLOCK_M candidates 8..192 */
#define MM_MIN_BLOCK_M  8u   /* smallest BLOCK_M: ring counters per 8 tokens */
#define MM_MAX_BLOCK_M  192u /* largest BLOCK_M: per-expert pool padding */
#define MM_UTCCP_ROWS   128u /* scale rows the UTCCP copy moves as one block */
#define MM_INTERLEAVE   8u   /* gate/up rows alternate in runs of 8 */
#define MM_MAX_TOPK     32u  /* the combine reads one slot per lane */
#define MM_BARRIER_BYTE 32u  /* grid sync counters + NVLink barrier */

/* ---- the symmetric buffer ------------------------------------------------ */

typedef struct mm_dims {
    uint32_t ranks;      /* EP group size (1: a plain allocation) */
    uint32_t experts;    /* physical experts over all ranks */
    uint32_t max_tokens; /* tokens per rank per call the layer was made for */
    uint32_t topk, hidden, inter;
} mm_dims;

typedef struct mm_view {
    uint64_t offset, bytes;
} mm_view;

/* In buffer order. */
enum {
    MM_WS_BARRIER,    /* 32 B */
    MM_WS_COUNTS,     /* expert send + recv counts: 2 E x u64 */
    MM_WS_RECV_SUM,   /* E_local x u64 */
    MM_WS_RING_COUNT, /* l1 full, l1 empty, l2 full, l2 empty: 4 x (ring/8) x u32 */
    MM_WS_PULL_IDX,   /* source token-topk per [local expert][rank][R*T]: u32 */
    MM_WS_SRC_META,   /* {rank, token, topk} u32 x3 per pool token; then align 16 */
    MM_X,             /* [T, H] e4m3 */
    MM_X_SF,          /* [T, H/128] int32 (UE8M0 x4), K-major */
    MM_TOPK_IDX,      /* [T, topk] int64, global ids, -1 masked */
    MM_TOPK_W,        /* [T, topk] f32 */
    MM_L1_ACTS,       /* [ring, H] e4m3 */
    MM_L1_SF,         /* [sf_ring, H/128] int32, M-major (stride 1, sf_ring) */
    MM_L1_W,          /* [ring] f32: the routing weight of each ring token */
    MM_L2_ACTS,       /* [ring, I] e4m3 */
    MM_L2_SF,         /* [sf_ring, I/128] int32, M-major */
    MM_COMBINE,       /* [topk, T, H] bf16 */
    MM_VIEW_COUNT
};

typedef struct mm_layout {
    mm_dims dims;
    uint32_t tokens; /* T: max_tokens rounded up to MM_TOKEN_ALIGN */
    uint32_t local;  /* experts per rank */
    uint32_t ring;   /* ring tokens (multiple of 384) */
    uint32_t ring_min, ring_max;
    uint32_t sf_ring;     /* scale rows of the ring: max over BLOCK_M b of (ring/b)*align(b,128) */
    uint32_t pool_tokens; /* align(R*T*min(topk, E_local) + E_local*(192-1), 384) */
    mm_view view[MM_VIEW_COUNT];
    uint64_t workspace; /* bytes before MM_X */
    uint64_t total;     /* bytes of the buffer (per rank) */
} mm_layout;

/* Plan the buffer. ring 0: our rule (ring_max: every token routed to this
 * rank in one call fits, so no wave waits for ring space); else a multiple
 * of 384 in [ring_min, ring_max]. Refuses what the kernel cannot run: H or
 * I not a multiple of 128 (the host's rule) or of 512 (each token's scale
 * row, H/32 or I/32 bytes, must be a multiple of 16), experts not divisible
 * by ranks, topk 0 or > 32, sizes whose buffer passes 2^63 bytes. */
int mm_layout_plan(const mm_dims *d, uint32_t ring, mm_layout *out, char *why, size_t cap);

/* The view's name ("x_sf", "l2_acts", ...). */
const char *mm_view_name(int view);

/* ---- weights ------------------------------------------------------------------ */

/* Row n of the interleaved L1 weight comes from row mm_interleave_src(n)
 * of [gate; up] (rows = 2I, I % 8 == 0): new[16j + r] = gate[8j + r],
 * new[16j + 8 + r] = up[8j + r]. */
uint32_t mm_interleave_src(uint32_t n, uint32_t rows);

/* Within each 128-row block, new[128c + 4b + a] = old[128c + 32a + b]. */
uint32_t mm_utccp_src(uint32_t n);

/* Any [E, 2I, row] byte tensor of L1 rows, interleaved as above (the
 * SM90 path's w13 values and scale bytes). I % 8 == 0. */
int mm_interleave_rows(const uint8_t *in, uint8_t *out, uint32_t experts, uint32_t inter, size_t row, char *why,
                       size_t cap);

/* L1 weight: w13 [E, 2I, H/2] e2m1 pairs -> the same shape, interleaved. */
int mm_transform_l1_weight(const uint8_t *w13, uint8_t *out, uint32_t experts, uint32_t inter, uint32_t hidden,
                           char *why, size_t cap);

/* Words of one projection's transformed scales: E x (K/128) x mn int32. */
uint64_t mm_sf_words(uint32_t experts, uint32_t mn, uint32_t k);

/* Scales: sf [E, mn, K/32] UE8M0 bytes -> words [E][K/128][mn] (MN-major,
 * mn % 128 == 0 so no TMA padding), word (w, n) = bytes 4w..4w+3 of row
 * src(n) little-endian, src = UTCCP after the L1 interleave (l1 = 1) or
 * UTCCP alone (L2). K % 128 == 0, mn % 128 == 0. */
int mm_transform_sf(const uint8_t *sf, uint32_t *out, uint32_t experts, uint32_t mn, uint32_t k, int l1, char *why,
                    size_t cap);

/* ---- placement and tokens ------------------------------------------------------ */

/* Logical expert of physical expert p: p % logical (vLLM EPLB's initial
 * layout, redundant replicas appended round-robin). */
uint32_t mm_logical_of(uint32_t physical, uint32_t logical);

/* The logical expert of each of rank `rank`'s local slots: physical
 * experts [rank*E_local, (rank+1)*E_local) of `physical` (= logical +
 * redundant), out[E_local]. physical % ranks == 0. */
int mm_local_logical(uint32_t physical, uint32_t logical, uint32_t ranks, uint32_t rank, uint32_t *out, char *why,
                     size_t cap);

/* A call of `tokens` tokens on a layer made for `max_tokens` (buffer T):
 * more is refused, never truncated. */
int mm_check_tokens(uint64_t tokens, const mm_layout *l, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
