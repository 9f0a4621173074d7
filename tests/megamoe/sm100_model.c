/*
 * tests/megamoe/sm100_model.c - the SM100 kernel's data flow on the host
 * (sm100_model.h): prepare, count, pull, GEMM1 + SwiGLU epilogue, GEMM2 +
 * combine push, combine, step by step as sm100_forward.cu does them, on
 * one symmetric buffer per rank. Operands are read where the loaders copy
 * them from; scales through the tcgen05.cp placement. The MMA's sums run
 * in double here (the hardware's order is its own), so results may differ
 * from the kernel's in last bits, not in where anything is.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "plugins/megamoe/host.h"
#include "plugins/megamoe/sm100_plan.h"
#include "tests/megamoe/sm100_model.h"

#define FP8_MAX 448.0f

typedef struct rank_buf {
    uint8_t *buf;            /* the symmetric buffer */
    uint8_t *l1;             /* transformed L1 values, local experts */
    uint32_t *l1_sf, *l2_sf; /* transformed scales */
    const uint8_t *l2;       /* the checkpoint's, local experts (read in place) */
    uint32_t *row0, *blk0;   /* [local + 1] */
} rank_buf;

typedef struct model {
    const mm100_model_layer *L;
    mm_layout y;
    uint32_t bm, local, mode;
    rank_buf *rk;
} model;

static void *at(const model *md, uint32_t rank, int v)
{
    return md->rk[rank].buf + md->y.view[v].offset;
}

static float bf16(float v)
{
    return fmoe_bf16_to_f32(fmoe_f32_to_bf16(v));
}

static double ue8m0(uint32_t b)
{
    return b == 0xFF ? NAN : ldexp(1.0, (int)b - 127);
}

/* numerics.cuh's rules, on the host */
static float amax_step(float m, float v)
{
    float a = fabsf(v);
    return a > m ? a : m;
}

static uint32_t input_sf_byte(float amax)
{
    float a = amax > 1e-4f ? amax : 1e-4f, q = a / FP8_MAX;
    uint32_t u;
    memcpy(&u, &q, 4);
    uint32_t e = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    return e < 1 ? 1 : e > 254 ? 254 : e;
}

static uint8_t e4m3_sat(float v)
{
    v = v > FP8_MAX ? FP8_MAX : v < -FP8_MAX ? -FP8_MAX : v;
    return fmoe_fp8_e4m3fn_encode(v);
}

static float pow2f(int32_t e)
{
    return (float)ldexp(1.0, e);
}

/* ---- prepare, count, pull ------------------------------------------------------- */

static void prepare(model *md, uint32_t r, const mm100_model_rank *in)
{
    const mm100_model_layer *L = md->L;
    uint32_t H = L->hidden, kw = H / 128, k = L->topk;
    uint8_t *xq = at(md, r, MM_X);
    uint32_t *xsf = at(md, r, MM_X_SF);
    int64_t *idx = at(md, r, MM_TOPK_IDX);
    float *tw = at(md, r, MM_TOPK_W);
    for (uint32_t t = 0; t < in->m; t++)
        for (uint32_t w = 0; w < kw; w++) {
            uint32_t word = 0;
            for (uint32_t g = 0; g < 4; g++) {
                const uint16_t *x = in->x + (size_t)t * H + w * 128 + g * 32;
                float amax = 0.0f;
                for (int i = 0; i < 32; i++)
                    amax = amax_step(amax, fmoe_bf16_to_f32(x[i]));
                uint32_t b = input_sf_byte(amax);
                for (int i = 0; i < 32; i++)
                    xq[(size_t)t * H + w * 128 + g * 32 + i] = e4m3_sat(fmoe_bf16_to_f32(x[i]) /
                                                                        pow2f((int32_t)b - 127));
                word |= b << (8 * g);
            }
            xsf[(size_t)t * kw + w] = word;
        }
    for (uint32_t i = 0; i < in->m * k; i++) {
        int32_t id = in->ids[i];
        idx[i] = id >= 0 && (uint32_t)id < L->experts ? id : -1;
        tw[i] = in->w[i];
    }
}

static int count(model *md, uint32_t src, const mm100_model_rank *in, char *why, size_t cap)
{
    const mm100_model_layer *L = md->L;
    const int64_t *idx = at(md, src, MM_TOPK_IDX);
    for (uint32_t i = 0; i < in->m * L->topk; i++) {
        int64_t id = idx[i];
        if (id < 0)
            continue;
        uint32_t dst = (uint32_t)(id / md->local), e = (uint32_t)(id % md->local);
        uint32_t *cnt = (uint32_t *)at(md, dst, MM_WS_COUNTS) + e * L->ranks + src; /* parity 0: a first call */
        uint32_t pos = (*cnt)++;
        if (pos >= md->y.tokens) {
            snprintf(why, cap, "expert %lld got more than %u rows from rank %u", (long long)id, md->y.tokens, src);
            return -1;
        }
        ((uint32_t *)at(md, dst, MM_WS_PULL_IDX))[mm100_pull_index(e, src, pos, L->ranks, md->y.tokens)] = i;
    }
    return 0;
}

static int pull(model *md, uint32_t r, char *why, size_t cap)
{
    const mm100_model_layer *L = md->L;
    uint32_t R = L->ranks, H = L->hidden, kw = H / 128, bm = md->bm, T = md->y.tokens;
    rank_buf *b = &md->rk[r];
    const uint32_t *cnt = at(md, r, MM_WS_COUNTS), *pl = at(md, r, MM_WS_PULL_IDX);
    uint32_t rows = mm100_tables(cnt, md->local, R, bm, b->row0, b->blk0);
    if (rows > md->y.ring) {
        snprintf(why, cap, "%u ring rows needed, the ring holds %u", rows, md->y.ring);
        return -1;
    }
    uint8_t *ring = at(md, r, MM_L1_ACTS);
    uint32_t *ring_sf = at(md, r, MM_L1_SF), *meta = at(md, r, MM_WS_SRC_META);
    float *ring_w = at(md, r, MM_L1_W);
    for (uint32_t row = 0; row < rows; row++) {
        uint32_t e = mm100_expert_of_block(b->blk0, md->local, row / bm), off = row - b->row0[e], src = 0;
        while (src < R && off >= cnt[e * R + src])
            off -= cnt[e * R + src++];
        if (src == R) {
            meta[3 * row] = 0xFFFFFFFFu;
            ring_w[row] = 0.0f;
            continue;
        }
        uint32_t ti = pl[mm100_pull_index(e, src, off, R, T)], tok = ti / L->topk, slot = ti % L->topk;
        memcpy(ring + (size_t)row * H, (uint8_t *)at(md, src, MM_X) + (size_t)tok * H, H);
        const uint32_t *sfs = (const uint32_t *)at(md, src, MM_X_SF) + (size_t)tok * kw;
        for (uint32_t w = 0; w < kw; w++)
            ring_sf[mm100_ring_sf_word(row, w, bm, md->y.sf_ring)] = sfs[w];
        ring_w[row] = ((const float *)at(md, src, MM_TOPK_W))[ti];
        meta[3 * row] = src;
        meta[3 * row + 1] = tok;
        meta[3 * row + 2] = slot;
    }
    return 0;
}

/* ---- the GEMMs ------------------------------------------------------------------- */

/* The scale byte the MMA reads for operand row m (0..127) and K chunk k,
 * from a 512-byte block as tcgen05.cp .32x128b.warpx4 lays it in TMEM:
 * lane b, column a holds word 4b + a; row m sits at lane m % 32, column
 * m / 32, byte k (sf_id). */
static uint32_t mma_scale(const uint32_t *block, uint32_t m, uint32_t k)
{
    return (block[4 * (m % 32) + m / 32] >> (8 * k)) & 0xFFu;
}

static double e2m1_at(const uint8_t *row, uint32_t col)
{
    uint8_t b = row[col / 2];
    return fmoe_fp4_e2m1_decode(col % 2 ? b >> 4 : b & 0xF);
}

static void gemm_phase(model *md, uint32_t r, int l1)
{
    const mm100_model_layer *L = md->L;
    rank_buf *b = &md->rk[r];
    uint32_t H = L->hidden, I = L->inter, R = L->ranks, T = md->y.tokens, bm = md->bm;
    uint32_t n_out = l1 ? 2 * I : H, K = l1 ? H : I, kblocks = K / 128, nblk = n_out / 128;
    const uint8_t *w = l1 ? b->l1 : b->l2;
    const uint32_t *wsf = l1 ? b->l1_sf : b->l2_sf;
    const uint8_t *act = at(md, r, l1 ? MM_L1_ACTS : MM_L2_ACTS);
    const uint32_t *asf = at(md, r, l1 ? MM_L1_SF : MM_L2_SF);
    const float *ring_w = at(md, r, MM_L1_W);
    const uint32_t *meta = at(md, r, MM_WS_SRC_META);
    uint8_t *l2 = at(md, r, MM_L2_ACTS), *l2sf = at(md, r, MM_L2_SF);
    double *acc = malloc(sizeof(double) * 128 * bm);
    float *a = malloc(sizeof(float) * 64 * bm); /* GEMM1: the tile's 64 channels */
    float c = bf16(L->limit);
    for (uint64_t tile = 0; tile < (uint64_t)b->blk0[md->local] * nblk; tile++) {
        uint32_t blk = (uint32_t)(tile / nblk), nb = (uint32_t)(tile % nblk);
        uint32_t e = mm100_expert_of_block(b->blk0, md->local, blk), row0 = blk * bm;
        memset(acc, 0, sizeof(double) * 128 * bm);
        for (uint32_t kb = 0; kb < kblocks; kb++) {
            const uint32_t *sa = wsf + mm100_weight_sf_block(e, kb, kblocks, n_out, nb);
            const uint32_t *sb = asf + mm100_ring_sf_block(kb, md->y.sf_ring, row0, bm);
            for (uint32_t k = 0; k < 4; k++)
                for (uint32_t m = 0; m < 128; m++) {
                    const uint8_t *wrow = w + ((size_t)e * n_out + nb * 128 + m) * (K / 2);
                    double s_a = ue8m0(mma_scale(sa, m, k));
                    for (uint32_t n = 0; n < bm; n++) {
                        const uint8_t *arow = act + (size_t)(row0 + n) * K;
                        uint32_t byte = md->mode == MM100_MODEL_BROKEN_TOKEN_SCALES ? (sb[n] >> (8 * k)) & 0xFFu
                                                                                    : mma_scale(sb, n, k);
                        double p = 0.0;
                        for (uint32_t j = 0; j < 32; j++) {
                            uint32_t col = kb * 128 + k * 32 + j;
                            p += e2m1_at(wrow, col) * fmoe_fp8_e4m3fn_decode(arow[col]);
                        }
                        acc[m * bm + n] += p * s_a * ue8m0(byte);
                    }
                }
        }
        if (!l1) {
            /* GEMM2: row m is output channel nb x 128 + m, pushed to the source */
            for (uint32_t m = 0; m < 128; m++)
                for (uint32_t n = 0; n < bm; n++) {
                    uint32_t row = row0 + n, src = meta[3 * row];
                    if (src >= R)
                        continue;
                    uint16_t *comb = (uint16_t *)at(md, src, MM_COMBINE);
                    comb[((size_t)meta[3 * row + 2] * T + meta[3 * row + 1]) * H + nb * 128 + m] = fmoe_f32_to_bf16(
                        (float)acc[m * bm + n]);
                }
            continue;
        }
        /* GEMM1: gate and up lanes 8 apart, the channel from the interleave */
        for (uint32_t m = 0; m < 128; m++) {
            if (!mm100_l1_is_gate(m))
                continue;
            uint32_t ch = mm100_l1_channel(nb, m);
            for (uint32_t n = 0; n < bm; n++) {
                float g = bf16((float)acc[m * bm + n]), u = bf16((float)acc[(m ^ 8) * bm + n]);
                if (L->limit > 0.0f) {
                    g = g < c ? g : c;
                    u = u < -c ? -c : u > c ? c : u;
                }
                a[(ch - nb * 64) * bm + n] = (g / (1.0f + expf(-g)) * u) * ring_w[row0 + n];
            }
        }
        for (uint32_t n = 0; n < bm; n++)
            for (uint32_t g2 = 0; g2 < 2; g2++) {
                float amax = 0.0f;
                for (uint32_t i = 0; i < 32; i++)
                    amax = amax_step(amax, a[(g2 * 32 + i) * bm + n]);
                uint32_t row = row0 + n, group = nb * 2 + g2;
                uint8_t sf = 0xFF;
                int32_t ex = 0;
                if (isfinite(amax)) {
                    float q = amax * (1.0f / FP8_MAX);
                    uint32_t bits;
                    memcpy(&bits, &q, 4);
                    ex = (int32_t)(bits >> 23) - 127 + ((bits & 0x7FFFFFu) != 0);
                    sf = (uint8_t)(ex + 127);
                }
                for (uint32_t i = 0; i < 32; i++) {
                    float v = a[(g2 * 32 + i) * bm + n];
                    l2[(size_t)row * I + group * 32 + i] = sf == 0xFF ? 0x7F : e4m3_sat(v * pow2f(-ex));
                }
                l2sf[mm100_ring_sf_word(row, group / 4, bm, md->y.sf_ring) * 4 + group % 4] = sf;
            }
    }
    free(acc);
    free(a);
}

static void combine(model *md, uint32_t r, mm100_model_rank *in)
{
    const mm100_model_layer *L = md->L;
    uint32_t H = L->hidden, T = md->y.tokens;
    const int64_t *idx = at(md, r, MM_TOPK_IDX);
    const uint16_t *comb = at(md, r, MM_COMBINE);
    for (uint32_t t = 0; t < in->m; t++)
        for (uint32_t h = 0; h < H; h++) {
            float s = 0.0f;
            for (uint32_t j = 0; j < L->topk; j++)
                if (idx[t * L->topk + j] >= 0)
                    s += fmoe_bf16_to_f32(comb[((size_t)j * T + t) * H + h]);
            in->out[(size_t)t * H + h] = bf16(s);
        }
}

/* ---- the whole forward ------------------------------------------------------------- */

static int setup_rank(model *md, uint32_t r, char *why, size_t cap)
{
    const mm100_model_layer *L = md->L;
    uint32_t Lc = md->local, H = L->hidden, I = L->inter;
    rank_buf *b = &md->rk[r];
    size_t e0 = (size_t)r * Lc;
    b->buf = calloc(md->y.total, 1);
    b->l1 = malloc((size_t)Lc * 2 * I * (H / 2));
    b->l1_sf = malloc(mm_sf_words(Lc, 2 * I, H) * 4);
    b->l2_sf = malloc(mm_sf_words(Lc, H, I) * 4);
    b->row0 = malloc(sizeof(uint32_t) * (Lc + 1));
    b->blk0 = malloc(sizeof(uint32_t) * (Lc + 1));
    if (!b->buf || !b->l1 || !b->l1_sf || !b->l2_sf || !b->row0 || !b->blk0) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    b->l2 = L->w2 + e0 * H * (I / 2);
    if (mm_transform_l1_weight(L->w13 + e0 * 2 * I * (H / 2), b->l1, Lc, I, H, why, cap) != 0 ||
        mm_transform_sf(L->s13 + e0 * 2 * I * (H / 32), b->l1_sf, Lc, 2 * I, H, 1, why, cap) != 0 ||
        mm_transform_sf(L->s2 + e0 * H * (I / 32), b->l2_sf, Lc, H, I, 0, why, cap) != 0)
        return -1;
    return 0;
}

int mm100_model_forward(const mm100_model_layer *L, uint32_t max_tokens, uint32_t block_m, mm100_model_rank *ranks,
                        int mode, char *why, size_t cap)
{
    model md = {.L = L, .bm = block_m, .mode = (uint32_t)mode};
    mm_dims d = {.ranks = L->ranks,
                 .experts = L->experts,
                 .max_tokens = max_tokens,
                 .topk = L->topk,
                 .hidden = L->hidden,
                 .inter = L->inter};
    if (mm_layout_plan(&d, 0, &md.y, why, cap) != 0)
        return -1;
    md.local = md.y.local;
    md.rk = calloc(L->ranks, sizeof *md.rk);
    int rc = md.rk ? 0 : -1;
    for (uint32_t r = 0; r < L->ranks && rc == 0; r++)
        rc = setup_rank(&md, r, why, cap);
    /* the kernel's phases, each finished on every rank before the next */
    for (uint32_t r = 0; r < L->ranks && rc == 0; r++)
        prepare(&md, r, &ranks[r]);
    for (uint32_t r = 0; r < L->ranks && rc == 0; r++)
        rc = count(&md, r, &ranks[r], why, cap);
    for (uint32_t r = 0; r < L->ranks && rc == 0; r++)
        rc = pull(&md, r, why, cap);
    for (int l1 = 1; l1 >= 0 && rc == 0; l1--)
        for (uint32_t r = 0; r < L->ranks; r++)
            gemm_phase(&md, r, l1);
    for (uint32_t r = 0; r < L->ranks && rc == 0; r++)
        combine(&md, r, &ranks[r]);
    for (uint32_t r = 0; md.rk && r < L->ranks; r++) {
        free(md.rk[r].buf);
        free(md.rk[r].l1);
        free(md.rk[r].l1_sf);
        free(md.rk[r].l2_sf);
        free(md.rk[r].row0);
        free(md.rk[r].blk0);
    }
    free(md.rk);
    return rc;
}
