/*
 * registry/discovery.c - find plugins (explicit files, then directories of
 * manifests, in the order of registry.h), decide from the manifest and the
 * configuration whether each may be loaded, and load the rest.
 */
#define _GNU_SOURCE /* dladdr, secure_getenv */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "base/error.h"
#include "base/glob.h"
#include "registry/manifest.h"
#include "registry/registry.h"

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static fmoe_plugin_record *add_record(fmoe_registry *reg)
{
    if (reg->n_plugins == reg->cap_plugins) {
        size_t cap = reg->cap_plugins ? reg->cap_plugins * 2 : 8;
        fmoe_plugin_record *p = realloc(reg->plugins, cap * sizeof *p);
        if (!p)
            return NULL;
        reg->plugins = p;
        reg->cap_plugins = cap;
    }
    fmoe_plugin_record *rec = &reg->plugins[reg->n_plugins++];
    memset(rec, 0, sizeof *rec);
    rec->logger = reg->logger;
    /* Only a completed load makes a record LOADED. */
    rec->state = FMOE_PLUGIN_STATE_FAILED;
    return rec;
}

static const fmoe_plugin_record *find_loaded_name(const fmoe_registry *reg, const char *name, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        const fmoe_plugin_record *r = &reg->plugins[i];
        if (r->name && strcmp(r->name, name) == 0 && r->state != FMOE_PLUGIN_STATE_SKIPPED)
            return r;
    }
    return NULL;
}

/* Any record of that name, whatever its state. */
static int has_record_named(const fmoe_registry *reg, const char *name)
{
    for (size_t i = 0; i < reg->n_plugins; i++)
        if (reg->plugins[i].name && strcmp(reg->plugins[i].name, name) == 0)
            return 1;
    return 0;
}

/* Fill identity fields from a manifest; the record then knows what it
 * serves without the library being loaded. */
static int record_from_manifest(fmoe_plugin_record *rec, const fmoe_manifest *m)
{
    rec->name = strdup(m->name);
    rec->version = strdup(m->version);
    rec->vendor = strdup(m->vendor);
    rec->library = strdup(m->library);
    rec->manifest_path = strdup(m->path);
    rec->schemes = fmoe_join_list(m->schemes, m->n_schemes);
    rec->scheme_globs = calloc(m->n_schemes, sizeof *rec->scheme_globs);
    rec->abi_major = m->abi_major;
    if (!rec->name || !rec->version || !rec->vendor || !rec->library || !rec->manifest_path || !rec->schemes ||
        !rec->scheme_globs)
        return 0;
    for (size_t i = 0; i < m->n_schemes; i++) {
        rec->scheme_globs[i] = strdup(m->schemes[i]);
        if (!rec->scheme_globs[i])
            return 0;
        rec->n_scheme_globs++;
    }
    return 1;
}

/* A bare library: serves whatever its query accepts ("*"). */
static int record_from_library(fmoe_plugin_record *rec, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return 0;
    rec->name = strdup(basename(copy));
    free(copy);
    rec->version = strdup("");
    rec->vendor = strdup("");
    rec->library = strdup(path);
    rec->manifest_path = strdup("");
    rec->schemes = strdup("*");
    rec->scheme_globs = calloc(1, sizeof *rec->scheme_globs);
    if (!rec->name || !rec->version || !rec->vendor || !rec->library || !rec->manifest_path || !rec->schemes ||
        !rec->scheme_globs)
        return 0;
    rec->scheme_globs[0] = strdup("*");
    if (!rec->scheme_globs[0])
        return 0;
    rec->n_scheme_globs = 1;
    return 1;
}

/* Why configuration or environment keeps this plugin from loading, or NULL. */
static const char *disabled_reason(const fmoe_registry *reg, const char *name, char *buf, size_t cap)
{
    const fmoe_config *cfg = reg->config;
    int i = fmoe_glob_find(reg->env_disable, reg->n_env_disable, name);
    if (i >= 0) {
        snprintf(buf, cap, "disabled by FMOE_BACKENDS=%s (-%s)", reg->env_backends, reg->env_disable[i]);
        return buf;
    }
    if (reg->n_env_select && fmoe_glob_find(reg->env_select, reg->n_env_select, name) < 0) {
        snprintf(buf, cap, "not selected by FMOE_BACKENDS=%s", reg->env_backends);
        return buf;
    }
    if (!cfg)
        return NULL;
    i = fmoe_glob_find(cfg->disable, cfg->n_disable, name);
    if (i >= 0) {
        snprintf(buf, cap, "disabled by %s: [select] disable = \"%s\"", cfg->path[0] ? cfg->path : "config",
                 cfg->disable[i]);
        return buf;
    }
    const fmoe_config_plugin *pc = fmoe_config_find_plugin(cfg, name);
    if (pc && pc->enabled == 0) {
        snprintf(buf, cap, "disabled by %s: [plugins.%s] enabled = false", cfg->path[0] ? cfg->path : "config", name);
        return buf;
    }
    return NULL;
}

/* Shadowed or disabled: 1 if the record must not be (further) loaded. */
static int excluded(fmoe_registry *reg, fmoe_plugin_record *rec)
{
    size_t self = (size_t)(rec - reg->plugins);
    const fmoe_plugin_record *first = find_loaded_name(reg, rec->name, self);
    if (first) {
        fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_SKIPPED,
                                     "shadowed by %s, found earlier in the search order",
                                     first->manifest_path[0] ? first->manifest_path : first->library);
        fmoe_log(reg->logger, FMOE_LOG_INFO, "loader", "plugin '%s' at %s: %s", rec->name, rec->library, rec->reason);
        return 1;
    }
    char why[1024];
    if (disabled_reason(reg, rec->name, why, sizeof why)) {
        fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_DISABLED, "%s", why);
        fmoe_log(reg->logger, FMOE_LOG_INFO, "loader", "plugin '%s': %s", rec->name, why);
        return 1;
    }
    return 0;
}

/* A manifest rules a plugin in or out before anything is loaded. */
static void admit_manifest(fmoe_registry *reg, fmoe_plugin_record *rec, const fmoe_manifest *m)
{
    if (excluded(reg, rec))
        return;
    struct utsname u;
    const char *machine = uname(&u) == 0 ? u.machine : "unknown";
    if (!fmoe_manifest_matches_arch(m, machine)) {
        char *arches = fmoe_join_list(m->arch, m->n_arch);
        fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_SKIPPED, "built for %s, this machine is %s",
                                     arches ? arches : "?", machine);
        free(arches);
        fmoe_log(reg->logger, FMOE_LOG_INFO, "loader", "plugin '%s': %s", rec->name, rec->reason);
        return;
    }
    if (m->abi_major != FMOE_ABI_MAJOR) {
        fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_SKIPPED,
                                     "manifest declares ABI %u.%u, host ABI %d.%d: the major version must match",
                                     m->abi_major, m->abi_minor, FMOE_ABI_MAJOR, FMOE_ABI_MINOR);
        fmoe_log(reg->logger, FMOE_LOG_WARN, "loader", "plugin '%s': %s", rec->name, rec->reason);
        return;
    }
    if (fmoe_plugin_record_open(rec))
        fmoe_plugin_record_start(rec, reg);
}

/* A bare library names itself only through its table, so it is opened
 * (entry is side-effect free) before the name rules apply. */
static void admit_library(fmoe_registry *reg, fmoe_plugin_record *rec)
{
    if (!fmoe_plugin_record_open(rec) || excluded(reg, rec))
        return;
    fmoe_plugin_record_start(rec, reg);
}

static int add_manifest(fmoe_registry *reg, const char *path)
{
    fmoe_manifest *m = NULL;
    fmoe_status st = fmoe_manifest_load(path, &m);
    if (st == FMOE_STATUS_OUT_OF_MEMORY)
        return 0;
    fmoe_plugin_record *rec = add_record(reg);
    if (!rec) {
        fmoe_manifest_free(m);
        return 0;
    }
    if (st != FMOE_STATUS_OK) {
        /* Unreadable manifest: keep a record so `fusedmoe plugins` shows it. */
        char *copy = strdup(path);
        rec->name = copy ? strdup(basename(copy)) : NULL;
        free(copy);
        rec->library = strdup("");
        rec->manifest_path = strdup(path);
        rec->version = strdup("");
        rec->vendor = strdup("");
        rec->schemes = strdup("");
        if (!rec->name || !rec->library || !rec->manifest_path || !rec->version || !rec->vendor || !rec->schemes)
            return 0;
        fmoe_plugin_record_set_state(rec, FMOE_PLUGIN_STATE_FAILED, "bad manifest: %s", fmoe_error_text());
        fmoe_log(reg->logger, FMOE_LOG_WARN, "loader", "%s", rec->reason);
        return 1;
    }
    int ok = record_from_manifest(rec, m);
    /* The tolerances move to the record (conform reads them through
     * fmoe_context_plugin_tolerance). */
    rec->tolerances = m->tolerances;
    rec->n_tolerances = m->n_tolerances;
    m->tolerances = NULL;
    m->n_tolerances = 0;
    rec->option_decls = m->options;
    rec->n_option_decls = m->n_options;
    m->options = NULL;
    m->n_options = 0;
    if (ok)
        admit_manifest(reg, rec, m);
    fmoe_manifest_free(m);
    return ok;
}

static int add_explicit(fmoe_registry *reg, const char *path)
{
    if (has_suffix(path, ".toml"))
        return add_manifest(reg, path);
    fmoe_plugin_record *rec = add_record(reg);
    if (!rec || !record_from_library(rec, path))
        return 0;
    admit_library(reg, rec);
    return 1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.toml in `dir`, in name order so discovery is deterministic. */
static int scan_dir(fmoe_registry *reg, const char *dir, const char *origin)
{
    DIR *d = opendir(dir);
    if (!d) {
        fmoe_log(reg->logger, FMOE_LOG_DEBUG, "loader", "plugin directory %s (%s) not searched: %s", dir, origin,
                 strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int ok = 1;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".toml"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                ok = 0;
                break;
            }
            names = p;
        }
        names[n] = strdup(e->d_name);
        ok = names[n++] != NULL;
    }
    closedir(d);
    if (ok) {
        qsort(names, n, sizeof *names, cmp_names);
        fmoe_log(reg->logger, FMOE_LOG_DEBUG, "loader", "searching %s (%s): %zu manifest(s)", dir, origin, n);
    }
    for (size_t i = 0; i < n && ok; i++) {
        char *path = join_path(dir, names[i]);
        ok = path && add_manifest(reg, path);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ok;
}

/* Directory of the libfusedmoe actually loaded + "/fusedmoe/plugins", so a
 * relocated install (a wheel, a bundle) finds its own plugins. */
static char *library_relative_dir(void)
{
    Dl_info info;
    if (!dladdr((void *)&fmoe_registry_build, &info) || !info.dli_fname)
        return NULL;
    char *copy = strdup(info.dli_fname);
    if (!copy)
        return NULL;
    char *dir = join_path(dirname(copy), FMOE_PLUGIN_SUBDIR);
    free(copy);
    return dir;
}

static int scan_env_dirs(fmoe_registry *reg, const char *value)
{
    size_t n = 0;
    char **dirs = fmoe_split_list(value, ':', &n);
    if (!dirs)
        return 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        if (dirs[i][0] != '/') {
            /* A relative entry would search relative to the current
             * directory, which is never searched. */
            fmoe_log(reg->logger, FMOE_LOG_WARN, "loader",
                     "FMOE_PLUGIN_PATH entry '%s' ignored: only absolute directories are searched", dirs[i]);
            continue;
        }
        ok = scan_dir(reg, dirs[i], "FMOE_PLUGIN_PATH");
    }
    free(dirs);
    return ok;
}

static int add_env_files(fmoe_registry *reg, const char *value)
{
    size_t n = 0;
    char **files = fmoe_split_list(value, ':', &n);
    if (!files)
        return 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = add_explicit(reg, files[i]);
    free(files);
    return ok;
}

static int parse_backends(fmoe_registry *reg, const char *value)
{
    size_t n = 0;
    char **items = fmoe_split_list(value, ',', &n);
    reg->env_backends = strdup(value);
    reg->env_select = calloc(n + 1, sizeof *reg->env_select);
    reg->env_disable = calloc(n + 1, sizeof *reg->env_disable);
    if (!items || !reg->env_backends || !reg->env_select || !reg->env_disable) {
        free(items);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int neg = items[i][0] == '-' || items[i][0] == '!';
        char *glob = strdup(items[i] + neg);
        if (!glob) {
            free(items);
            return 0;
        }
        if (neg)
            reg->env_disable[reg->n_env_disable++] = glob;
        else
            reg->env_select[reg->n_env_select++] = glob;
    }
    free(items);
    return 1;
}

/* Options for a plugin that was never found would otherwise vanish: say so. */
static void warn_unclaimed_options(const fmoe_registry *reg)
{
    for (size_t i = 0; i < reg->n_env_options; i++)
        if (!has_record_named(reg, reg->env_options[i].plugin))
            fmoe_log(reg->logger, FMOE_LOG_WARN, "loader", "FMOE_OPTIONS sets %s.%s, but no plugin '%s' was found",
                     reg->env_options[i].plugin, reg->env_options[i].key, reg->env_options[i].plugin);
    for (size_t i = 0; i < reg->n_api_options; i++)
        if (!has_record_named(reg, reg->api_options[i].plugin))
            fmoe_log(reg->logger, FMOE_LOG_WARN, "loader",
                     "fmoe_context_options.plugin_options sets %s.%s, but no plugin '%s' was found",
                     reg->api_options[i].plugin, reg->api_options[i].key, reg->api_options[i].plugin);
    const fmoe_config *cfg = reg->config;
    for (size_t i = 0; cfg && i < cfg->n_plugins; i++)
        if (cfg->plugins[i].n_options && !has_record_named(reg, cfg->plugins[i].name))
            fmoe_log(reg->logger, FMOE_LOG_WARN, "loader", "%s sets [plugins.%s.options], but no plugin '%s' was found",
                     cfg->path[0] ? cfg->path : "config", cfg->plugins[i].name, cfg->plugins[i].name);
}

static fmoe_status discover(fmoe_registry *reg, const fmoe_env *env, const char *const *explicit_files,
                            uint32_t n_explicit)
{
    const fmoe_config *cfg = reg->config;
    for (uint32_t i = 0; i < n_explicit; i++)
        if (!add_explicit(reg, explicit_files[i]))
            return FMOE_STATUS_OUT_OF_MEMORY;
    if (env->plugin_files && !add_env_files(reg, env->plugin_files))
        return FMOE_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; cfg && i < cfg->n_plugin_files; i++)
        if (!add_explicit(reg, cfg->plugin_files[i]))
            return FMOE_STATUS_OUT_OF_MEMORY;
    if (env->plugin_path && !scan_env_dirs(reg, env->plugin_path))
        return FMOE_STATUS_OUT_OF_MEMORY;
    for (size_t i = 0; cfg && i < cfg->n_search_paths; i++)
        if (!scan_dir(reg, cfg->search_paths[i], cfg->path))
            return FMOE_STATUS_OUT_OF_MEMORY;
    if (env->no_default_dirs)
        return FMOE_STATUS_OK;
    char *libdir = library_relative_dir();
    int ok = 1;
    if (libdir)
        ok = scan_dir(reg, libdir, "beside libfusedmoe");
    /* Skip the install dir when it is the same directory as the one above. */
    char *a = libdir ? realpath(libdir, NULL) : NULL;
    char *b = realpath(FMOE_INSTALL_PLUGIN_DIR, NULL);
    if (ok && !(a && b && strcmp(a, b) == 0))
        ok = scan_dir(reg, FMOE_INSTALL_PLUGIN_DIR, "install directory");
    free(a);
    free(b);
    free(libdir);
    return ok ? FMOE_STATUS_OK : FMOE_STATUS_OUT_OF_MEMORY;
}

fmoe_status fmoe_registry_build(fmoe_registry *reg, const fmoe_config *config, const fmoe_env *env,
                                const char *const *explicit_files, uint32_t n_explicit, fmoe_logger *logger)
{
    memset(reg, 0, sizeof *reg);
    reg->logger = logger;
    reg->config = config;
    if (env->backends && !parse_backends(reg, env->backends))
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading FMOE_BACKENDS");
    if (env->options) {
        fmoe_status est = fmoe_env_options_parse(env->options, "FMOE_OPTIONS", &reg->env_options, &reg->n_env_options);
        if (est != FMOE_STATUS_OK)
            return est;
    }
    if (env->api_options) {
        fmoe_status est = fmoe_env_options_parse(env->api_options, "fmoe_context_options.plugin_options",
                                                 &reg->api_options, &reg->n_api_options);
        if (est != FMOE_STATUS_OK)
            return est;
    }
    fmoe_status st = discover(reg, env, explicit_files, n_explicit);
    if (st != FMOE_STATUS_OK)
        return fmoe_error_set(st, "out of memory while discovering plugins");
    warn_unclaimed_options(reg);
    size_t loaded = 0;
    for (size_t i = 0; i < reg->n_plugins; i++)
        loaded += reg->plugins[i].state == FMOE_PLUGIN_STATE_LOADED;
    fmoe_log(logger, loaded ? FMOE_LOG_INFO : FMOE_LOG_WARN, "loader", "%zu plugin(s) found, %zu loaded",
             reg->n_plugins, loaded);
    return FMOE_STATUS_OK;
}

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void fmoe_registry_release(fmoe_registry *reg)
{
    for (size_t i = 0; i < reg->n_plugins; i++) {
        fmoe_plugin_record *r = &reg->plugins[i];
        /* Libraries stay loaded (never dlclose); only our bookkeeping goes. */
        /* Every plugin whose init succeeded is shut down, loaded or not
         * (a probe may fail after init): init and shutdown pair up. */
        if (r->initialized && r->table && FMOE_HAS_FIELD(r->table, shutdown) && r->table->shutdown)
            r->table->shutdown(r->plugin_state);
        free(r->name);
        free(r->version);
        free(r->vendor);
        free(r->library);
        free(r->manifest_path);
        free(r->schemes);
        free_strings(r->scheme_globs, r->n_scheme_globs);
        fmoe_manifest_tolerances_free(r->tolerances, r->n_tolerances);
        fmoe_option_decls_free(r->option_decls, r->n_option_decls);
        fmoe_option_settings_free(r->options, r->n_options);
        free(r->reason);
        free(r->devices);
    }
    free(reg->plugins);
    free_strings(reg->env_select, reg->n_env_select);
    free_strings(reg->env_disable, reg->n_env_disable);
    free(reg->env_backends);
    fmoe_env_options_free(reg->env_options, reg->n_env_options);
    fmoe_env_options_free(reg->api_options, reg->n_api_options);
    memset(reg, 0, sizeof *reg);
}
