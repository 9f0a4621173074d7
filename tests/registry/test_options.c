/*
 * tests/registry/test_options.c - plugin options end to end: [[option]]
 * declarations in a manifest, the host's checks before init, defaults,
 * [plugins.<name>.options], FMOE_OPTIONS and ignore_environment, what init
 * receives (the fixture echoes it in its device notes), the public listing,
 * and init/shutdown pairing when the probe fails.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/registry/registry_fixtures.h"

/* A manifest for fixture_ok with two declared options. */
static void options_manifest(const char *dir, const char *extra)
{
    char path[1024], text[4096];
    snprintf(path, sizeof path, "%s/fixture_ok.toml", dir);
    snprintf(text, sizeof text,
             "name = \"fixture_ok\"\nlibrary = \"%s\"\nversion = \"0.0.1\"\nvendor = \"tests\"\n"
             "abi_major = 1\nabi_minor = 0\narch = [\"any\"]\ndevices = [\"cpu\"]\nschemes = [\"f32\"]\n"
             "[[option]]\nname = \"tier\"\ntype = \"enum\"\nvalues = [\"auto\", \"fast\", \"slow\"]\n"
             "default = \"auto\"\nhelp = \"which kernels\"\n"
             "[[option]]\nname = \"threads\"\ntype = \"int\"\nmin = 1\nmax = 64\ndefault = 4\n"
             "help = \"worker threads\"\n%s",
             FIXTURE_SO_FIXTURE_OK, extra);
    fx_write(path, text);
}

/* What the fixture's init received, from its device notes. */
static const char *received(const fmoe_context *ctx, char *buf, size_t cap)
{
    for (uint32_t i = 0; i < fmoe_context_device_count(ctx); i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        ck_assert_int_eq(fmoe_context_device(ctx, i, &d), FMOE_STATUS_OK);
        if (strcmp(d.plugin, "fixture_ok") == 0) {
            snprintf(buf, cap, "%s", d.reason);
            return buf;
        }
    }
    ck_abort_msg("fixture_ok reported no device");
    return NULL;
}

static uint32_t plugin_index(const fmoe_context *ctx, const char *name)
{
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        fmoe_plugin_info p = {.struct_size = sizeof p};
        ck_assert_int_eq(fmoe_context_plugin(ctx, i, &p), FMOE_STATUS_OK);
        if (strcmp(p.name, name) == 0)
            return i;
    }
    ck_abort_msg("no plugin %s", name);
    return 0;
}

static fmoe_context *options_context(const char *dir, const char *config_text, int use_env)
{
    char manifest[1024], cfg[1024];
    snprintf(manifest, sizeof manifest, "%s/fixture_ok.toml", dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, config_text);
    const char *files[] = {manifest};
    return fx_context(files, 1, cfg, use_env, NULL);
}

START_TEST(defaults_reach_init_in_manifest_order)
{
    char dir[512], buf[256];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    fmoe_context *ctx = options_context(dir, "", 0);
    ck_assert_int_eq(fx_plugin(ctx, "fixture_ok").state, FMOE_PLUGIN_STATE_LOADED);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=auto,threads=4");
    uint32_t p = plugin_index(ctx, "fixture_ok");
    ck_assert_uint_eq(fmoe_context_plugin_option_count(ctx, p), 2);
    fmoe_plugin_option_info o = {.struct_size = sizeof o};
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, p, 0, &o), FMOE_STATUS_OK);
    ck_assert_str_eq(o.name, "tier");
    ck_assert_str_eq(o.type, "enum");
    ck_assert_str_eq(o.domain, "auto|fast|slow");
    ck_assert_str_eq(o.default_value, "auto");
    ck_assert_str_eq(o.value, "auto");
    ck_assert_str_eq(o.source, "default");
    ck_assert_str_eq(o.help, "which kernels");
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, p, 1, &o), FMOE_STATUS_OK);
    ck_assert_str_eq(o.domain, "1..64");
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, p, 2, &o), FMOE_STATUS_INVALID_ARGUMENT);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(config_values_override_defaults)
{
    char dir[512], buf[256];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    fmoe_context *ctx = options_context(dir, "[plugins.fixture_ok.options]\nthreads = 16\ntier = \"slow\"\n", 0);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=slow,threads=16");
    fmoe_plugin_option_info o = {.struct_size = sizeof o};
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, plugin_index(ctx, "fixture_ok"), 1, &o), FMOE_STATUS_OK);
    ck_assert_str_eq(o.value, "16");
    ck_assert_str_eq(o.source, "config");
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(undeclared_option_fails_before_init)
{
    char dir[512];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    fmoe_context *ctx = options_context(dir, "[plugins.fixture_ok.options]\ntreads = 2\n", 0);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_ok");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_msg(strstr(p.reason, "[plugins.fixture_ok.options]: plugin 'fixture_ok' has no option 'treads' "
                                   "(its manifest declares: tier, threads)") != NULL,
                  "reason: %s", p.reason);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(ill_typed_values_fail_naming_the_option)
{
    static const struct {
        const char *config, *reason;
    } cases[] = {
        {"threads = 0\n", "option 'threads' of plugin 'fixture_ok' = \"0\": expected an integer in 1..64"},
        {"threads = 65\n", "option 'threads' of plugin 'fixture_ok' = \"65\": expected an integer in 1..64"},
        {"threads = \"four\"\n", "option 'threads' of plugin 'fixture_ok' = \"four\": expected an integer in 1..64"},
        {"tier = \"fastest\"\n", "option 'tier' of plugin 'fixture_ok' = \"fastest\": expected one of auto|fast|slow"},
        {"tier = true\n", "option 'tier' of plugin 'fixture_ok' = \"true\": expected one of auto|fast|slow"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512], text[256];
        fx_tempdir(dir, sizeof dir);
        options_manifest(dir, "");
        snprintf(text, sizeof text, "[plugins.fixture_ok.options]\n%s", cases[i].config);
        fmoe_context *ctx = options_context(dir, text, 0);
        fmoe_plugin_info p = fx_plugin(ctx, "fixture_ok");
        ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
        ck_assert_msg(strstr(p.reason, cases[i].reason) != NULL, "case %zu: reason: %s", i, p.reason);
        fmoe_context_destroy(ctx);
    }
}
END_TEST

/* A string option and integers bounded on one side or not at all: their
 * domains as listed, their defaults and config values reaching init, and
 * values outside them refused naming the domain. */
START_TEST(string_and_one_sided_int_options)
{
    static const char *extra =
        "[[option]]\nname = \"label\"\ntype = \"string\"\ndefault = \"x\"\nhelp = \"free text\"\n"
        "[[option]]\nname = \"floor\"\ntype = \"int\"\nmin = 0\ndefault = 1\nhelp = \"from 0\"\n"
        "[[option]]\nname = \"cap\"\ntype = \"int\"\nmax = 8\ndefault = 2\nhelp = \"up to 8\"\n"
        "[[option]]\nname = \"any\"\ntype = \"int\"\ndefault = -5\nhelp = \"any integer\"\n";
    static const char *domains[4] = {"text", "0..", "..8", "any 64-bit integer"};
    char dir[512], buf[256];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, extra);
    fmoe_context *ctx = options_context(dir, "", 0);
    fmoe_plugin_info info = fx_plugin(ctx, "fixture_ok");
    ck_assert_msg(info.state == FMOE_PLUGIN_STATE_LOADED, "state %d: %s", info.state, info.reason);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=auto,threads=4,label=x,floor=1,cap=2,any=-5");
    uint32_t p = plugin_index(ctx, "fixture_ok");
    ck_assert_uint_eq(fmoe_context_plugin_option_count(ctx, p), 6);
    for (uint32_t i = 0; i < 4; i++) {
        fmoe_plugin_option_info o = {.struct_size = sizeof o};
        ck_assert_int_eq(fmoe_context_plugin_option(ctx, p, 2 + i, &o), FMOE_STATUS_OK);
        ck_assert_str_eq(o.domain, domains[i]);
    }
    fmoe_context_destroy(ctx);

    ctx = options_context(dir,
                          "[plugins.fixture_ok.options]\nlabel = \"a b\"\nfloor = 9000000000\ncap = -7\n"
                          "any = -9223372036854775808\n",
                          0);
    ck_assert_str_eq(received(ctx, buf, sizeof buf),
                     "options: tier=auto,threads=4,label=a b,floor=9000000000,cap=-7,any=-9223372036854775808");
    fmoe_context_destroy(ctx);

    static const struct {
        const char *config, *reason;
    } refused[] = {
        {"floor = -1\n", "option 'floor' of plugin 'fixture_ok' = \"-1\": expected an integer in 0.."},
        {"cap = 9\n", "option 'cap' of plugin 'fixture_ok' = \"9\": expected an integer in ..8"},
        {"any = \"many\"\n", "option 'any' of plugin 'fixture_ok' = \"many\": expected a 64-bit integer"},
        {"any = \"9223372036854775808\"\n",
         "option 'any' of plugin 'fixture_ok' = \"9223372036854775808\": expected a 64-bit integer"},
        {"any = \"-9223372036854775809\"\n",
         "option 'any' of plugin 'fixture_ok' = \"-9223372036854775809\": expected a 64-bit integer"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "[plugins.fixture_ok.options]\n%s", refused[i].config);
        ctx = options_context(dir, text, 0);
        info = fx_plugin(ctx, "fixture_ok");
        ck_assert_int_eq(info.state, FMOE_PLUGIN_STATE_FAILED);
        ck_assert_msg(strstr(info.reason, refused[i].reason) != NULL, "case %zu: reason: %s", i, info.reason);
        fmoe_context_destroy(ctx);
    }
}
END_TEST

/* FMOE_OPTIONS overrides the TOML, and ignore_environment silences it:
 * the one way the environment reaches a plugin. (Check runs each test in
 * a child process, so setenv stays here.) */
START_TEST(environment_overrides_and_ignore_environment_silences)
{
    char dir[512], buf[256];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    setenv("FMOE_OPTIONS", "fixture_ok.tier=fast,fixture_ok.threads=8", 1);
    const char *cfg = "[plugins.fixture_ok.options]\nthreads = 2\n";
    fmoe_context *ctx = options_context(dir, cfg, 1);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=fast,threads=8");
    fmoe_plugin_option_info o = {.struct_size = sizeof o};
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, plugin_index(ctx, "fixture_ok"), 0, &o), FMOE_STATUS_OK);
    ck_assert_str_eq(o.source, "environment");
    fmoe_context_destroy(ctx);

    ctx = options_context(dir, cfg, 0);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=auto,threads=2");
    fmoe_context_destroy(ctx);
}
END_TEST

/* The application's own options (fmoe_context_options.plugin_options) are
 * checked like the TOML's and have the last word, over FMOE_OPTIONS too. */
START_TEST(application_options_come_last)
{
    char dir[512], manifest[1024], cfg[1024], buf[256];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    snprintf(manifest, sizeof manifest, "%s/fixture_ok.toml", dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, "[plugins.fixture_ok.options]\nthreads = 2\ntier = \"slow\"\n");
    setenv("FMOE_OPTIONS", "fixture_ok.threads=8", 1);
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    const char *files[] = {manifest};
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.config_path = cfg;
    o.isolated = 1;
    o.plugin_options = "fixture_ok.threads=32";
    fmoe_context *ctx = NULL;
    ck_assert_int_eq(fmoe_context_create(&o, &ctx), FMOE_STATUS_OK);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: tier=slow,threads=32");
    fmoe_plugin_option_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, plugin_index(ctx, "fixture_ok"), 1, &info), FMOE_STATUS_OK);
    ck_assert_str_eq(info.source, "application");
    fmoe_context_destroy(ctx);
    o.plugin_options = "fixture_ok.threads=99";
    ck_assert_int_eq(fmoe_context_create(&o, &ctx), FMOE_STATUS_OK);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_ok");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_str_eq(p.reason, "fmoe_context_options.plugin_options: option 'threads' of plugin 'fixture_ok' = "
                               "\"99\": expected an integer in 1..64");
    fmoe_context_destroy(ctx);
    o.plugin_options = "threads=4";
    ck_assert_int_eq(fmoe_context_create(&o, &ctx), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_context_options.plugin_options: entry 'threads=4' is not "
                                        "<plugin>.<option>=<value> (e.g. cpu.isa=avx2)");
}
END_TEST

START_TEST(malformed_environment_fails_the_context)
{
    char dir[512], manifest[1024];
    fx_tempdir(dir, sizeof dir);
    options_manifest(dir, "");
    snprintf(manifest, sizeof manifest, "%s/fixture_ok.toml", dir);
    setenv("FMOE_OPTIONS", "fixture_ok.tier", 1);
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    const char *files[] = {manifest};
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.isolated = 1;
    fmoe_context *ctx = NULL;
    ck_assert_int_eq(fmoe_context_create(&o, &ctx), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "FMOE_OPTIONS: entry 'fixture_ok.tier' is not <plugin>.<option>=<value> (e.g. cpu.isa=avx2)");
    ck_assert_ptr_null(ctx);
}
END_TEST

START_TEST(bad_declarations_refuse_the_manifest)
{
    static const struct {
        const char *decl, *error;
    } cases[] = {
        {"[[option]]\nname = \"x\"\ntype = \"float\"\ndefault = 1\nhelp = \"h\"\n",
         "type must be one of bool, int, enum, string"},
        {"[[option]]\nname = \"x\"\ntype = \"enum\"\nvalues = [\"a\"]\ndefault = \"b\"\nhelp = \"h\"\n",
         "default \"b\": expected one of a"},
        {"[[option]]\nname = \"x\"\ntype = \"int\"\nmin = 5\nmax = 1\ndefault = 3\nhelp = \"h\"\n", "min 5 > max 1"},
        {"[[option]]\nname = \"x\"\ntype = \"bool\"\nvalues = [\"a\"]\ndefault = true\nhelp = \"h\"\n",
         "'values' is only for type = \"enum\""},
        {"[[option]]\nname = \"X-1\"\ntype = \"bool\"\ndefault = true\nhelp = \"h\"\n", "is not [a-z0-9_]"},
        {"[[option]]\nname = \"tier\"\ntype = \"bool\"\ndefault = true\nhelp = \"h\"\n",
         "option 'tier' is declared twice"},
        {"[[option]]\nname = \"x\"\ntype = \"bool\"\ndefault = true\n", "missing required key 'help'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512];
        fx_tempdir(dir, sizeof dir);
        options_manifest(dir, cases[i].decl);
        fmoe_context *ctx = options_context(dir, "", 0);
        fmoe_plugin_info p = fx_plugin(ctx, "fixture_ok.toml"); /* a bad manifest names no plugin */
        ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
        ck_assert_msg(strstr(p.reason, "bad manifest") && strstr(p.reason, cases[i].error), "case %zu: %s", i,
                      p.reason);
        fmoe_context_destroy(ctx);
    }
}
END_TEST

/* Without a manifest there is nothing to check against: the user's options
 * reach init verbatim, and the plugin has the last word. */
START_TEST(bare_library_gets_options_verbatim)
{
    char dir[512], cfg[1024], buf[256];
    fx_tempdir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, "[plugins.fixture_ok.options]\nanything = \"goes\"\n");
    const char *files[] = {FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 1, cfg, 0, NULL);
    ck_assert_str_eq(received(ctx, buf, sizeof buf), "options: anything=goes");
    fmoe_plugin_option_info o = {.struct_size = sizeof o};
    ck_assert_int_eq(fmoe_context_plugin_option(ctx, plugin_index(ctx, "fixture_ok"), 0, &o), FMOE_STATUS_OK);
    ck_assert_str_eq(o.type, "");
    ck_assert_str_eq(o.source, "config");
    fmoe_context_destroy(ctx);
}
END_TEST

/* PLUGIN-ABI: init and shutdown once per context, paired, even when the
 * probe fails after a successful init. */
START_TEST(probe_failure_still_shuts_down)
{
    char dir[512], cfg[1024];
    fx_tempdir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, "[log]\nlevel = \"info\"\n"); /* the fixture logs its shutdown at info */
    fx_log lg = {0};
    const char *files[] = {FIXTURE_SO_FIXTURE_PROBE_FAIL};
    fmoe_context *ctx = fx_context(files, 1, cfg, 0, &lg);
    fmoe_plugin_info p = fx_plugin(ctx, "fixture_probe_fail");
    ck_assert_int_eq(p.state, FMOE_PLUGIN_STATE_FAILED);
    ck_assert_str_eq(p.reason, "probe failed (device-error): fixture probe fails on purpose");
    ck_assert_ptr_null(strstr(lg.text, "fixture shut down"));
    fmoe_context_destroy(ctx);
    ck_assert_msg(strstr(lg.text, "fixture shut down") != NULL, "log: %s", lg.text);
}
END_TEST

START_TEST(options_for_a_missing_plugin_are_reported)
{
    char dir[512], cfg[1024];
    fx_tempdir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
    fx_write(cfg, "[plugins.nosuch.options]\nx = 1\n");
    fx_log lg = {0};
    const char *files[] = {REFERENCE_MANIFEST};
    fmoe_context *ctx = fx_context(files, 1, cfg, 0, &lg);
    ck_assert_msg(strstr(lg.text, "sets [plugins.nosuch.options], but no plugin 'nosuch' was found") != NULL, "log: %s",
                  lg.text);
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, defaults_reach_init_in_manifest_order);
    tcase_add_test(tc, config_values_override_defaults);
    tcase_add_test(tc, undeclared_option_fails_before_init);
    tcase_add_test(tc, ill_typed_values_fail_naming_the_option);
    tcase_add_test(tc, string_and_one_sided_int_options);
    tcase_add_test(tc, environment_overrides_and_ignore_environment_silences);
    tcase_add_test(tc, malformed_environment_fails_the_context);
    tcase_add_test(tc, application_options_come_last);
    tcase_add_test(tc, bad_declarations_refuse_the_manifest);
    tcase_add_test(tc, bare_library_gets_options_verbatim);
    tcase_add_test(tc, probe_failure_still_shuts_down);
    tcase_add_test(tc, options_for_a_missing_plugin_are_reported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 12);
}
