/*
 * registry/loader.c - load one plugin: dlopen, find the entry symbol,
 * negotiate the ABI, check the table, init with the user's options, probe.
 * Every failure is recorded in the plugin's record (state FAILED + reason);
 * nothing here can stop the other plugins from loading.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/text_file.h"
#include "registry/registry.h"

/* The most devices one plugin may report. */
#define FMOE_MAX_DEVICES_PER_PLUGIN 64

/* The plugin table must reach at least `query` (ABI 1.0's last mandatory slot). */
#define FMOE_PLUGIN_TABLE_MIN_SIZE FMOE_STRUCT_SIZE_UPTO(fmoe_plugin, query)

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

void fmoe_plugin_record_set_state(fmoe_plugin_record *rec, int32_t state, const char *fmt, ...)
{
    char text[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    free(rec->reason);
    rec->reason = strdup(text);
    rec->state = state;
}

static void fail(fmoe_plugin_record *rec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(fmoe_plugin_record *rec, const char *fmt, ...)
{
    char text[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_FAILED, "%s", text);
    fmoe_log(rec->logger, FMOE_LOG_WARN, "loader", "plugin '%s' (%s) skipped: %s", rec->name, rec->library, text);
}

static const char *status_text(fmoe_status st)
{
    return fmoe_status_name(st);
}

/* Check the table the entry returned before calling anything in it. */
static int check_table(fmoe_plugin_record *rec, const fmoe_plugin *t)
{
    if (!t) {
        fail(rec, "entry returned OK but no plugin table");
        return 0;
    }
    if (t->struct_size < FMOE_PLUGIN_TABLE_MIN_SIZE) {
        fail(rec,
             "plugin table struct_size %zu is smaller than the ABI %d.0 minimum %zu (corrupt or not a fusedmoe plugin)",
             t->struct_size, FMOE_ABI_MAJOR, (size_t)FMOE_PLUGIN_TABLE_MIN_SIZE);
        return 0;
    }
    if (t->abi_major != FMOE_ABI_MAJOR) {
        fail(rec, "plugin ABI %u.%u, host ABI %d.%d: the major version must match", t->abi_major, t->abi_minor,
             FMOE_ABI_MAJOR, FMOE_ABI_MINOR);
        return 0;
    }
    if (!t->name || !t->probe || !t->query) {
        fail(rec, "plugin table lacks a mandatory field (%s)", !t->name ? "name" : !t->probe ? "probe" : "query");
        return 0;
    }
    if (rec->manifest_path[0] && strcmp(t->name, rec->name) != 0) {
        fail(rec, "library reports name '%s' but its manifest %s says '%s'", t->name, rec->manifest_path, rec->name);
        return 0;
    }
    return 1;
}

static uint32_t negotiate_minor(const fmoe_plugin *t)
{
    const uint32_t host_minor = FMOE_ABI_MINOR;
    return t->abi_minor < host_minor ? t->abi_minor : host_minor;
}

/* The options init receives (plugin_options.h): resolved and checked
 * against the manifest first, so a typo fails here naming the option. */
static int run_init(fmoe_plugin_record *rec, const fmoe_registry *reg)
{
    const fmoe_plugin *t = rec->table;
    char why[1024];
    if (fmoe_options_resolve(rec->name, rec->manifest_path[0] != '\0', rec->option_decls, rec->n_option_decls,
                             reg->config, reg->env_options, reg->n_env_options, reg->api_options, reg->n_api_options,
                             &rec->options, &rec->n_options, why, sizeof why) != 0) {
        fail(rec, "%s", why);
        return 0;
    }
    if (!FMOE_HAS_FIELD(t, init) || !t->init) {
        for (size_t i = 0; i < rec->n_options; i++)
            if (strcmp(rec->options[i].source, "default") != 0) {
                fail(rec, "option '%s' is set (%s) but the plugin has no init to receive options", rec->options[i].key,
                     rec->options[i].source);
                return 0;
            }
        return 1;
    }
    size_t n = rec->n_options;
    fmoe_option *opts = calloc(n ? n : 1, sizeof *opts);
    const fmoe_option **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    if (!opts || !ptrs) {
        free(opts);
        free(ptrs);
        fail(rec, "out of memory preparing init options");
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        opts[i].struct_size = sizeof opts[i];
        opts[i].key = rec->options[i].key;
        opts[i].value = rec->options[i].value;
        ptrs[i] = &opts[i];
    }
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_init_args args = {.struct_size = sizeof args,
                           .err = &err,
                           .host = &rec->host,
                           .abi_minor = rec->abi_minor,
                           .options = ptrs,
                           .n_options = (uint32_t)n};
    fmoe_status st = t->init(&args);
    free(opts);
    free(ptrs);
    if (st != FMOE_STATUS_OK) {
        fail(rec, "init failed (%s): %s", status_text(st), fmoe_plugin_error_text(&err, "no message"));
        return 0;
    }
    rec->plugin_state = args.state;
    rec->initialized = 1;
    return 1;
}

static void terminate_strings(fmoe_device_report *r)
{
    r->name[sizeof r->name - 1] = '\0';
    r->arch[sizeof r->arch - 1] = '\0';
    r->id[sizeof r->id - 1] = '\0';
    r->driver[sizeof r->driver - 1] = '\0';
    r->reason[sizeof r->reason - 1] = '\0';
}

static int run_probe(fmoe_plugin_record *rec)
{
    fmoe_device_report *reports = calloc(FMOE_MAX_DEVICES_PER_PLUGIN, sizeof *reports);
    fmoe_device_report **ptrs = calloc(FMOE_MAX_DEVICES_PER_PLUGIN, sizeof *ptrs);
    if (!reports || !ptrs) {
        free(reports);
        free(ptrs);
        fail(rec, "out of memory preparing the probe");
        return 0;
    }
    for (int i = 0; i < FMOE_MAX_DEVICES_PER_PLUGIN; i++) {
        reports[i].struct_size = sizeof reports[i];
        ptrs[i] = &reports[i];
    }
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_probe_args args = {.struct_size = sizeof args,
                            .err = &err,
                            .state = rec->plugin_state,
                            .reports = ptrs,
                            .capacity = FMOE_MAX_DEVICES_PER_PLUGIN};
    fmoe_status st = rec->table->probe(&args);
    free(ptrs);
    if (st != FMOE_STATUS_OK) {
        free(reports);
        fail(rec, "probe failed (%s): %s", status_text(st), fmoe_plugin_error_text(&err, "no message"));
        return 0;
    }
    if (args.count > FMOE_MAX_DEVICES_PER_PLUGIN) {
        free(reports);
        fail(rec, "probe reported %u devices, more than the %d slots it was given", args.count,
             FMOE_MAX_DEVICES_PER_PLUGIN);
        return 0;
    }
    for (uint32_t i = 0; i < args.count; i++) {
        terminate_strings(&reports[i]);
        int32_t kind = reports[i].kind;
        if (kind < FMOE_DEVICE_CPU || kind > FMOE_DEVICE_ROCM) {
            free(reports);
            fail(rec, "probe reported device %u with unknown kind %d", i, kind);
            return 0;
        }
        if (!reports[i].available)
            reports[i].score = 0;
    }
    rec->devices = reports;
    rec->n_devices = args.count;
    return 1;
}

int fmoe_plugin_record_open(fmoe_plugin_record *rec)
{
    /* dlopen opens the path without a type check: a FIFO would block it
     * for good and a device be read. (A bare name is searched for by the
     * dynamic loader, which skips such entries.) */
    if (strchr(rec->library, '/') && fmoe_check_not_special(rec->library, "plugin library") != FMOE_STATUS_OK) {
        fail(rec, "%s", fmoe_error_text());
        return 0;
    }
    dlerror();
    void *handle = dlopen(rec->library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        fail(rec, "dlopen failed: %s", why ? why : "unknown error");
        return 0;
    }
    /* Never dlclose'd, even on failure: a plugin's static destructors or
     * vendor libraries may not survive unloading (docs/PLUGIN-ABI.md). */
    fmoe_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, FMOE_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        fail(rec, "no symbol '%s' in %s: not a fusedmoe plugin, or it was built without exporting the entry",
             FMOE_PLUGIN_ENTRY_SYMBOL, rec->library);
        return 0;
    }
    fmoe_host_table_init(&rec->host, rec);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_entry_args args = {.struct_size = sizeof args, .host = &rec->host, .err = &err};
    fmoe_status st = entry(&args);
    if (st != FMOE_STATUS_OK) {
        fail(rec, "entry refused (%s): %s", status_text(st), fmoe_plugin_error_text(&err, "no message"));
        return 0;
    }
    if (!check_table(rec, args.plugin))
        return 0;
    const fmoe_plugin *t = args.plugin;
    rec->table = t;
    rec->abi_major = t->abi_major;
    rec->abi_minor = negotiate_minor(t);
#if FMOE_ABI_MINOR_MIN > 0
    if (rec->abi_minor < FMOE_ABI_MINOR_MIN) {
        fail(rec, "plugin ABI %u.%u is older than the oldest this host accepts (%d.%d)", t->abi_major, t->abi_minor,
             FMOE_ABI_MAJOR, FMOE_ABI_MINOR_MIN);
        return 0;
    }
#endif
    if (!rec->manifest_path[0]) {
        /* Loaded as a bare library: the table is the only source of identity. */
        free(rec->name);
        rec->name = strdup(t->name);
    }
    free(rec->version);
    free(rec->vendor);
    rec->version = dup_or_empty(t->version);
    rec->vendor = dup_or_empty(t->vendor);
    if (!rec->name || !rec->version || !rec->vendor) {
        fail(rec, "out of memory");
        return 0;
    }
    fmoe_log(rec->logger, FMOE_LOG_INFO, "loader",
             "plugin '%s' %s (%s) from %s: built for ABI %u.%u, host ABI %d.%d, negotiated %u.%u", rec->name,
             rec->version, t->build_id ? t->build_id : "", rec->library, t->abi_major, t->abi_minor, FMOE_ABI_MAJOR,
             FMOE_ABI_MINOR, rec->abi_major, rec->abi_minor);
    return 1;
}

void fmoe_plugin_record_start(fmoe_plugin_record *rec, const fmoe_registry *reg)
{
    if (!run_init(rec, reg) || !run_probe(rec))
        return;
    rec->state = FMOE_PLUGIN_STATE_LOADED;
    free(rec->reason);
    rec->reason = strdup("");
}
