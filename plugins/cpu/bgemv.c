/*
 * plugins/cpu/bgemv.c - the bf16 small-M GEMMs of bgemv.h over the pool.
 */
#include "plugins/cpu/bgemv.h"

#include <string.h>

#include "fusedmoe/kit/half.h"

/* Items per thread: enough to even out experts of different row counts,
 * few enough that an item streams hundreds of KiB (and runs CPU_BNT tiles
 * per kernel call). */
#define ITEMS_PER_THREAD 16

uint32_t cpu_bgemv_items_cap(uint32_t active, uint32_t tiles)
{
    return active * tiles;
}

/* dst = round(sums + bias) for nn outputs from n0 of expert e. */
static void epilogue(const cpu_bgemv *g, uint32_t e, uint32_t n0, uint32_t nn, const float *sums, float *dst)
{
    if (!g->bias && g->round == FMOE_DTYPE_F32) {
        memcpy(dst, sums, nn * sizeof(float));
        return;
    }
    int64_t b0 = (int64_t)e * g->w->n + n0;
    for (uint32_t r = 0; r < nn; r++)
        dst[r] = fmoe_round_to(g->round, sums[r] + (g->bias ? fmoe_load_float(g->bias, g->bias_dtype, b0 + r) : 0.0f));
}

/* The row of position p. */
static const uint16_t *in_row(const cpu_bgemv *g, uint32_t p)
{
    return g->in_rows ? g->in_rows[p] : g->in + (size_t)p * g->in_stride;
}

/* The AMX path: the rows (at most CPU_BMR) packed once for the item into
 * the worker's buffer, K zero-padded to the 32-value block; one tile per
 * call, the next tile prefetched into L2 as it goes. */
static void item_amx(const cpu_bgemv *g, cpu_bgemv_item it, uint32_t p0, uint32_t rows, uint32_t worker)
{
    uint32_t K = g->w->k, kp = (K + 31) / 32 * 32, N = g->w->n;
    cpu_btile t;
    t.k = K;
    t.nt = 1;
    t.mr = rows;
    t.apk_stride = g->apk_stride;
    uint16_t *pk = g->apack + (size_t)worker * CPU_BMR * g->apk_stride;
    for (uint32_t m = 0; m < rows; m++) {
        memcpy(pk + (size_t)m * g->apk_stride, in_row(g, p0 + m), K * sizeof(uint16_t));
        memset(pk + (size_t)m * g->apk_stride + K, 0, (kp - K) * sizeof(uint16_t));
    }
    t.apk = pk;
    for (uint32_t tile = it.t0; tile < it.t1; tile++) {
        t.w[0] = cpu_bweights_tile(g->w, it.expert, tile);
        t.ahead = tile + 1 < it.t1 ? cpu_bweights_tile(g->w, it.expert, tile + 1) : NULL;
        g->amx->tile(&t);
        uint32_t n0 = tile * CPU_BNR, nn = N - n0 < CPU_BNR ? N - n0 : CPU_BNR;
        for (uint32_t m = 0; m < rows; m++)
            epilogue(g, it.expert, n0, nn, t.out[0][m], g->out + (size_t)(p0 + m) * g->out_stride + n0);
    }
}

static void item_task(void *ctx, uint32_t item, uint32_t worker)
{
    const cpu_bgemv *g = ctx;
    cpu_bgemv_item it = g->items[item];
    uint32_t p0 = g->start[it.expert], p1 = g->start[it.expert + 1], N = g->w->n;
    if (g->amx && p1 - p0 >= CPU_BAMX_MIN_ROWS && p1 - p0 <= CPU_BMR) {
        item_amx(g, it, p0, p1 - p0, worker);
        return;
    }
    cpu_btile t;
    t.k = g->w->k;
    /* Tiles per call: 4 memory streams for one or two rows (the second row
     * reruns each 32 KiB K block from L1: two tiles a call, as before, kept
     * Mixtral M=4 ~8% slower); from three rows one tile (the AMX kernel, or
     * vdpbf16ps whose registers then hold one tile), the rows' compute
     * overlapping memory. */
    uint32_t rows = p1 - p0, per_call = rows >= 3 ? 1 : CPU_BNT;
    for (uint32_t tile = it.t0; tile < it.t1; tile += t.nt) {
        t.nt = it.t1 - tile < per_call ? it.t1 - tile : per_call;
        for (uint32_t i = 0; i < t.nt; i++)
            t.w[i] = cpu_bweights_tile(g->w, it.expert, tile + i);
        /* The next call's first tile, while it is this item's: its start is
         * prefetched as this call ends. */
        t.ahead = tile + t.nt < it.t1 ? cpu_bweights_tile(g->w, it.expert, tile + t.nt) : NULL;
        for (uint32_t p = p0; p < p1; p += CPU_BMR) {
            t.mr = p1 - p < CPU_BMR ? p1 - p : CPU_BMR;
            for (uint32_t m = 0; m < t.mr; m++)
                t.a[m] = in_row(g, p + m);
            g->kern->tile(&t);
            for (uint32_t i = 0; i < t.nt; i++) {
                uint32_t n0 = (tile + i) * CPU_BNR, nn = N - n0 < CPU_BNR ? N - n0 : CPU_BNR;
                for (uint32_t m = 0; m < t.mr; m++)
                    epilogue(g, it.expert, n0, nn, t.out[i][m], g->out + (size_t)(p + m) * g->out_stride + n0);
            }
        }
    }
}

uint32_t cpu_bgemv_run(cpu_bgemv *g, cpu_pool *pool)
{
    uint32_t E = g->w->experts, tiles = g->w->tiles, active = 0;
    for (uint32_t e = 0; e < E; e++) {
        uint32_t rows = g->start[e + 1] - g->start[e];
        active += rows > 0 && (g->max_rows == 0 || rows <= g->max_rows);
    }
    if (active == 0)
        return 0;
    uint64_t want = (uint64_t)cpu_pool_size(pool) * ITEMS_PER_THREAD, total = (uint64_t)active * tiles;
    uint32_t piece = cpu_pool_size(pool) == 1 ? tiles : (uint32_t)((total + want - 1) / want);
    piece = (piece + CPU_BNT - 1) / CPU_BNT * CPU_BNT; /* whole kernel calls */
    piece = piece > tiles ? tiles : piece;
    /* Experts with the most rows (the most compute per byte) first, so the
     * last items of the run are the quick ones: the threads finish close
     * together. Pass r takes the experts of r rows, pass 0 those above
     * CPU_BMR. */
    uint32_t n = 0;
    for (uint32_t r = 0; r <= CPU_BMR; r = r == 0 ? CPU_BMR : r - 1) {
        for (uint32_t e = 0; e < E; e++) {
            uint32_t rows = g->start[e + 1] - g->start[e];
            if (rows == 0 || (g->max_rows && rows > g->max_rows) || (r ? rows != r : rows <= CPU_BMR))
                continue;
            for (uint32_t t = 0; t < tiles && n < g->items_cap; t += piece)
                g->items[n++] = (cpu_bgemv_item){e, t, t + piece < tiles ? t + piece : tiles};
        }
        if (r == 1)
            break;
    }
    cpu_pool_run(pool, n, item_task, g);
    return active;
}
