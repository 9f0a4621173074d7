/*
 * cli/main.c - the `fusedmoe` tool: global options, --help/--version and
 * dispatch to one command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"

typedef struct command {
    const char *name;
    int (*fn)(const cli_globals *g, int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"plugins", cmd_plugins, "list every plugin found: version, ABI, state, schemes, why not loaded"},
    {"probe", cmd_probe, "list the devices each loaded plugin reported"},
    {"explain", cmd_explain, "show how a backend is chosen for a layer and scheme"},
    {"run", cmd_run, "run a checkpoint's MoE layers (or a random layer) and check them against the reference"},
    {"conform", cmd_conform, "check a plugin against the plugin ABI and the reference (docs/CONFORMANCE.md)"},
    {"bench", cmd_bench, "time a backend on model shapes against this machine's floor (docs/BENCH.md)"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_help(FILE *f)
{
    fputs("Usage: fusedmoe [--config FILE] [--plugin FILE]... [--log SPEC] [--isolated] <command> [options]\n"
          "\n"
          "Runs fused Mixture-of-Experts layers through run-time backend plugins.\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "Global options (before the command):\n"
          "  --config FILE   TOML configuration (default: $FMOE_CONFIG, else the installed one)\n"
          "  --plugin FILE   load this plugin manifest (.toml) or library (.so) first; repeatable\n"
          "  --log SPEC      log level and categories, as $FMOE_LOG (e.g. debug, info,dispatch)\n"
          "  --isolated      see nothing installed: no default configuration, no plugins beside\n"
          "                  the library or in the install dir (FMOE_* variables still apply)\n"
          "  --help          this help; 'fusedmoe <command> --help' for a command\n"
          "  --version       library version and plugin ABI\n"
          "\n"
          "Exit codes:\n"
          "  0  success\n"
          "  1  check failed (run: the backend disagrees with the reference)\n"
          "  2  usage error\n"
          "  3  configuration or input error (bad TOML, layer config or scheme key)\n"
          "  4  no backend can serve the layer\n"
          "  5  plugin or internal error\n"
          "\n"
          "Documentation: docs/CLI.md\n",
          f);
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Parse the global options; *next is the index of the command. Returns -1 to
 * go on, or an exit code. */
static int parse_globals(int argc, char **argv, cli_globals *g, int *next)
{
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *v = NULL;
        int r;
        if (cli_opt_flag(argv[i], "--help")) {
            print_help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--version")) {
            uint32_t major, minor;
            fmoe_plugin_abi(&major, &minor);
            printf("fusedmoe %s (plugin ABI %u.%u)\n", fmoe_version(), major, minor);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--isolated")) {
            g->isolated = 1;
            continue;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--config", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage(NULL, "--config needs a file");
            g->config_path = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--plugin", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage(NULL, "--plugin needs a file");
            g->plugin_files[g->n_plugin_files++] = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--log", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage(NULL, "--log needs a spec (e.g. debug or info,dispatch)");
            g->log_spec = v;
        } else {
            return cli_usage(NULL, "unknown option '%s'", argv[i]);
        }
    }
    if (i < argc && strcmp(argv[i], "-h") == 0) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (i >= argc)
        return cli_usage(NULL, "no command given (one of: plugins, probe, explain, run)");
    *next = i;
    return -1;
}

int main(int argc, char **argv)
{
    cli_globals g = {0};
    /* At most one --plugin per argument, so argc entries always suffice. */
    g.plugin_files = calloc((size_t)argc, sizeof *g.plugin_files);
    if (!g.plugin_files) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    int cmd_index = 0;
    int rc = parse_globals(argc, argv, &g, &cmd_index);
    if (rc < 0) {
        const char *name = argv[cmd_index];
        const command *c = find_command(name);
        if (strcmp(name, "help") == 0 && cmd_index + 1 < argc && find_command(argv[cmd_index + 1])) {
            char *help_argv[] = {argv[cmd_index + 1], "--help", NULL};
            rc = find_command(argv[cmd_index + 1])->fn(&g, 2, help_argv);
        } else if (strcmp(name, "help") == 0) {
            print_help(stdout);
            rc = CLI_EXIT_OK;
        } else if (!c) {
            rc = cli_usage(NULL, "unknown command '%s' (one of: plugins, probe, explain, run)", name);
        } else {
            rc = c->fn(&g, argc - cmd_index, argv + cmd_index);
        }
    }
    free(g.plugin_files);
    return rc;
}
