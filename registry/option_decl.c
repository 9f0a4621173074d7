/* registry/option_decl.c - [[option]] tables of a manifest (option_decl.h). */
#include "registry/option_decl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"
#include "fusedmoe/plugin.h"

static const char *const option_keys[] = {"name", "type", "values", "min", "max", "default", "help", NULL};
static const char *const type_names[] = {"bool", "int", "enum", "string", NULL};

const char *fmoe_option_type_name(int32_t type)
{
    return type >= 0 && type <= FMOE_OPTION_STRING ? type_names[type] : "?";
}

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading a manifest's options");
}

/* Like a plugin name, with '_' only: option names become TOML keys and
 * FMOE_OPTIONS entries ("cpu.isa=avx2"), where '-' and '.' would be odd. */
static int is_option_name(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
            return 0;
    return n > 0 && n <= FMOE_OPTION_NAME_MAX;
}

const fmoe_option_decl *fmoe_option_decl_find(const fmoe_option_decl *d, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(d[i].name, name) == 0)
            return &d[i];
    return NULL;
}

int fmoe_option_value_check(const fmoe_option_decl *d, const char *text, char *why, size_t cap)
{
    int b = 0;
    long long v = 0;
    switch (d->type) {
    case FMOE_OPTION_BOOL:
        if (fmoe_option_parse_bool(text, &b) == 0)
            return 0;
        snprintf(why, cap, "expected a boolean (true or false)");
        return -1;
    case FMOE_OPTION_INT:
        if (fmoe_option_parse_int(text, d->has_min ? d->min : INT64_MIN, d->has_max ? d->max : INT64_MAX, &v) == 0)
            return 0;
        if (d->has_min || d->has_max)
            snprintf(why, cap, "expected an integer in %s", d->domain);
        else
            snprintf(why, cap, "expected a 64-bit integer");
        return -1;
    case FMOE_OPTION_ENUM:
        for (size_t i = 0; i < d->n_values; i++)
            if (strcmp(text, d->values[i]) == 0)
                return 0;
        snprintf(why, cap, "expected one of %s", d->domain);
        return -1;
    default:
        if (text && strlen(text) <= FMOE_OPTION_TEXT_MAX)
            return 0;
        snprintf(why, cap, "expected a string of at most %d bytes", FMOE_OPTION_TEXT_MAX);
        return -1;
    }
}

/* The domain line shown in listings and messages. */
static char *make_domain(const fmoe_option_decl *d)
{
    char buf[64];
    switch (d->type) {
    case FMOE_OPTION_BOOL:
        return strdup("true|false");
    case FMOE_OPTION_ENUM: {
        size_t len = 1;
        for (size_t i = 0; i < d->n_values; i++)
            len += strlen(d->values[i]) + 1;
        char *s = malloc(len);
        if (!s)
            return NULL;
        s[0] = '\0';
        for (size_t i = 0; i < d->n_values; i++) {
            if (i)
                strcat(s, "|");
            strcat(s, d->values[i]);
        }
        return s;
    }
    case FMOE_OPTION_INT:
        if (d->has_min && d->has_max)
            snprintf(buf, sizeof buf, "%" PRId64 "..%" PRId64, d->min, d->max);
        else if (d->has_min)
            snprintf(buf, sizeof buf, "%" PRId64 "..", d->min);
        else if (d->has_max)
            snprintf(buf, sizeof buf, "..%" PRId64, d->max);
        else
            snprintf(buf, sizeof buf, "any 64-bit integer");
        return strdup(buf);
    default:
        return strdup("text");
    }
}

static fmoe_status read_type(const fmoe_toml_doc *doc, const fmoe_toml_node *t, size_t i, fmoe_option_decl *d)
{
    const fmoe_toml_node *v = fmoe_toml_get(t, "type");
    char *text = NULL;
    fmoe_status st = fmoe_toml_copy_string(doc, v, "type", "one of bool, int, enum, string", &text);
    if (st != FMOE_STATUS_OK)
        return st;
    int idx = -1;
    fmoe_option_parse_enum(text, type_names, &idx);
    free(text);
    if (idx < 0)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v),
                                  "option[%zu] '%s': type must be one of bool, int, enum, string", i, d->name);
    d->type = idx;
    return FMOE_STATUS_OK;
}

static fmoe_status read_bounds(const fmoe_toml_doc *doc, const fmoe_toml_node *t, size_t i, fmoe_option_decl *d)
{
    const char *keys[] = {"min", "max"};
    int *has[] = {&d->has_min, &d->has_max};
    int64_t *val[] = {&d->min, &d->max};
    for (size_t k = 0; k < 2; k++) {
        const fmoe_toml_node *v = fmoe_toml_get(t, keys[k]);
        if (!v)
            continue;
        if (d->type != FMOE_OPTION_INT)
            return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v), "option[%zu] '%s': '%s' is only for type = \"int\"", i,
                                      d->name, keys[k]);
        if (!fmoe_toml_get_integer(v, val[k]))
            return fmoe_toml_expect(doc, v, FMOE_TOML_INTEGER, keys[k], "an integer");
        *has[k] = 1;
    }
    if (d->has_min && d->has_max && d->min > d->max)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(t), "option[%zu] '%s': min %" PRId64 " > max %" PRId64, i,
                                  d->name, d->min, d->max);
    return FMOE_STATUS_OK;
}

static fmoe_status read_values(const fmoe_toml_doc *doc, const fmoe_toml_node *t, size_t i, fmoe_option_decl *d)
{
    const fmoe_toml_node *v = fmoe_toml_get(t, "values");
    if (d->type != FMOE_OPTION_ENUM) {
        if (v)
            return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v),
                                      "option[%zu] '%s': 'values' is only for type = \"enum\"", i, d->name);
        return FMOE_STATUS_OK;
    }
    if (!v)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(t), "option[%zu] '%s': type = \"enum\" needs 'values'", i,
                                  d->name);
    if (fmoe_toml_kind_of(v) == FMOE_TOML_ARRAY && fmoe_toml_size(v) > FMOE_OPTION_MAX_VALUES)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v), "option[%zu] '%s': %zu values, at most %d", i, d->name,
                                  fmoe_toml_size(v), FMOE_OPTION_MAX_VALUES);
    fmoe_status st = fmoe_toml_copy_string_array(doc, v, "values", "a non-empty array of the allowed values",
                                                 "an allowed value", 1, &d->values, &d->n_values);
    if (st != FMOE_STATUS_OK)
        return st;
    for (size_t a = 0; a < d->n_values; a++) {
        if (strpbrk(d->values[a], "|,= \t"))
            return fmoe_toml_error_at(doc, fmoe_toml_pos_of(fmoe_toml_at(v, a)),
                                      "option[%zu] '%s': value \"%s\" may not contain '|', ',', '=' or blanks", i,
                                      d->name, d->values[a]);
        for (size_t b = 0; b < a; b++)
            if (strcmp(d->values[a], d->values[b]) == 0)
                return fmoe_toml_error_at(doc, fmoe_toml_pos_of(fmoe_toml_at(v, a)),
                                          "option[%zu] '%s': value \"%s\" is listed twice", i, d->name, d->values[a]);
    }
    return FMOE_STATUS_OK;
}

/* The default, as text of the declared type, checked against the domain. */
static fmoe_status read_default(const fmoe_toml_doc *doc, const fmoe_toml_node *t, size_t i, fmoe_option_decl *d)
{
    const fmoe_toml_node *v = fmoe_toml_get(t, "default");
    char buf[32];
    int64_t iv = 0;
    int bv = 0;
    const char *want = d->type == FMOE_OPTION_BOOL  ? "a boolean"
                       : d->type == FMOE_OPTION_INT ? "an integer"
                                                    : "a string";
    if (d->type == FMOE_OPTION_BOOL) {
        if (!fmoe_toml_get_bool(v, &bv))
            return fmoe_toml_expect(doc, v, FMOE_TOML_BOOL, "default", want);
        d->default_text = strdup(bv ? "true" : "false");
    } else if (d->type == FMOE_OPTION_INT) {
        if (!fmoe_toml_get_integer(v, &iv))
            return fmoe_toml_expect(doc, v, FMOE_TOML_INTEGER, "default", want);
        snprintf(buf, sizeof buf, "%" PRId64, iv);
        d->default_text = strdup(buf);
    } else {
        const char *s = NULL;
        size_t len = 0;
        if (!fmoe_toml_get_string(v, &s, &len))
            return fmoe_toml_expect(doc, v, FMOE_TOML_STRING, "default", want);
        if (strlen(s) != len)
            return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v), "option[%zu] '%s': default contains a NUL byte", i,
                                      d->name);
        d->default_text = strdup(s);
    }
    if (!d->default_text)
        return out_of_memory();
    char why[256];
    if (fmoe_option_value_check(d, d->default_text, why, sizeof why) != 0)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v), "option[%zu] '%s': default \"%s\": %s", i, d->name,
                                  d->default_text, why);
    return FMOE_STATUS_OK;
}

static fmoe_status read_decl(const fmoe_toml_doc *doc, const fmoe_toml_node *t, size_t i, fmoe_option_decl *out,
                             const fmoe_option_decl *earlier)
{
    char where[64];
    snprintf(where, sizeof where, "in option[%zu]", i);
    fmoe_status st = fmoe_toml_check_keys(doc, t, where, option_keys);
    if (st != FMOE_STATUS_OK)
        return st;
    const char *req[] = {"name", "type", "default", "help"};
    for (size_t k = 0; k < 4; k++)
        if (!fmoe_toml_get(t, req[k]))
            return fmoe_toml_error_at(doc, fmoe_toml_pos_of(t), "option[%zu]: missing required key '%s'", i, req[k]);
    const fmoe_toml_node *nv = fmoe_toml_get(t, "name");
    st = fmoe_toml_copy_string(doc, nv, "name", "an option name ([a-z0-9_]+)", &out->name);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!is_option_name(out->name))
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(nv), "option[%zu]: name \"%s\" is not [a-z0-9_]{1,%d}", i,
                                  out->name, FMOE_OPTION_NAME_MAX);
    if (fmoe_option_decl_find(earlier, i, out->name))
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(nv), "option[%zu]: option '%s' is declared twice", i,
                                  out->name);
    if ((st = read_type(doc, t, i, out)) != FMOE_STATUS_OK || (st = read_bounds(doc, t, i, out)) != FMOE_STATUS_OK ||
        (st = read_values(doc, t, i, out)) != FMOE_STATUS_OK)
        return st;
    out->domain = make_domain(out);
    if (!out->domain)
        return out_of_memory();
    if ((st = read_default(doc, t, i, out)) != FMOE_STATUS_OK)
        return st;
    const fmoe_toml_node *hv = fmoe_toml_get(t, "help");
    st = fmoe_toml_copy_string(doc, hv, "help", "one line of meaning", &out->help);
    if (st == FMOE_STATUS_OK && (!out->help[0] || strchr(out->help, '\n') || strlen(out->help) > FMOE_OPTION_TEXT_MAX))
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(hv), "option[%zu] '%s': help must be one non-empty line", i,
                                  out->name);
    return st;
}

fmoe_status fmoe_option_decls_read(const fmoe_toml_doc *doc, const fmoe_toml_node *root, fmoe_option_decl **out,
                                   size_t *n)
{
    *out = NULL;
    *n = 0;
    const fmoe_toml_node *v = fmoe_toml_get(root, "option");
    if (!v)
        return FMOE_STATUS_OK;
    fmoe_status st = fmoe_toml_expect(doc, v, FMOE_TOML_ARRAY, "option", "an array of tables ([[option]])");
    if (st != FMOE_STATUS_OK)
        return st;
    size_t count = fmoe_toml_size(v);
    if (count > FMOE_OPTION_MAX_DECLS)
        return fmoe_toml_error_at(doc, fmoe_toml_pos_of(v), "%zu [[option]] tables, at most %d", count,
                                  FMOE_OPTION_MAX_DECLS);
    if (count == 0)
        return FMOE_STATUS_OK;
    fmoe_option_decl *d = calloc(count, sizeof *d);
    if (!d)
        return out_of_memory();
    for (size_t i = 0; i < count; i++) {
        const fmoe_toml_node *t = fmoe_toml_at(v, i);
        st = fmoe_toml_expect(doc, t, FMOE_TOML_TABLE, "option", "an array of tables ([[option]])");
        if (st == FMOE_STATUS_OK)
            st = read_decl(doc, t, i, &d[i], d);
        if (st != FMOE_STATUS_OK) {
            fmoe_option_decls_free(d, i + 1);
            return st;
        }
    }
    *out = d;
    *n = count;
    return FMOE_STATUS_OK;
}

void fmoe_option_decls_free(fmoe_option_decl *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++) {
        free(d[i].name);
        fmoe_toml_free_strings(d[i].values, d[i].n_values);
        free(d[i].domain);
        free(d[i].default_text);
        free(d[i].help);
    }
    free(d);
}
