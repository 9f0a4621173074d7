/*
 * tests/test_layer_config.c - fmoe_layer_config_init / _validate / derived
 * sizes / _expert_map (core/layer_config.c).
 *
 * Every rejection asserts the status and the exact message; the expert maps
 * are checked against tables written out by hand.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

/* A valid config every rejection test starts from. */
static fmoe_layer_config valid_config(void)
{
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = 8;
    cfg.top_k = 2;
    cfg.hidden_size = 64;
    cfg.intermediate_size = 32;
    return cfg;
}

static void expect_ok(const fmoe_layer_config *cfg)
{
    fmoe_status st = fmoe_layer_config_validate(cfg);
    ck_assert_msg(st == FMOE_STATUS_OK, "rejected: %s", fmoe_last_error());
    ck_assert_str_eq(fmoe_last_error(), "");
}

static void expect_rejected(const fmoe_layer_config *cfg, const char *message)
{
    ck_assert_int_eq(fmoe_layer_config_validate(cfg), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), message);
}

START_TEST(defaults)
{
    fmoe_layer_config cfg;
    memset(&cfg, 0xAB, sizeof cfg);
    fmoe_layer_config_init(&cfg);
    ck_assert_uint_eq(cfg.struct_size, sizeof cfg);
    ck_assert_uint_eq(cfg.num_experts, 0);
    ck_assert_uint_eq(cfg.top_k, 0);
    ck_assert_uint_eq(cfg.hidden_size, 0);
    ck_assert_uint_eq(cfg.intermediate_size, 0);
    ck_assert_uint_eq(cfg.num_redundant_experts, 0);
    ck_assert_int_eq(cfg.activation, FMOE_ACT_SILU);
    ck_assert_uint_eq(cfg.gated, 1);
    ck_assert_uint_eq(cfg.has_bias, 0);
    ck_assert(cfg.swiglu_alpha == 1.702f);
    ck_assert(cfg.swiglu_limit == 0.0f);
    ck_assert_int_eq(cfg.act_dtype, FMOE_DTYPE_BF16);
    ck_assert_int_eq(cfg.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(cfg.renormalize, 0);
    ck_assert_uint_eq(cfg.grouped_topk, 0);
    ck_assert_uint_eq(cfg.has_correction_bias, 0);
    ck_assert(cfg.routed_scaling_factor == 1.0f);
    ck_assert_uint_eq(cfg.apply_router_weight_on_input, 0);
    ck_assert_uint_eq(cfg.tp_size, 1);
    ck_assert_uint_eq(cfg.tp_rank, 0);
    ck_assert_uint_eq(cfg.ep_size, 1);
    ck_assert_uint_eq(cfg.ep_rank, 0);
    ck_assert_int_eq(cfg.placement, FMOE_PLACEMENT_LINEAR);
    ck_assert_uint_eq(cfg.enable_eplb, 0);
    ck_assert_uint_eq(cfg.max_num_tokens, 8192);
    /* The sizes must be set: the defaults alone are rejected. */
    expect_rejected(&cfg, "layer config: num_experts = 0, expected at least 1");
}
END_TEST

START_TEST(accepts_valid_configs)
{
    fmoe_layer_config cfg = valid_config();
    expect_ok(&cfg);

    /* DeepSeek-V3-like: grouped sigmoid with bias, EP over 8 ranks, EPLB. */
    cfg.num_experts = 256;
    cfg.top_k = 8;
    cfg.scoring = FMOE_SCORING_SIGMOID;
    cfg.renormalize = 1;
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 8;
    cfg.topk_group = 4;
    cfg.has_correction_bias = 1;
    cfg.routed_scaling_factor = 2.5f;
    cfg.ep_size = 8;
    cfg.ep_rank = 7;
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 32;
    cfg.placement = FMOE_PLACEMENT_ROUND_ROBIN;
    expect_ok(&cfg);

    /* Boundaries that are allowed. */
    cfg = valid_config();
    cfg.top_k = cfg.num_experts;
    expect_ok(&cfg);
    cfg.grouped_topk = 1;
    cfg.num_expert_group = 4;
    cfg.topk_group = 4;
    expect_ok(&cfg); /* top_k == topk_group * E/G */
    cfg = valid_config();
    cfg.activation = FMOE_ACT_SWIGLUOAI;
    cfg.swiglu_limit = 7.0f;
    cfg.has_bias = 1;
    cfg.tp_size = 4;
    cfg.tp_rank = 3;
    expect_ok(&cfg);
    cfg = valid_config();
    cfg.gated = 0;
    cfg.activation = FMOE_ACT_RELU2;
    cfg.act_dtype = FMOE_DTYPE_F16;
    cfg.top_k = 1;
    cfg.apply_router_weight_on_input = 1;
    cfg.scoring = FMOE_SCORING_SQRTSOFTPLUS;
    expect_ok(&cfg);
    cfg = valid_config();
    cfg.ep_size = 8; /* one expert per rank */
    cfg.ep_rank = 5;
    expect_ok(&cfg);
    cfg.num_experts = 10; /* uneven split is fine without EPLB */
    cfg.ep_size = 4;
    cfg.ep_rank = 3;
    expect_ok(&cfg);

    /* A larger struct (a newer caller) is accepted. */
    cfg = valid_config();
    cfg.struct_size = sizeof cfg + 64;
    expect_ok(&cfg);

    /* A failure's text is cleared by the next successful call. */
    cfg.num_experts = 0;
    ck_assert_int_eq(fmoe_layer_config_validate(&cfg), FMOE_STATUS_INVALID_ARGUMENT);
    cfg.num_experts = 8;
    expect_ok(&cfg);
}
END_TEST

START_TEST(rejects_struct)
{
    expect_rejected(NULL, "layer config: cfg is NULL");
    fmoe_layer_config cfg = valid_config();
    size_t v1 = offsetof(fmoe_layer_config, max_num_tokens) + sizeof(uint32_t);
    char msg[256];
    cfg.struct_size = v1 - 1;
    snprintf(msg, sizeof msg,
             "layer config: struct_size = %zu, expected at least %zu (set it with fmoe_layer_config_init)", v1 - 1, v1);
    expect_rejected(&cfg, msg);
    cfg.struct_size = 0;
    snprintf(msg, sizeof msg,
             "layer config: struct_size = 0, expected at least %zu (set it with fmoe_layer_config_init)", v1);
    expect_rejected(&cfg, msg);
    cfg.struct_size = v1; /* exactly version 1: fine */
    expect_ok(&cfg);
}
END_TEST

START_TEST(rejects_sizes)
{
    fmoe_layer_config cfg = valid_config();
    cfg.num_experts = 0;
    expect_rejected(&cfg, "layer config: num_experts = 0, expected at least 1");
    cfg = valid_config();
    cfg.top_k = 0;
    expect_rejected(&cfg, "layer config: top_k = 0, expected at least 1");
    cfg = valid_config();
    cfg.top_k = 9;
    expect_rejected(&cfg, "layer config: top_k = 9 exceeds num_experts = 8");
    cfg = valid_config();
    cfg.hidden_size = 0;
    expect_rejected(&cfg, "layer config: hidden_size = 0, expected at least 1");
    cfg = valid_config();
    cfg.intermediate_size = 0;
    expect_rejected(&cfg, "layer config: intermediate_size = 0, expected at least 1");
    cfg = valid_config();
    cfg.num_experts = 0x7FFFFFFF;
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 1;
    expect_rejected(&cfg, "layer config: num_experts + num_redundant_experts = 2147483648 exceeds 2147483647 "
                          "(expert ids are int32)");
}
END_TEST

START_TEST(rejects_flags)
{
    static const char *const names[] = {
        "gated",      "has_bias", "renormalize", "grouped_topk", "has_correction_bias", "apply_router_weight_on_input",
        "enable_eplb"};
    for (int i = 0; i < 7; i++) {
        fmoe_layer_config cfg = valid_config();
        uint32_t *field[] = {&cfg.gated,
                             &cfg.has_bias,
                             &cfg.renormalize,
                             &cfg.grouped_topk,
                             &cfg.has_correction_bias,
                             &cfg.apply_router_weight_on_input,
                             &cfg.enable_eplb};
        *field[i] = 2;
        char msg[128];
        snprintf(msg, sizeof msg, "layer config: %s = 2, expected 0 or 1", names[i]);
        expect_rejected(&cfg, msg);
        *field[i] = 0xFFFFFFFFu;
        snprintf(msg, sizeof msg, "layer config: %s = 4294967295, expected 0 or 1", names[i]);
        expect_rejected(&cfg, msg);
    }
}
END_TEST

START_TEST(rejects_activation)
{
    fmoe_layer_config cfg = valid_config();
    cfg.activation = FMOE_ACT_INVALID;
    expect_rejected(&cfg, "layer config: activation = 0 is unknown, expected silu (1), gelu (2), gelu_tanh (3), "
                          "relu2 (4), swigluoai (5) or swiglustep (6)");
    cfg.activation = 7;
    expect_rejected(&cfg, "layer config: activation = 7 is unknown, expected silu (1), gelu (2), gelu_tanh (3), "
                          "relu2 (4), swigluoai (5) or swiglustep (6)");
    cfg = valid_config();
    cfg.activation = FMOE_ACT_SWIGLUOAI;
    cfg.gated = 0;
    expect_rejected(&cfg, "layer config: activation = 5 (swigluoai) is gated only, but gated = 0");
    cfg.activation = FMOE_ACT_SWIGLUSTEP;
    expect_rejected(&cfg, "layer config: activation = 6 (swiglustep) is gated only, but gated = 0");

    cfg = valid_config();
    cfg.swiglu_limit = -1.0f;
    expect_rejected(&cfg, "layer config: swiglu_limit = -1, expected a finite value >= 0 (0 = no clamp)");
    cfg.swiglu_limit = INFINITY;
    expect_rejected(&cfg, "layer config: swiglu_limit = inf, expected a finite value >= 0 (0 = no clamp)");
    cfg.swiglu_limit = NAN;
    expect_rejected(&cfg, "layer config: swiglu_limit = nan, expected a finite value >= 0 (0 = no clamp)");
    cfg = valid_config();
    cfg.swiglu_alpha = -INFINITY;
    expect_rejected(&cfg, "layer config: swiglu_alpha = -inf, expected a finite value");
    cfg.swiglu_alpha = NAN;
    expect_rejected(&cfg, "layer config: swiglu_alpha = nan, expected a finite value");
}
END_TEST

START_TEST(rejects_act_dtype)
{
    fmoe_layer_config cfg = valid_config();
    cfg.act_dtype = FMOE_DTYPE_INVALID;
    expect_rejected(&cfg, "layer config: act_dtype = 0, expected F32 (1), BF16 (2) or F16 (3)");
    cfg.act_dtype = FMOE_DTYPE_F64;
    expect_rejected(&cfg, "layer config: act_dtype = 4, expected F32 (1), BF16 (2) or F16 (3)");
    cfg.act_dtype = FMOE_DTYPE_FP8_E4M3FN;
    expect_rejected(&cfg, "layer config: act_dtype = 5, expected F32 (1), BF16 (2) or F16 (3)");
}
END_TEST

START_TEST(rejects_routing)
{
    fmoe_layer_config cfg = valid_config();
    cfg.scoring = FMOE_SCORING_INVALID;
    expect_rejected(&cfg, "layer config: scoring = 0 is unknown, expected softmax (1), sigmoid (2) or "
                          "sqrtsoftplus (3)");
    cfg.scoring = 4;
    expect_rejected(&cfg, "layer config: scoring = 4 is unknown, expected softmax (1), sigmoid (2) or "
                          "sqrtsoftplus (3)");

    cfg = valid_config();
    cfg.routed_scaling_factor = 0.0f;
    expect_rejected(&cfg, "layer config: routed_scaling_factor = 0, expected a finite value > 0");
    cfg.routed_scaling_factor = -2.5f;
    expect_rejected(&cfg, "layer config: routed_scaling_factor = -2.5, expected a finite value > 0");
    cfg.routed_scaling_factor = INFINITY;
    expect_rejected(&cfg, "layer config: routed_scaling_factor = inf, expected a finite value > 0");
    cfg.routed_scaling_factor = NAN;
    expect_rejected(&cfg, "layer config: routed_scaling_factor = nan, expected a finite value > 0");

    cfg = valid_config();
    cfg.apply_router_weight_on_input = 1;
    expect_rejected(&cfg, "layer config: apply_router_weight_on_input = 1 needs top_k = 1, got top_k = 2");
}
END_TEST

START_TEST(rejects_grouping)
{
    fmoe_layer_config cfg = valid_config();
    cfg.grouped_topk = 1;
    expect_rejected(&cfg, "layer config: grouped_topk = 1 needs num_expert_group and topk_group >= 1, got "
                          "num_expert_group = 0, topk_group = 0");
    cfg.num_expert_group = 4;
    expect_rejected(&cfg, "layer config: grouped_topk = 1 needs num_expert_group and topk_group >= 1, got "
                          "num_expert_group = 4, topk_group = 0");
    cfg.num_expert_group = 0;
    cfg.topk_group = 2;
    expect_rejected(&cfg, "layer config: grouped_topk = 1 needs num_expert_group and topk_group >= 1, got "
                          "num_expert_group = 0, topk_group = 2");
    cfg.num_expert_group = 4;
    cfg.topk_group = 5;
    expect_rejected(&cfg, "layer config: topk_group = 5 exceeds num_expert_group = 4");
    cfg.num_experts = 10;
    cfg.topk_group = 2;
    expect_rejected(&cfg, "layer config: num_experts = 10 is not a multiple of num_expert_group = 4");
    cfg.num_experts = 8;
    cfg.topk_group = 1;
    cfg.top_k = 3;
    expect_rejected(&cfg, "layer config: top_k = 3 exceeds the 2 experts in topk_group = 1 groups of 2");

    /* Group fields are ignored when grouped_topk is off. */
    cfg.grouped_topk = 0;
    cfg.num_expert_group = 3;
    expect_ok(&cfg);
}
END_TEST

START_TEST(rejects_parallel)
{
    fmoe_layer_config cfg = valid_config();
    cfg.tp_size = 0;
    expect_rejected(&cfg, "layer config: tp_size = 0, expected at least 1");
    cfg = valid_config();
    cfg.tp_size = 2;
    cfg.tp_rank = 2;
    expect_rejected(&cfg, "layer config: tp_rank = 2 is out of range for tp_size = 2 (expected 0..1)");
    cfg = valid_config();
    cfg.ep_size = 0;
    expect_rejected(&cfg, "layer config: ep_size = 0, expected at least 1");
    cfg = valid_config();
    cfg.ep_rank = 1;
    expect_rejected(&cfg, "layer config: ep_rank = 1 is out of range for ep_size = 1 (expected 0..0)");
    cfg = valid_config();
    cfg.tp_size = 2;
    cfg.ep_size = 2;
    expect_rejected(&cfg, "layer config: tp_size = 2 and ep_size = 2: a layer uses tensor or expert "
                          "parallelism, not both");
    cfg = valid_config();
    cfg.intermediate_size = 100;
    cfg.tp_size = 3;
    expect_rejected(&cfg, "layer config: intermediate_size = 100 is not divisible by tp_size = 3");
    cfg = valid_config();
    cfg.placement = FMOE_PLACEMENT_INVALID;
    expect_rejected(&cfg, "layer config: placement = 0 is unknown, expected linear (1) or round_robin (2)");
    cfg.placement = 3;
    expect_rejected(&cfg, "layer config: placement = 3 is unknown, expected linear (1) or round_robin (2)");
    cfg = valid_config();
    cfg.ep_size = 16;
    expect_rejected(&cfg, "layer config: ep_size = 16 exceeds the 8 global experts; every EP rank must own "
                          "at least one");
}
END_TEST

START_TEST(rejects_eplb)
{
    fmoe_layer_config cfg = valid_config();
    cfg.num_redundant_experts = 2;
    expect_rejected(&cfg, "layer config: num_redundant_experts = 2 needs enable_eplb = 1");
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 1024;
    expect_rejected(&cfg, "layer config: num_redundant_experts = 1024 exceeds the maximum of 1023");
    cfg.num_redundant_experts = 2;
    cfg.ep_size = 4;
    expect_rejected(&cfg, "layer config: enable_eplb = 1 needs the global experts (num_experts + "
                          "num_redundant_experts = 10) to be a multiple of ep_size = 4");
    cfg.num_redundant_experts = 1023; /* the maximum is allowed */
    cfg.num_experts = 1025;
    cfg.ep_size = 8;
    expect_ok(&cfg);
    /* Redundant experts count as global experts for the ep_size bound. */
    cfg = valid_config();
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 8;
    cfg.ep_size = 16;
    expect_ok(&cfg);
}
END_TEST

START_TEST(rejects_max_num_tokens)
{
    fmoe_layer_config cfg = valid_config();
    cfg.max_num_tokens = 0;
    expect_rejected(&cfg, "layer config: max_num_tokens = 0, expected at least 1");
}
END_TEST

START_TEST(derived_sizes)
{
    fmoe_layer_config cfg = valid_config();
    ck_assert_uint_eq(fmoe_layer_config_global_experts(&cfg), 8);
    ck_assert_uint_eq(fmoe_layer_config_local_experts(&cfg), 8);
    ck_assert_uint_eq(fmoe_layer_config_intermediate_per_rank(&cfg), 32);
    cfg.intermediate_size = 1024;
    cfg.tp_size = 4;
    cfg.tp_rank = 1;
    ck_assert_uint_eq(fmoe_layer_config_intermediate_per_rank(&cfg), 256);

    /* E = 10 over 4 ranks: 3, 3, 2, 2 for both placements. */
    cfg = valid_config();
    cfg.num_experts = 10;
    cfg.ep_size = 4;
    const uint32_t counts[4] = {3, 3, 2, 2};
    for (int p = FMOE_PLACEMENT_LINEAR; p <= FMOE_PLACEMENT_ROUND_ROBIN; p++) {
        cfg.placement = p;
        for (uint32_t r = 0; r < 4; r++) {
            cfg.ep_rank = r;
            ck_assert_uint_eq(fmoe_layer_config_local_experts(&cfg), counts[r]);
        }
    }

    /* EPLB: physical = logical + redundant. */
    cfg = valid_config();
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 4;
    cfg.ep_size = 4;
    cfg.ep_rank = 2;
    expect_ok(&cfg);
    ck_assert_uint_eq(fmoe_layer_config_global_experts(&cfg), 12);
    ck_assert_uint_eq(fmoe_layer_config_local_experts(&cfg), 3);

    ck_assert_uint_eq(fmoe_layer_config_global_experts(NULL), 0);
    ck_assert_uint_eq(fmoe_layer_config_local_experts(NULL), 0);
    ck_assert_uint_eq(fmoe_layer_config_intermediate_per_rank(NULL), 0);
}
END_TEST

static void expect_map(fmoe_layer_config *cfg, uint32_t rank, const int32_t *want, uint32_t n)
{
    int32_t map[16];
    memset(map, 0x5A, sizeof map);
    cfg->ep_rank = rank;
    fmoe_status st = fmoe_layer_config_expert_map(cfg, map, n);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_last_error());
    for (uint32_t g = 0; g < n; g++)
        ck_assert_msg(map[g] == want[g], "rank %u expert %u: %d, expected %d", rank, g, map[g], want[g]);
    ck_assert_int_eq(map[n], 0x5A5A5A5A); /* nothing written past len */
}

START_TEST(expert_map_linear)
{
    fmoe_layer_config cfg = valid_config();
    cfg.num_experts = 10;
    cfg.ep_size = 4;
    cfg.placement = FMOE_PLACEMENT_LINEAR;
    static const int32_t want[4][10] = {
        {0, 1, 2, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, 0, 1, 2, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, 0, 1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, 0, 1},
    };
    for (uint32_t r = 0; r < 4; r++)
        expect_map(&cfg, r, want[r], 10);
}
END_TEST

START_TEST(expert_map_round_robin)
{
    fmoe_layer_config cfg = valid_config();
    cfg.num_experts = 10;
    cfg.ep_size = 4;
    cfg.placement = FMOE_PLACEMENT_ROUND_ROBIN;
    static const int32_t want[4][10] = {
        {0, -1, -1, -1, 1, -1, -1, -1, 2, -1},
        {-1, 0, -1, -1, -1, 1, -1, -1, -1, 2},
        {-1, -1, 0, -1, -1, -1, 1, -1, -1, -1},
        {-1, -1, -1, 0, -1, -1, -1, 1, -1, -1},
    };
    for (uint32_t r = 0; r < 4; r++)
        expect_map(&cfg, r, want[r], 10);
}
END_TEST

START_TEST(expert_map_identity_and_eplb)
{
    fmoe_layer_config cfg = valid_config();
    cfg.num_experts = 5;
    cfg.top_k = 1;
    expect_map(&cfg, 0, (const int32_t[]){0, 1, 2, 3, 4}, 5);

    /* EPLB: 6 logical + 2 redundant = 8 physical over 2 ranks. */
    cfg.num_experts = 6;
    cfg.enable_eplb = 1;
    cfg.num_redundant_experts = 2;
    cfg.ep_size = 2;
    expect_map(&cfg, 0, (const int32_t[]){0, 1, 2, 3, -1, -1, -1, -1}, 8);
    expect_map(&cfg, 1, (const int32_t[]){-1, -1, -1, -1, 0, 1, 2, 3}, 8);
}
END_TEST

START_TEST(expert_map_errors)
{
    fmoe_layer_config cfg = valid_config();
    int32_t map[16];
    ck_assert_int_eq(fmoe_layer_config_expert_map(&cfg, map, 9), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "expert map: len = 9, expected the 8 global experts");
    ck_assert_int_eq(fmoe_layer_config_expert_map(&cfg, NULL, 8), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "expert map: expert_map is NULL");
    /* An invalid config is reported as validation reports it. */
    cfg.ep_size = 2;
    cfg.ep_rank = 2;
    ck_assert_int_eq(fmoe_layer_config_expert_map(&cfg, map, 8), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "layer config: ep_rank = 2 is out of range for ep_size = 2 (expected 0..1)");
    ck_assert_int_eq(fmoe_layer_config_expert_map(NULL, map, 8), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "layer config: cfg is NULL");
}
END_TEST

START_TEST(expert_maps_partition_experts)
{
    /* Every (E, ep, placement): each expert is owned by exactly one rank,
     * local indices on a rank are 0..local-1 each exactly once. */
    for (uint32_t E = 1; E <= 40; E++) {
        for (uint32_t ep = 1; ep <= E && ep <= 9; ep++) {
            for (int p = FMOE_PLACEMENT_LINEAR; p <= FMOE_PLACEMENT_ROUND_ROBIN; p++) {
                fmoe_layer_config cfg = valid_config();
                cfg.num_experts = E;
                cfg.top_k = 1;
                cfg.ep_size = ep;
                cfg.placement = p;
                int owners[40] = {0};
                for (uint32_t r = 0; r < ep; r++) {
                    cfg.ep_rank = r;
                    int32_t map[40];
                    ck_assert_int_eq(fmoe_layer_config_expert_map(&cfg, map, E), FMOE_STATUS_OK);
                    uint32_t local = fmoe_layer_config_local_experts(&cfg);
                    int seen[40] = {0};
                    for (uint32_t g = 0; g < E; g++) {
                        if (map[g] < 0)
                            continue;
                        ck_assert_int_lt(map[g], (int)local);
                        seen[map[g]]++;
                        owners[g]++;
                    }
                    for (uint32_t l = 0; l < local; l++)
                        ck_assert_int_eq(seen[l], 1);
                }
                for (uint32_t g = 0; g < E; g++)
                    ck_assert_int_eq(owners[g], 1);
            }
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("layer_config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, accepts_valid_configs);
    tcase_add_test(tc, rejects_struct);
    tcase_add_test(tc, rejects_sizes);
    tcase_add_test(tc, rejects_flags);
    tcase_add_test(tc, rejects_activation);
    tcase_add_test(tc, rejects_act_dtype);
    tcase_add_test(tc, rejects_routing);
    tcase_add_test(tc, rejects_grouping);
    tcase_add_test(tc, rejects_parallel);
    tcase_add_test(tc, rejects_eplb);
    tcase_add_test(tc, rejects_max_num_tokens);
    tcase_add_test(tc, derived_sizes);
    tcase_add_test(tc, expert_map_linear);
    tcase_add_test(tc, expert_map_round_robin);
    tcase_add_test(tc, expert_map_identity_and_eplb);
    tcase_add_test(tc, expert_map_errors);
    tcase_add_test(tc, expert_maps_partition_experts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 18);
}
