/*
 * plugins/cuda/ep_layout.c - offsets of the symmetric buffer (ep_layout.h).
 */
#include "plugins/cuda/ep_layout.h"

#include <stdio.h>
#include <string.h>

#include "fusedmoe/common.h"

#define MAX_BYTES (1ull << 40)

static uint64_t align_up(uint64_t v)
{
    return (v + FMCU_EP_ALIGN - 1) / FMCU_EP_ALIGN * FMCU_EP_ALIGN;
}

/* Place a region of `bytes` at *at; 0, or -1 when the total passes MAX_BYTES. */
static int place(uint64_t *at, uint64_t *offset, uint64_t bytes)
{
    *offset = *at;
    if (bytes > MAX_BYTES || *at > MAX_BYTES - bytes)
        return -1;
    *at = align_up(*at + bytes);
    return 0;
}

int fmcu_ep_layout_make(uint32_t size, uint32_t max_tokens, uint32_t hidden, uint32_t top_k, int32_t act_dtype,
                        int32_t dispatch, fmcu_ep_layout *L, char *why, size_t cap)
{
    memset(L, 0, sizeof *L);
    if (size < 1 || size > FMCU_EP_MAX_RANKS) {
        snprintf(why, cap, "EP group size %u: this plugin serves 1..%d ranks", size, FMCU_EP_MAX_RANKS);
        return -1;
    }
    if (max_tokens < 1 || hidden < 8 || hidden % 8 || top_k < 1) {
        snprintf(why, cap, "EP group: max_tokens_per_rank %u, hidden %u, top_k %u: need >= 1, a multiple of 8, >= 1",
                 max_tokens, hidden, top_k);
        return -1;
    }
    if (act_dtype != FMOE_DTYPE_BF16 && act_dtype != FMOE_DTYPE_F16) {
        snprintf(why, cap, "EP group: activation dtype %d: this plugin's groups carry bf16 or f16 (%d, %d)", act_dtype,
                 FMOE_DTYPE_BF16, FMOE_DTYPE_F16);
        return -1;
    }
    uint32_t scales = 0, code_bytes = 2;
    switch (dispatch) {
    case FMOE_EP_DISPATCH_ACTIVATION:
        break;
    case FMOE_EP_DISPATCH_FP8_TOKEN:
        scales = 1, code_bytes = 1;
        break;
    case FMOE_EP_DISPATCH_FP8_BLOCK:
        if (hidden % 128) {
            snprintf(why, cap, "EP group: FP8 1x128 dispatch needs hidden %% 128 == 0, hidden is %u", hidden);
            return -1;
        }
        scales = hidden / 128, code_bytes = 1;
        break;
    default:
        snprintf(why, cap, "EP group: dispatch kind %d is not one of FMOE_EP_DISPATCH_*", dispatch);
        return -1;
    }
    L->size = size, L->max_tokens = max_tokens, L->hidden = hidden, L->top_k = top_k;
    L->act_dtype = act_dtype, L->dispatch = dispatch;
    L->x_row_bytes = hidden * code_bytes;
    L->scales_per_row = scales;
    L->y_row_bytes = hidden * 2;
    const uint64_t slots = (uint64_t)size * max_tokens;
    uint64_t at = 0;
    int bad = place(&at, &L->disp_arrive, 8ull * size) || place(&at, &L->comb_arrive, 8ull * size) ||
              place(&at, &L->count, 4ull * size) || place(&at, &L->x, slots * L->x_row_bytes) ||
              place(&at, &L->scale, slots * scales * 4ull) || place(&at, &L->ids, slots * top_k * 4ull) ||
              place(&at, &L->w, slots * top_k * 4ull) || place(&at, &L->comb_y, slots * L->y_row_bytes);
    if (bad) {
        snprintf(why, cap, "EP group: %u ranks x %u tokens x hidden %u need more than 2^40 bytes of buffer", size,
                 max_tokens, hidden);
        return -1;
    }
    L->bytes = at;
    return 0;
}
