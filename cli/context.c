/* cli/context.c - the library context every command works in, built from the
 * global options. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"

int cli_open_context(const cli_globals *g, fmoe_context **out)
{
    fmoe_context_options opts;
    fmoe_context_options_init(&opts);
    opts.config_path = g->config_path;
    opts.plugin_files = g->plugin_files;
    opts.n_plugin_files = g->n_plugin_files;
    opts.log_spec = g->log_spec;
    opts.isolated = (uint32_t)g->isolated;
    /* log_fn stays NULL: the library writes its log to stderr, which keeps
     * stdout clean for tables and JSON. */
    fmoe_status st = fmoe_context_create(&opts, out);
    if (st != FMOE_STATUS_OK) {
        *out = NULL;
        return cli_fail(st, NULL);
    }
    return CLI_EXIT_OK;
}

void cli_device_string(int32_t kind, int32_t index, char *buf, size_t cap)
{
    /* A candidate refused before any device was tried has no device. */
    if (kind == FMOE_DEVICE_ANY)
        snprintf(buf, cap, "any");
    else
        snprintf(buf, cap, "%s:%d", fmoe_device_kind_name(kind), index);
}

int cli_run_listing(const cli_globals *g, int argc, char **argv, const char *command, void (*help)(FILE *out),
                    int (*print_table)(const fmoe_context *ctx), int (*print_json)(const fmoe_context *ctx))
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--json"))
            json = 1;
        else
            return cli_usage(command, "unknown option '%s'", argv[i]);
    }
    fmoe_context *ctx = NULL;
    int rc = cli_open_context(g, &ctx);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = json ? print_json(ctx) : print_table(ctx);
    fmoe_context_destroy(ctx);
    return rc;
}
