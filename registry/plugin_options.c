/* registry/plugin_options.c - resolve a plugin's options (plugin_options.h). */
#include "registry/plugin_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"

void fmoe_env_options_free(fmoe_env_option *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++) {
        free(e[i].plugin);
        free(e[i].key);
        free(e[i].value);
    }
    free(e);
}

static char *dup_range(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static fmoe_status parse_entry(const char *origin, const char *s, size_t len, fmoe_env_option *e)
{
    const char *eq = memchr(s, '=', len);
    const char *dot = eq ? memchr(s, '.', (size_t)(eq - s)) : NULL;
    if (!eq || !dot || dot == s || dot + 1 == eq)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: entry '%.*s' is not <plugin>.<option>=<value> (e.g. cpu.isa=avx2)", origin, (int)len,
                              s);
    e->plugin = dup_range(s, (size_t)(dot - s));
    e->key = dup_range(dot + 1, (size_t)(eq - dot - 1));
    e->value = dup_range(eq + 1, len - (size_t)(eq + 1 - s));
    if (!e->plugin || !e->key || !e->value)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", origin);
    if (!fmoe_is_plugin_name(e->plugin))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: entry '%.*s': '%s' is not a plugin name", origin,
                              (int)len, s, e->plugin);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_env_options_parse(const char *text, const char *origin, fmoe_env_option **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t count = 0;
    for (const char *p = text; *p; p++)
        count += *p == ',';
    if (count + 1 > FMOE_ENV_OPTIONS_MAX)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: %zu entries, at most %d", origin, count + 1,
                              FMOE_ENV_OPTIONS_MAX);
    fmoe_env_option *e = calloc(count + 1, sizeof *e);
    if (!e)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", origin);
    size_t k = 0;
    fmoe_status st = FMOE_STATUS_OK;
    for (const char *p = text; st == FMOE_STATUS_OK;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) /* "a.b=1,,c.d=2" and a trailing comma are harmless */
            st = parse_entry(origin, p, len, &e[k++]);
        if (!end)
            break;
        p = end + 1;
    }
    if (st != FMOE_STATUS_OK) {
        fmoe_env_options_free(e, k);
        return st;
    }
    *out = e;
    *n = k;
    return FMOE_STATUS_OK;
}

void fmoe_option_settings_free(fmoe_option_setting *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        free(s[i].key);
        free(s[i].value);
    }
    free(s);
}

static fmoe_option_setting *find_setting(fmoe_option_setting *s, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].key, key) == 0)
            return &s[i];
    return NULL;
}

/* "isa, amx" for messages. */
static void declared_names(const fmoe_option_decl *d, size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", d[i].name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* Set `key` = `value` from `source`, checked against the declarations. */
static int apply_one(const char *plugin, int has_manifest, const fmoe_option_decl *decls, size_t n_decls,
                     fmoe_option_setting *s, size_t *n, const char *key, const char *value, const char *source,
                     const char *where, char *why, size_t cap)
{
    const fmoe_option_decl *d = fmoe_option_decl_find(decls, n_decls, key);
    if (has_manifest && !d) {
        char names[512];
        declared_names(decls, n_decls, names, sizeof names);
        if (n_decls)
            snprintf(why, cap, "%s: plugin '%s' has no option '%s' (its manifest declares: %s)", where, plugin, key,
                     names);
        else
            snprintf(why, cap, "%s: plugin '%s' has no option '%s' (its manifest declares none)", where, plugin, key);
        return -1;
    }
    char expected[256];
    if (d && fmoe_option_value_check(d, value, expected, sizeof expected) != 0) {
        snprintf(why, cap, "%s: option '%s' of plugin '%s' = \"%s\": %s", where, key, plugin, value, expected);
        return -1;
    }
    fmoe_option_setting *hit = find_setting(s, *n, key);
    if (!hit) {
        hit = &s[(*n)++];
        hit->key = strdup(key);
        hit->decl = d;
    }
    free(hit->value);
    hit->value = strdup(value);
    hit->source = source;
    if (!hit->key || !hit->value) {
        snprintf(why, cap, "out of memory resolving the options of plugin '%s'", plugin);
        return -1;
    }
    return 0;
}

int fmoe_options_resolve(const char *name, int has_manifest, const fmoe_option_decl *decls, size_t n_decls,
                         const fmoe_config *config, fmoe_env_option *env, size_t n_env, fmoe_env_option *api,
                         size_t n_api, fmoe_option_setting **out, size_t *n_out, char *why, size_t cap)
{
    *out = NULL;
    *n_out = 0;
    const fmoe_config_plugin *pc = config ? fmoe_config_find_plugin(config, name) : NULL;
    size_t n_user = pc ? pc->n_options : 0;
    for (size_t i = 0; i < n_env; i++)
        n_user += strcmp(env[i].plugin, name) == 0;
    for (size_t i = 0; i < n_api; i++)
        n_user += strcmp(api[i].plugin, name) == 0;
    fmoe_option_setting *s = calloc(n_decls + n_user + 1, sizeof *s);
    if (!s) {
        snprintf(why, cap, "out of memory resolving the options of plugin '%s'", name);
        return -1;
    }
    size_t n = 0;
    int ok = 1;
    for (size_t i = 0; ok && i < n_decls; i++) {
        s[n].key = strdup(decls[i].name);
        s[n].value = strdup(decls[i].default_text);
        s[n].source = "default";
        s[n].decl = &decls[i];
        n++;
        if (!s[n - 1].key || !s[n - 1].value) {
            snprintf(why, cap, "out of memory resolving the options of plugin '%s'", name);
            ok = 0;
        }
    }
    char where[160];
    snprintf(where, sizeof where, "%s [plugins.%s.options]", config && config->path[0] ? config->path : "config", name);
    for (size_t i = 0; ok && pc && i < pc->n_options; i++)
        ok = apply_one(name, has_manifest, decls, n_decls, s, &n, pc->options[i].key, pc->options[i].value, "config",
                       where, why, cap) == 0;
    for (size_t i = 0; ok && i < n_env; i++) {
        if (strcmp(env[i].plugin, name) != 0)
            continue;
        env[i].used = 1;
        ok = apply_one(name, has_manifest, decls, n_decls, s, &n, env[i].key, env[i].value, "environment",
                       "FMOE_OPTIONS", why, cap) == 0;
    }
    for (size_t i = 0; ok && i < n_api; i++) {
        if (strcmp(api[i].plugin, name) != 0)
            continue;
        api[i].used = 1;
        ok = apply_one(name, has_manifest, decls, n_decls, s, &n, api[i].key, api[i].value, "application",
                       "fmoe_context_options.plugin_options", why, cap) == 0;
    }
    if (!ok) {
        fmoe_option_settings_free(s, n);
        return -1;
    }
    *out = s;
    *n_out = n;
    return 0;
}
