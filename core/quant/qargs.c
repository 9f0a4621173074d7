/*
 * core/quant/qargs.c - compressed-tensors QuantizationArgs: reading,
 * validation and description (see qargs.h).
 *
 * The consistency rules and their wording follow compressed-tensors'
 * QuantizationArgs validators, so a config that compressed-tensors would
 * refuse is refused here with the same reason, plus the JSON path.
 */
#include "core/quant/qargs.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fusedmoe/fusedmoe.h"

void qargs_defaults(qargs *a)
{
    memset(a, 0, sizeof *a);
    a->type = QTYPE_INT;
    a->num_bits = 8;
    a->strategy = QS_NONE;
    a->symmetric = 1;
    a->dynamic = QDYN_STATIC;
    a->actorder = QORDER_NONE;
    a->scale_dtype = FMOE_DTYPE_INVALID;
}

static const char *const strategy_names[] = {
    [QS_NONE] = "none",   [QS_TENSOR] = "tensor", [QS_CHANNEL] = "channel",           [QS_GROUP] = "group",
    [QS_BLOCK] = "block", [QS_TOKEN] = "token",   [QS_TENSOR_GROUP] = "tensor_group", [QS_ATTN_HEAD] = "attn_head",
};

const char *qargs_strategy_name(int strategy)
{
    if (strategy < 0 || strategy > QS_ATTN_HEAD)
        return "?";
    return strategy_names[strategy];
}

/* Every key QuantizationArgs has; anything else is an error there too. */
static const char *const known_keys[] = {
    "num_bits", "type",     "symmetric",   "group_size", "strategy", "block_structure",
    "dynamic",  "actorder", "scale_dtype", "zp_dtype",   "observer", "observer_kwargs",
};

#define KNOWN_KEYS_TEXT \
    "num_bits, type, symmetric, group_size, strategy, block_structure, dynamic, actorder, scale_dtype, " \
    "zp_dtype, observer, observer_kwargs"

static fmoe_status check_keys(qjson *j, const json_t *obj)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        int known = 0;
        for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++)
            known |= strcmp(key, known_keys[i]) == 0;
        if (!known) {
            size_t mark = qjson_enter_key(j, key);
            fmoe_status st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                                        "unknown key (QuantizationArgs has " KNOWN_KEYS_TEXT ")");
            qjson_leave(j, mark);
            return st;
        }
    }
    return FMOE_STATUS_OK;
}

/* A failure at member `key`. */
static fmoe_status fail_at(qjson *j, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static fmoe_status fail_at(qjson *j, const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mark = qjson_enter_key(j, key);
    fmoe_status st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "%s", msg);
    qjson_leave(j, mark);
    return st;
}

static fmoe_status read_num_bits(qjson *j, const json_t *obj, qargs *a)
{
    long long v = a->num_bits;
    int given = 0;
    fmoe_status st = qjson_int(j, obj, "num_bits", 0, &v, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    if (v < 1 || v > 32) {
        return fail_at(j, "num_bits", "expected 1 to 32 bits, got %lld", v);
    }
    a->num_bits = (uint32_t)v;
    return FMOE_STATUS_OK;
}

static fmoe_status read_type(qjson *j, const json_t *obj, qargs *a)
{
    const char *s = NULL;
    int given = 0;
    fmoe_status st = qjson_string(j, obj, "type", 0, &s, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    if (strcasecmp(s, "int") == 0)
        a->type = QTYPE_INT;
    else if (strcasecmp(s, "float") == 0)
        a->type = QTYPE_FLOAT;
    else
        return fail_at(j, "type", "expected \"int\" or \"float\", got \"%s\"", s);
    return FMOE_STATUS_OK;
}

static fmoe_status read_group_size(qjson *j, const json_t *obj, qargs *a)
{
    long long v = 0;
    int given = 0;
    fmoe_status st = qjson_int(j, obj, "group_size", 0, &v, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    /* 0 is neither None, -1 nor positive: compressed-tensors refuses it. */
    if (v < -1 || v == 0)
        return fail_at(j, "group_size",
                       "Invalid group size %lld. Use group_size > 0 for strategy='group' and group_size = -1 for "
                       "'channel'",
                       v);
    if (v > (long long)QARGS_MAX_SIZE)
        return fail_at(j, "group_size", "group size %lld is out of range (at most 1048576)", v);
    a->group_size = (int32_t)v;
    return FMOE_STATUS_OK;
}

static fmoe_status read_strategy(qjson *j, const json_t *obj, qargs *a)
{
    const char *s = NULL;
    int given = 0;
    fmoe_status st = qjson_string(j, obj, "strategy", 0, &s, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    for (int k = QS_TENSOR; k <= QS_ATTN_HEAD; k++) {
        if (strcasecmp(s, strategy_names[k]) == 0) {
            a->strategy = k;
            return FMOE_STATUS_OK;
        }
    }
    return fail_at(j, "strategy",
                   "expected \"tensor\", \"channel\", \"group\", \"block\", \"token\", \"tensor_group\" or "
                   "\"attn_head\", got \"%s\"",
                   s);
}

/* One side of block_structure: a positive size the key can carry. */
static int block_side_ok(long long v)
{
    return v >= 1 && v <= (long long)QARGS_MAX_SIZE;
}

#define BLOCK_RULE "two sizes [rows, cols] from 1 to 1048576"

/* [rows, cols], or the older "RxC" string form. */
static fmoe_status read_block_structure(qjson *j, const json_t *obj, qargs *a)
{
    json_t *v = qjson_member(obj, "block_structure");
    if (!v)
        return FMOE_STATUS_OK;
    size_t mark = qjson_enter_key(j, "block_structure");
    fmoe_status st = FMOE_STATUS_OK;
    long long rows = 0, cols = 0;
    if (json_is_string(v)) {
        char tail = 0;
        if (sscanf(json_string_value(v), "%lldx%lld%c", &rows, &cols, &tail) != 2 || !block_side_ok(rows) ||
            !block_side_ok(cols))
            st = qjson_expected(j, v, BLOCK_RULE);
    } else if (!json_is_array(v) || json_array_size(v) != 2) {
        st = qjson_expected(j, v, BLOCK_RULE);
    } else {
        for (size_t i = 0; i < 2 && st == FMOE_STATUS_OK; i++) {
            json_t *side = json_array_get(v, i);
            size_t at = qjson_enter_index(j, i);
            if (!json_is_integer(side))
                st = qjson_expected(j, side, "an integer");
            else if (!block_side_ok((long long)json_integer_value(side)))
                st = qjson_expected(j, side, "a size from 1 to 1048576");
            qjson_leave(j, at);
            if (i == 0)
                rows = json_is_integer(side) ? (long long)json_integer_value(side) : 0;
            else
                cols = json_is_integer(side) ? (long long)json_integer_value(side) : 0;
        }
    }
    qjson_leave(j, mark);
    if (st == FMOE_STATUS_OK) {
        a->block_n = (uint32_t)rows;
        a->block_k = (uint32_t)cols;
    }
    return st;
}

static fmoe_status read_dynamic(qjson *j, const json_t *obj, qargs *a)
{
    json_t *v = qjson_member(obj, "dynamic");
    if (!v)
        return FMOE_STATUS_OK;
    if (json_is_boolean(v)) {
        a->dynamic = json_is_true(v) ? QDYN_DYNAMIC : QDYN_STATIC;
        return FMOE_STATUS_OK;
    }
    if (json_is_string(v) && strcasecmp(json_string_value(v), "local") == 0) {
        a->dynamic = QDYN_LOCAL;
        return FMOE_STATUS_OK;
    }
    size_t mark = qjson_enter_key(j, "dynamic");
    fmoe_status st = qjson_expected(j, v, "true, false or \"local\"");
    qjson_leave(j, mark);
    return st;
}

static fmoe_status read_actorder(qjson *j, const json_t *obj, qargs *a)
{
    static const struct {
        const char *name;
        int value;
    } orders[] = {{"group", QORDER_GROUP},
                  {"dynamic", QORDER_GROUP},
                  {"weight", QORDER_WEIGHT},
                  {"static", QORDER_WEIGHT}};
    json_t *v = qjson_member(obj, "actorder");
    if (!v)
        return FMOE_STATUS_OK;
    if (json_is_boolean(v)) {
        a->actorder = json_is_true(v) ? QORDER_GROUP : QORDER_NONE;
        return FMOE_STATUS_OK;
    }
    if (json_is_string(v)) {
        for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
            if (strcasecmp(json_string_value(v), orders[i].name) == 0) {
                a->actorder = orders[i].value;
                return FMOE_STATUS_OK;
            }
        }
    }
    size_t mark = qjson_enter_key(j, "actorder");
    fmoe_status st = qjson_expected(j, v, "null, true, false, \"group\", \"weight\", \"dynamic\" or \"static\"");
    qjson_leave(j, mark);
    return st;
}

/* A torch dtype name, "torch.uint8" or "uint8". */
static fmoe_status read_torch_dtype(qjson *j, const json_t *obj, const char *key, fmoe_dtype *out)
{
    const char *s = NULL;
    int given = 0;
    fmoe_status st = qjson_string(j, obj, key, 0, &s, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    const char *name = strncmp(s, "torch.", 6) == 0 ? s + 6 : s;
    fmoe_dtype dt = fmoe_dtype_from_name(name);
    if (dt == FMOE_DTYPE_INVALID)
        return fail_at(j, key, "No such torch dtype `torch.%s`", name);
    *out = dt;
    return FMOE_STATUS_OK;
}

/* Fields we only check for type: they do not change the scheme. */
static fmoe_status read_unused(qjson *j, const json_t *obj)
{
    fmoe_dtype zp = FMOE_DTYPE_INVALID;
    const char *observer = NULL;
    json_t *kwargs = NULL;
    fmoe_status st = read_torch_dtype(j, obj, "zp_dtype", &zp);
    if (st == FMOE_STATUS_OK)
        st = qjson_string(j, obj, "observer", 0, &observer, NULL);
    if (st == FMOE_STATUS_OK)
        st = qjson_object(j, obj, "observer_kwargs", 0, &kwargs, NULL);
    return st;
}

/* compressed-tensors' model validator: infer the strategy, then refuse what
 * it refuses. Messages are its own. */
static fmoe_status validate(qjson *j, qargs *a)
{
    if (a->strategy == QS_NONE)
        a->strategy = a->group_size > 0 ? QS_GROUP : a->group_size == -1 ? QS_CHANNEL : QS_TENSOR;
    int grouped = a->strategy == QS_GROUP || a->strategy == QS_TENSOR_GROUP;
    const char *name = qargs_strategy_name(a->strategy);
    if (a->strategy == QS_TOKEN && a->dynamic == QDYN_STATIC)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "Cannot perform static token quantization, please use `dynamic=True`");
    if (grouped && a->group_size <= 0)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "strategy %s requires group_size to be set to a positive value", name);
    if (!grouped && a->group_size > 0)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "group_size requires strategy to be set to 'group'");
    if (a->strategy == QS_BLOCK && !a->block_n)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "Block strategy requires block structure");
    if (a->strategy != QS_BLOCK && a->block_n)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "Block structure requires block strategy");
    if (a->actorder == QORDER_GROUP && !grouped)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "Must use group or tensor_group quantization strategy in order to apply group activation "
                          "ordering");
    if (a->dynamic != QDYN_STATIC && !grouped && a->strategy != QS_TOKEN && a->strategy != QS_TENSOR)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "One of (token, tensor, tensor_group, group) must be used for dynamic quant.");
    if (a->dynamic == QDYN_LOCAL && a->strategy != QS_TENSOR_GROUP)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "local is only supported for strategy tensor_group");
    return FMOE_STATUS_OK;
}

fmoe_status qargs_read(qjson *j, const json_t *obj, qargs *out)
{
    qargs a;
    qargs_defaults(&a);
    fmoe_status st = check_keys(j, obj);
    if (st == FMOE_STATUS_OK)
        st = read_num_bits(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_type(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = qjson_bool(j, obj, "symmetric", 0, &a.symmetric, NULL);
    if (st == FMOE_STATUS_OK)
        st = read_group_size(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_strategy(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_block_structure(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_dynamic(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_actorder(j, obj, &a);
    if (st == FMOE_STATUS_OK)
        st = read_torch_dtype(j, obj, "scale_dtype", &a.scale_dtype);
    if (st == FMOE_STATUS_OK)
        st = read_unused(j, obj);
    if (st == FMOE_STATUS_OK)
        st = validate(j, &a);
    if (st == FMOE_STATUS_OK)
        *out = a;
    return st;
}

void qargs_describe(const qargs *a, char *buf, size_t cap)
{
    static const char *const dynamic_names[] = {"false", "true", "\"local\""};
    static const char *const order_names[] = {"none", "group", "weight"};
    int n = snprintf(buf, cap, "type=%s num_bits=%u strategy=%s", a->type == QTYPE_FLOAT ? "float" : "int", a->num_bits,
                     qargs_strategy_name(a->strategy));
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len < cap && a->group_size)
        len += (size_t)snprintf(buf + len, cap - len, " group_size=%d", a->group_size);
    if (len < cap && a->block_n)
        len += (size_t)snprintf(buf + len, cap - len, " block_structure=[%u, %u]", a->block_n, a->block_k);
    if (len < cap)
        len += (size_t)snprintf(buf + len, cap - len, " symmetric=%s dynamic=%s", a->symmetric ? "true" : "false",
                                dynamic_names[a->dynamic]);
    if (len < cap && a->actorder)
        len += (size_t)snprintf(buf + len, cap - len, " actorder=%s", order_names[a->actorder]);
    if (len < cap && a->scale_dtype != FMOE_DTYPE_INVALID)
        snprintf(buf + len, cap - len, " scale_dtype=%s", fmoe_dtype_name(a->scale_dtype));
}
