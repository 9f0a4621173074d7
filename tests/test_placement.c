/*
 * tests/test_placement.c - the public expert placement tables
 * (docs/PLACEMENT.md) on hand-worked layouts: linear and round-robin EP
 * with leftover experts on the first ranks, the AITER mask with its
 * sentinel, EPLB replicas appended round-robin, and the dispatch order.
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

static fmoe_layer_config layer(uint32_t experts, uint32_t ep, uint32_t rank, int32_t placement)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = experts;
    c.top_k = 2;
    c.hidden_size = 64;
    c.intermediate_size = 64;
    c.ep_size = ep;
    c.ep_rank = rank;
    c.placement = placement;
    return c;
}

static void expect_ints(const int32_t *got, const int32_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%zu] = %d, want %d", what, i, got[i], want[i]);
}

/* E = 10 over 4 ranks: 3, 3, 2, 2 experts (the first two ranks get one more). */
START_TEST(linear_mask_and_local_ids)
{
    fmoe_layer_config c = layer(10, 4, 1, FMOE_PLACEMENT_LINEAR);
    int32_t mask[11], l2g[3];
    static const int32_t want_mask[11] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
    static const int32_t want_l2g[3] = {3, 4, 5};
    ck_assert_int_eq(fmoe_layer_config_expert_mask(&c, mask, 11), FMOE_STATUS_OK);
    expect_ints(mask, want_mask, 11, "mask");
    ck_assert_int_eq(fmoe_layer_config_local_to_global(&c, l2g, 3), FMOE_STATUS_OK);
    expect_ints(l2g, want_l2g, 3, "local_to_global");
    c.ep_rank = 3;
    int32_t l2g3[2];
    static const int32_t want3[2] = {8, 9};
    ck_assert_int_eq(fmoe_layer_config_local_to_global(&c, l2g3, 2), FMOE_STATUS_OK);
    expect_ints(l2g3, want3, 2, "rank 3");
}
END_TEST

START_TEST(round_robin_and_dispatch_order)
{
    fmoe_layer_config c = layer(10, 4, 1, FMOE_PLACEMENT_ROUND_ROBIN);
    int32_t mask[11], l2g[3], g2d[10], d2g[10];
    static const int32_t want_mask[11] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0};
    static const int32_t want_l2g[3] = {1, 5, 9};
    /* rank offsets 0, 3, 6, 8; expert g goes to offset(g % 4) + g / 4 */
    static const int32_t want_g2d[10] = {0, 3, 6, 8, 1, 4, 7, 9, 2, 5};
    static const int32_t want_d2g[10] = {0, 4, 8, 1, 5, 9, 2, 6, 3, 7};
    ck_assert_int_eq(fmoe_layer_config_expert_mask(&c, mask, 11), FMOE_STATUS_OK);
    expect_ints(mask, want_mask, 11, "mask");
    ck_assert_int_eq(fmoe_layer_config_local_to_global(&c, l2g, 3), FMOE_STATUS_OK);
    expect_ints(l2g, want_l2g, 3, "local_to_global");
    ck_assert_int_eq(fmoe_layer_config_dispatch_order(&c, g2d, d2g, 10), FMOE_STATUS_OK);
    expect_ints(g2d, want_g2d, 10, "global_to_dispatch");
    expect_ints(d2g, want_d2g, 10, "dispatch_to_global");
    /* Linear placement: already in rank order. */
    c.placement = FMOE_PLACEMENT_LINEAR;
    ck_assert_int_eq(fmoe_layer_config_dispatch_order(&c, g2d, NULL, 10), FMOE_STATUS_OK);
    for (int32_t g = 0; g < 10; g++)
        ck_assert_int_eq(g2d[g], g);
}
END_TEST

/* L = 4 logical experts, R = 6 redundant: physical 4..9 hold 0,1,2,3,0,1. */
START_TEST(eplb_tables)
{
    fmoe_layer_config c = layer(4, 1, 0, FMOE_PLACEMENT_LINEAR);
    c.enable_eplb = 1;
    c.num_redundant_experts = 6;
    ck_assert_msg(fmoe_layer_config_validate(&c) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    int32_t p2l[10], l2p[12];
    uint32_t count[4];
    static const int32_t want_p2l[10] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
    static const int32_t want_l2p[12] = {0, 4, 8, 1, 5, 9, 2, 6, -1, 3, 7, -1};
    ck_assert_int_eq(fmoe_layer_config_physical_to_logical(&c, p2l, 10), FMOE_STATUS_OK);
    expect_ints(p2l, want_p2l, 10, "physical_to_logical");
    ck_assert_int_eq(fmoe_layer_config_logical_to_physical(&c, l2p, 3, count), FMOE_STATUS_OK);
    expect_ints(l2p, want_l2p, 12, "logical_to_physical");
    ck_assert_uint_eq(count[0], 3);
    ck_assert_uint_eq(count[1], 3);
    ck_assert_uint_eq(count[2], 2);
    ck_assert_uint_eq(count[3], 2);
    ck_assert_int_eq(fmoe_layer_config_logical_to_physical(&c, l2p, 2, count), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "logical to physical: max_replicas = 2, but logical expert 0 has 3 replicas");
    /* With EP, the mask covers physical experts: 10 over 2 ranks. */
    c.ep_size = 2;
    c.ep_rank = 1;
    int32_t mask[11];
    static const int32_t want_mask[11] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0};
    ck_assert_int_eq(fmoe_layer_config_expert_mask(&c, mask, 11), FMOE_STATUS_OK);
    expect_ints(mask, want_mask, 11, "mask");
}
END_TEST

START_TEST(length_errors)
{
    fmoe_layer_config c = layer(10, 4, 1, FMOE_PLACEMENT_LINEAR);
    int32_t buf[16];
    ck_assert_int_eq(fmoe_layer_config_expert_mask(&c, buf, 10), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "expert mask: len = 10, expected 11 (global experts + 1 sentinel)");
    ck_assert_int_eq(fmoe_layer_config_local_to_global(&c, buf, 2), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "local to global: len = 2, expected 3 (local experts)");
    ck_assert_int_eq(fmoe_layer_config_physical_to_logical(&c, NULL, 10), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "physical to logical: the buffer is NULL");
    ck_assert_int_eq(fmoe_layer_config_dispatch_order(&c, NULL, NULL, 10), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "dispatch order: the buffer is NULL");
    c.ep_rank = 4; /* an invalid config is refused with its own message */
    ck_assert_int_eq(fmoe_layer_config_expert_mask(&c, buf, 11), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "ep_rank"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, linear_mask_and_local_ids);
    tcase_add_test(tc, round_robin_and_dispatch_order);
    tcase_add_test(tc, eplb_tables);
    tcase_add_test(tc, length_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 4);
}
