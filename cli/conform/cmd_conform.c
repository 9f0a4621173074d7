#define _XOPEN_SOURCE 700 /* realpath */
/*
 * cli/conform/cmd_conform.c - `fusedmoe conform`: options, the context the
 * plugins are loaded into (by the production loader), and the modes run
 * for each plugin under test (docs/CONFORMANCE.md).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/conform/conform.h"
#include "cli/rng.h"

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] conform [--plugin NAME|PATH] [--scheme KEY|GLOB]\n"
          "           [--mode abi|support|test|stress|ep|all] [--filter SUBSTR] [--seed N]\n"
          "           [--exhaustive] [--json FILE] [--verbose]\n"
          "\n"
          "Checks a backend plugin against the plugin ABI and against the reference plugin.\n"
          "Every check is a case with a verdict PASS, FAIL or UNSUPPORTED; the run passes when\n"
          "no case fails. Each failure prints a repro line that reruns that case alone.\n"
          "\n"
          "Options:\n"
          "  --plugin NAME|PATH  the plugin to check: a name the registry found, or a manifest\n"
          "                      (.toml) or library (.so) to load; default: every plugin found\n"
          "  --scheme KEY|GLOB   only schemes whose canonical key matches (docs/SCHEMES.md)\n"
          "  --mode M            abi, support, test, stress, ep or all (default all); repeatable;\n"
          "                      ep: the plugin's N-rank EP groups against one device (docs/EP.md)\n"
          "  --filter SUBSTR     only cases whose id contains SUBSTR (e.g. test/bf16/tokens)\n"
          "  --seed N            seed of every random input (default: a fresh one, printed)\n"
          "  --exhaustive        test the full shape product, not the default grid\n"
          "  --json FILE         also write the report as JSON to FILE\n"
          "  --verbose           print PASS cases too\n"
          "  --help              this help\n"
          "\n"
          "Exit codes: 0 every case PASS or UNSUPPORTED; 1 a case FAILED (or the plugin crashed);\n"
          "2 usage; 3 bad configuration, scheme or no such plugin; 5 internal error.\n"
          "Documentation: docs/CONFORMANCE.md\n",
          f);
}

static int parse_mode(const char *v, uint32_t *modes)
{
    static const struct {
        const char *name;
        uint32_t bit;
    } names[] = {
        {"abi", CF_MODE_ABI},       {"support", CF_MODE_SUPPORT}, {"test", CF_MODE_TEST},
        {"stress", CF_MODE_STRESS}, {"ep", CF_MODE_EP},           {"all", CF_MODE_ALL},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(v, names[i].name) == 0) {
            *modes |= names[i].bit;
            return 0;
        }
    return -1;
}

static int parse_args(int argc, char **argv, cf_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--exhaustive")) {
            o->exhaustive = 1;
        } else if (cli_opt_flag(argv[i], "--verbose")) {
            o->verbose = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--plugin", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("conform", "--plugin needs a plugin name or a manifest/library path");
            o->plugin = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--scheme", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("conform", "--scheme needs a key or glob (e.g. bf16, 'fp8*')");
            o->scheme_glob = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--mode", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || parse_mode(v, &o->modes) != 0)
                return cli_usage("conform", "--mode: expected abi, support, test, stress, ep or all");
        } else if ((r = cli_opt_value(argc, argv, &i, "--filter", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("conform", "--filter needs a substring of case ids");
            o->filter = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--seed", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u64(v, &o->seed) != 0)
                return cli_usage("conform", "--seed: expected a whole number from 0 to 2^64-1");
            o->seed_given = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--json", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("conform", "--json needs a file");
            o->json_path = v;
        } else {
            return cli_usage("conform", "unknown option '%s'", argv[i]);
        }
    }
    if (!o->modes)
        o->modes = CF_MODE_ALL;
    return -1;
}

/* A --plugin value naming a file rather than a registry name. */
static int is_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && strcmp(s + n - 5, ".toml") == 0) || (n > 3 && strcmp(s + n - 3, ".so") == 0);
}

static int same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (!a || !b || !a[0] || !b[0] || !realpath(a, ra) || !realpath(b, rb))
        return 0;
    return strcmp(ra, rb) == 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_modes(cf_run *r, int have_reference)
{
    const cf_plugin *p = r->plugin;
    if (p->state != FMOE_PLUGIN_STATE_LOADED) {
        r->mode = "abi";
        if (cf_begin(r, "load"))
            cf_end(r, CF_FAIL, "the production loader did not load it: %s", p->reason);
        return;
    }
    if (r->o->modes & CF_MODE_ABI) {
        r->mode = "abi";
        cf_mode_abi(r);
    }
    if (r->o->modes & CF_MODE_SUPPORT) {
        r->mode = "support";
        cf_mode_support(r);
    }
    if (r->o->modes & CF_MODE_TEST) {
        r->mode = "test";
        if (!have_reference) {
            if (cf_begin(r, "oracle"))
                cf_end(r, CF_FAIL,
                       "the reference plugin (the oracle) is not loaded: give its manifest with "
                       "--plugin, or install it beside libfusedmoe");
        } else {
            cf_mode_test(r);
        }
    }
    if (r->o->modes & CF_MODE_STRESS) {
        r->mode = "stress";
        cf_mode_stress(r);
    }
    if (r->o->modes & CF_MODE_EP) {
        r->mode = "ep";
        cf_mode_ep(r);
    }
}

int cmd_conform(const cli_globals *g, int argc, char **argv)
{
    cf_opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.scheme_glob) {
        fmoe_scheme s = {.struct_size = sizeof s};
        int glob = strpbrk(o.scheme_glob, "*?[") != NULL;
        if (!glob && fmoe_scheme_parse(o.scheme_glob, &s) != FMOE_STATUS_OK)
            return cli_fail(FMOE_STATUS_PARSE_ERROR, "bad --scheme");
    }
    if (!o.seed_given)
        o.seed = cli_rng_fresh_seed();
    printf("seed: %llu\n", (unsigned long long)o.seed);
    fflush(stdout);

    /* The plugins come from the library's own loader: the context, given the
     * global --plugin files plus conform's --plugin when it is a file. */
    const char **files = calloc(g->n_plugin_files + 1, sizeof *files);
    if (!files) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (uint32_t i = 0; i < g->n_plugin_files; i++)
        files[i] = g->plugin_files[i];
    uint32_t n_files = g->n_plugin_files;
    int given = 0;
    for (uint32_t i = 0; o.plugin && i < n_files; i++)
        given |= same_file(o.plugin, files[i]);
    if (o.plugin && is_path(o.plugin) && !given)
        files[n_files++] = o.plugin;
    fmoe_context_options opts;
    fmoe_context_options_init(&opts);
    opts.config_path = g->config_path;
    opts.plugin_files = files;
    opts.n_plugin_files = n_files;
    opts.log_spec = g->log_spec;
    opts.isolated = (uint32_t)g->isolated;
    fmoe_context *ctx = NULL;
    fmoe_status st = fmoe_context_create(&opts, &ctx);
    free(files);
    if (st != FMOE_STATUS_OK)
        return cli_fail(st, NULL);

    uint32_t n = fmoe_context_plugin_count(ctx);
    cf_plugin *plugins = calloc(n + 1, sizeof *plugins);
    size_t n_test = 0;
    int have_reference = 0;
    for (uint32_t i = 0; plugins && i < n; i++) {
        fmoe_plugin_info info = {.struct_size = sizeof info};
        if (fmoe_context_plugin(ctx, i, &info) != FMOE_STATUS_OK)
            continue;
        if (strcmp(info.name, "reference") == 0 && info.state == FMOE_PLUGIN_STATE_LOADED)
            have_reference = 1;
        int wanted;
        if (o.plugin && is_path(o.plugin))
            wanted = same_file(o.plugin, info.path) || same_file(o.plugin, info.manifest);
        else if (o.plugin)
            wanted = strcmp(o.plugin, info.name) == 0;
        else
            wanted = info.state == FMOE_PLUGIN_STATE_LOADED || info.state == FMOE_PLUGIN_STATE_FAILED;
        /* A shadowed copy of a name is not the plugin the registry uses. */
        if (wanted && info.state == FMOE_PLUGIN_STATE_SKIPPED && o.plugin && !is_path(o.plugin))
            wanted = 0;
        /* ... and neither is a second record of a name already taken. */
        for (size_t j = 0; wanted && j < n_test; j++)
            if (strcmp(plugins[j].name, info.name) == 0 && info.state == FMOE_PLUGIN_STATE_SKIPPED)
                wanted = 0;
        if (!wanted)
            continue;
        plugins[n_test++] = (cf_plugin){.name = info.name,
                                        .path = info.path,
                                        .manifest = info.manifest,
                                        .schemes = info.schemes,
                                        .state = info.state,
                                        .reason = info.reason};
    }
    if (!plugins || n_test == 0) {
        if (plugins && o.plugin)
            cli_error("no plugin '%s' was found (see 'fusedmoe plugins'; give a manifest path to load one)", o.plugin);
        else if (plugins)
            cli_error("no plugins were found to check (see 'fusedmoe plugins')");
        else
            cli_error("out of memory");
        free(plugins);
        fmoe_context_destroy(ctx);
        return plugins ? CLI_EXIT_CONFIG : CLI_EXIT_INTERNAL;
    }

    cf_run r = {.g = g, .o = &o, .ctx = ctx, .tty = isatty(STDERR_FILENO)};
    cf_install_crash_handler();
    double t0 = now_s();
    for (size_t i = 0; i < n_test; i++) {
        r.plugin = &plugins[i];
        printf("plugin: %s (%s)\n", plugins[i].name, plugins[i].path);
        fflush(stdout);
        run_modes(&r, have_reference);
    }
    rc = cf_report_finish(&r, now_s() - t0);
    cf_run_free(&r);
    free(plugins);
    fmoe_context_destroy(ctx);
    return rc;
}
