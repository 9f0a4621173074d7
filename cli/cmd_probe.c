/* cli/cmd_probe.c - `fusedmoe probe`: the devices every loaded plugin reported. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/table.h"

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] probe [--json]\n"
          "\n"
          "Lists every device each loaded plugin reported when it was probed: plugin,\n"
          "device (kind:index), whether the plugin can use it, its score, memory and name,\n"
          "then its architecture, stable id, driver and the plugin's reason or notes.\n"
          "\n"
          "Options:\n"
          "  --json   one JSON document instead of the table\n"
          "  --help   this help\n"
          "\n"
          "Exit codes: 0 listed; 2 usage; 3 configuration error; 5 internal error.\n",
          f);
}

static const char *or_dash(const char *s)
{
    return s && s[0] ? s : "-";
}

/* 17179869184 -> "16.0 GiB"; 0 means the plugin did not say. */
static void format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes == 0) {
        snprintf(buf, cap, "-");
        return;
    }
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static json_t *device_json(const fmoe_device_info *d)
{
    char dev[48];
    cli_device_string(d->kind, d->index, dev, sizeof dev);
    json_t *o = json_object();
    cli_json_set(o, "plugin", cli_json_string(d->plugin));
    cli_json_set(o, "device", json_string(dev));
    cli_json_set(o, "kind", json_string(fmoe_device_kind_name(d->kind)));
    cli_json_set(o, "index", json_integer(d->index));
    cli_json_set(o, "available", json_boolean(d->available));
    cli_json_set(o, "score", json_integer(d->score));
    cli_json_set(o, "name", cli_json_string(d->name));
    cli_json_set(o, "arch", cli_json_string(d->arch));
    cli_json_set(o, "id", cli_json_string(d->id));
    cli_json_set(o, "driver", cli_json_string(d->driver));
    cli_json_set(o, "memory_bytes", json_integer((json_int_t)d->memory_bytes));
    cli_json_set(o, "reason", cli_json_string(d->reason));
    return o;
}

static int print_json(const fmoe_context *ctx)
{
    json_t *root = json_object();
    json_t *list = json_array();
    for (uint32_t i = 0; i < fmoe_context_device_count(ctx); i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        fmoe_status st = fmoe_context_device(ctx, i, &d);
        if (st != FMOE_STATUS_OK) {
            json_decref(root);
            json_decref(list);
            return cli_fail(st, "reading the device list");
        }
        json_array_append_new(list, device_json(&d));
    }
    cli_json_set(root, "devices", list);
    return cli_json_print(root);
}

static int print_table(const fmoe_context *ctx)
{
    static const char *const headers[] = {"PLUGIN", "DEVICE", "AVAILABLE", "SCORE", "MEMORY", "NAME"};
    uint32_t n = fmoe_context_device_count(ctx);
    if (n == 0) {
        printf("no devices reported (is any plugin loaded? see 'fusedmoe plugins')\n");
        return CLI_EXIT_OK;
    }
    cli_table *t = table_new(6, headers);
    if (!t) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    int rc = CLI_EXIT_OK;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        fmoe_status st = fmoe_context_device(ctx, i, &d);
        if (st != FMOE_STATUS_OK) {
            rc = cli_fail(st, "reading the device list");
            break;
        }
        char dev[48], score[16], mem[32];
        cli_device_string(d.kind, d.index, dev, sizeof dev);
        snprintf(score, sizeof score, "%u", d.score);
        format_bytes(d.memory_bytes, mem, sizeof mem);
        const char *cells[] = {d.plugin, dev, d.available ? "yes" : "no", score, mem, or_dash(d.name)};
        int bad = table_row(t, cells) != 0;
        bad |= table_note(t, "arch: %s  id: %s  driver: %s", or_dash(d.arch), or_dash(d.id), or_dash(d.driver)) != 0;
        if (d.reason && d.reason[0])
            bad |= table_note(t, "%s: %s", d.available ? "note" : "reason", d.reason) != 0;
        if (bad) {
            cli_error("out of memory");
            rc = CLI_EXIT_INTERNAL;
            break;
        }
    }
    if (rc == CLI_EXIT_OK)
        table_print(t, stdout);
    table_free(t);
    return rc;
}

int cmd_probe(const cli_globals *g, int argc, char **argv)
{
    return cli_run_listing(g, argc, argv, "probe", help, print_table, print_json);
}
