/*
 * plugins/cuda/launch_shape.c - see launch_shape.h.
 */
#include "plugins/cuda/launch_shape.h"

#include <errno.h>
#include <stdlib.h>

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
