/*
 * tests/cuda/test_cuda_options.c - the cuda plugin's options
 * (plugins/cuda/options.c): the defaults and the manifest's (cuda.toml,
 * argv[1]) agree, every value each option takes, and refusals that name
 * the option and what it expected. No GPU needed.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plugins/cuda/ep.h"
#include "plugins/cuda/launch_shape.h"
#include "plugins/cuda/options.h"
#include "plugins/cuda/tier.h"

/* Set `name` to `value` on the defaults: 0, or -1 with the refusal in why. */
static int set_one(fmcu_options *o, const char *name, const char *value, char *why, size_t cap)
{
    fmcu_options_default(o);
    why[0] = 0;
    return fmcu_options_set(o, name, value, why, cap);
}

START_TEST(defaults_are_the_measured_choices)
{
    fmcu_options o;
    memset(&o, 0x5a, sizeof o);
    fmcu_options_default(&o);
    ck_assert_int_eq(o.tier, FMCU_TIER_AUTO);
    ck_assert_int_eq(o.plan_wide_pairs, 8192);
    ck_assert_int_eq(o.decode_tail, 1);
    ck_assert_int_eq(o.decode_fused, FMCU_FUSED_AUTO);
    ck_assert_int_eq(o.decode_fused_w13_regs, 0);
    ck_assert_int_eq(o.prefill_warp_rows, 1);
    ck_assert_int_eq(o.prefill_half_tiles, 1);
    ck_assert_int_eq(o.prefill_tile_order, FMCU_GG_ORDER_AUTO);
    ck_assert_int_eq(o.wq_wgmma, 1);
    ck_assert_int_eq(o.wq_ring, FMCU_FUSED_AUTO);
    ck_assert_int_eq(o.stream_wgmma, FMCU_FUSED_AUTO);
    ck_assert_int_eq(o.stream_wgmma_gemm1, FMCU_FUSED_AUTO);
    ck_assert_int_eq(o.stream_wgmma_bf16, FMCU_FUSED_AUTO);
    ck_assert_uint_eq(o.prefill_dequant_mib, 1024);
    ck_assert_int_eq(o.prefill_dequant_fused, FMCU_FUSED_AUTO);
    ck_assert_int_eq(o.prefill_block_gemm, FMCU_BLOCK_GEMM_CUTLASS);
    ck_assert_int_eq(o.prefill_w4_gemm, FMCU_W4_GEMM_AUTO);
}
END_TEST

/* The manifest the build wrote (cuda.toml, argv[1]). */
static const char *manifest_path;

/* Field by field (the struct has padding). */
static int same_options(const fmcu_options *a, const fmcu_options *b)
{
    return a->tier == b->tier && a->plan_wide_pairs == b->plan_wide_pairs && a->decode_tail == b->decode_tail &&
           a->decode_fused == b->decode_fused && a->decode_fused_w13_regs == b->decode_fused_w13_regs &&
           a->prefill_warp_rows == b->prefill_warp_rows && a->prefill_half_tiles == b->prefill_half_tiles &&
           a->prefill_tile_order == b->prefill_tile_order && a->wq_wgmma == b->wq_wgmma && a->wq_ring == b->wq_ring &&
           a->stream_wgmma == b->stream_wgmma && a->stream_wgmma_gemm1 == b->stream_wgmma_gemm1 &&
           a->stream_wgmma_bf16 == b->stream_wgmma_bf16 && a->prefill_dequant_mib == b->prefill_dequant_mib &&
           a->prefill_dequant_fused == b->prefill_dequant_fused && a->prefill_block_gemm == b->prefill_block_gemm &&
           a->prefill_w4_gemm == b->prefill_w4_gemm;
}

/* `key = value` on a manifest line: the value without quotes, else NULL. */
static const char *value_of(const char *line, const char *key, char *buf, size_t cap)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0 || strncmp(line + n, " = ", 3) != 0)
        return NULL;
    const char *v = line + n + 3;
    size_t len = strcspn(v, "\n");
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
        v++;
        len -= 2;
    }
    if (len >= cap)
        return NULL;
    memcpy(buf, v, len);
    buf[len] = 0;
    return buf;
}

/* Every [[option]] of the manifest is one of ours, and the text the host
 * passes for its default (the TOML value as text) gives
 * fmcu_options_default's value: the manifest and the code agree. */
START_TEST(manifest_defaults_are_the_code_defaults)
{
    FILE *f = fopen(manifest_path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", manifest_path);
    fmcu_options d, o;
    fmcu_ep_options ed, eo;
    fmcu_options_default(&d);
    fmcu_options_default(&o);
    fmcu_ep_options_default(&ed);
    fmcu_ep_options_default(&eo);
    char line[512], name[64] = "", value[64], why[256];
    int declared = 0;
    while (fgets(line, sizeof line, f)) {
        if (value_of(line, "name", value, sizeof value)) /* the plugin's name first, then each option's */
            snprintf(name, sizeof name, "%s", value);
        if (name[0] && value_of(line, "default", value, sizeof value)) {
            /* as plugin.c's init: the EP options first, then the others */
            const int ep = fmcu_ep_options_set(&eo, name, value, why, sizeof why);
            ck_assert_msg(ep == 1 || (ep == 0 && fmcu_options_set(&o, name, value, why, sizeof why) == 0), "%s: %s",
                          manifest_path, why);
            declared++;
            name[0] = 0;
        }
    }
    fclose(f);
    ck_assert_int_eq(declared, 20);
    ck_assert(same_options(&o, &d));
    ck_assert_str_eq(eo.nccl_library, ed.nccl_library);
    ck_assert_uint_eq(eo.timeout_ms, ed.timeout_ms);
    ck_assert_int_eq(eo.transport, ed.transport);
}
END_TEST

/* The EP options (ep_options.c): values taken, values refused by name;
 * another option's name is not theirs (0). */
START_TEST(ep_options)
{
    fmcu_ep_options o;
    char why[256];
    fmcu_ep_options_default(&o);
    ck_assert_str_eq(o.nccl_library, "libnccl.so.2");
    ck_assert_uint_eq(o.timeout_ms, 30000);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_timeout_ms", "1", why, sizeof why), 1);
    ck_assert_uint_eq(o.timeout_ms, 1);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_timeout_ms", "3600000", why, sizeof why), 1);
    ck_assert_uint_eq(o.timeout_ms, 3600000);
    static const char *const bad[] = {"0", "3600001", "-5", "1s", ""};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(fmcu_ep_options_set(&o, "ep_timeout_ms", bad[i], why, sizeof why), -1);
        ck_assert_msg(strstr(why, "option 'ep_timeout_ms'") && strstr(why, "1 to 3600000"), "%s", why);
    }
    ck_assert_uint_eq(o.timeout_ms, 3600000);
    ck_assert_int_eq(fmcu_ep_options_set(&o, "nccl_library", "/opt/nccl/lib/libnccl.so.2", why, sizeof why), 1);
    ck_assert_str_eq(o.nccl_library, "/opt/nccl/lib/libnccl.so.2");
    ck_assert_int_eq(fmcu_ep_options_set(&o, "nccl_library", "", why, sizeof why), -1);
    ck_assert_msg(strstr(why, "option 'nccl_library'") != NULL, "%s", why);
    char longer[600];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    ck_assert_int_eq(fmcu_ep_options_set(&o, "nccl_library", longer, why, sizeof why), -1);
    ck_assert_str_eq(o.nccl_library, "/opt/nccl/lib/libnccl.so.2");
    ck_assert_int_eq(fmcu_ep_options_set(&o, "tier", "stream", why, sizeof why), 0);
}
END_TEST

START_TEST(tier_values)
{
    static const char *const names[] = {"auto", "stream", "tiled", "prefill"};
    static const int tiers[] = {FMCU_TIER_AUTO, FMCU_TIER_STREAM, FMCU_TIER_TILED, FMCU_TIER_PREFILL};
    fmcu_options o;
    char why[256];
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(set_one(&o, "tier", names[i], why, sizeof why), 0);
        ck_assert_int_eq(o.tier, tiers[i]);
    }
}
END_TEST

START_TEST(plan_wide_pairs_values)
{
    fmcu_options o;
    char why[256];
    ck_assert_int_eq(set_one(&o, "plan_wide_pairs", "1", why, sizeof why), 0);
    ck_assert_int_eq(o.plan_wide_pairs, 1);
    ck_assert_int_eq(set_one(&o, "plan_wide_pairs", "65536", why, sizeof why), 0);
    ck_assert_int_eq(o.plan_wide_pairs, 65536);
    /* 0: never, which no call's pair count reaches. */
    ck_assert_int_eq(set_one(&o, "plan_wide_pairs", "0", why, sizeof why), 0);
    ck_assert_int_eq(o.plan_wide_pairs, INT64_MAX);
}
END_TEST

START_TEST(prefill_dequant_mib_values)
{
    fmcu_options o;
    char why[256];
    ck_assert_int_eq(set_one(&o, "prefill_dequant_mib", "0", why, sizeof why), 0);
    ck_assert_uint_eq(o.prefill_dequant_mib, 0);
    ck_assert_int_eq(set_one(&o, "prefill_dequant_mib", "4096", why, sizeof why), 0);
    ck_assert_uint_eq(o.prefill_dequant_mib, 4096);
    ck_assert_int_eq(set_one(&o, "prefill_dequant_mib", "1048576", why, sizeof why), 0);
    ck_assert_uint_eq(o.prefill_dequant_mib, 1048576);
}
END_TEST

START_TEST(bool_and_enum_values)
{
    fmcu_options o;
    char why[256];
    ck_assert_int_eq(set_one(&o, "decode_tail", "false", why, sizeof why), 0);
    ck_assert_int_eq(o.decode_tail, 0);
    ck_assert_int_eq(set_one(&o, "decode_fused", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.decode_fused, FMCU_FUSED_ON);
    ck_assert_int_eq(set_one(&o, "decode_fused", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.decode_fused, FMCU_FUSED_OFF);
    ck_assert_int_eq(set_one(&o, "decode_fused_w13", "registers", why, sizeof why), 0);
    ck_assert_int_eq(o.decode_fused_w13_regs, 1);
    ck_assert_int_eq(set_one(&o, "prefill_warp_rows", "false", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_warp_rows, 0);
    ck_assert_int_eq(set_one(&o, "prefill_half_tiles", "false", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_half_tiles, 0);
    ck_assert_int_eq(set_one(&o, "prefill_dequant_fused", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_dequant_fused, FMCU_FUSED_ON);
    ck_assert_int_eq(set_one(&o, "prefill_dequant_fused", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_dequant_fused, FMCU_FUSED_OFF);
    ck_assert_int_eq(set_one(&o, "wq_wgmma", "false", why, sizeof why), 0);
    ck_assert_int_eq(o.wq_wgmma, 0);
    ck_assert_int_eq(set_one(&o, "wq_ring", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.wq_ring, FMCU_FUSED_ON);
    ck_assert_int_eq(set_one(&o, "wq_ring", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.wq_ring, FMCU_FUSED_OFF);
    ck_assert_int_ne(set_one(&o, "wq_ring", "true", why, sizeof why), 0);
    ck_assert_int_eq(set_one(&o, "stream_wgmma", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma, FMCU_FUSED_OFF);
    ck_assert_int_eq(set_one(&o, "stream_wgmma", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma, FMCU_FUSED_ON);
    ck_assert_int_ne(set_one(&o, "stream_wgmma", "false", why, sizeof why), 0);
    ck_assert_str_eq(why, "option 'stream_wgmma': expected auto, on or off, got 'false'");
    ck_assert_int_eq(set_one(&o, "stream_wgmma_gemm1", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma_gemm1, FMCU_FUSED_OFF);
    ck_assert_int_eq(set_one(&o, "stream_wgmma_gemm1", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma_gemm1, FMCU_FUSED_ON);
    ck_assert_int_ne(set_one(&o, "stream_wgmma_gemm1", "true", why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "auto, on or off"));
    ck_assert_int_eq(set_one(&o, "stream_wgmma_bf16", "off", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma_bf16, FMCU_FUSED_OFF);
    ck_assert_int_eq(set_one(&o, "stream_wgmma_bf16", "on", why, sizeof why), 0);
    ck_assert_int_eq(o.stream_wgmma_bf16, FMCU_FUSED_ON);
    ck_assert_int_ne(set_one(&o, "stream_wgmma_bf16", "false", why, sizeof why), 0);
    ck_assert_int_eq(set_one(&o, "prefill_tile_order", "fixed", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_tile_order, FMCU_GG_ORDER_FIXED);
    ck_assert_int_eq(set_one(&o, "prefill_tile_order", "counter", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_tile_order, FMCU_GG_ORDER_COUNTER);
    ck_assert_int_eq(set_one(&o, "prefill_block_gemm", "ours", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_block_gemm, FMCU_BLOCK_GEMM_OURS);
    ck_assert_int_eq(set_one(&o, "prefill_block_gemm", "cutlass", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_block_gemm, FMCU_BLOCK_GEMM_CUTLASS);
    ck_assert_int_eq(set_one(&o, "prefill_w4_gemm", "converting", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_w4_gemm, FMCU_W4_GEMM_CONVERTING);
    ck_assert_int_eq(set_one(&o, "prefill_w4_gemm", "swapped", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_w4_gemm, FMCU_W4_GEMM_SWAPPED);
    ck_assert_int_eq(set_one(&o, "prefill_w4_gemm", "auto", why, sizeof why), 0);
    ck_assert_int_eq(o.prefill_w4_gemm, FMCU_W4_GEMM_AUTO);
}
END_TEST

/* A refused value names the option, what it takes and what it got, and
 * leaves the options as they were. */
#define CK_REFUSED(name, value, text) \
    do { \
        fmcu_options o_, d_; \
        char why_[256]; \
        ck_assert_int_eq(set_one(&o_, (name), (value), why_, sizeof why_), -1); \
        ck_assert_str_eq(why_, (text)); \
        fmcu_options_default(&d_); \
        ck_assert(same_options(&o_, &d_)); \
    } while (0)

START_TEST(bad_values_are_refused_naming_the_option)
{
    CK_REFUSED("tier", "Stream", "option 'tier': expected auto, stream, tiled or prefill, got 'Stream'");
    CK_REFUSED("tier", "", "option 'tier': expected auto, stream, tiled or prefill, got ''");
    CK_REFUSED("plan_wide_pairs", "-5",
               "option 'plan_wide_pairs': expected a whole number of pairs >= 0 (0: never), "
               "got '-5'");
    CK_REFUSED("plan_wide_pairs", "12x",
               "option 'plan_wide_pairs': expected a whole number of pairs >= 0 (0: never), "
               "got '12x'");
    CK_REFUSED("plan_wide_pairs", "99999999999999999999999",
               "option 'plan_wide_pairs': expected a whole number of pairs >= 0 (0: never), "
               "got '99999999999999999999999'");
    CK_REFUSED("prefill_dequant_mib", "-1",
               "option 'prefill_dequant_mib': expected a whole number of MiB from 0 to 1048576 (0: never), got '-1'");
    CK_REFUSED("prefill_dequant_mib", "1048577",
               "option 'prefill_dequant_mib': expected a whole number of MiB from 0 to 1048576 (0: never), "
               "got '1048577'");
    CK_REFUSED("decode_tail", "off", "option 'decode_tail': expected true or false, got 'off'");
    CK_REFUSED("decode_fused", "1", "option 'decode_fused': expected auto, on or off, got '1'");
    CK_REFUSED("prefill_dequant_fused", "true", "option 'prefill_dequant_fused': expected auto, on or off, got 'true'");
    CK_REFUSED("decode_fused_w13", "regs", "option 'decode_fused_w13': expected auto or registers, got 'regs'");
    CK_REFUSED("prefill_warp_rows", "yes", "option 'prefill_warp_rows': expected true or false, got 'yes'");
    CK_REFUSED("prefill_half_tiles", "2", "option 'prefill_half_tiles': expected true or false, got '2'");
    CK_REFUSED("prefill_tile_order", "fixedx",
               "option 'prefill_tile_order': expected auto, fixed or counter, got "
               "'fixedx'");
    CK_REFUSED("prefill_block_gemm", "own", "option 'prefill_block_gemm': expected cutlass or ours, got 'own'");
    CK_REFUSED("prefill_w4_gemm", "swap", "option 'prefill_w4_gemm': expected auto, swapped or converting, got 'swap'");
}
END_TEST

START_TEST(unknown_names_are_refused)
{
    fmcu_options o;
    char why[512];
    ck_assert_int_eq(set_one(&o, "FMCU_TAIL", "0", why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "option 'FMCU_TAIL': not an option of the cuda plugin (tier, plan_wide_pairs"));
    ck_assert_int_eq(set_one(&o, "Tier", "auto", why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "option 'Tier': not an option"));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_cuda_options CUDA_TOML (the manifest the build wrote)\n");
        return 2;
    }
    manifest_path = argv[1];
    Suite *s = suite_create("cuda_options");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, defaults_are_the_measured_choices);
    tcase_add_test(tc, manifest_defaults_are_the_code_defaults);
    tcase_add_test(tc, ep_options);
    tcase_add_test(tc, tier_values);
    tcase_add_test(tc, plan_wide_pairs_values);
    tcase_add_test(tc, prefill_dequant_mib_values);
    tcase_add_test(tc, bool_and_enum_values);
    tcase_add_test(tc, bad_values_are_refused_naming_the_option);
    tcase_add_test(tc, unknown_names_are_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
