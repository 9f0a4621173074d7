/*
 * registry/config.c - reads fusedmoe.toml into struct fmoe_config (see
 * config.h; docs/CONFIG.md documents every key).
 *
 * The reader is strict on purpose: a misspelt key that were silently
 * ignored would leave the user believing a backend is pinned or disabled
 * when it is not, so anything the schema does not name is an error that
 * points at the line and column of the offending key or value.
 */
#include "registry/config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"
#include "registry/toml_wrap.h"

/* What the section readers share. */
typedef struct config_reader {
    const fmoe_toml_doc *doc;
    fmoe_config *cfg;
} config_reader;

static const char *const root_keys[] = {"search", "select", "plugins", "log", NULL};
static const char *const search_keys[] = {"files", "paths", NULL};
static const char *const select_keys[] = {"prefer", "disable", "fallback", "schemes", NULL};
static const char *const plugin_keys[] = {"enabled", "options", NULL};
static const char *const log_keys[] = {"level", "dispatch", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

#define PLUGIN_NAME_RULE  "a plugin name of a-z, 0-9, '_' and '-'"
#define PLUGIN_NAME_CHARS "only a-z, 0-9, '_' and '-'"

/* Room for a table's dotted name in messages; a longer plugin name is cut
 * short in the message only. Buffers that wrap a dotted name are larger. */
#define DOTTED_MAX 256

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* Make every relative entry of `paths` absolute, in place. */
static fmoe_status resolve_paths(const config_reader *r, char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *abs = NULL;
        fmoe_status st = fmoe_toml_resolve_path(r->doc, paths[i], &abs);
        if (st != FMOE_STATUS_OK)
            return st;
        free(paths[i]);
        paths[i] = abs;
    }
    return FMOE_STATUS_OK;
}

/* ---- small typed readers -------------------------------------------------- */

/* `node` must be a table; `name` is its dotted name ("select.schemes"). */
static fmoe_status expect_table(const config_reader *r, const fmoe_toml_node *node, const char *name)
{
    char expected[DOTTED_MAX + 16];
    snprintf(expected, sizeof expected, "a table [%s]", name);
    return fmoe_toml_expect(r->doc, node, FMOE_TOML_TABLE, name, expected);
}

static fmoe_status read_bool(const config_reader *r, const fmoe_toml_node *node, const char *what, int *out)
{
    fmoe_status st = fmoe_toml_expect(r->doc, node, FMOE_TOML_BOOL, what, "true or false");
    if (st == FMOE_STATUS_OK)
        fmoe_toml_get_bool(node, out);
    return st;
}

/* A plugin name given as a string value (not as a table key). */
static fmoe_status read_plugin_name(const config_reader *r, const fmoe_toml_node *node, const char *what, char **out)
{
    fmoe_status st = fmoe_toml_copy_string(r->doc, node, what, PLUGIN_NAME_RULE, out);
    if (st != FMOE_STATUS_OK)
        return st;
    if (fmoe_is_plugin_name(*out))
        return FMOE_STATUS_OK;
    st = fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(node), "%s = \"%s\" is not a valid plugin name (expected %s)",
                            what, *out, PLUGIN_NAME_CHARS);
    free(*out);
    *out = NULL;
    return st;
}

/* ---- [search] ------------------------------------------------------------- */

static fmoe_status read_search(const config_reader *r, const fmoe_toml_node *t)
{
    fmoe_config *cfg = r->cfg;
    fmoe_status st = expect_table(r, t, "search");
    if (st == FMOE_STATUS_OK)
        st = fmoe_toml_check_keys(r->doc, t, "in [search]", search_keys);
    const fmoe_toml_node *v = fmoe_toml_get(t, "files");
    if (st == FMOE_STATUS_OK && v) {
        st = fmoe_toml_copy_string_array(r->doc, v, "[search] files", "an array of paths",
                                         "a path to a plugin manifest (.toml) or library (.so)", 0, &cfg->plugin_files,
                                         &cfg->n_plugin_files);
        if (st == FMOE_STATUS_OK)
            st = resolve_paths(r, cfg->plugin_files, cfg->n_plugin_files);
    }
    v = fmoe_toml_get(t, "paths");
    if (st == FMOE_STATUS_OK && v) {
        st = fmoe_toml_copy_string_array(r->doc, v, "[search] paths", "an array of directories", "a directory", 0,
                                         &cfg->search_paths, &cfg->n_search_paths);
        if (st == FMOE_STATUS_OK)
            st = resolve_paths(r, cfg->search_paths, cfg->n_search_paths);
    }
    return st;
}

/* ---- [select] ------------------------------------------------------------- */

static fmoe_status read_scheme_choice(const config_reader *r, const fmoe_toml_node *t, size_t i)
{
    fmoe_config_scheme_choice *c = &r->cfg->schemes[r->cfg->n_schemes];
    size_t len = 0;
    const char *glob = fmoe_toml_key(t, i, &len);
    if (len == 0 || strlen(glob) != len)
        return fmoe_toml_error_at(
            r->doc, fmoe_toml_key_pos(t, i),
            "[select.schemes] has an empty key (expected a scheme-key glob such as \"fp8e4m3:*\")");
    char what[256];
    snprintf(what, sizeof what, "[select.schemes] \"%s\"", glob);
    fmoe_status st = read_plugin_name(r, fmoe_toml_value(t, i), what, &c->backend);
    if (st != FMOE_STATUS_OK)
        return st;
    c->scheme_glob = strdup(glob);
    if (!c->scheme_glob) {
        free(c->backend);
        c->backend = NULL;
        return out_of_memory();
    }
    r->cfg->n_schemes++;
    return FMOE_STATUS_OK;
}

/* Kept in file order: the first glob that matches a scheme key decides. */
static fmoe_status read_schemes(const config_reader *r, const fmoe_toml_node *t)
{
    fmoe_status st = expect_table(r, t, "select.schemes");
    if (st != FMOE_STATUS_OK)
        return st;
    size_t n = fmoe_toml_size(t);
    if (n == 0)
        return FMOE_STATUS_OK;
    r->cfg->schemes = calloc(n, sizeof *r->cfg->schemes);
    if (!r->cfg->schemes)
        return out_of_memory();
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++)
        st = read_scheme_choice(r, t, i);
    return st;
}

static fmoe_status read_select(const config_reader *r, const fmoe_toml_node *t)
{
    fmoe_config *cfg = r->cfg;
    fmoe_status st = expect_table(r, t, "select");
    if (st == FMOE_STATUS_OK)
        st = fmoe_toml_check_keys(r->doc, t, "in [select]", select_keys);
    const fmoe_toml_node *v = fmoe_toml_get(t, "prefer");
    if (st == FMOE_STATUS_OK && v)
        st = fmoe_toml_copy_string_array(r->doc, v, "[select] prefer", "an array of plugin-name globs",
                                         "a plugin-name glob", 0, &cfg->prefer, &cfg->n_prefer);
    v = fmoe_toml_get(t, "disable");
    if (st == FMOE_STATUS_OK && v)
        st = fmoe_toml_copy_string_array(r->doc, v, "[select] disable", "an array of plugin-name globs",
                                         "a plugin-name glob", 0, &cfg->disable, &cfg->n_disable);
    v = fmoe_toml_get(t, "fallback");
    if (st == FMOE_STATUS_OK && v)
        st = read_bool(r, v, "[select] fallback", &cfg->fallback);
    v = fmoe_toml_get(t, "schemes");
    if (st == FMOE_STATUS_OK && v)
        st = read_schemes(r, v);
    return st;
}

/* ---- [plugins.<name>] ----------------------------------------------------- */

#define OPTION_VALUE_RULE "a string, integer, float or boolean"

/* Plugins receive options as strings (the ABI has no typed values), so
 * scalars are converted here, once, in a form that parses back exactly. */
static fmoe_status option_text(const config_reader *r, const fmoe_toml_node *v, const char *what, char **out)
{
    char buf[32];
    int64_t i = 0;
    double f = 0;
    int b = 0;
    switch (fmoe_toml_kind_of(v)) {
    case FMOE_TOML_STRING:
        return fmoe_toml_copy_string(r->doc, v, what, "a non-empty string", out);
    case FMOE_TOML_INTEGER:
        fmoe_toml_get_integer(v, &i);
        snprintf(buf, sizeof buf, "%" PRId64, i);
        break;
    case FMOE_TOML_FLOAT:
        fmoe_toml_get_float(v, &f);
        fmoe_toml_format_float(f, buf);
        break;
    case FMOE_TOML_BOOL:
        fmoe_toml_get_bool(v, &b);
        snprintf(buf, sizeof buf, "%s", b ? "true" : "false");
        break;
    default:
        return fmoe_toml_expect(r->doc, v, FMOE_TOML_STRING, what, OPTION_VALUE_RULE);
    }
    *out = strdup(buf);
    return *out ? FMOE_STATUS_OK : out_of_memory();
}

static fmoe_status read_option(const config_reader *r, const fmoe_toml_node *t, size_t i, fmoe_config_plugin *p)
{
    fmoe_config_kv *kv = &p->options[p->n_options];
    size_t len = 0;
    const char *key = fmoe_toml_key(t, i, &len);
    if (len == 0 || strlen(key) != len)
        return fmoe_toml_error_at(r->doc, fmoe_toml_key_pos(t, i),
                                  "[plugins.%s.options] has an empty key (expected an option name)", p->name);
    char what[256];
    snprintf(what, sizeof what, "[plugins.%s.options] %s", p->name, key);
    fmoe_status st = option_text(r, fmoe_toml_value(t, i), what, &kv->value);
    if (st != FMOE_STATUS_OK)
        return st;
    kv->key = strdup(key);
    if (!kv->key) {
        free(kv->value);
        kv->value = NULL;
        return out_of_memory();
    }
    p->n_options++;
    return FMOE_STATUS_OK;
}

static fmoe_status read_options(const config_reader *r, const fmoe_toml_node *t, fmoe_config_plugin *p)
{
    char name[DOTTED_MAX];
    snprintf(name, sizeof name, "plugins.%s.options", p->name);
    fmoe_status st = expect_table(r, t, name);
    if (st != FMOE_STATUS_OK)
        return st;
    size_t n = fmoe_toml_size(t);
    if (n == 0)
        return FMOE_STATUS_OK;
    p->options = calloc(n, sizeof *p->options);
    if (!p->options)
        return out_of_memory();
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++)
        st = read_option(r, t, i, p);
    return st;
}

/* Entry `i` of [plugins]: the key is the plugin's name. */
static fmoe_status read_plugin(const config_reader *r, const fmoe_toml_node *plugins, size_t i)
{
    size_t len = 0;
    const char *name = fmoe_toml_key(plugins, i, &len);
    if (!fmoe_is_plugin_name(name) || strlen(name) != len)
        return fmoe_toml_error_at(r->doc, fmoe_toml_key_pos(plugins, i),
                                  "plugin name '%s' in [plugins] is not valid (expected %s)", name, PLUGIN_NAME_CHARS);
    const fmoe_toml_node *t = fmoe_toml_value(plugins, i);
    char dotted[DOTTED_MAX];
    snprintf(dotted, sizeof dotted, "plugins.%s", name);
    fmoe_status st = expect_table(r, t, dotted);
    if (st != FMOE_STATUS_OK)
        return st;
    char where[DOTTED_MAX + 16];
    snprintf(where, sizeof where, "in [%s]", dotted);
    st = fmoe_toml_check_keys(r->doc, t, where, plugin_keys);
    if (st != FMOE_STATUS_OK)
        return st;

    fmoe_config_plugin *p = &r->cfg->plugins[r->cfg->n_plugins];
    p->enabled = -1;
    p->name = strdup(name);
    if (!p->name)
        return out_of_memory();
    /* Counted now so that fmoe_config_free() releases whatever follows. */
    r->cfg->n_plugins++;
    const fmoe_toml_node *v = fmoe_toml_get(t, "enabled");
    if (v) {
        char what[DOTTED_MAX + 16];
        snprintf(what, sizeof what, "[%s] enabled", dotted);
        st = read_bool(r, v, what, &p->enabled);
    }
    v = fmoe_toml_get(t, "options");
    if (st == FMOE_STATUS_OK && v)
        st = read_options(r, v, p);
    return st;
}

static fmoe_status read_plugins(const config_reader *r, const fmoe_toml_node *t)
{
    fmoe_status st = expect_table(r, t, "plugins");
    if (st != FMOE_STATUS_OK)
        return st;
    size_t n = fmoe_toml_size(t);
    if (n == 0)
        return FMOE_STATUS_OK;
    r->cfg->plugins = calloc(n, sizeof *r->cfg->plugins);
    if (!r->cfg->plugins)
        return out_of_memory();
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++)
        st = read_plugin(r, t, i);
    return st;
}

/* ---- [log] ---------------------------------------------------------------- */

static int is_log_level(const char *s)
{
    for (const char *const *l = log_levels; *l; l++)
        if (strcmp(s, *l) == 0)
            return 1;
    return 0;
}

static fmoe_status read_log(const config_reader *r, const fmoe_toml_node *t)
{
    fmoe_config *cfg = r->cfg;
    fmoe_status st = expect_table(r, t, "log");
    if (st == FMOE_STATUS_OK)
        st = fmoe_toml_check_keys(r->doc, t, "in [log]", log_keys);
    const fmoe_toml_node *v = fmoe_toml_get(t, "level");
    if (st == FMOE_STATUS_OK && v) {
        st = fmoe_toml_copy_string(r->doc, v, "[log] level", "one of error, warn, info, debug", &cfg->log_level);
        if (st == FMOE_STATUS_OK && !is_log_level(cfg->log_level))
            st = fmoe_toml_error_at(
                r->doc, fmoe_toml_pos_of(v),
                "[log] level = \"%s\" is not a log level (expected one of error, warn, info, debug)", cfg->log_level);
    }
    v = fmoe_toml_get(t, "dispatch");
    if (st == FMOE_STATUS_OK && v)
        st = fmoe_toml_copy_string(r->doc, v, "[log] dispatch", "a file path for the JSONL dispatch log",
                                   &cfg->dispatch_log);
    return st;
}

/* ---- the document --------------------------------------------------------- */

static fmoe_status read_root(const config_reader *r)
{
    const fmoe_toml_node *root = fmoe_toml_root(r->doc);
    fmoe_status st = fmoe_toml_check_keys(r->doc, root, "at the top level", root_keys);
    const fmoe_toml_node *v = fmoe_toml_get(root, "search");
    if (st == FMOE_STATUS_OK && v)
        st = read_search(r, v);
    v = fmoe_toml_get(root, "select");
    if (st == FMOE_STATUS_OK && v)
        st = read_select(r, v);
    v = fmoe_toml_get(root, "plugins");
    if (st == FMOE_STATUS_OK && v)
        st = read_plugins(r, v);
    v = fmoe_toml_get(root, "log");
    if (st == FMOE_STATUS_OK && v)
        st = read_log(r, v);
    return st;
}

/* Build the config from a parsed document; `name` becomes cfg->path. */
static fmoe_status config_from_doc(const fmoe_toml_doc *doc, const char *name, fmoe_config **out)
{
    fmoe_config *cfg = fmoe_config_new_default();
    if (!cfg)
        return out_of_memory();
    free(cfg->path);
    cfg->path = strdup(name);
    if (!cfg->path) {
        fmoe_config_free(cfg);
        return out_of_memory();
    }
    config_reader r = {.doc = doc, .cfg = cfg};
    fmoe_status st = read_root(&r);
    if (st != FMOE_STATUS_OK) {
        fmoe_config_free(cfg);
        return st;
    }
    *out = cfg;
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_config_load_file(const char *path, fmoe_config **out)
{
    *out = NULL;
    fmoe_toml_doc *doc = NULL;
    fmoe_status st = fmoe_toml_parse_file(path, &doc);
    if (st != FMOE_STATUS_OK)
        return st;
    st = config_from_doc(doc, path, out);
    fmoe_toml_free(doc);
    return st;
}

fmoe_status fmoe_config_load_string(const char *text, const char *source, fmoe_config **out)
{
    *out = NULL;
    if (!text)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_config_load_string: text is NULL");
    if (!source)
        source = "<string>";
    fmoe_toml_doc *doc = NULL;
    fmoe_status st = fmoe_toml_parse(text, strlen(text), source, &doc);
    if (st != FMOE_STATUS_OK)
        return st;
    st = config_from_doc(doc, source, out);
    fmoe_toml_free(doc);
    return st;
}

fmoe_config *fmoe_config_new_default(void)
{
    fmoe_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->path = strdup("");
    if (!cfg->path) {
        free(cfg);
        return NULL;
    }
    return cfg;
}

static void free_plugin(fmoe_config_plugin *p)
{
    for (size_t i = 0; i < p->n_options; i++) {
        free(p->options[i].key);
        free(p->options[i].value);
    }
    free(p->options);
    free(p->name);
}

void fmoe_config_free(fmoe_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->path);
    fmoe_toml_free_strings(cfg->plugin_files, cfg->n_plugin_files);
    fmoe_toml_free_strings(cfg->search_paths, cfg->n_search_paths);
    fmoe_toml_free_strings(cfg->prefer, cfg->n_prefer);
    fmoe_toml_free_strings(cfg->disable, cfg->n_disable);
    for (size_t i = 0; i < cfg->n_schemes; i++) {
        free(cfg->schemes[i].scheme_glob);
        free(cfg->schemes[i].backend);
    }
    free(cfg->schemes);
    for (size_t i = 0; i < cfg->n_plugins; i++)
        free_plugin(&cfg->plugins[i]);
    free(cfg->plugins);
    free(cfg->log_level);
    free(cfg->dispatch_log);
    free(cfg);
}

const fmoe_config_plugin *fmoe_config_find_plugin(const fmoe_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_plugins; i++)
        if (strcmp(cfg->plugins[i].name, name) == 0)
            return &cfg->plugins[i];
    return NULL;
}
