/*
 * tests/registry/test_loader.c - ABI negotiation and loading: each broken
 * fixture plugin is reported with a clear reason and never stops the others.
 */
#include "tests/registry/registry_fixtures.h"

/* The host's minor version as text, for messages that quote it. */
#define FMOE_TEST_STR2(x) #x
#define FMOE_TEST_STR(x)  FMOE_TEST_STR2(x)
#define FMOE_TEST_MINOR   FMOE_TEST_STR(FMOE_ABI_MINOR)

/* Load `so` as an explicit file next to a good plugin; return its record. */
static fmoe_plugin_info load_one(const char *so, const char *name, fmoe_context **ctx_out)
{
    const char *files[] = {FIXTURE_SO_FIXTURE_OK, so};
    fmoe_context *ctx = fx_context(files, 2, NULL, 0, NULL);
    /* The good one loads whatever the other does. */
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    *ctx_out = ctx;
    return fx_plugin(ctx, name);
}

START_TEST(newer_minor_is_accepted_at_host_minor)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_NEWER_MINOR, "fixture_newer_minor", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_LOADED);
    ck_assert_uint_eq(p.abi_major, 1);
    ck_assert_uint_eq(p.abi_minor, FMOE_ABI_MINOR); /* min(host, plugin) */
    ck_assert_str_eq(p.reason, "");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(other_major_refused_by_its_entry)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_MAJOR2, "libfixture_major2.so", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_str_eq(p.reason, "entry refused (abi-mismatch): fixture speaks ABI 2.x, the host 1." FMOE_TEST_MINOR);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(other_major_in_table_refused_by_host)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_MAJOR2_LIES, "libfixture_major2_lies.so", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_str_eq(p.reason,
                     "plugin ABI 2." FMOE_TEST_MINOR ", host ABI 1." FMOE_TEST_MINOR ": the major version must match");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(other_major_in_manifest_skipped_without_loading)
{
    char dir[512];
    fx_tempdir(dir, sizeof dir);
    /* The library does not even exist: the manifest alone rules it out. */
    fx_manifest(dir, "future.toml", "future", "/nonexistent/libfuture.so", 2, "any", "\"*\"");
    char path[600];
    snprintf(path, sizeof path, "%s/future.toml", dir);
    const char *files[] = {path};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "future");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_SKIPPED);
    ck_assert_str_eq(p.reason,
                     "manifest declares ABI 2.0, host ABI 1." FMOE_TEST_MINOR ": the major version must match");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(wrong_arch_skipped_without_loading)
{
    char dir[512], path[600];
    fx_tempdir(dir, sizeof dir);
    fx_manifest(dir, "other.toml", "other", "/nonexistent/libother.so", 1, "riscv128", "\"*\"");
    snprintf(path, sizeof path, "%s/other.toml", dir);
    const char *files[] = {path};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "other");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_SKIPPED);
    ck_assert_msg(strstr(p.reason, "built for riscv128, this machine is ") == p.reason, "reason: %s", p.reason);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(smaller_table_refused)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_TABLE_SMALL, "libfixture_table_small.so", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    char want[256];
    snprintf(want, sizeof want,
             "plugin table struct_size %zu is smaller than the ABI 1.0 minimum %zu (corrupt or not a fusedmoe plugin)",
             offsetof(fmoe_plugin, probe), FMOE_STRUCT_SIZE_UPTO(fmoe_plugin, query));
    ck_assert_str_eq(p.reason, want);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(larger_table_accepted)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_TABLE_LARGE, "fixture_table_large", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_LOADED);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(missing_entry_symbol)
{
    fmoe_context *ctx;
    fmoe_plugin_info p = load_one(FIXTURE_SO_FIXTURE_NO_ENTRY, "libfixture_no_entry.so", &ctx);
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    char want[1024];
    snprintf(want, sizeof want,
             "no symbol 'fmoe_plugin_entry' in %s: not a fusedmoe plugin, or it was built without exporting the entry",
             FIXTURE_SO_FIXTURE_NO_ENTRY);
    ck_assert_str_eq(p.reason, want);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(init_failure_reported)
{
    fx_log lg = {0};
    const char *files[] = {FIXTURE_SO_FIXTURE_INIT_FAIL, FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 2, NULL, 0, &lg);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_init_fail");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_str_eq(p.reason, "init failed (device-error): fixture init fails on purpose");
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    /* Reported at warn level, naming the plugin. */
    ck_assert_ptr_nonnull(strstr(lg.text, "1 [loader] plugin 'fixture_init_fail'"));
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(dlopen_failure_has_dlerror_text)
{
    char dir[512], path[600];
    fx_tempdir(dir, sizeof dir);
    fx_manifest(dir, "ghost.toml", "ghost", "libghost.so", 1, "any", "\"*\"");
    snprintf(path, sizeof path, "%s/ghost.toml", dir);
    const char *files[] = {path};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "ghost");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    char want[1024];
    snprintf(want, sizeof want,
             "dlopen failed: %s/libghost.so: cannot open shared object file: No such file or directory", dir);
    ck_assert_str_eq(p.reason, want);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(not_a_shared_object)
{
    char dir[512], so[600];
    fx_tempdir(dir, sizeof dir);
    snprintf(so, sizeof so, "%s/libjunk.so", dir);
    fx_write(so, "this is not an ELF file\n");
    const char *files[] = {so};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "libjunk.so");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_msg(strstr(p.reason, "dlopen failed: ") == p.reason && strstr(p.reason, "libjunk.so"), "%s", p.reason);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(bad_manifest_reported_by_file)
{
    char dir[512], path[600];
    fx_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/broken.toml", dir);
    fx_write(path, "name = \"broken\"\nlibrary = 7\n");
    const char *files[] = {path, FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 2, NULL, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "broken.toml");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_msg(strstr(p.reason, "bad manifest: ") == p.reason && strstr(p.reason, path), "%s", p.reason);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(probe_reports_devices)
{
    const char *files[] = {FIXTURE_SO_FIXTURE_OK, FIXTURE_SO_FIXTURE_NO_DEVICE};
    fmoe_context *ctx = fx_context(files, 2, NULL, 0, NULL);
    ck_assert_uint_eq(fmoe_context_device_count(ctx), 2);
    fmoe_device_info d = {.struct_size = sizeof d};
    ck_assert_int_eq(fmoe_context_device(ctx, 1, &d), FMOE_STATUS_OK);
    ck_assert_str_eq(d.plugin, "fixture_no_device");
    ck_assert_uint_eq(d.available, 0);
    ck_assert_uint_eq(d.score, 0);
    ck_assert_str_eq(d.reason, "fixture has no usable device");
    ck_assert_int_eq(fmoe_context_device(ctx, 2, &d), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_context_device: index 2 out of range (2 devices)");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(info_struct_size_respected)
{
    /* A caller built against an older, shorter fmoe_plugin_info: nothing is
     * written past the size it declared. */
    const char *files[] = {FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    struct {
        fmoe_plugin_info info;
        unsigned char guard[64];
    } buf;
    memset(&buf, 0xA5, sizeof buf);
    size_t small = offsetof(fmoe_plugin_info, version);
    buf.info.struct_size = small;
    ck_assert_int_eq(fmoe_context_plugin(ctx, 0, &buf.info), FMOE_STATUS_OK);
    ck_assert_str_eq(buf.info.name, "fixture_ok");
    const unsigned char *after = (const unsigned char *)&buf.info + small;
    for (size_t i = 0; i < sizeof buf - small; i++)
        ck_assert_uint_eq(after[i], 0xA5);
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("negotiation");
    tcase_add_test(tc, newer_minor_is_accepted_at_host_minor);
    tcase_add_test(tc, other_major_refused_by_its_entry);
    tcase_add_test(tc, other_major_in_table_refused_by_host);
    tcase_add_test(tc, other_major_in_manifest_skipped_without_loading);
    tcase_add_test(tc, wrong_arch_skipped_without_loading);
    tcase_add_test(tc, smaller_table_refused);
    tcase_add_test(tc, larger_table_accepted);
    tcase_add_test(tc, missing_entry_symbol);
    tcase_add_test(tc, init_failure_reported);
    tcase_add_test(tc, dlopen_failure_has_dlerror_text);
    tcase_add_test(tc, not_a_shared_object);
    tcase_add_test(tc, bad_manifest_reported_by_file);
    tcase_add_test(tc, probe_reports_devices);
    tcase_add_test(tc, info_struct_size_respected);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 14);
}
