/*
 * core/model/mjson.c - the typed reads a model config needs beyond qjson:
 * integers with a range, numbers that may be written 1 or 1.0, and the
 * hidden_act check the families share. Errors name the key path (qjson).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/model/model.h"

fmoe_status mjson_expected_at(qjson *j, const json_t *obj, const char *key, const char *what)
{
    size_t mark = qjson_enter_key(j, key);
    fmoe_status st = qjson_expected(j, json_object_get(obj, key), what);
    qjson_leave(j, mark);
    return st;
}

fmoe_status mjson_fail_at(qjson *j, const char *key, fmoe_status status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mark = qjson_enter_key(j, key);
    fmoe_status st = qjson_fail(j, status, "%s", msg);
    qjson_leave(j, mark);
    return st;
}

fmoe_status mjson_uint(qjson *j, const json_t *obj, const char *key, int required, uint32_t lo, uint32_t hi,
                       uint32_t *out)
{
    long long v = 0;
    int given = 0;
    fmoe_status st = qjson_int(j, obj, key, required, &v, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    if (v < (long long)lo || v > (long long)hi) {
        char what[64];
        snprintf(what, sizeof what, "an integer in [%u, %u]", lo, hi);
        return mjson_expected_at(j, obj, key, what);
    }
    *out = (uint32_t)v;
    return FMOE_STATUS_OK;
}

fmoe_status mjson_real(qjson *j, const json_t *obj, const char *key, int required, double *out, int *given)
{
    if (given)
        *given = 0;
    json_t *v = qjson_member(obj, key);
    if (!v) {
        if (required)
            return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "missing required key \"%s\"", key);
        return FMOE_STATUS_OK;
    }
    if (!json_is_number(v))
        return mjson_expected_at(j, obj, key, "a number");
    double d = json_number_value(v);
    if (!isfinite(d)) /* a huge integer literal read as real */
        return mjson_expected_at(j, obj, key, "a finite number");
    *out = d;
    if (given)
        *given = 1;
    return FMOE_STATUS_OK;
}

fmoe_status mjson_require_silu(qjson *j, const json_t *obj)
{
    const char *act = NULL;
    int given = 0;
    fmoe_status st = qjson_string(j, obj, "hidden_act", 0, &act, &given);
    if (st != FMOE_STATUS_OK || !given || strcmp(act, "silu") == 0)
        return st;
    return mjson_fail_at(j, "hidden_act", FMOE_STATUS_UNSUPPORTED,
                         "\"%s\" is not supported; the experts of this family are implemented for \"silu\" only", act);
}
