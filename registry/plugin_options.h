/*
 * registry/plugin_options.h - the options a plugin's init receives: its
 * manifest's declarations with their defaults, overridden by the user's
 * [plugins.<name>.options] and then by FMOE_OPTIONS (the one environment
 * override, which ignore_environment silences). The host refuses names the
 * manifest does not declare and values of the wrong type before init, so a
 * typo never reaches a plugin and is never dropped silently.
 */
#ifndef FMOE_REGISTRY_PLUGIN_OPTIONS_H
#define FMOE_REGISTRY_PLUGIN_OPTIONS_H

#include <stddef.h>

#include "fusedmoe/common.h"
#include "registry/config.h"
#include "registry/option_decl.h"

/* The most FMOE_OPTIONS entries read (the text is a few hundred bytes in
 * practice; this bounds the work a hostile environment can ask for). */
#define FMOE_ENV_OPTIONS_MAX 256

/* One FMOE_OPTIONS entry, "<plugin>.<option>=<value>". */
typedef struct fmoe_env_option {
    char *plugin, *key, *value;
    int used; /* a plugin of that name was found */
} fmoe_env_option;

/* One option as init receives it. */
typedef struct fmoe_option_setting {
    char *key;
    char *value;
    const char *source;           /* "default", "config", "environment" or "application" (static) */
    const fmoe_option_decl *decl; /* NULL for a plugin loaded without a manifest */
} fmoe_option_setting;

/* Parse comma-separated "<plugin>.<option>=<value>" entries; `origin` names
 * the text in errors ("FMOE_OPTIONS", "fmoe_context_options.plugin_options").
 * INVALID_ARGUMENT naming the entry when one is not of that shape. */
fmoe_status fmoe_env_options_parse(const char *text, const char *origin, fmoe_env_option **out, size_t *n);
void fmoe_env_options_free(fmoe_env_option *e, size_t n);

/* The settings of plugin `name` with declarations `decls` (has_manifest 0:
 * no declarations to check against; the user's options pass verbatim).
 * 0 on success; -1 with `why` naming the option and what was expected. */
int fmoe_options_resolve(const char *name, int has_manifest, const fmoe_option_decl *decls, size_t n_decls,
                         const fmoe_config *config, fmoe_env_option *env, size_t n_env, fmoe_env_option *api,
                         size_t n_api, fmoe_option_setting **out, size_t *n_out, char *why, size_t cap);
void fmoe_option_settings_free(fmoe_option_setting *s, size_t n);

#endif
