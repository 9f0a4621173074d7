/*
 * plugins/megamoe/layout.c - the MegaMoE symmetric buffer (host.h), as
 * DeepGEMM 54e2261 lays it out (layout/mega_moe.cuh Workspace, csrc/apis/
 * mega.hpp get_symm_buffer_size_for_mega_moe; spec/formats.md §7.3): the
 * workspace, then the per-rank inputs, the two ring buffers and the
 * combine slots, tightly packed. Every piece is a multiple of 16 bytes
 * because T and ring are multiples of 384, so every view starts 16-byte
 * aligned as TMA needs.
 *
 * The ring. DeepGEMM accepts any multiple of 384 in [R*T, min(R*T*E_local,
 * align(R*T*topk + E_local*383, 384))] and picks one from a memory budget
 * tuned for DeepSeek-V4 on EP72 (mega/__init__.py). Our rule: the upper
 * bound, unless the ring_tokens option picks another. The upper bound holds
 * every token routed to this rank in one call, so the dispatch never waits
 * for GEMM2 to free ring space (one wave of all local experts); its cost is
 * memory, which the plan reports, and the option trades it back.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/megamoe/host.h"

#define LIMIT ((uint64_t)1 << 62)

static const char *const names[MM_VIEW_COUNT] = {
    "workspace.barrier",
    "workspace.expert_counts",
    "workspace.recv_sums",
    "workspace.ring_counters",
    "workspace.pull_indices",
    "workspace.token_sources",
    "x",
    "x_sf",
    "topk_idx",
    "topk_weights",
    "l1_acts",
    "l1_acts_sf",
    "l1_topk_weights",
    "l2_acts",
    "l2_acts_sf",
    "combine",
};

const char *mm_view_name(int view)
{
    return view >= 0 && view < MM_VIEW_COUNT ? names[view] : "?";
}

/* a * b * c > LIMIT, without computing the product. */
static int too_big(uint64_t a, uint64_t b, uint64_t c)
{
    return a && b && (b > LIMIT / c / a);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static int fail(char *why, size_t cap, const char *text)
{
    if (cap)
        snprintf(why, cap, "%s", text);
    return -1;
}

static int check_dims(const mm_dims *d, char *why, size_t cap)
{
    char text[256];
    if (!d->ranks || !d->experts || !d->max_tokens || !d->hidden || !d->inter)
        return fail(why, cap, "MegaMoE buffer: ranks, experts, max tokens, hidden and intermediate sizes must be > 0");
    /* Bounds that keep every product below 2^64 (then too_big refuses
     * what would not fit in memory anyway). */
    if (d->experts > 65536 || d->max_tokens > (1u << 30) || d->hidden > (1u << 20) || d->inter > (1u << 20))
        return fail(why, cap,
                    "MegaMoE buffer: expected at most 65536 experts, 2^30 tokens per rank, hidden and intermediate "
                    "sizes up to 2^20");
    if (d->experts % d->ranks) {
        snprintf(text, sizeof text, "MegaMoE: %u experts do not divide over %u EP ranks", d->experts, d->ranks);
        return fail(why, cap, text);
    }
    if (d->topk == 0 || d->topk > MM_MAX_TOPK) {
        snprintf(text, sizeof text, "MegaMoE: top_k %u is outside 1..%u (the combine reads one slot per lane)", d->topk,
                 MM_MAX_TOPK);
        return fail(why, cap, text);
    }
    const uint32_t sizes[2] = {d->hidden, d->inter};
    const char *what[2] = {"hidden_size", "intermediate_size_per_partition"};
    for (int i = 0; i < 2; i++) {
        if (sizes[i] % 128) {
            snprintf(text, sizeof text, "MegaMoE: %s %u is not a multiple of 128 (the kernel's host check)", what[i],
                     sizes[i]);
            return fail(why, cap, text);
        }
        if (sizes[i] % (16 * MM_GROUP)) {
            snprintf(text, sizeof text,
                     "MegaMoE: %s %u is not a multiple of 512: a token's UE8M0 scale row (%u/32 = %u bytes) must be "
                     "a multiple of 16 bytes",
                     what[i], sizes[i], sizes[i], sizes[i] / MM_GROUP);
            return fail(why, cap, text);
        }
    }
    return 0;
}

/* Ring bounds for T (already aligned): one expert per wave, all of them. */
static void ring_bounds(const mm_dims *d, uint64_t T, uint32_t local, uint64_t *lo, uint64_t *hi)
{
    uint64_t all = (uint64_t)d->ranks * T;
    uint64_t every = all * local;
    uint64_t routed = align_up(all * d->topk + (uint64_t)local * (MM_TOKEN_ALIGN - 1), MM_TOKEN_ALIGN);
    *lo = all;
    *hi = local == 1 ? all : every < routed ? every : routed;
}

/* Scale rows of the ring: each BLOCK_M block of b tokens takes align(b, 128)
 * rows (the UTCCP copy moves 128); the worst b is 8: 16 rows per token. */
static uint64_t sf_ring_of(uint64_t ring)
{
    static const uint32_t blocks[] = {8, 16, 32, 64, 96, 128, 192};
    uint64_t worst = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        uint64_t rows = ring / blocks[i] * align_up(blocks[i], MM_UTCCP_ROWS);
        worst = rows > worst ? rows : worst;
    }
    return worst;
}

int mm_layout_plan(const mm_dims *d, uint32_t ring, mm_layout *out, char *why, size_t cap)
{
    if (check_dims(d, why, cap) != 0)
        return -1;
    memset(out, 0, sizeof *out);
    char text[256];
    uint64_t T = align_up(d->max_tokens, MM_TOKEN_ALIGN), H = d->hidden, I = d->inter, k = d->topk;
    uint64_t R = d->ranks, E = d->experts, L = E / R;
    uint64_t lo, hi;
    ring_bounds(d, T, (uint32_t)L, &lo, &hi);
    uint64_t r = ring ? ring : hi;
    if (ring && (ring % MM_TOKEN_ALIGN || ring < lo || ring > hi)) {
        snprintf(text, sizeof text,
                 "MegaMoE: ring of %u tokens: expected a multiple of %u from %llu (one expert per wave) to %llu (all "
                 "of them)",
                 ring, MM_TOKEN_ALIGN, (unsigned long long)lo, (unsigned long long)hi);
        return fail(why, cap, text);
    }
    uint64_t sf_ring = sf_ring_of(r);
    uint64_t per_token_experts = k < L ? k : L;
    uint64_t pool = align_up(R * T * per_token_experts + L * (MM_MAX_BLOCK_M - 1), MM_TOKEN_ALIGN);
    /* A buffer past 2^62 bytes is no buffer: refuse it before any size
     * below can wrap (each view is at most four factors of the dims). */
    if (T > UINT32_MAX || r > UINT32_MAX || sf_ring > UINT32_MAX || pool > UINT32_MAX || too_big(L * R, R * T, 4) ||
        too_big(k * T, H, 2) || too_big(sf_ring, H, 1) || too_big(r, H + I, 1) || too_big(pool, 12, 1))
        return fail(why, cap, "MegaMoE: the buffer for these sizes would pass 2^62 bytes");
    const uint64_t bytes[MM_VIEW_COUNT] = {
        [MM_WS_BARRIER] = MM_BARRIER_BYTE,
        [MM_WS_COUNTS] = 2 * E * 8,
        [MM_WS_RECV_SUM] = L * 8,
        [MM_WS_RING_COUNT] = 4 * (r / MM_MIN_BLOCK_M) * 4,
        [MM_WS_PULL_IDX] = L * R * (R * T) * 4,
        [MM_WS_SRC_META] = 0, /* set below: padded to 16 with the workspace */
        [MM_X] = T * H,
        [MM_X_SF] = T * (H / MM_GROUP),
        [MM_TOPK_IDX] = T * k * 8,
        [MM_TOPK_W] = T * k * 4,
        [MM_L1_ACTS] = r * H,
        [MM_L1_SF] = sf_ring * (H / MM_GROUP),
        [MM_L1_W] = r * 4,
        [MM_L2_ACTS] = r * I,
        [MM_L2_SF] = sf_ring * (I / MM_GROUP),
        [MM_COMBINE] = k * T * H * 2,
    };
    uint64_t at = 0;
    for (int v = 0; v < MM_VIEW_COUNT; v++) {
        uint64_t b = bytes[v];
        if (v == MM_WS_SRC_META) { /* 12-byte records; the workspace ends 16-aligned */
            b = align_up(at + pool * 12, 16) - at;
        }
        out->view[v] = (mm_view){.offset = at, .bytes = b};
        at += b;
        if (v == MM_WS_SRC_META)
            out->workspace = at;
    }
    out->dims = *d;
    out->tokens = (uint32_t)T;
    out->local = (uint32_t)L;
    out->ring = (uint32_t)r;
    out->ring_min = (uint32_t)lo;
    out->ring_max = (uint32_t)hi;
    out->sf_ring = (uint32_t)sf_ring;
    out->pool_tokens = (uint32_t)pool;
    out->total = at;
    return 0;
}
