/* cli/cmd_plugins.c - `fusedmoe plugins`: every plugin the registry saw. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/table.h"

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] plugins [--verbose] [--json]\n"
          "\n"
          "Lists every plugin the registry found, in discovery order: name, version, ABI\n"
          "(declared major . negotiated minor), state (loaded, disabled, skipped, failed), the\n"
          "schemes it serves, its library and manifest, and why it is not loaded.\n"
          "\n"
          "Options:\n"
          "  --verbose  also each plugin's options: value in effect and where it came from\n"
          "             (default, config, environment = FMOE_OPTIONS), type, default, meaning\n"
          "  --json     one JSON document instead of the table (options always included)\n"
          "  --help     this help\n"
          "\n"
          "Exit codes: 0 listed; 2 usage; 3 configuration error; 5 internal error.\n",
          f);
}

static const char *state_name(int32_t state)
{
    switch (state) {
    case FMOE_PLUGIN_STATE_LOADED:
        return "loaded";
    case FMOE_PLUGIN_STATE_DISABLED:
        return "disabled";
    case FMOE_PLUGIN_STATE_SKIPPED:
        return "skipped";
    case FMOE_PLUGIN_STATE_FAILED:
        return "failed";
    default:
        return "unknown";
    }
}

/* "f32, bf16" -> ["f32", "bf16"]: machines should not split strings. */
static json_t *scheme_list(const char *schemes)
{
    json_t *a = json_array();
    const char *p = schemes ? schemes : "";
    while (a && *p) {
        size_t n = strcspn(p, ",");
        size_t lead = strspn(p, " ");
        size_t len = n > lead ? n - lead : 0;
        while (len && p[lead + len - 1] == ' ')
            len--;
        if (len)
            json_array_append_new(a, json_stringn(p + lead, len));
        p += n + (p[n] == ',');
    }
    return a;
}

static json_t *options_json(const fmoe_context *ctx, uint32_t plugin)
{
    json_t *a = json_array();
    for (uint32_t k = 0; a && k < fmoe_context_plugin_option_count(ctx, plugin); k++) {
        fmoe_plugin_option_info o = {.struct_size = sizeof o};
        if (fmoe_context_plugin_option(ctx, plugin, k, &o) != FMOE_STATUS_OK)
            continue;
        json_t *j = json_object();
        cli_json_set(j, "name", cli_json_string(o.name));
        cli_json_set(j, "value", cli_json_string(o.value));
        cli_json_set(j, "source", cli_json_string(o.source));
        cli_json_set(j, "type", o.type[0] ? cli_json_string(o.type) : json_null());
        cli_json_set(j, "domain", o.domain[0] ? cli_json_string(o.domain) : json_null());
        cli_json_set(j, "default", o.type[0] ? cli_json_string(o.default_value) : json_null());
        cli_json_set(j, "help", o.help[0] ? cli_json_string(o.help) : json_null());
        json_array_append_new(a, j);
    }
    return a;
}

static json_t *plugin_json(const fmoe_context *ctx, uint32_t index, const fmoe_plugin_info *p)
{
    json_t *o = json_object();
    char abi[32];
    snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
    cli_json_set(o, "name", cli_json_string(p->name));
    cli_json_set(o, "version", cli_json_string(p->version));
    cli_json_set(o, "vendor", cli_json_string(p->vendor));
    cli_json_set(o, "abi", json_string(abi));
    cli_json_set(o, "abi_major", json_integer(p->abi_major));
    cli_json_set(o, "abi_minor", json_integer(p->abi_minor));
    cli_json_set(o, "state", json_string(state_name(p->state)));
    cli_json_set(o, "path", cli_json_string(p->path));
    cli_json_set(o, "manifest", cli_json_string(p->manifest));
    cli_json_set(o, "schemes", scheme_list(p->schemes));
    cli_json_set(o, "reason", p->state == FMOE_PLUGIN_STATE_LOADED ? json_null() : cli_json_string(p->reason));
    cli_json_set(o, "options", options_json(ctx, index));
    return o;
}

static int print_json(const fmoe_context *ctx)
{
    json_t *root = json_object();
    json_t *list = json_array();
    const char *cfg = fmoe_context_config_path(ctx);
    cli_json_set(root, "config", cfg[0] ? cli_json_string(cfg) : json_null());
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        fmoe_plugin_info p = {.struct_size = sizeof p};
        fmoe_status st = fmoe_context_plugin(ctx, i, &p);
        if (st != FMOE_STATUS_OK) {
            json_decref(root);
            json_decref(list);
            return cli_fail(st, "reading the plugin list");
        }
        json_array_append_new(list, plugin_json(ctx, i, &p));
    }
    cli_json_set(root, "plugins", list);
    return cli_json_print(root);
}

/* One note per option: "option isa = avx2 (config) enum auto|avx2, default auto: meaning". */
static int option_notes(cli_table *t, const fmoe_context *ctx, uint32_t plugin)
{
    int bad = 0;
    uint32_t n = fmoe_context_plugin_option_count(ctx, plugin);
    if (n == 0)
        return table_note(t, "options:  none declared") != 0;
    for (uint32_t k = 0; k < n && !bad; k++) {
        fmoe_plugin_option_info o = {.struct_size = sizeof o};
        if (fmoe_context_plugin_option(ctx, plugin, k, &o) != FMOE_STATUS_OK)
            return 1;
        if (o.type[0])
            bad |= table_note(t, "option   %s = %s (%s; %s %s, default %s): %s", o.name, o.value, o.source, o.type,
                              o.domain, o.default_value, o.help) != 0;
        else
            bad |= table_note(t, "option   %s = %s (%s; not declared: the plugin has no manifest)", o.name, o.value,
                              o.source) != 0;
    }
    return bad;
}

/* One note per device a loaded plugin reported, so a plugin that loads but
 * can run nowhere here says why ("no AMD GPU: ...") in the listing itself. */
static int device_notes(cli_table *t, const fmoe_context *ctx, const char *plugin)
{
    int bad = 0, any = 0;
    for (uint32_t i = 0; i < fmoe_context_device_count(ctx) && !bad; i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        if (fmoe_context_device(ctx, i, &d) != FMOE_STATUS_OK || strcmp(d.plugin, plugin) != 0)
            continue;
        any = 1;
        if (d.available)
            bad |= table_note(t, "device:   %s:%d %s (score %u)", fmoe_device_kind_name(d.kind), d.index, d.name,
                              d.score) != 0;
        else
            bad |= table_note(t, "device:   %s:%d unavailable: %s", fmoe_device_kind_name(d.kind), d.index,
                              d.reason && d.reason[0] ? d.reason : "(no reason given)") != 0;
    }
    if (!any && !bad)
        bad |= table_note(t, "device:   none reported") != 0;
    return bad;
}

static int print_table_opts(const fmoe_context *ctx, int verbose)
{
    static const char *const headers[] = {"NAME", "VERSION", "ABI", "STATE", "SCHEMES"};
    const char *cfg = fmoe_context_config_path(ctx);
    printf("config: %s\n", cfg[0] ? cfg : "(built-in defaults)");
    uint32_t n = fmoe_context_plugin_count(ctx);
    if (n == 0) {
        printf("no plugins found (see --plugin, $FMOE_PLUGIN_PATH and [search] in the config)\n");
        return CLI_EXIT_OK;
    }
    cli_table *t = table_new(5, headers);
    if (!t) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    int rc = CLI_EXIT_OK;
    for (uint32_t i = 0; i < n && rc == CLI_EXIT_OK; i++) {
        fmoe_plugin_info p = {.struct_size = sizeof p};
        fmoe_status st = fmoe_context_plugin(ctx, i, &p);
        if (st != FMOE_STATUS_OK) {
            rc = cli_fail(st, "reading the plugin list");
            break;
        }
        char abi[32];
        if (p.abi_major == 0)
            snprintf(abi, sizeof abi, "-"); /* never loaded: nothing declared */
        else
            snprintf(abi, sizeof abi, "%u.%u", p.abi_major, p.abi_minor);
        const char *cells[] = {p.name, p.version && p.version[0] ? p.version : "-", abi, state_name(p.state),
                               p.schemes && p.schemes[0] ? p.schemes : "-"};
        int bad = table_row(t, cells) != 0;
        bad |= table_note(t, "library:  %s", p.path && p.path[0] ? p.path : "-") != 0;
        bad |= table_note(t, "manifest: %s", p.manifest && p.manifest[0] ? p.manifest : "-") != 0;
        if (p.state != FMOE_PLUGIN_STATE_LOADED)
            bad |= table_note(t, "reason:   %s", p.reason && p.reason[0] ? p.reason : "(none given)") != 0;
        else
            bad |= device_notes(t, ctx, p.name);
        if (verbose)
            bad |= option_notes(t, ctx, i);
        if (bad) {
            cli_error("out of memory");
            rc = CLI_EXIT_INTERNAL;
        }
    }
    if (rc == CLI_EXIT_OK)
        table_print(t, stdout);
    table_free(t);
    return rc;
}

int cmd_plugins(const cli_globals *g, int argc, char **argv)
{
    int json = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--json"))
            json = 1;
        else if (cli_opt_flag(argv[i], "--verbose") || cli_opt_flag(argv[i], "-v"))
            verbose = 1;
        else
            return cli_usage("plugins", "unknown option '%s'", argv[i]);
    }
    fmoe_context *ctx = NULL;
    int rc = cli_open_context(g, &ctx);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = json ? print_json(ctx) : print_table_opts(ctx, verbose);
    fmoe_context_destroy(ctx);
    return rc;
}
