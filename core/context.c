/*
 * core/context.c - create a context: find and read the configuration,
 * apply environment overrides, build the plugin registry; and the read-only
 * views of plugins, devices and selections the CLI prints.
 */
#define _GNU_SOURCE /* secure_getenv, dladdr */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/glob.h"
#include "core/context.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"

/* Environment is read with secure_getenv: a setuid program never takes
 * plugin paths from its caller. */
static const char *env_get(const fmoe_context_options *o, const char *name)
{
    if (o->ignore_environment)
        return NULL;
    const char *v = secure_getenv(name);
    return v && *v ? v : NULL;
}

void fmoe_plugin_abi(uint32_t *major, uint32_t *minor)
{
    if (major)
        *major = FMOE_ABI_MAJOR;
    if (minor)
        *minor = FMOE_ABI_MINOR;
}

void fmoe_context_options_init(fmoe_context_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

static int file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

/* share/fusedmoe/fusedmoe.toml next to the libfusedmoe actually loaded
 * (lib/../share), then the configured install location. */
static char *default_config_path(void)
{
    Dl_info info;
    if (dladdr((void *)&fmoe_context_create, &info) && info.dli_fname) {
        char *copy = strdup(info.dli_fname);
        if (!copy)
            return NULL;
        char path[4096];
        snprintf(path, sizeof path, "%s/../share/fusedmoe/fusedmoe.toml", dirname(copy));
        free(copy);
        if (file_exists(path))
            return strdup(path);
    }
    const char *installed = FMOE_INSTALL_DATA_DIR "/fusedmoe.toml";
    return file_exists(installed) ? strdup(installed) : NULL;
}

static fmoe_status load_config(const fmoe_context_options *o, fmoe_config **out)
{
    const char *path = o->config_path ? o->config_path : env_get(o, "FMOE_CONFIG");
    if (path)
        return fmoe_config_load_file(path, out);
    char *def = o->isolated ? NULL : default_config_path();
    if (!def) {
        *out = fmoe_config_new_default();
        return *out ? FMOE_STATUS_OK : fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    fmoe_status st = fmoe_config_load_file(def, out);
    free(def);
    return st;
}

static fmoe_status setup_logging(fmoe_context *ctx, const fmoe_context_options *o)
{
    const fmoe_config *cfg = ctx->config;
    if (cfg->log_level && fmoe_logger_set_level(&ctx->logger, cfg->log_level) != 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: unknown [log] level '%s'", cfg->path, cfg->log_level);
    const char *spec = env_get(o, "FMOE_LOG");
    fmoe_status st;
    if (spec && (st = fmoe_logger_apply_spec(&ctx->logger, spec, "FMOE_LOG")) != FMOE_STATUS_OK)
        return st;
    if (FMOE_HAS_FIELD(o, log_spec) && o->log_spec &&
        (st = fmoe_logger_apply_spec(&ctx->logger, o->log_spec, "log_spec (--log)")) != FMOE_STATUS_OK)
        return st;
    if (cfg->dispatch_log)
        return fmoe_logger_open_dispatch(&ctx->logger, cfg->dispatch_log);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_context_create(const fmoe_context_options *opts, fmoe_context **out)
{
    fmoe_error_clear();
    if (!out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_context_create: out is NULL");
    *out = NULL;
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    if (opts) {
        if (opts->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_context_options, config_path))
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "fmoe_context_options.struct_size %zu is too small (call fmoe_context_options_init)",
                                  opts->struct_size);
        memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    }
    fmoe_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_logger_init(&ctx->logger, o.log_fn, o.log_user);
    pthread_mutex_init(&ctx->serial_apply, NULL);
    fmoe_status st = load_config(&o, &ctx->config);
    if (st == FMOE_STATUS_OK)
        st = setup_logging(ctx, &o);
    if (st == FMOE_STATUS_OK) {
        fmoe_env env = {
            .plugin_files = env_get(&o, "FMOE_PLUGIN_FILES"),
            .plugin_path = env_get(&o, "FMOE_PLUGIN_PATH"),
            .backends = env_get(&o, "FMOE_BACKENDS"),
            .options = env_get(&o, "FMOE_OPTIONS"),
            .api_options = FMOE_HAS_FIELD(&o, plugin_options) ? o.plugin_options : NULL,
            .no_default_dirs = o.isolated != 0,
        };
        fmoe_log(&ctx->logger, FMOE_LOG_INFO, "loader", "fusedmoe %s, plugin ABI %d.%d, configuration %s",
                 fmoe_version(), FMOE_ABI_MAJOR, FMOE_ABI_MINOR,
                 ctx->config->path[0] ? ctx->config->path : "(built-in defaults)");
        st = fmoe_registry_build(&ctx->registry, ctx->config, &env, o.plugin_files, o.n_plugin_files, &ctx->logger);
    }
    if (st != FMOE_STATUS_OK) {
        fmoe_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FMOE_STATUS_OK;
}

void fmoe_context_destroy(fmoe_context *ctx)
{
    if (!ctx)
        return;
    fmoe_registry_release(&ctx->registry);
    fmoe_config_free(ctx->config);
    fmoe_logger_close(&ctx->logger);
    pthread_mutex_destroy(&ctx->serial_apply);
    free(ctx);
}

const char *fmoe_context_config_path(const fmoe_context *ctx)
{
    return ctx && ctx->config ? ctx->config->path : "";
}

uint32_t fmoe_context_plugin_count(const fmoe_context *ctx)
{
    return ctx ? (uint32_t)ctx->registry.n_plugins : 0;
}

/* Out-structs are filled only up to the size the caller declared. */
#define FILL_UPTO(dst, src) memcpy((dst), &(src), (dst)->struct_size < sizeof(src) ? (dst)->struct_size : sizeof(src))

static fmoe_status check_out(const void *info, size_t struct_size, size_t min, const char *what)
{
    if (!info)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: info is NULL", what);
    if (struct_size < min)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: struct_size %zu too small (set it to sizeof)", what,
                              struct_size);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_context_plugin(const fmoe_context *ctx, uint32_t index, fmoe_plugin_info *info)
{
    fmoe_error_clear();
    fmoe_status st = check_out(info, info ? info->struct_size : 0, sizeof(size_t) + sizeof(char *),
                               "fmoe_context_plugin");
    if (st != FMOE_STATUS_OK)
        return st;
    if (!ctx || index >= ctx->registry.n_plugins)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_context_plugin: index %u out of range (%u plugins)",
                              index, fmoe_context_plugin_count(ctx));
    const fmoe_plugin_record *r = &ctx->registry.plugins[index];
    fmoe_plugin_info v = {
        .struct_size = info->struct_size,
        .name = r->name ? r->name : "",
        .version = r->version ? r->version : "",
        .vendor = r->vendor ? r->vendor : "",
        .path = r->library ? r->library : "",
        .manifest = r->manifest_path ? r->manifest_path : "",
        .abi_major = r->abi_major,
        .abi_minor = r->state == FMOE_PLUGIN_STATE_LOADED ? r->abi_minor : 0,
        .state = r->state,
        .reason = r->reason ? r->reason : "",
        .schemes = r->schemes ? r->schemes : "",
    };
    FILL_UPTO(info, v);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_context_plugin_tolerance(const fmoe_context *ctx, uint32_t index, const char *scheme_key,
                                          fmoe_plugin_tolerance *out)
{
    fmoe_error_clear();
    fmoe_status st = check_out(out, out ? out->struct_size : 0, sizeof(size_t) + sizeof(double),
                               "fmoe_context_plugin_tolerance");
    if (st != FMOE_STATUS_OK)
        return st;
    if (!ctx || index >= ctx->registry.n_plugins || !scheme_key)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_context_plugin_tolerance: index %u out of range (%u plugins), or no scheme key",
                              index, fmoe_context_plugin_count(ctx));
    const fmoe_plugin_record *r = &ctx->registry.plugins[index];
    for (size_t i = 0; i < r->n_tolerances; i++) {
        const fmoe_manifest_tolerance *t = &r->tolerances[i];
        if (fmoe_glob_find(t->schemes, t->n_schemes, scheme_key) < 0)
            continue;
        fmoe_plugin_tolerance v = {.struct_size = out->struct_size,
                                   .mismatch = t->mismatch,
                                   .schemes = t->joined,
                                   .reason = t->reason,
                                   .link = t->link};
        FILL_UPTO(out, v);
        return FMOE_STATUS_OK;
    }
    return fmoe_error_set(FMOE_STATUS_NOT_FOUND, "plugin '%s' declares no tolerance for %s", r->name ? r->name : "?",
                          scheme_key);
}

uint32_t fmoe_context_device_count(const fmoe_context *ctx)
{
    uint32_t n = 0;
    for (size_t i = 0; ctx && i < ctx->registry.n_plugins; i++)
        n += ctx->registry.plugins[i].n_devices;
    return n;
}

fmoe_status fmoe_context_device(const fmoe_context *ctx, uint32_t index, fmoe_device_info *info)
{
    fmoe_error_clear();
    fmoe_status st = check_out(info, info ? info->struct_size : 0, sizeof(size_t) + sizeof(char *),
                               "fmoe_context_device");
    if (st != FMOE_STATUS_OK)
        return st;
    uint32_t k = index;
    for (size_t i = 0; ctx && i < ctx->registry.n_plugins; i++) {
        const fmoe_plugin_record *r = &ctx->registry.plugins[i];
        if (k >= r->n_devices) {
            k -= r->n_devices;
            continue;
        }
        const fmoe_device_report *d = &r->devices[k];
        fmoe_device_info v = {
            .struct_size = info->struct_size,
            .plugin = r->name,
            .kind = d->kind,
            .index = d->index,
            .available = d->available,
            .score = d->score,
            .name = d->name,
            .arch = d->arch,
            .id = d->id,
            .driver = d->driver,
            .reason = d->reason,
            .memory_bytes = d->memory_bytes,
        };
        FILL_UPTO(info, v);
        return FMOE_STATUS_OK;
    }
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_context_device: index %u out of range (%u devices)",
                          index, fmoe_context_device_count(ctx));
}

fmoe_status fmoe_context_explain(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                                 fmoe_selection **out)
{
    fmoe_error_clear();
    if (!ctx || !scheme || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_context_explain: NULL argument");
    *out = NULL;
    fmoe_status st = fmoe_layer_config_validate(cfg);
    if (st != FMOE_STATUS_OK)
        return st;
    const fmoe_select_filter any = {.device_kind = FMOE_DEVICE_ANY, .device_index = -1, .backend = NULL};
    return fmoe_registry_select(&ctx->registry, cfg, scheme, &any, out);
}
