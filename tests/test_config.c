/*
 * tests/test_config.c - the fusedmoe.toml reader (registry/config.c): every
 * field of a full file, path resolution, option conversion, the shipped
 * default file, and the exact text of each class of error.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "registry/config.h"
#include "registry/toml_wrap.h"
#include "test_util.h"

#define DATA FMOE_TEST_DATA_DIR "/config"

static fmoe_config *load_ok(const char *path)
{
    fmoe_config *cfg = NULL;
    fmoe_status st = fmoe_config_load_file(path, &cfg);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s: status %d: %s", path, st, fmoe_error_text());
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

static fmoe_config *parse_ok(const char *text)
{
    fmoe_config *cfg = NULL;
    fmoe_status st = fmoe_config_load_string(text, "t.toml", &cfg);
    ck_assert_msg(st == FMOE_STATUS_OK, "status %d: %s", st, fmoe_error_text());
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

static void assert_strings(char *const *got, size_t n_got, const char *const *want, size_t n_want)
{
    ck_assert_uint_eq(n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        ck_assert_str_eq(got[i], want[i]);
}

/* ---- a valid file ------------------------------------------------------- */

START_TEST(test_full_file)
{
    fmoe_config *cfg = load_ok(DATA "/full.toml");
    ck_assert_str_eq(cfg->path, DATA "/full.toml");

    const char *files[] = {"/opt/fmoe/cuda.toml", DATA "/local/cpu.toml", DATA "/libfmoe-extra.so"};
    assert_strings(cfg->plugin_files, cfg->n_plugin_files, files, 3);
    const char *paths[] = {DATA "/plugins", "/usr/lib/fusedmoe/plugins"};
    assert_strings(cfg->search_paths, cfg->n_search_paths, paths, 2);

    const char *prefer[] = {"cuda*", "cpu"};
    assert_strings(cfg->prefer, cfg->n_prefer, prefer, 2);
    const char *disable[] = {"rocm", "cpu_arm?"};
    assert_strings(cfg->disable, cfg->n_disable, disable, 2);
    ck_assert_int_eq(cfg->fallback, 1);

    /* File order, not sorted: the first matching glob decides. */
    ck_assert_uint_eq(cfg->n_schemes, 3);
    ck_assert_str_eq(cfg->schemes[0].scheme_glob, "fp8*");
    ck_assert_str_eq(cfg->schemes[0].backend, "cuda");
    ck_assert_str_eq(cfg->schemes[1].scheme_glob, "bf16");
    ck_assert_str_eq(cfg->schemes[1].backend, "reference");
    ck_assert_str_eq(cfg->schemes[2].scheme_glob, "w4a16-[gm]*");
    ck_assert_str_eq(cfg->schemes[2].backend, "cpu-arm_2");

    /* [plugins.cpu.options] comes before [plugins.cpu] in the file, so cpu
     * is first seen after cuda. */
    ck_assert_uint_eq(cfg->n_plugins, 3);
    ck_assert_str_eq(cfg->plugins[0].name, "cuda");
    ck_assert_int_eq(cfg->plugins[0].enabled, 0);
    ck_assert_uint_eq(cfg->plugins[0].n_options, 0);
    const fmoe_config_plugin *cpu = &cfg->plugins[1];
    ck_assert_str_eq(cpu->name, "cpu");
    ck_assert_int_eq(cpu->enabled, 1);
    const char *keys[] = {"threads", "isa", "alpha", "beta", "big", "tiny", "pinned", "spin", "neg"};
    const char *values[] = {"8", "avx512", "0.1", "2.0", "1e+300", "-1.5e-07", "true", "false", "-42"};
    ck_assert_uint_eq(cpu->n_options, 9);
    for (size_t i = 0; i < 9; i++) {
        ck_assert_str_eq(cpu->options[i].key, keys[i]);
        ck_assert_str_eq(cpu->options[i].value, values[i]);
    }
    ck_assert_str_eq(cfg->plugins[2].name, "empty");
    ck_assert_int_eq(cfg->plugins[2].enabled, -1);
    ck_assert_uint_eq(cfg->plugins[2].n_options, 0);

    ck_assert_str_eq(cfg->log_level, "debug");
    /* Not a [search] path: left as written, opened relative to the cwd. */
    ck_assert_str_eq(cfg->dispatch_log, "logs/dispatch.jsonl");

    ck_assert_ptr_eq(fmoe_config_find_plugin(cfg, "cpu"), cpu);
    ck_assert_ptr_eq(fmoe_config_find_plugin(cfg, "cuda"), &cfg->plugins[0]);
    ck_assert_ptr_null(fmoe_config_find_plugin(cfg, "rocm"));
    ck_assert_ptr_null(fmoe_config_find_plugin(cfg, "cp"));
    fmoe_config_free(cfg);
}
END_TEST

START_TEST(test_defaults)
{
    fmoe_config *cfg = fmoe_config_new_default();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_str_eq(cfg->path, "");
    ck_assert_uint_eq(cfg->n_plugin_files + cfg->n_search_paths + cfg->n_prefer + cfg->n_disable, 0);
    ck_assert_uint_eq(cfg->n_schemes + cfg->n_plugins, 0);
    ck_assert_int_eq(cfg->fallback, 0);
    ck_assert_ptr_null(cfg->log_level);
    ck_assert_ptr_null(cfg->dispatch_log);
    ck_assert_ptr_null(fmoe_config_find_plugin(cfg, "cpu"));
    fmoe_config_free(cfg);
    fmoe_config_free(NULL);
}
END_TEST

START_TEST(test_empty_text)
{
    fmoe_config *cfg = parse_ok("# nothing but a comment\n");
    ck_assert_str_eq(cfg->path, "t.toml");
    ck_assert_uint_eq(cfg->n_plugins + cfg->n_schemes + cfg->n_prefer, 0);
    ck_assert_ptr_null(cfg->log_level);
    fmoe_config_free(cfg);
}
END_TEST

/* The file installed as share/fusedmoe/fusedmoe.toml. */
START_TEST(test_shipped_default_file)
{
    fmoe_config *cfg = load_ok(FMOE_TEST_DATA_DIR "/../../fusedmoe.toml");
    ck_assert_uint_eq(cfg->n_plugin_files, 0);
    ck_assert_uint_eq(cfg->n_search_paths, 0);
    ck_assert_uint_eq(cfg->n_prefer, 0);
    ck_assert_uint_eq(cfg->n_disable, 0);
    ck_assert_int_eq(cfg->fallback, 0);
    ck_assert_uint_eq(cfg->n_schemes, 0);
    ck_assert_uint_eq(cfg->n_plugins, 0);
    ck_assert_str_eq(cfg->log_level, "warn");
    ck_assert_ptr_null(cfg->dispatch_log);
    fmoe_config_free(cfg);
}
END_TEST

/* A commented-out example in the shipped file: "# [table]" or "# key = ...",
 * as opposed to prose ("# Set to false ..."). */
static int is_commented_setting(const char *line)
{
    if (strncmp(line, "# ", 2) != 0)
        return 0;
    line += 2;
    if (*line == '[')
        return 1;
    size_t key = strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_-*:/\"");
    return key > 0 && strncmp(line + key, " = ", 3) == 0;
}

/* The examples commented out in the shipped file must be valid too: a user
 * enables one by deleting its "# ". */
START_TEST(test_shipped_examples_parse)
{
    FILE *f = fopen(FMOE_TEST_DATA_DIR "/../../fusedmoe.toml", "r");
    ck_assert_ptr_nonnull(f);
    char text[8192] = "";
    char line[512];
    int uncommented = 0;
    while (fgets(line, sizeof line, f)) {
        int setting = is_commented_setting(line);
        uncommented += setting;
        strncat(text, line + (setting ? 2 : 0), sizeof text - strlen(text) - 1);
    }
    fclose(f);
    ck_assert_int_eq(uncommented, 11);
    fmoe_config *cfg = parse_ok(text);
    ck_assert_uint_eq(cfg->n_plugin_files, 1);
    ck_assert_str_eq(cfg->plugin_files[0], "/opt/vendor/fusedmoe/fmoe-cuda.toml");
    ck_assert_uint_eq(cfg->n_search_paths, 1);
    const char *prefer[] = {"cuda*", "cpu"};
    assert_strings(cfg->prefer, cfg->n_prefer, prefer, 2);
    const char *disable[] = {"rocm"};
    assert_strings(cfg->disable, cfg->n_disable, disable, 1);
    ck_assert_uint_eq(cfg->n_schemes, 2);
    ck_assert_str_eq(cfg->schemes[0].scheme_glob, "bf16");
    ck_assert_str_eq(cfg->schemes[0].backend, "reference");
    const fmoe_config_plugin *cpu = fmoe_config_find_plugin(cfg, "cpu");
    ck_assert_ptr_nonnull(cpu);
    ck_assert_int_eq(cpu->enabled, 1);
    ck_assert_uint_eq(cpu->n_options, 1);
    ck_assert_str_eq(cpu->options[0].value, "8");
    ck_assert_str_eq(cfg->dispatch_log, "fusedmoe-dispatch.jsonl");
    fmoe_config_free(cfg);
}
END_TEST

/* ---- relative paths ------------------------------------------------------- */

START_TEST(test_relative_to_file)
{
    fmoe_config *cfg = load_ok(DATA "/relative.toml");
    const char *files[] = {DATA "/cpu.toml", DATA "/sub/lib.so", DATA "/../up/x.toml", "/abs/y.toml"};
    assert_strings(cfg->plugin_files, cfg->n_plugin_files, files, 4);
    const char *paths[] = {DATA, DATA "/dir"};
    assert_strings(cfg->search_paths, cfg->n_search_paths, paths, 2);
    fmoe_config_free(cfg);
}
END_TEST

/* A config path that is itself relative resolves through the cwd. */
START_TEST(test_relative_config_path)
{
    char saved[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(saved, sizeof saved));
    ck_assert_int_eq(chdir(FMOE_TEST_DATA_DIR), 0);
    fmoe_config *cfg = NULL;
    fmoe_status st = fmoe_config_load_file("config/relative.toml", &cfg);
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(saved), 0);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_error_text());
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/config/cpu.toml", cwd);
    ck_assert_str_eq(cfg->plugin_files[0], want);
    snprintf(want, sizeof want, "%s/config", cwd);
    ck_assert_str_eq(cfg->search_paths[0], want);
    ck_assert_str_eq(cfg->path, "config/relative.toml");
    fmoe_config_free(cfg);
}
END_TEST

START_TEST(test_relative_to_cwd_for_strings)
{
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    fmoe_config *cfg = parse_ok("[search]\nfiles = [\"a/b.toml\", \"/c.so\"]\npaths = [\"./p\"]\n");
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/a/b.toml", cwd);
    ck_assert_str_eq(cfg->plugin_files[0], want);
    ck_assert_str_eq(cfg->plugin_files[1], "/c.so");
    snprintf(want, sizeof want, "%s/p", cwd);
    ck_assert_str_eq(cfg->search_paths[0], want);
    fmoe_config_free(cfg);
}
END_TEST

/* ---- option values -------------------------------------------------------- */

static const struct {
    const char *toml;
    const char *text;
} option_cases[] = {
    {"2", "2"},
    {"-0", "0"},
    {"0x10", "16"},
    {"1_000", "1000"},
    {"9223372036854775807", "9223372036854775807"},
    {"-9223372036854775808", "-9223372036854775808"},
    {"true", "true"},
    {"false", "false"},
    {"0.1", "0.1"},
    {"2.0", "2.0"},
    {"-3e0", "-3.0"},
    {"0.30000000000000004", "0.30000000000000004"},
    {"1e22", "1e+22"},
    {"123456.0", "123456.0"},
    {"1234567.0", "1.234567e+06"},
    {"0.0001", "0.0001"},
    {"0.00001", "1e-05"},
    {"5e-324", "5e-324"},
    {"1.7976931348623157e308", "1.7976931348623157e+308"},
    {"-0.0", "-0.0"},
    {"inf", "inf"},
    {"-inf", "-inf"},
    {"nan", "nan"},
    {"-nan", "nan"},
    {"\"a b\"", "a b"},
    {"'C:\\x'", "C:\\x"},
};

START_TEST(test_option_conversion)
{
    char text[256];
    snprintf(text, sizeof text, "[plugins.p.options]\nv = %s\n", option_cases[_i].toml);
    fmoe_config *cfg = parse_ok(text);
    const fmoe_config_plugin *p = fmoe_config_find_plugin(cfg, "p");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->n_options, 1);
    ck_assert_str_eq(p->options[0].key, "v");
    ck_assert_str_eq(p->options[0].value, option_cases[_i].text);
    fmoe_config_free(cfg);
}
END_TEST

/* Every float option must read back as exactly the value in the file. */
START_TEST(test_option_float_round_trip)
{
    fmoe_rng rng = fmoe_rng_for(7);
    for (int i = 0; i < 1000; i++) {
        union {
            uint64_t u;
            double d;
        } bits = {fmoe_rng_u64(&rng)};
        if (isnan(bits.d) || isinf(bits.d))
            continue;
        char text[128];
        snprintf(text, sizeof text, "[plugins.p.options]\nv = %.17e\n", bits.d);
        fmoe_config *cfg = parse_ok(text);
        const char *value = cfg->plugins[0].options[0].value;
        ck_assert_msg(strtod(value, NULL) == bits.d, "%s does not read back as %.17g", value, bits.d);
        ck_assert_msg(strlen(value) <= 24, "%s is not the shortest form", value);
        fmoe_config_free(cfg);
    }
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

static void assert_error(const char *text, fmoe_status want_status, const char *want_text)
{
    fmoe_config *cfg = (fmoe_config *)1;
    fmoe_status st = fmoe_config_load_string(text, "t.toml", &cfg);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(st == want_status, "status %d, want %d (%s) for:\n%s", st, want_status, fmoe_error_text(), text);
    ck_assert_str_eq(fmoe_error_text(), want_text);
}

/* One per error class; the messages are the contract docs/CONFIG.md shows. */
static const struct {
    const char *toml;
    const char *error;
} error_cases[] = {
    /* unknown keys, at every level */
    {"search = {}\nfoo = 1\n",
     "t.toml:2:1: unknown key 'foo' at the top level (expected one of: search, select, plugins, log)"},
    {"[search]\nfile = []\n", "t.toml:2:1: unknown key 'file' in [search] (expected one of: files, paths)"},
    {"[select]\nprefer = []\npreferred = []\n",
     "t.toml:3:1: unknown key 'preferred' in [select] (expected one of: prefer, disable, fallback, schemes)"},
    {"[plugins.cpu]\nenable = true\n",
     "t.toml:2:1: unknown key 'enable' in [plugins.cpu] (expected one of: enabled, options)"},
    {"[log]\nlevel = \"info\"\nfile = \"x\"\n",
     "t.toml:3:1: unknown key 'file' in [log] (expected one of: level, dispatch)"},
    {"[select.scheme]\n\"bf16\" = \"cpu\"\n",
     "t.toml:1:9: unknown key 'scheme' in [select] (expected one of: prefer, disable, fallback, schemes)"},
    /* a nested table or array where an option value belongs */
    {"[plugins.cpu.options]\nthreads = 4\n[plugins.cpu.options.numa]\nnode = 1\n",
     "t.toml:3:1: [plugins.cpu.options] numa is a table (expected a string, integer, float or boolean)"},
    {"[plugins.cpu.options]\ncores = [0, 1]\n",
     "t.toml:2:9: [plugins.cpu.options] cores is an array (expected a string, integer, float or boolean)"},
    {"[plugins.cpu.options]\nwhen = 1979-05-27\n",
     "t.toml:2:8: [plugins.cpu.options] when is a date-time (expected a string, integer, float or boolean)"},
    {"[plugins.cpu.options]\nisa = \"\"\n",
     "t.toml:2:7: [plugins.cpu.options] isa is empty (expected a non-empty string)"},
    {"[plugins.cpu.options]\n\"\" = 1\n",
     "t.toml:2:1: [plugins.cpu.options] has an empty key (expected an option name)"},
    /* wrong types, one per key */
    {"search = 3\n", "t.toml:1:10: search is an integer (expected a table [search])"},
    {"[search]\nfiles = \"a.toml\"\n", "t.toml:2:9: [search] files is a string (expected an array of paths)"},
    {"[search]\nfiles = [\"a.toml\", 2]\n",
     "t.toml:2:20: [search] files[1] is an integer (expected a path to a plugin manifest (.toml) or library (.so))"},
    {"[search]\npaths = [[\"a\"]]\n", "t.toml:2:10: [search] paths[0] is an array (expected a directory)"},
    {"select = [\"cpu\"]\n", "t.toml:1:10: select is an array (expected a table [select])"},
    {"[select]\nprefer = \"cpu\"\n",
     "t.toml:2:10: [select] prefer is a string (expected an array of plugin-name globs)"},
    {"[select]\ndisable = [true]\n", "t.toml:2:12: [select] disable[0] is a boolean (expected a plugin-name glob)"},
    {"[select]\nfallback = 1\n", "t.toml:2:12: [select] fallback is an integer (expected true or false)"},
    {"[select]\nschemes = [\"bf16\"]\n", "t.toml:2:11: select.schemes is an array (expected a table [select.schemes])"},
    {"[select.schemes]\nbf16 = 1.5\n",
     "t.toml:2:8: [select.schemes] \"bf16\" is a float (expected a plugin name of a-z, 0-9, '_' and '-')"},
    {"plugins = 1\n", "t.toml:1:11: plugins is an integer (expected a table [plugins])"},
    {"[[plugins]]\nname = \"cpu\"\n", "t.toml:1:1: plugins is an array (expected a table [plugins])"},
    {"[plugins]\ncpu = \"on\"\n", "t.toml:2:7: plugins.cpu is a string (expected a table [plugins.cpu])"},
    {"[plugins.cpu]\nenabled = \"yes\"\n", "t.toml:2:11: [plugins.cpu] enabled is a string (expected true or false)"},
    {"[plugins.cpu]\noptions = \"threads=4\"\n",
     "t.toml:2:11: plugins.cpu.options is a string (expected a table [plugins.cpu.options])"},
    {"log = \"debug\"\n", "t.toml:1:7: log is a string (expected a table [log])"},
    {"[log]\nlevel = 3\n", "t.toml:2:9: [log] level is an integer (expected one of error, warn, info, debug)"},
    {"[log]\ndispatch = false\n",
     "t.toml:2:12: [log] dispatch is a boolean (expected a file path for the JSONL dispatch log)"},
    /* bad values */
    {"[log]\nlevel = \"verbose\"\n",
     "t.toml:2:9: [log] level = \"verbose\" is not a log level (expected one of error, warn, info, debug)"},
    {"[log]\nlevel = \"WARN\"\n",
     "t.toml:2:9: [log] level = \"WARN\" is not a log level (expected one of error, warn, info, debug)"},
    {"[log]\nlevel = \"\"\n", "t.toml:2:9: [log] level is empty (expected one of error, warn, info, debug)"},
    {"[log]\ndispatch = ''\n",
     "t.toml:2:12: [log] dispatch is empty (expected a file path for the JSONL dispatch log)"},
    {"[plugins.CPU]\nenabled = true\n",
     "t.toml:1:10: plugin name 'CPU' in [plugins] is not valid (expected only a-z, 0-9, '_' and '-')"},
    {"[plugins.\"cuda.fp8\"]\n",
     "t.toml:1:10: plugin name 'cuda.fp8' in [plugins] is not valid (expected only a-z, 0-9, '_' and '-')"},
    {"[plugins.\"\"]\n", "t.toml:1:10: plugin name '' in [plugins] is not valid (expected only a-z, 0-9, '_' and '-')"},
    {"[select.schemes]\n\"fp8*\" = \"Cuda\"\n", "t.toml:2:10: [select.schemes] \"fp8*\" = \"Cuda\" is not a valid "
                                                "plugin name (expected only a-z, 0-9, '_' and '-')"},
    {"[select.schemes]\n\"fp8*\" = \"\"\n",
     "t.toml:2:10: [select.schemes] \"fp8*\" is empty (expected a plugin name of a-z, 0-9, '_' and '-')"},
    {"[select.schemes]\n\"\" = \"cuda\"\n",
     "t.toml:2:1: [select.schemes] has an empty key (expected a scheme-key glob such as \"fp8e4m3:*\")"},
    {"[select]\nprefer = [\"cuda\", \"\"]\n", "t.toml:2:19: [select] prefer[1] is empty (expected a plugin-name glob)"},
    {"[select]\ndisable = [\"\"]\n", "t.toml:2:12: [select] disable[0] is empty (expected a plugin-name glob)"},
    {"[search]\npaths = [\"\"]\n", "t.toml:2:10: [search] paths[0] is empty (expected a directory)"},
    {"[search]\nfiles = [\"a\\u0000b\"]\n", "t.toml:2:10: [search] files[0] contains a NUL character "
                                            "(expected a path to a plugin manifest (.toml) or library (.so))"},
    /* TOML syntax, reported as toml++ words it */
    {"[select]\nprefer = [\"cuda\",\n", "t.toml:2:19: Error while parsing array: encountered end-of-file"},
    {"[log]\nlevel = \"info\"\nlevel = \"debug\"\n",
     "t.toml:3:9: Error while parsing key-value pair: cannot redefine existing string 'level'"},
    {"[select]\nfallback = yes\n", "t.toml:2:12: Error while parsing value: could not determine value type"},
};

START_TEST(test_errors)
{
    assert_error(error_cases[_i].toml, FMOE_STATUS_PARSE_ERROR, error_cases[_i].error);
}
END_TEST

START_TEST(test_error_names_the_file)
{
    fmoe_config *cfg = NULL;
    fmoe_status st = fmoe_config_load_file(DATA "/bad_type.toml", &cfg);
    ck_assert_int_eq(st, FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(fmoe_error_text(),
                     DATA "/bad_type.toml:4:12: [select] fallback is a string (expected true or false)");
}
END_TEST

START_TEST(test_syntax_error_in_file)
{
    fmoe_config *cfg = NULL;
    fmoe_status st = fmoe_config_load_file(DATA "/syntax.toml", &cfg);
    ck_assert_int_eq(st, FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(fmoe_error_text(),
                     DATA "/syntax.toml:3:14: Error while parsing string: unescaped control characters other than TAB "
                          "(U+0009) are explicitly prohibited");
}
END_TEST

START_TEST(test_missing_file)
{
    fmoe_config *cfg = (fmoe_config *)1;
    fmoe_status st = fmoe_config_load_file(DATA "/no-such.toml", &cfg);
    ck_assert_int_eq(st, FMOE_STATUS_NOT_FOUND);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(fmoe_error_text(), DATA "/no-such.toml: No such file or directory");
}
END_TEST

START_TEST(test_default_source_name)
{
    assert_error("x = 1\n", FMOE_STATUS_PARSE_ERROR,
                 "t.toml:1:1: unknown key 'x' at the top level (expected one of: search, select, plugins, log)");
    fmoe_config *cfg = NULL;
    ck_assert_int_eq(fmoe_config_load_string("[log]\nlevel = 1\n", NULL, &cfg), FMOE_STATUS_PARSE_ERROR);
    ck_assert_str_eq(fmoe_error_text(),
                     "<string>:2:9: [log] level is an integer (expected one of error, warn, info, debug)");
    ck_assert_int_eq(fmoe_config_load_string(NULL, NULL, &cfg), FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* ---- the TOML layer underneath (registry/toml_wrap.h) --------------------- */

static void assert_pos(fmoe_toml_pos pos, uint32_t line, uint32_t column)
{
    ck_assert_uint_eq(pos.line, line);
    ck_assert_uint_eq(pos.column, column);
}

START_TEST(test_toml_dom)
{
    const char *text = "zeta = 1\n"
                       "[b.inner]\n"
                       "when = 1979-05-27T07:32:00.5-08:00\n"
                       "day = 2024-02-29\n"
                       "[a]\n"
                       "list = [\"x\", 2.5, [true]]\n"
                       "[b]\n"
                       "\"k\\u0000ey\" = 'v'\n";
    fmoe_toml_doc *doc = NULL;
    ck_assert_int_eq(fmoe_toml_parse(text, strlen(text), "dom.toml", &doc), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_toml_source(doc), "dom.toml");
    const fmoe_toml_node *root = fmoe_toml_root(doc);
    ck_assert_int_eq(fmoe_toml_kind_of(root), FMOE_TOML_TABLE);
    /* File order of first appearance: zeta, b (from [b.inner]), a. */
    ck_assert_uint_eq(fmoe_toml_size(root), 3);
    ck_assert_str_eq(fmoe_toml_key(root, 0, NULL), "zeta");
    ck_assert_str_eq(fmoe_toml_key(root, 1, NULL), "b");
    ck_assert_str_eq(fmoe_toml_key(root, 2, NULL), "a");
    assert_pos(fmoe_toml_key_pos(root, 0), 1, 1);
    assert_pos(fmoe_toml_key_pos(root, 1), 2, 2);
    assert_pos(fmoe_toml_key_pos(root, 2), 5, 2);
    assert_pos(fmoe_toml_pos_of(fmoe_toml_value(root, 0)), 1, 8);
    ck_assert_ptr_null(fmoe_toml_key(root, 3, NULL));
    ck_assert_ptr_null(fmoe_toml_value(root, 3));
    ck_assert_int_eq(fmoe_toml_find(root, "a"), 2);
    ck_assert_int_eq(fmoe_toml_find(root, "c"), -1);

    const fmoe_toml_node *b = fmoe_toml_get(root, "b");
    ck_assert_uint_eq(fmoe_toml_size(b), 2);
    size_t len = 0;
    ck_assert_str_eq(fmoe_toml_key(b, 0, &len), "inner");
    ck_assert_uint_eq(len, 5);
    /* A key with an escaped NUL: the C string stops early, len does not. */
    ck_assert_str_eq(fmoe_toml_key(b, 1, &len), "k");
    ck_assert_uint_eq(len, 4);

    const fmoe_toml_node *inner = fmoe_toml_get(b, "inner");
    fmoe_toml_datetime dt;
    ck_assert_int_eq(fmoe_toml_get_datetime(fmoe_toml_get(inner, "when"), &dt), 1);
    ck_assert_int_eq(dt.has_date && dt.has_time && dt.has_offset, 1);
    ck_assert_int_eq(dt.year * 10000 + dt.month * 100 + dt.day, 19790527);
    ck_assert_int_eq(dt.hour * 10000 + dt.minute * 100 + dt.second, 73200);
    ck_assert_uint_eq(dt.nanosecond, 500000000u);
    ck_assert_int_eq(dt.offset_minutes, -480);
    ck_assert_int_eq(fmoe_toml_get_datetime(fmoe_toml_get(inner, "day"), &dt), 1);
    ck_assert_int_eq(dt.has_date && !dt.has_time && !dt.has_offset, 1);
    ck_assert_int_eq(dt.day, 29);
    ck_assert_str_eq(fmoe_toml_kind_name(fmoe_toml_kind_of(fmoe_toml_get(inner, "day"))), "date-time");

    const fmoe_toml_node *list = fmoe_toml_get(fmoe_toml_get(root, "a"), "list");
    ck_assert_int_eq(fmoe_toml_kind_of(list), FMOE_TOML_ARRAY);
    ck_assert_uint_eq(fmoe_toml_size(list), 3);
    const char *s;
    ck_assert_int_eq(fmoe_toml_get_string(fmoe_toml_at(list, 0), &s, &len), 1);
    ck_assert_str_eq(s, "x");
    double f = 0;
    int64_t i = 0;
    ck_assert_int_eq(fmoe_toml_get_float(fmoe_toml_at(list, 1), &f), 1);
    ck_assert_double_eq(f, 2.5);
    ck_assert_int_eq(fmoe_toml_get_integer(fmoe_toml_at(list, 1), &i), 0);
    assert_pos(fmoe_toml_pos_of(fmoe_toml_at(list, 2)), 6, 19);
    int flag = 0;
    ck_assert_int_eq(fmoe_toml_get_bool(fmoe_toml_at(fmoe_toml_at(list, 2), 0), &flag), 1);
    ck_assert_int_eq(flag, 1);
    ck_assert_ptr_null(fmoe_toml_at(list, 3));
    ck_assert_ptr_null(fmoe_toml_at(root, 0));
    fmoe_toml_free(doc);
    fmoe_toml_free(NULL);
}
END_TEST

START_TEST(test_toml_parse_error)
{
    fmoe_toml_doc *doc = (fmoe_toml_doc *)1;
    const char *text = "a = 1\nb = [1, 2\n";
    ck_assert_int_eq(fmoe_toml_parse(text, strlen(text), NULL, &doc), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_null(doc);
    ck_assert_str_eq(fmoe_error_text(), "<string>:2:11: Error while parsing array: encountered end-of-file");
    /* The length bounds the text: the "= 2" after it is never seen. */
    ck_assert_int_eq(fmoe_toml_parse("a = 1= 2", 5, NULL, &doc), FMOE_STATUS_OK);
    fmoe_toml_free(doc);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_full_file);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_empty_text);
    tcase_add_test(tc, test_shipped_default_file);
    tcase_add_test(tc, test_shipped_examples_parse);
    tcase_add_test(tc, test_relative_to_file);
    tcase_add_test(tc, test_relative_config_path);
    tcase_add_test(tc, test_relative_to_cwd_for_strings);
    tcase_add_loop_test(tc, test_option_conversion, 0, (int)(sizeof option_cases / sizeof option_cases[0]));
    tcase_add_test(tc, test_option_float_round_trip);
    tcase_add_loop_test(tc, test_errors, 0, (int)(sizeof error_cases / sizeof error_cases[0]));
    tcase_add_test(tc, test_error_names_the_file);
    tcase_add_test(tc, test_syntax_error_in_file);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_default_source_name);
    tcase_add_test(tc, test_toml_dom);
    tcase_add_test(tc, test_toml_parse_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 87);
}
