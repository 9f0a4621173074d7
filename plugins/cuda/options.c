/*
 * plugins/cuda/options.c - the cuda plugin's options (options.h).
 */
#include "plugins/cuda/options.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fusedmoe/plugin.h"
#include "plugins/cuda/launch_shape.h"
#include "plugins/cuda/tier.h"

void fmcu_options_default(fmcu_options *o)
{
    o->tier = FMCU_TIER_AUTO;
    o->plan_wide_pairs = FMCU_PLAN_WIDE_PAIRS;
    o->decode_tail = 1;
    o->decode_fused = FMCU_FUSED_AUTO;
    o->decode_fused_w13_regs = 0;
    o->prefill_warp_rows = 1;
    o->prefill_half_tiles = 1;
    o->prefill_tile_order = FMCU_GG_ORDER_AUTO;
    o->wq_wgmma = 1;
    o->wq_ring = FMCU_FUSED_AUTO;
    o->stream_wgmma = FMCU_FUSED_AUTO;
    o->stream_wgmma_gemm1 = FMCU_FUSED_AUTO;
    o->stream_wgmma_bf16 = FMCU_FUSED_AUTO;
    o->prefill_dequant_mib = FMCU_PREFILL_DEQUANT_MIB;
    o->prefill_dequant_fused = FMCU_FUSED_AUTO;
    o->prefill_block_gemm = FMCU_BLOCK_GEMM_CUTLASS;
    o->prefill_w4_gemm = FMCU_W4_GEMM_AUTO;
}

/* An enum option: its values, what each sets, and the refusal's wording. */
typedef struct enum_option {
    const char *name;
    const char *const *values; /* NULL-terminated */
    const int *codes;
    const char *expected;
} enum_option;

static const char *const TIER_VALUES[] = {"auto", "stream", "tiled", "prefill", NULL};
static const int TIER_CODES[] = {FMCU_TIER_AUTO, FMCU_TIER_STREAM, FMCU_TIER_TILED, FMCU_TIER_PREFILL};
static const char *const FUSED_VALUES[] = {"auto", "on", "off", NULL};
static const int FUSED_CODES[] = {FMCU_FUSED_AUTO, FMCU_FUSED_ON, FMCU_FUSED_OFF};
static const char *const W13_VALUES[] = {"auto", "registers", NULL};
static const int W13_CODES[] = {0, 1};
static const char *const ORDER_VALUES[] = {"auto", "fixed", "counter", NULL};
static const int ORDER_CODES[] = {FMCU_GG_ORDER_AUTO, FMCU_GG_ORDER_FIXED, FMCU_GG_ORDER_COUNTER};

static const enum_option TIER = {"tier", TIER_VALUES, TIER_CODES, "auto, stream, tiled or prefill"};
static const enum_option FUSED = {"decode_fused", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option W13 = {"decode_fused_w13", W13_VALUES, W13_CODES, "auto or registers"};
static const enum_option DQ_FUSED = {"prefill_dequant_fused", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option RING = {"wq_ring", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option G2_WGMMA = {"stream_wgmma", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option G1_WGMMA = {"stream_wgmma_gemm1", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option BF16_WGMMA = {"stream_wgmma_bf16", FUSED_VALUES, FUSED_CODES, "auto, on or off"};
static const enum_option ORDER = {"prefill_tile_order", ORDER_VALUES, ORDER_CODES, "auto, fixed or counter"};
static const char *const BLOCK_VALUES[] = {"cutlass", "ours", NULL};
static const int BLOCK_CODES[] = {FMCU_BLOCK_GEMM_CUTLASS, FMCU_BLOCK_GEMM_OURS};
static const enum_option BLOCK_GEMM = {"prefill_block_gemm", BLOCK_VALUES, BLOCK_CODES, "cutlass or ours"};
static const char *const W4G_VALUES[] = {"auto", "swapped", "converting", NULL};
static const int W4G_CODES[] = {FMCU_W4_GEMM_AUTO, FMCU_W4_GEMM_SWAPPED, FMCU_W4_GEMM_CONVERTING};
static const enum_option W4_GEMM = {"prefill_w4_gemm", W4G_VALUES, W4G_CODES, "auto, swapped or converting"};

static int refuse(const char *name, const char *expected, const char *value, char *why, size_t cap)
{
    snprintf(why, cap, "option '%s': expected %s, got '%s'", name, expected, value);
    return -1;
}

static int set_enum(const enum_option *e, const char *value, int *out, char *why, size_t cap)
{
    int i;
    if (fmoe_option_parse_enum(value, e->values, &i) != 0)
        return refuse(e->name, e->expected, value, why, cap);
    *out = e->codes[i];
    return 0;
}

static int set_bool(const char *name, const char *value, int *out, char *why, size_t cap)
{
    int b;
    if (fmoe_option_parse_bool(value, &b) != 0)
        return refuse(name, "true or false", value, why, cap);
    *out = b;
    return 0;
}

int fmcu_options_set(fmcu_options *o, const char *name, const char *value, char *why, size_t cap)
{
    if (!name)
        name = "";
    if (!value)
        value = "";
    int v;
    if (strcmp(name, TIER.name) == 0) {
        if (set_enum(&TIER, value, &v, why, cap) != 0)
            return -1;
        o->tier = v;
        return 0;
    }
    if (strcmp(name, "plan_wide_pairs") == 0) {
        long long n;
        if (fmoe_option_parse_int(value, 0, INT64_MAX, &n) != 0)
            return refuse(name, "a whole number of pairs >= 0 (0: never)", value, why, cap);
        o->plan_wide_pairs = n == 0 ? INT64_MAX : (int64_t)n;
        return 0;
    }
    if (strcmp(name, "decode_tail") == 0)
        return set_bool(name, value, &o->decode_tail, why, cap);
    if (strcmp(name, FUSED.name) == 0)
        return set_enum(&FUSED, value, &o->decode_fused, why, cap);
    if (strcmp(name, W13.name) == 0)
        return set_enum(&W13, value, &o->decode_fused_w13_regs, why, cap);
    if (strcmp(name, "prefill_warp_rows") == 0)
        return set_bool(name, value, &o->prefill_warp_rows, why, cap);
    if (strcmp(name, "prefill_half_tiles") == 0)
        return set_bool(name, value, &o->prefill_half_tiles, why, cap);
    if (strcmp(name, "wq_wgmma") == 0)
        return set_bool(name, value, &o->wq_wgmma, why, cap);
    if (strcmp(name, RING.name) == 0)
        return set_enum(&RING, value, &o->wq_ring, why, cap);
    if (strcmp(name, G2_WGMMA.name) == 0)
        return set_enum(&G2_WGMMA, value, &o->stream_wgmma, why, cap);
    if (strcmp(name, "stream_wgmma_gemm1") == 0)
        return set_enum(&G1_WGMMA, value, &o->stream_wgmma_gemm1, why, cap);
    if (strcmp(name, "stream_wgmma_bf16") == 0)
        return set_enum(&BF16_WGMMA, value, &o->stream_wgmma_bf16, why, cap);
    if (strcmp(name, ORDER.name) == 0)
        return set_enum(&ORDER, value, &o->prefill_tile_order, why, cap);
    if (strcmp(name, DQ_FUSED.name) == 0)
        return set_enum(&DQ_FUSED, value, &o->prefill_dequant_fused, why, cap);
    if (strcmp(name, BLOCK_GEMM.name) == 0)
        return set_enum(&BLOCK_GEMM, value, &o->prefill_block_gemm, why, cap);
    if (strcmp(name, W4_GEMM.name) == 0)
        return set_enum(&W4_GEMM, value, &o->prefill_w4_gemm, why, cap);
    if (strcmp(name, "prefill_dequant_mib") == 0) {
        long long n;
        if (fmoe_option_parse_int(value, 0, FMCU_PREFILL_DEQUANT_MIB_MAX, &n) != 0)
            return refuse(name, "a whole number of MiB from 0 to 1048576 (0: never)", value, why, cap);
        o->prefill_dequant_mib = (uint32_t)n;
        return 0;
    }
    snprintf(why, cap,
             "option '%s': not an option of the cuda plugin (tier, plan_wide_pairs, decode_tail, decode_fused, "
             "decode_fused_w13, prefill_warp_rows, prefill_half_tiles, prefill_tile_order, wq_wgmma, wq_ring, "
             "stream_wgmma, stream_wgmma_gemm1, stream_wgmma_bf16, prefill_dequant_mib, prefill_dequant_fused, "
             "prefill_block_gemm, prefill_w4_gemm, nccl_library, ep_timeout_ms)",
             name);
    return -1;
}
