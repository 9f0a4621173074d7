/*
 * plugins/cuda/launch_shape.c - see launch_shape.h.
 */
#include "plugins/cuda/launch_shape.h"

unsigned fmcu_quant_threads(uint32_t cols)
{
    return cols > FMCU_QUANT_WIDE_COLS ? 1024u : 256u;
}

fmcu_act_launch fmcu_act_shape(int mode, uint32_t I, int warp_rows)
{
    fmcu_act_launch l = {0, 1, 0, 0};
    if (mode == FMCU_ACT_GROUP) {
        uint32_t warps = (I / FMCU_ACT_GROUP_COLS + 1) / 2; /* two groups a warp */
        l.threads = 32 * (warps < 1 ? 1 : warps > 8 ? 8 : warps);
        return l;
    }
    const uint32_t chunks = (I + 7) / 8;
    if (mode == FMCU_ACT_TOKEN && warp_rows) {
        const uint32_t per_lane = (chunks + 31) / 32;
        if (per_lane <= FMCU_ACT_WARP_CH) {
            l.threads = FMCU_ACT_MAX_THREADS;
            l.ch = (int)(per_lane < 1 ? 1 : per_lane);
            l.warp_rows = 1;
            return l;
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
    return kind == FMCU_GG_N192_PROMOTED;
}

/* H rounded up to whole tiles of bn columns. */
static uint32_t padded(uint32_t H, uint32_t bn)
{
    return (H + bn - 1) / bn * bn;
}

void fmcu_gg_kinds(int bf16, int64_t rows, uint32_t H, int *k1, int *k2)
{
    *k1 = bf16 ? FMCU_GG_N256_FAST : FMCU_GG_N192_PROMOTED;
    const uint32_t width = rows < 128 ? 128 : 256;
    *k2 = padded(H, 192) < padded(H, width) ? FMCU_GG_N192_FAST : width == 128 ? FMCU_GG_N128_FAST : FMCU_GG_N256_FAST;
}
