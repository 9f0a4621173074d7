/* core/quant/qjson.c - typed config.json reads with JSON paths (see qjson.h). */
#include "core/quant/qjson.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void qjson_init(qjson *j, const char *source)
{
    j->source = source;
    j->path[0] = '\0';
    j->len = 0;
    j->pattern_cost = 0;
}

/* Append to the path; a path that no longer fits ends in "..." (messages
 * only, so a cut path is better than none). */
static void path_append(qjson *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void path_append(qjson *j, const char *fmt, ...)
{
    size_t room = sizeof j->path - j->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->path + j->len, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        memcpy(j->path + sizeof j->path - 4, "...", 4);
        j->len = sizeof j->path - 1;
        return;
    }
    j->len += (size_t)n;
}

static int is_identifier(const char *key)
{
    if (!key[0])
        return 0;
    for (const char *p = key; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return 0;
    return 1;
}

size_t qjson_enter_key(qjson *j, const char *key)
{
    size_t mark = j->len;
    if (is_identifier(key))
        path_append(j, "%s%s", j->len ? "." : "", key);
    else
        path_append(j, "[\"%s\"]", key);
    return mark;
}

size_t qjson_enter_index(qjson *j, size_t index)
{
    size_t mark = j->len;
    path_append(j, "[%zu]", index);
    return mark;
}

void qjson_leave(qjson *j, size_t mark)
{
    j->len = mark;
    j->path[mark] = '\0';
}

fmoe_status qjson_fail(const qjson *j, fmoe_status status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (j->len)
        return fmoe_error_set(status, "%s: %s: %s", j->source, j->path, msg);
    return fmoe_error_set(status, "%s: %s", j->source, msg);
}

/* A real written the way Python would read it back: 4.0, not 4. */
static void describe_real(double v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.17g", v);
    if (!strpbrk(buf, ".eEn")) /* n: nan/inf never parse, but be safe */
        strncat(buf, ".0", cap - strlen(buf) - 1);
}

void qjson_describe(const json_t *value, char *buf, size_t cap)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        snprintf(buf, cap, "an object");
        return;
    case JSON_ARRAY:
        snprintf(buf, cap, "an array");
        return;
    case JSON_INTEGER:
        snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        return;
    case JSON_REAL:
        describe_real(json_real_value(value), buf, cap);
        return;
    case JSON_TRUE:
        snprintf(buf, cap, "true");
        return;
    case JSON_FALSE:
        snprintf(buf, cap, "false");
        return;
    case JSON_NULL:
        snprintf(buf, cap, "null");
        return;
    case JSON_STRING:
        break;
    }
    /* Quote strings, cut long ones, and keep control bytes out of the
     * message. */
    const char *s = json_string_value(value);
    size_t n = 0, limit = 48;
    if (cap < 8) {
        snprintf(buf, cap, "\"..\"");
        return;
    }
    buf[n++] = '"';
    for (; *s && n + 5 < cap; s++) {
        if (limit-- == 0) {
            memcpy(buf + n, "...", 3);
            n += 3;
            break;
        }
        buf[n++] = (unsigned char)*s < 0x20 ? '?' : *s;
    }
    buf[n++] = '"';
    buf[n] = '\0';
}

fmoe_status qjson_expected(const qjson *j, const json_t *got, const char *what)
{
    char text[128];
    qjson_describe(got, text, sizeof text);
    return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "expected %s, got %s", what, text);
}

json_t *qjson_member(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* The member, NULL when absent/null (an error if required). */
static fmoe_status member_or_missing(qjson *j, const json_t *obj, const char *key, int required, json_t **out)
{
    *out = qjson_member(obj, key);
    if (!*out && required)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "missing required key \"%s\"", key);
    return FMOE_STATUS_OK;
}

/* Check the member's type with the path pointing at it. */
static fmoe_status typed(qjson *j, const json_t *obj, const char *key, int required, json_type type, const char *what,
                         json_t **out, int *given)
{
    json_t *v;
    if (given)
        *given = 0;
    fmoe_status st = member_or_missing(j, obj, key, required, &v);
    if (st != FMOE_STATUS_OK || !v)
        return st;
    int ok = json_typeof(v) == type || (type == JSON_TRUE && json_is_boolean(v));
    if (!ok) {
        size_t mark = qjson_enter_key(j, key);
        st = qjson_expected(j, v, what);
        qjson_leave(j, mark);
        return st;
    }
    *out = v;
    if (given)
        *given = 1;
    return FMOE_STATUS_OK;
}

fmoe_status qjson_string(qjson *j, const json_t *obj, const char *key, int required, const char **out, int *given)
{
    json_t *v = NULL;
    fmoe_status st = typed(j, obj, key, required, JSON_STRING, "a string", &v, given);
    if (st == FMOE_STATUS_OK && v)
        *out = json_string_value(v);
    return st;
}

fmoe_status qjson_int(qjson *j, const json_t *obj, const char *key, int required, long long *out, int *given)
{
    json_t *v = NULL;
    fmoe_status st = typed(j, obj, key, required, JSON_INTEGER, "an integer", &v, given);
    if (st == FMOE_STATUS_OK && v)
        *out = (long long)json_integer_value(v);
    return st;
}

fmoe_status qjson_bool(qjson *j, const json_t *obj, const char *key, int required, int *out, int *given)
{
    json_t *v = NULL;
    fmoe_status st = typed(j, obj, key, required, JSON_TRUE, "true or false", &v, given);
    if (st == FMOE_STATUS_OK && v)
        *out = json_is_true(v);
    return st;
}

fmoe_status qjson_object(qjson *j, const json_t *obj, const char *key, int required, json_t **out, int *given)
{
    return typed(j, obj, key, required, JSON_OBJECT, "an object", out, given);
}

fmoe_status qjson_array(qjson *j, const json_t *obj, const char *key, int required, json_t **out, int *given)
{
    return typed(j, obj, key, required, JSON_ARRAY, "an array", out, given);
}

fmoe_status qjson_strdup(const char *s, char **out)
{
    size_t n = strlen(s) + 1;
    *out = malloc(n);
    if (!*out)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memcpy(*out, s, n);
    return FMOE_STATUS_OK;
}

void qjson_free_strings(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

fmoe_status qjson_string_list(qjson *j, const json_t *obj, const char *key, char ***out, size_t *n)
{
    json_t *arr = NULL;
    int given = 0;
    *out = NULL;
    *n = 0;
    fmoe_status st = qjson_array(j, obj, key, 0, &arr, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t count = json_array_size(arr);
    if (count == 0) /* an empty list owns nothing: callers may skip the free */
        return FMOE_STATUS_OK;
    char **list = calloc(count, sizeof *list);
    if (!list)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    size_t mark = qjson_enter_key(j, key);
    for (size_t i = 0; i < count && st == FMOE_STATUS_OK; i++) {
        json_t *item = json_array_get(arr, i);
        size_t at = qjson_enter_index(j, i);
        if (!json_is_string(item))
            st = qjson_expected(j, item, "a string");
        else
            st = qjson_strdup(json_string_value(item), &list[i]);
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    if (st != FMOE_STATUS_OK) {
        qjson_free_strings(list, count);
        return st;
    }
    *out = list;
    *n = count;
    return FMOE_STATUS_OK;
}
