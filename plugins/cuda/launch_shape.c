/*
 * plugins/cuda/launch_shape.c - see launch_shape.h.
 */
#include "plugins/cuda/launch_shape.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A whole number filling all of s, else 0 with *ok = 0. */
static long long whole(const char *s, int *ok)
{
    *ok = 0;
    if (!s || !*s)
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return 0;
    *ok = 1;
    return v;
}

int64_t fmcu_plan_wide_pairs(const char *env)
{
    int ok;
    long long v = whole(env, &ok);
    if (!ok)
        return FMCU_PLAN_WIDE_PAIRS;
    return v <= 0 ? INT64_MAX : (int64_t)v;
}

unsigned fmcu_quant_threads(uint32_t cols)
{
    return cols > FMCU_QUANT_WIDE_COLS ? 1024u : 256u;
}

int fmcu_act_warp_cap(const char *env)
{
    int ok;
    long long v = whole(env, &ok);
    if (!ok)
        return FMCU_ACT_WARP_CH;
    return v < 0 ? 0 : v > FMCU_ACT_WARP_MAX_CH ? FMCU_ACT_WARP_MAX_CH : (int)v;
}

fmcu_act_launch fmcu_act_shape(int mode, uint32_t I, int warp_cap)
{
    fmcu_act_launch l = {0, 1, 0, 0};
    if (mode == FMCU_ACT_GROUP) {
        uint32_t warps = (I / FMCU_ACT_GROUP_COLS + 1) / 2; /* two groups a warp */
        l.threads = 32 * (warps < 1 ? 1 : warps > 8 ? 8 : warps);
        return l;
    }
    const uint32_t chunks = (I + 7) / 8;
    if (mode == FMCU_ACT_TOKEN) {
        static const int lane_chunks[] = {1, 2, 3, 4, 6, 8};
        const uint32_t per_lane = (chunks + 31) / 32;
        for (size_t i = 0; i < sizeof lane_chunks / sizeof lane_chunks[0]; i++) {
            if (per_lane > (uint32_t)lane_chunks[i])
                continue;
            if (lane_chunks[i] <= warp_cap) {
                l.threads = FMCU_ACT_MAX_THREADS;
                l.ch = lane_chunks[i];
                l.warp_rows = 1;
                return l;
            }
            break;
        }
    }
    if (chunks > 512) {
        l.threads = FMCU_ACT_MAX_THREADS;
        l.ch = 2;
        l.smem = mode == FMCU_ACT_TOKEN ? (size_t)I * 2 : 0;
        return l;
    }
    l.ch = chunks <= 128 ? 1 : chunks <= 256 ? 2 : 4;
    const uint32_t threads = (chunks + (uint32_t)l.ch - 1) / (uint32_t)l.ch;
    l.threads = (threads + 31) / 32 * 32;
    return l;
}

int fmcu_gg_promoted(int kind)
{
    return kind == FMCU_GG_N128_PROMOTED || kind == FMCU_GG_N192_PROMOTED;
}

int fmcu_gg_order(const char *env)
{
    if (env && strcmp(env, "fixed") == 0)
        return FMCU_GG_ORDER_FIXED;
    if (env && strcmp(env, "counter") == 0)
        return FMCU_GG_ORDER_COUNTER;
    return FMCU_GG_ORDER_AUTO;
}

int fmcu_gg_whole_tiles(const char *env)
{
    return env && strcmp(env, "0") == 0;
}

/* H rounded up to whole tiles of bn columns. */
static uint32_t padded(uint32_t H, uint32_t bn)
{
    return (H + bn - 1) / bn * bn;
}

void fmcu_gg_kinds(int bf16, int64_t rows, uint32_t H, const char *env, int *k1, int *k2)
{
    *k1 = bf16 ? FMCU_GG_N256_FAST : FMCU_GG_N192_PROMOTED;
    const uint32_t width = rows < 128 ? 128 : 256;
    *k2 = padded(H, 192) < padded(H, width) ? FMCU_GG_N192_FAST
          : width == 128                    ? FMCU_GG_N128_FAST
                                            : FMCU_GG_N256_FAST;
    if (!env || strlen(env) != 2)
        return;
    for (int j = 0; j < 2; j++) {
        int *k = j ? k2 : k1;
        const int d = env[j] - '0';
        if (env[j] == 'c')
            *k = -1;
        else if (d >= 0 && d < FMCU_GG_KINDS && !(bf16 && fmcu_gg_promoted(d)))
            *k = d;
    }
}
