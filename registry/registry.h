/*
 * registry/registry.h - the set of plugins a context knows: where each was
 * found, whether it loaded and why not, what devices it reported, and the
 * scheme globs it serves (the registry is keyed by canonical scheme key:
 * a plugin is a candidate for a layer when one of its globs matches).
 *
 * Discovery order (first plugin of a given name wins; later ones are kept
 * as SKIPPED "shadowed by ..."):
 *   1. explicit files: context options, FMOE_PLUGIN_FILES, [search] files
 *   2. FMOE_PLUGIN_PATH directories (absolute paths only)
 *   3. [search] paths of the TOML
 *   4. <directory of libfusedmoe>/fusedmoe/plugins
 *   5. the configured install directory
 * The current directory is never searched. Plugins are never unloaded.
 */
#ifndef FMOE_REGISTRY_REGISTRY_H
#define FMOE_REGISTRY_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"
#include "registry/config.h"
#include "registry/log.h"
#include "registry/manifest.h"
#include "registry/plugin_options.h"

struct fmoe_error {
    fmoe_status status;
    char text[1024];
};

typedef struct fmoe_plugin_record {
    char *name;
    char *version;
    char *vendor;
    char *library;       /* shared library path */
    char *manifest_path; /* "" when loaded without a manifest */
    char *schemes;       /* comma-separated globs, for display */
    char **scheme_globs; /* from the manifest; {"*"} without one */
    size_t n_scheme_globs;
    fmoe_manifest_tolerance *tolerances; /* the manifest's [[tolerance]] entries (owned) */
    size_t n_tolerances;
    fmoe_option_decl *option_decls; /* the manifest's [[option]] entries (owned) */
    size_t n_option_decls;
    fmoe_option_setting *options; /* what init received (or would have): plugin_options.h */
    size_t n_options;
    int initialized; /* init returned OK: shutdown is owed */
    int32_t state;   /* FMOE_PLUGIN_STATE_* */
    char *reason;    /* why not loaded; "" when loaded */
    uint32_t abi_major;
    uint32_t abi_minor;       /* negotiated */
    const fmoe_plugin *table; /* when loaded */
    void *plugin_state;       /* from init */
    fmoe_host host;           /* this plugin's host table (ctx = this record) */
    fmoe_logger *logger;
    fmoe_device_report *devices;
    uint32_t n_devices;
} fmoe_plugin_record;

typedef struct fmoe_env {
    const char *plugin_files; /* FMOE_PLUGIN_FILES */
    const char *plugin_path;  /* FMOE_PLUGIN_PATH */
    const char *backends;     /* FMOE_BACKENDS */
    const char *options;      /* FMOE_OPTIONS */
    const char *api_options;  /* fmoe_context_options.plugin_options (not the environment) */
    /* 1: search only the explicit files, FMOE_PLUGIN_* and the TOML's
     * [search]; never the directory of libfusedmoe or the install dir
     * (fmoe_context_options.isolated). */
    int no_default_dirs;
} fmoe_env;

typedef struct fmoe_registry {
    fmoe_plugin_record *plugins;
    size_t n_plugins, cap_plugins;
    fmoe_logger *logger;
    const fmoe_config *config;
    /* FMOE_BACKENDS parsed: plain globs select (in preference order), "-glob" disables. */
    char **env_select;
    size_t n_env_select;
    char **env_disable;
    size_t n_env_disable;
    char *env_backends; /* the raw value, for messages */
    fmoe_env_option *env_options;
    size_t n_env_options; /* FMOE_OPTIONS parsed */
    fmoe_env_option *api_options;
    size_t n_api_options; /* the application's plugin_options parsed */
} fmoe_registry;

/* Discover, filter, load, negotiate, init and probe every plugin. Only
 * OUT_OF_MEMORY and a malformed FMOE_OPTIONS fail; each plugin's own
 * failure is recorded in its record. */
fmoe_status fmoe_registry_build(fmoe_registry *reg, const fmoe_config *config, const fmoe_env *env,
                                const char *const *explicit_files, uint32_t n_explicit, fmoe_logger *logger);
void fmoe_registry_release(fmoe_registry *reg);

/* Loading one record whose library/manifest fields are set (loader.c), in
 * two steps so a bare library can be admitted by the name its table gives:
 * open = dlopen + entry + table checks + negotiation (1 on success);
 * start = init with the user's options + probe. Both record failures in
 * the record (state FAILED, reason) and never fail the caller. */
int fmoe_plugin_record_open(fmoe_plugin_record *rec);
void fmoe_plugin_record_start(fmoe_plugin_record *rec, const fmoe_registry *reg);

/* Set a record's state and its reason (printf format). */
void fmoe_plugin_record_set_state(fmoe_plugin_record *rec, int32_t state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Host services handed to plugins (host.c). */
void fmoe_host_table_init(fmoe_host *host, fmoe_plugin_record *rec);
void fmoe_plugin_error_reset(struct fmoe_error *err);
/* The plugin's error text, or `fallback` if it set none. */
const char *fmoe_plugin_error_text(const struct fmoe_error *err, const char *fallback);

/* A (plugin, device) candidate the registry considered, with its verdict. */
typedef struct fmoe_candidate_rec {
    const fmoe_plugin_record *plugin;
    const fmoe_method *method;
    int32_t device_kind, device_index;
    int32_t verdict;
    uint32_t score;
    int32_t preference;
    char reason[512];
} fmoe_candidate_rec;

struct fmoe_selection {
    char scheme_key[FMOE_SCHEME_KEY_MAX];
    fmoe_candidate_rec *candidates;
    uint32_t n_candidates;
    int32_t chosen;
    char summary[4096];
};

/* Select a method for (cfg, scheme) on the allowed devices. Returns OK with
 * *out->chosen >= 0, or UNSUPPORTED (error text lists every candidate's
 * reason) with the report still in *out. Other statuses: no report. */
typedef struct fmoe_select_filter {
    int32_t device_kind;  /* FMOE_DEVICE_ANY for any */
    int32_t device_index; /* -1 for any */
    const char *backend;  /* plugin-name glob, NULL for any */
    void *ep_group;       /* the plugin's EP group the layer binds to (query_args.ep_group), or NULL */
} fmoe_select_filter;

fmoe_status fmoe_registry_select(const fmoe_registry *reg, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                                 const fmoe_select_filter *filter, fmoe_selection **out);

#endif
