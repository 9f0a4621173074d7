/*
 * tests/cuda/test_cuda_ep_transport.c - which transport a CUDA EP group
 * gets (plugins/cuda/ep_options.c), without a GPU:
 *   - the option ep_transport: its values taken, others refused by name;
 *   - fmcu_ep_transport_pick for every option value against LSA team sizes
 *     (the ranks NCCL says this rank reaches by load/store): auto is lsa
 *     exactly when the team is the group, lsa refuses a smaller team naming
 *     both counts, collective takes any.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/ep.h"
#include "plugins/cuda/ep_api.h"
#include "tests/test_util.h"

START_TEST(option_values)
{
    fmcu_ep_options o;
    char why[256] = "";
    fmcu_ep_options_default(&o);
    ck_assert_int_eq(o.transport, FMCU_EP_TRANSPORT_AUTO);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_transport", "collective", why, sizeof why), 1);
    ck_assert_int_eq(o.transport, FMCU_EP_TRANSPORT_COLLECTIVE);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_transport", "lsa", why, sizeof why), 1);
    ck_assert_int_eq(o.transport, FMCU_EP_TRANSPORT_LSA);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_transport", "auto", why, sizeof why), 1);
    ck_assert_int_eq(o.transport, FMCU_EP_TRANSPORT_AUTO);
    const char *bad[] = {"", "LSA", "nvlink", "collective ", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.transport = FMCU_EP_TRANSPORT_LSA;
        ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_transport", bad[i], why, sizeof why), -1);
        ck_assert_msg(strstr(why, "option 'ep_transport'") && strstr(why, "auto, lsa or collective"), "%s", why);
        ck_assert_int_eq(o.transport, FMCU_EP_TRANSPORT_LSA); /* unchanged */
    }
    ck_assert_str_eq(fmcu_ep_transport_name(FMCU_EP_TRANSPORT_LSA), "lsa");
    ck_assert_str_eq(fmcu_ep_transport_name(FMCU_EP_TRANSPORT_COLLECTIVE), "collective");
    ck_assert_str_eq(fmcu_ep_transport_name(FMCU_EP_TRANSPORT_AUTO), "auto");
}
END_TEST

START_TEST(pick)
{
    char why[256];
    /* one host of 8 GPUs on NVLink, 2 nodes of 8, 1 rank, 4 nodes of 1 */
    const uint32_t size[] = {8, 16, 1, 4, 64};
    const uint32_t team[] = {8, 8, 1, 1, 64};
    for (size_t i = 0; i < sizeof size / sizeof size[0]; i++) {
        const int whole = team[i] == size[i];
        int32_t out = -1;
        ck_assert_int_eq(fmcu_ep_transport_pick(FMCU_EP_TRANSPORT_AUTO, team[i], size[i], &out, why, sizeof why), 0);
        ck_assert_int_eq(out, whole ? FMCU_EP_TRANSPORT_LSA : FMCU_EP_TRANSPORT_COLLECTIVE);
        out = -1;
        ck_assert_int_eq(fmcu_ep_transport_pick(FMCU_EP_TRANSPORT_COLLECTIVE, team[i], size[i], &out, why, sizeof why),
                         0);
        ck_assert_int_eq(out, FMCU_EP_TRANSPORT_COLLECTIVE);
        out = -1;
        why[0] = 0;
        const int rc = fmcu_ep_transport_pick(FMCU_EP_TRANSPORT_LSA, team[i], size[i], &out, why, sizeof why);
        if (whole) {
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(out, FMCU_EP_TRANSPORT_LSA);
        } else {
            char counts[64];
            snprintf(counts, sizeof counts, "%u of the %u ranks", team[i], size[i]);
            ck_assert_int_eq(rc, -1);
            ck_assert_int_eq(out, -1);
            ck_assert_msg(strstr(why, "ep_transport=lsa") && strstr(why, counts) && strstr(why, "collective"), "%s",
                          why);
        }
    }
    /* what NCCL could not report for a group */
    int32_t out = -1;
    ck_assert_int_eq(fmcu_ep_transport_pick(FMCU_EP_TRANSPORT_AUTO, 0, 4, &out, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "0 ranks in this rank's NVLink (LSA) team of a group of 4"), "%s", why);
    ck_assert_int_eq(fmcu_ep_transport_pick(FMCU_EP_TRANSPORT_AUTO, 5, 4, &out, why, sizeof why), -1);
    ck_assert_int_eq(fmcu_ep_transport_pick(7, 4, 4, &out, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "transport 7"), "%s", why);
    ck_assert_int_eq(out, -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_ep_transport");
    TCase *tc = tcase_create("transport");
    tcase_add_test(tc, option_values);
    tcase_add_test(tc, pick);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 2);
}
