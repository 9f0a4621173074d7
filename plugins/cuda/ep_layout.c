/*
 * plugins/cuda/ep_layout.c - offsets of an EP group's chunks, receive
 * buffer and send staging (ep_layout.h).
 */
#include "plugins/cuda/ep_layout.h"

#include <stdio.h>
#include <string.h>

#include "fusedmoe/common.h"

#define MAX_BYTES (1ull << 40)

static uint64_t align_to(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* a x b into *out; -1 when it passes MAX_BYTES. */
static int mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b && a > MAX_BYTES / b)
        return -1;
    *out = a * b;
    return 0;
}

/* Place a part of `count` x `each` bytes at *at, then align *at to `align`;
 * 0, or -1 when the total passes MAX_BYTES. */
static int place(uint64_t *at, uint64_t *offset, uint64_t count, uint64_t each, uint64_t align)
{
    uint64_t bytes;
    *offset = *at;
    if (mul(count, each, &bytes) != 0 || *at > MAX_BYTES - bytes)
        return -1;
    *at = align_to(*at + bytes, align);
    return 0;
}

uint64_t fmcu_ep_collective_bytes(const fmcu_ep_layout *L)
{
    return (uint64_t)(L->size - 1) * (L->disp_chunk + L->comb_chunk);
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
    /* rows of 2^31 bytes or more pass 2^40 bytes anyway (refused below) */
    L->x_row_bytes = hidden >= (1u << 30) ? 0 : hidden * code_bytes;
    L->scales_per_row = scales;
    L->y_row_bytes = hidden >= (1u << 30) ? 0 : hidden * 2;
    const uint64_t T = max_tokens, A = FMCU_EP_PART_ALIGN, G = FMCU_EP_ALIGN;
    uint64_t at = 0, end = 0, c = 0;
    /* one dispatch chunk, then one combine chunk */
    int bad = hidden >= (1u << 30) || place(&c, &L->c_count, 1, 4, A) || place(&c, &L->c_x, T, L->x_row_bytes, A) ||
              place(&c, &L->c_scale, T, scales * 4ull, A) || place(&c, &L->c_ids, T, top_k * 4ull, A) ||
              place(&c, &L->c_w, T, top_k * 4ull, G);
    L->disp_chunk = c;
    c = 0;
    bad = bad || place(&c, &end, T, L->y_row_bytes, G);
    L->comb_chunk = c;
    /* the receive buffer, then the staging */
    bad = bad || place(&at, &L->disp_arrive, size, 8, G) || place(&at, &L->comb_arrive, size, 8, G) ||
          place(&at, &L->disp, size, L->disp_chunk, G) || place(&at, &L->comb, size, L->comb_chunk, G);
    L->bytes = at;
    at = 0;
    bad = bad || place(&at, &L->send_disp, size, L->disp_chunk, G) || place(&at, &L->send_comb, size, L->comb_chunk, G);
    L->staging_bytes = at;
    if (bad) {
        snprintf(why, cap, "EP group: %u ranks x %u tokens x hidden %u need more than 2^40 bytes of buffer", size,
                 max_tokens, hidden);
        return -1;
    }
    return 0;
}
