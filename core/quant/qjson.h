/*
 * core/quant/qjson.h - typed reads from a parsed config.json (jansson) that
 * name where they are: every error says the source and the JSON path of the
 * offending value, e.g.
 *
 *   config.json: quantization_config.config_groups.group_0.weights.num_bits:
 *   expected an integer, got "4"
 *
 * The readers are strict about types on purpose. Python's readers accept
 * "4" or 4.0 for an integer; reading either as 4 here would hide a config
 * that was written by hand and is probably wrong somewhere else too, and a
 * key we know read with the wrong type is never silently taken as absent.
 */
#ifndef FMOE_CORE_QUANT_QJSON_H
#define FMOE_CORE_QUANT_QJSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

/* Longest JSON path kept for messages; deeper paths end in "...". */
#define QJSON_PATH_MAX 384

/* Where a reader is: the source name and the path of the current value. */
typedef struct qjson {
    const char *source;        /* "config.json" or the file's path */
    char path[QJSON_PATH_MAX]; /* "" at the document root */
    size_t len;
    /* Instructions of the module-name patterns compiled so far while
     * reading this document (module_match.h): at most
     * FMOE_LIMIT_PATTERN_TOTAL, and the measure of a name lookup's cost. */
    uint64_t pattern_cost;
} qjson;

void qjson_init(qjson *j, const char *source);

/* Step into member `key` / element `index`; returns a mark for qjson_leave.
 * Keys that are not plain identifiers are written ["like this"]. */
size_t qjson_enter_key(qjson *j, const char *key);
size_t qjson_enter_index(qjson *j, size_t index);
void qjson_leave(qjson *j, size_t mark);

/* "<source>: <path>: <message>" (the path left out at the root). */
fmoe_status qjson_fail(const qjson *j, fmoe_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* INVALID_ARGUMENT "<source>: <path>: expected <what>, got <value>". */
fmoe_status qjson_expected(const qjson *j, const json_t *got, const char *what);

/* A short rendering of a value for messages: "4", "4.0", "\"4\"", true,
 * null, an object, an array. */
void qjson_describe(const json_t *value, char *buf, size_t cap);

/* Member `key` of `obj`, or NULL when it is absent or JSON null: HF writes
 * null for "not set", so the two mean the same everywhere we read. */
json_t *qjson_member(const json_t *obj, const char *key);

/*
 * Typed members. Each returns OK and sets *given to 1 (given may be NULL)
 * when the member is there with the right type; OK with *given 0 and *out
 * untouched when it is absent or null and not `required`; INVALID_ARGUMENT
 * naming the path otherwise ("missing required key" for a required one).
 */
fmoe_status qjson_string(qjson *j, const json_t *obj, const char *key, int required, const char **out, int *given);
fmoe_status qjson_int(qjson *j, const json_t *obj, const char *key, int required, long long *out, int *given);
fmoe_status qjson_bool(qjson *j, const json_t *obj, const char *key, int required, int *out, int *given);
fmoe_status qjson_object(qjson *j, const json_t *obj, const char *key, int required, json_t **out, int *given);
fmoe_status qjson_array(qjson *j, const json_t *obj, const char *key, int required, json_t **out, int *given);

/* A list of strings (absent or null: an empty list). The strings are
 * copied; free them with qjson_free_strings. */
fmoe_status qjson_string_list(qjson *j, const json_t *obj, const char *key, char ***out, size_t *n);
void qjson_free_strings(char **list, size_t n);

/* strdup that reports OUT_OF_MEMORY through the error slot. */
fmoe_status qjson_strdup(const char *s, char **out);

#endif
