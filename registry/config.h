/*
 * registry/config.h - the user's TOML configuration (fusedmoe.toml), as a
 * plain C struct. docs/CONFIG.md is the reference for every key.
 *
 * Parsing is strict: an unknown key, a wrong type or a bad value is a
 * PARSE_ERROR whose text is "<file>:<line>:<column>: <what was wrong and
 * what was expected>" (set through base/error.h).
 */
#ifndef FMOE_REGISTRY_CONFIG_H
#define FMOE_REGISTRY_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

typedef struct fmoe_config_kv {
    char *key;
    char *value;
} fmoe_config_kv;

/* [plugins.<name>] */
typedef struct fmoe_config_plugin {
    char *name;
    int enabled;             /* -1 unset, 0 disabled, 1 enabled */
    fmoe_config_kv *options; /* [plugins.<name>.options]: values converted to strings */
    size_t n_options;
} fmoe_config_plugin;

/* [select.schemes]: scheme-key glob -> backend name */
typedef struct fmoe_config_scheme_choice {
    char *scheme_glob;
    char *backend;
} fmoe_config_scheme_choice;

typedef struct fmoe_config {
    char *path; /* file read; "" for built-in defaults */
    /* [search] */
    char **plugin_files;
    size_t n_plugin_files; /* files = [...] manifests or .so */
    char **search_paths;
    size_t n_search_paths; /* paths = [...] directories */
    /* [select] */
    char **prefer;
    size_t n_prefer; /* prefer = [...] name globs, best first */
    char **disable;
    size_t n_disable; /* disable = [...] name globs */
    int fallback;     /* fallback = true|false (default false) */
    fmoe_config_scheme_choice *schemes;
    size_t n_schemes;
    /* [plugins.<name>] */
    fmoe_config_plugin *plugins;
    size_t n_plugins;
    /* [log] */
    char *log_level;    /* "error"|"warn"|"info"|"debug" or NULL (unset) */
    char *dispatch_log; /* path of the JSONL dispatch log, or NULL */
} fmoe_config;

/* Relative paths in [search] are resolved against the directory of the
 * file they appear in. */
fmoe_status fmoe_config_load_file(const char *path, fmoe_config **out);
/* `source` names the text in error messages ("<string>" if NULL); relative
 * paths are resolved against the current directory. */
fmoe_status fmoe_config_load_string(const char *text, const char *source, fmoe_config **out);
/* Built-in defaults (no file): everything empty, fallback off. */
fmoe_config *fmoe_config_new_default(void);
void fmoe_config_free(fmoe_config *cfg);

/* Options of plugin `name` (NULL if the file has no [plugins.<name>]). */
const fmoe_config_plugin *fmoe_config_find_plugin(const fmoe_config *cfg, const char *name);

#endif
