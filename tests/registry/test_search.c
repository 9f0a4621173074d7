/*
 * tests/registry/test_search.c - where plugins are found and in which order,
 * and what the environment and the TOML can switch off.
 */
#include <stdlib.h>

#include "tests/registry/registry_fixtures.h"

/* Index-th record named `name` (0 = first found). */
static fmoe_plugin_info nth_named(const fmoe_context *ctx, const char *name, int nth)
{
    fmoe_plugin_info info = {.struct_size = sizeof info};
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        ck_assert_int_eq(fmoe_context_plugin(ctx, i, &info), FMOE_STATUS_OK);
        if (strcmp(info.name, name) == 0 && nth-- == 0)
            return info;
    }
    ck_abort_msg("no record %d named %s", nth, name);
    return info;
}

static void dir_with_fixture(char *dir, size_t cap)
{
    fx_tempdir(dir, cap);
    fx_manifest(dir, "fixture_ok.toml", "fixture_ok", FIXTURE_SO_FIXTURE_OK, 1, "any", "\"bf16\", \"f32\"");
}

START_TEST(explicit_file_shadows_search_path)
{
    char dir[512];
    dir_with_fixture(dir, sizeof dir);
    setenv("FMOE_PLUGIN_PATH", dir, 1);
    const char *files[] = {FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 1, NULL, 1, NULL);
    fmoe_plugin_info first = nth_named(ctx, "fixture_ok", 0), second = nth_named(ctx, "fixture_ok", 1);
    ck_assert_int_eq(first.state, FMOE_PLUGIN_STATE_LOADED);
    ck_assert_str_eq(first.manifest, "");
    ck_assert_int_eq(second.state, FMOE_PLUGIN_STATE_SKIPPED);
    char want[1024];
    snprintf(want, sizeof want, "shadowed by %s, found earlier in the search order", FIXTURE_SO_FIXTURE_OK);
    ck_assert_str_eq(second.reason, want);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(env_path_before_toml_paths)
{
    char env_dir[512], toml_dir[512], cfg[600], text[1024];
    dir_with_fixture(env_dir, sizeof env_dir);
    dir_with_fixture(toml_dir, sizeof toml_dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", toml_dir);
    snprintf(text, sizeof text, "[search]\npaths = [\"%s\"]\n", toml_dir);
    fx_write(cfg, text);
    setenv("FMOE_PLUGIN_PATH", env_dir, 1);
    fmoe_context *ctx = fx_context(NULL, 0, cfg, 1, NULL);
    char env_manifest[600], toml_manifest[600];
    snprintf(env_manifest, sizeof env_manifest, "%s/fixture_ok.toml", env_dir);
    snprintf(toml_manifest, sizeof toml_manifest, "%s/fixture_ok.toml", toml_dir);
    fmoe_plugin_info first = nth_named(ctx, "fixture_ok", 0), second = nth_named(ctx, "fixture_ok", 1);
    ck_assert_str_eq(first.manifest, env_manifest);
    ck_assert_int_eq(first.state, FMOE_PLUGIN_STATE_LOADED);
    ck_assert_str_eq(second.manifest, toml_manifest);
    ck_assert_int_eq(second.state, FMOE_PLUGIN_STATE_SKIPPED);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(env_plugin_files)
{
    setenv("FMOE_PLUGIN_FILES", FIXTURE_SO_FIXTURE_OK ":" FIXTURE_SO_FIXTURE_REFUSE, 1);
    fmoe_context *ctx = fx_context(NULL, 0, NULL, 1, NULL);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_refuse").state, FMOE_PLUGIN_STATE_LOADED);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(environment_ignored_on_request)
{
    setenv("FMOE_PLUGIN_FILES", FIXTURE_SO_FIXTURE_OK, 1);
    fmoe_context *ctx = fx_context(NULL, 0, NULL, 0, NULL);
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        fmoe_plugin_info info = {.struct_size = sizeof info};
        fmoe_context_plugin(ctx, i, &info);
        ck_assert_str_ne(info.name, "fixture_ok");
    }
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(backends_env_disables)
{
    setenv("FMOE_BACKENDS", "-fixture_r*", 1);
    const char *files[] = {FIXTURE_SO_FIXTURE_OK, FIXTURE_SO_FIXTURE_REFUSE};
    fmoe_context *ctx = fx_context(files, 2, NULL, 1, NULL);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    /* A bare library is named by its table, so the glob matches that name. */
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_refuse");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_DISABLED);
    ck_assert_str_eq(p.reason, "disabled by FMOE_BACKENDS=-fixture_r* (-fixture_r*)");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(backends_env_selects)
{
    char dir[512], path[600];
    fx_tempdir(dir, sizeof dir);
    fx_manifest(dir, "a.toml", "fixture_refuse", FIXTURE_SO_FIXTURE_REFUSE, 1, "any", "\"*\"");
    snprintf(path, sizeof path, "%s/a.toml", dir);
    setenv("FMOE_BACKENDS", "fixture_ok", 1);
    const char *files[] = {FIXTURE_SO_FIXTURE_OK, path};
    fmoe_context *ctx = fx_context(files, 2, NULL, 1, NULL);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_refuse");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_DISABLED);
    ck_assert_str_eq(p.reason, "not selected by FMOE_BACKENDS=fixture_ok");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(toml_disable_and_enabled_false)
{
    char dir[512], cfg[600], a[600], b[600], text[2048];
    fx_tempdir(dir, sizeof dir);
    fx_manifest(dir, "a.toml", "fixture_ok", FIXTURE_SO_FIXTURE_OK, 1, "any", "\"*\"");
    fx_manifest(dir, "b.toml", "fixture_refuse", FIXTURE_SO_FIXTURE_REFUSE, 1, "any", "\"*\"");
    snprintf(a, sizeof a, "%s/a.toml", dir);
    snprintf(b, sizeof b, "%s/b.toml", dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    snprintf(text, sizeof text,
             "[search]\nfiles = [\"%s\", \"%s\"]\n[select]\ndisable = [\"fixture_o?\"]\n"
             "[plugins.fixture_refuse]\nenabled = false\n",
             a, b);
    fx_write(cfg, text);
    fmoe_context *ctx = fx_context(NULL, 0, cfg, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_ok");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_DISABLED);
    snprintf(text, sizeof text, "disabled by %s: [select] disable = \"fixture_o?\"", cfg);
    ck_assert_str_eq(p.reason, text);
    p = fx_plugin(ctx, "fixture_refuse");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_DISABLED);
    snprintf(text, sizeof text, "disabled by %s: [plugins.fixture_refuse] enabled = false", cfg);
    ck_assert_str_eq(p.reason, text);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(current_directory_never_searched)
{
    char dir[512];
    dir_with_fixture(dir, sizeof dir);
    ck_assert_int_eq(chdir(dir), 0);
    fx_log lg = {0};
    /* An empty entry and a relative one would both mean the cwd. */
    setenv("FMOE_PLUGIN_PATH", "::.:", 1);
    fmoe_context *ctx = fx_context(NULL, 0, NULL, 1, &lg);
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        fmoe_plugin_info info = {.struct_size = sizeof info};
        fmoe_context_plugin(ctx, i, &info);
        ck_assert_msg(strncmp(info.manifest, dir, strlen(dir)) != 0, "loaded from cwd: %s", info.manifest);
    }
    ck_assert_ptr_nonnull(
        strstr(lg.text, "FMOE_PLUGIN_PATH entry '.' ignored: only absolute directories are searched"));
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(plugin_options_reach_init)
{
    char dir[512], cfg[600];
    fx_tempdir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, "[plugins.reference.options]\nbogus = 1\n");
    const char *files[] = {REFERENCE_MANIFEST};
    fmoe_context *ctx = fx_context(files, 1, cfg, 0, NULL);
    fmoe_plugin_info p = fx_plugin(ctx, "reference");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_msg(strstr(p.reason,
                         "[plugins.reference.options]: plugin 'reference' has no option 'bogus' (its manifest "
                         "declares: monolithic, nvfp4_globals, ep_timeout_ms)") != NULL,
                  "reason: %s", p.reason);
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("search");
    TCase *tc = tcase_create("search");
    tcase_add_test(tc, explicit_file_shadows_search_path);
    tcase_add_test(tc, env_path_before_toml_paths);
    tcase_add_test(tc, env_plugin_files);
    tcase_add_test(tc, environment_ignored_on_request);
    tcase_add_test(tc, backends_env_disables);
    tcase_add_test(tc, backends_env_selects);
    tcase_add_test(tc, toml_disable_and_enabled_false);
    tcase_add_test(tc, current_directory_never_searched);
    tcase_add_test(tc, plugin_options_reach_init);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 9);
}
