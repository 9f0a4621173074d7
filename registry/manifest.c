/*
 * registry/manifest.c - reads a plugin manifest (schema in manifest.h).
 *
 * The registry trusts a manifest to decide whether a library may be loaded
 * at all, so the reader is as strict as the config reader: unknown keys,
 * wrong types and bad values are errors with the line and column, and a
 * missing required key is an error naming the key and the file.
 */
#include "registry/manifest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"
#include "registry/toml_wrap.h"

static const char *const manifest_keys[] = {"name",      "library",   "version", "vendor",  "description",
                                            "abi_major", "abi_minor", "arch",    "devices", "schemes",
                                            "requires",  "tolerance", "option",  NULL};
static const char *const tolerance_keys[] = {"schemes", "mismatch", "reason", "link", NULL};
static const char *const device_names[] = {"cpu", "cuda", "rocm", NULL};

#define PLUGIN_NAME_CHARS "only a-z, 0-9, '_' and '-'"
#define ABI_RANGE         "an integer in [0, 2^31)"

typedef struct manifest_reader {
    const fmoe_toml_doc *doc;
    const fmoe_toml_node *root;
    fmoe_manifest *m;
} manifest_reader;

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* The value of `key`, or NULL; a missing required key is an error (the file
 * has no line to point at, so the message names the file alone). */
static fmoe_status lookup(const manifest_reader *r, const char *key, const char *expected, int required,
                          const fmoe_toml_node **out)
{
    *out = fmoe_toml_get(r->root, key);
    if (*out || !required)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: missing required key '%s' (expected %s)",
                          fmoe_toml_source(r->doc), key, expected);
}

static fmoe_status read_string(const manifest_reader *r, const char *key, const char *expected, char **out)
{
    const fmoe_toml_node *v;
    fmoe_status st = lookup(r, key, expected, 1, &v);
    if (st != FMOE_STATUS_OK)
        return st;
    return fmoe_toml_copy_string(r->doc, v, key, expected, out);
}

static fmoe_status read_name(const manifest_reader *r)
{
    fmoe_status st = read_string(r, "name", "a plugin name of a-z, 0-9, '_' and '-'", &r->m->name);
    if (st != FMOE_STATUS_OK || fmoe_is_plugin_name(r->m->name))
        return st;
    return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(fmoe_toml_get(r->root, "name")),
                              "name = \"%s\" is not a valid plugin name (expected %s)", r->m->name, PLUGIN_NAME_CHARS);
}

static fmoe_status read_library(const manifest_reader *r)
{
    char *written = NULL;
    fmoe_status st = read_string(r, "library", "a path to the plugin library, relative to the manifest", &written);
    if (st != FMOE_STATUS_OK)
        return st;
    st = fmoe_toml_resolve_path(r->doc, written, &r->m->library);
    free(written);
    return st;
}

static fmoe_status read_description(const manifest_reader *r)
{
    const fmoe_toml_node *v = fmoe_toml_get(r->root, "description");
    const char *text = "";
    size_t len = 0;
    if (v) {
        fmoe_status st = fmoe_toml_expect(r->doc, v, FMOE_TOML_STRING, "description", "a string");
        if (st != FMOE_STATUS_OK)
            return st;
        fmoe_toml_get_string(v, &text, &len);
        if (strlen(text) != len)
            return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(v),
                                      "description contains a NUL character (expected a string)");
    }
    r->m->description = strdup(text);
    return r->m->description ? FMOE_STATUS_OK : out_of_memory();
}

static fmoe_status read_abi(const manifest_reader *r, const char *key, uint32_t *out)
{
    const fmoe_toml_node *v;
    fmoe_status st = lookup(r, key, ABI_RANGE, 1, &v);
    if (st == FMOE_STATUS_OK)
        st = fmoe_toml_expect(r->doc, v, FMOE_TOML_INTEGER, key, ABI_RANGE);
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t value = 0;
    fmoe_toml_get_integer(v, &value);
    /* Kept below 2^31 so that the value fits every integer type the ABI
     * and its users might hold it in, signed or not. */
    if (value < 0 || value > INT32_MAX)
        return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(v), "%s = %" PRId64 " is out of range (expected %s)", key,
                                  value, ABI_RANGE);
    *out = (uint32_t)value;
    return FMOE_STATUS_OK;
}

static fmoe_status read_list(const manifest_reader *r, const char *key, const char *expected, const char *element,
                             int required, char ***out, size_t *n)
{
    const fmoe_toml_node *v;
    fmoe_status st = lookup(r, key, expected, required, &v);
    if (st != FMOE_STATUS_OK || !v)
        return st;
    return fmoe_toml_copy_string_array(r->doc, v, key, expected, element, required, out, n);
}

static int is_device(const char *s)
{
    for (const char *const *d = device_names; *d; d++)
        if (strcmp(s, *d) == 0)
            return 1;
    return 0;
}

static fmoe_status read_devices(const manifest_reader *r)
{
    fmoe_status st = read_list(r, "devices", "a non-empty array of devices (cpu, cuda, rocm)", "one of cpu, cuda, rocm",
                               1, &r->m->devices, &r->m->n_devices);
    if (st != FMOE_STATUS_OK)
        return st;
    const fmoe_toml_node *v = fmoe_toml_get(r->root, "devices");
    for (size_t i = 0; i < r->m->n_devices; i++)
        if (!is_device(r->m->devices[i]))
            return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(fmoe_toml_at(v, i)),
                                      "devices[%zu] = \"%s\" is not a device (expected one of cpu, cuda, rocm)", i,
                                      r->m->devices[i]);
    return FMOE_STATUS_OK;
}

/* One [[tolerance]] table (manifest.h). */
static fmoe_status read_tolerance(const manifest_reader *r, const fmoe_toml_node *t, size_t i,
                                  fmoe_manifest_tolerance *out)
{
    char where[64];
    snprintf(where, sizeof where, "in tolerance[%zu]", i);
    fmoe_status st = fmoe_toml_check_keys(r->doc, t, where, tolerance_keys);
    if (st != FMOE_STATUS_OK)
        return st;
    const char *req[] = {"schemes", "mismatch", "reason", "link"};
    for (size_t k = 0; k < 4; k++)
        if (!fmoe_toml_get(t, req[k]))
            return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(t), "tolerance[%zu]: missing required key '%s'", i,
                                      req[k]);
    st = fmoe_toml_copy_string_array(r->doc, fmoe_toml_get(t, "schemes"), "schemes",
                                     "a non-empty array of scheme-key globs", "a scheme-key glob", 1, &out->schemes,
                                     &out->n_schemes);
    if (st != FMOE_STATUS_OK)
        return st;
    out->joined = fmoe_join_list(out->schemes, out->n_schemes);
    if (!out->joined)
        return out_of_memory();
    const fmoe_toml_node *v = fmoe_toml_get(t, "mismatch");
    const char *want = "a fraction of elements in (0, 0.01]";
    if (!fmoe_toml_get_float(v, &out->mismatch))
        return fmoe_toml_expect(r->doc, v, FMOE_TOML_FLOAT, "mismatch", want);
    if (!(out->mismatch > 0 && out->mismatch <= FMOE_MANIFEST_MAX_MISMATCH))
        return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(v), "tolerance[%zu]: mismatch = %g (expected %s)", i,
                                  out->mismatch, want);
    const char *keys[] = {"reason", "link"};
    char **dst[] = {&out->reason, &out->link};
    for (size_t k = 0; k < 2; k++) {
        v = fmoe_toml_get(t, keys[k]);
        st = fmoe_toml_copy_string(r->doc, v, keys[k],
                                   k ? "the issue or paper that shows it (an http(s) URL)"
                                     : "why the plugin needs it (a non-empty string)",
                                   dst[k]);
        if (st != FMOE_STATUS_OK)
            return st;
        if (!(*dst[k])[0] || (k == 1 && strncmp(*dst[k], "https://", 8) != 0 && strncmp(*dst[k], "http://", 7) != 0))
            return fmoe_toml_error_at(r->doc, fmoe_toml_pos_of(v), "tolerance[%zu]: %s = \"%s\" (expected %s)", i,
                                      keys[k], *dst[k], k ? "an http(s) URL" : "a non-empty string");
    }
    return FMOE_STATUS_OK;
}

static fmoe_status read_tolerances(const manifest_reader *r)
{
    const fmoe_toml_node *v = fmoe_toml_get(r->root, "tolerance");
    if (!v)
        return FMOE_STATUS_OK;
    fmoe_status st = fmoe_toml_expect(r->doc, v, FMOE_TOML_ARRAY, "tolerance", "an array of tables ([[tolerance]])");
    if (st != FMOE_STATUS_OK)
        return st;
    size_t n = fmoe_toml_size(v);
    r->m->tolerances = calloc(n ? n : 1, sizeof *r->m->tolerances);
    if (!r->m->tolerances)
        return out_of_memory();
    for (size_t i = 0; i < n; i++) {
        const fmoe_toml_node *t = fmoe_toml_at(v, i);
        st = fmoe_toml_expect(r->doc, t, FMOE_TOML_TABLE, "tolerance", "an array of tables ([[tolerance]])");
        if (st == FMOE_STATUS_OK) {
            r->m->n_tolerances++;
            st = read_tolerance(r, t, i, &r->m->tolerances[i]);
        }
        if (st != FMOE_STATUS_OK)
            return st;
    }
    return FMOE_STATUS_OK;
}

/* Every key, in the order of the schema in manifest.h. */
static fmoe_status read_manifest(const manifest_reader *r)
{
    fmoe_manifest *m = r->m;
    fmoe_status st = fmoe_toml_check_keys(r->doc, r->root, "in a plugin manifest", manifest_keys);
    if (st == FMOE_STATUS_OK)
        st = read_name(r);
    if (st == FMOE_STATUS_OK)
        st = read_library(r);
    if (st == FMOE_STATUS_OK)
        st = read_string(r, "version", "a version string such as \"1.2.0\"", &m->version);
    if (st == FMOE_STATUS_OK)
        st = read_string(r, "vendor", "a non-empty string", &m->vendor);
    if (st == FMOE_STATUS_OK)
        st = read_description(r);
    if (st == FMOE_STATUS_OK)
        st = read_abi(r, "abi_major", &m->abi_major);
    if (st == FMOE_STATUS_OK)
        st = read_abi(r, "abi_minor", &m->abi_minor);
    if (st == FMOE_STATUS_OK)
        st = read_list(r, "arch", "a non-empty array of architectures (uname -m, or \"any\")",
                       "an architecture such as \"x86_64\" or \"any\"", 1, &m->arch, &m->n_arch);
    if (st == FMOE_STATUS_OK)
        st = read_devices(r);
    if (st == FMOE_STATUS_OK)
        st = read_list(r, "schemes", "a non-empty array of scheme-key globs", "a scheme-key glob", 1, &m->schemes,
                       &m->n_schemes);
    if (st == FMOE_STATUS_OK)
        st = read_list(r, "requires", "an array of requirement strings", "a requirement such as \"cuda>=12.8\"", 0,
                       &m->requires, &m->n_requires);
    if (st == FMOE_STATUS_OK)
        st = read_tolerances(r);
    if (st == FMOE_STATUS_OK)
        st = fmoe_option_decls_read(r->doc, r->root, &m->options, &m->n_options);
    return st;
}

fmoe_status fmoe_manifest_load(const char *path, fmoe_manifest **out)
{
    *out = NULL;
    fmoe_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return out_of_memory();
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return out_of_memory();
    }
    fmoe_toml_doc *doc = NULL;
    fmoe_status st = fmoe_toml_parse_file(path, &doc);
    if (st == FMOE_STATUS_OK) {
        manifest_reader r = {.doc = doc, .root = fmoe_toml_root(doc), .m = m};
        st = read_manifest(&r);
    }
    fmoe_toml_free(doc);
    if (st != FMOE_STATUS_OK) {
        fmoe_manifest_free(m);
        return st;
    }
    *out = m;
    return FMOE_STATUS_OK;
}

void fmoe_manifest_free(fmoe_manifest *m)
{
    if (!m)
        return;
    free(m->path);
    free(m->name);
    free(m->library);
    free(m->version);
    free(m->vendor);
    free(m->description);
    fmoe_toml_free_strings(m->arch, m->n_arch);
    fmoe_toml_free_strings(m->devices, m->n_devices);
    fmoe_toml_free_strings(m->schemes, m->n_schemes);
    fmoe_toml_free_strings(m->requires, m->n_requires);
    fmoe_manifest_tolerances_free(m->tolerances, m->n_tolerances);
    fmoe_option_decls_free(m->options, m->n_options);
    free(m);
}

void fmoe_manifest_tolerances_free(fmoe_manifest_tolerance *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        fmoe_toml_free_strings(t[i].schemes, t[i].n_schemes);
        free(t[i].joined);
        free(t[i].reason);
        free(t[i].link);
    }
    free(t);
}

int fmoe_manifest_matches_arch(const fmoe_manifest *m, const char *machine)
{
    for (size_t i = 0; i < m->n_arch; i++)
        if (strcmp(m->arch[i], "any") == 0 || strcmp(m->arch[i], machine) == 0)
            return 1;
    return 0;
}
