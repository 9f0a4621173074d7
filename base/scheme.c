/*
 * base/scheme.c - the canonical scheme key: fmoe_scheme <-> text.
 *
 * The registry, the manifests and the TOML file all name schemes by key, so
 * the key must be canonical: one scheme, one string. The struct is canonical
 * too (defaults written out, unused fields 0), which makes "same scheme" a
 * plain comparison on either side. Grammar and rules: docs/SCHEMES.md.
 *
 *   key   = side [ "/" side ]           weights, then activations
 *   side  = dtype { ":" attribute }
 *
 * Canonical attribute order: strategy, actorder, scale, dynamic, asym.
 */
#include "base/scheme.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* Vocabulary                                                                */
/* ------------------------------------------------------------------------ */

typedef struct dtype_token {
    fmoe_dtype dtype;
    const char *token;
} dtype_token;

/* Value types a side may name, in the order error messages list them. The
 * first three are unquantized storage types (weights only, no attributes). */
static const dtype_token value_tokens[] = {
    {FMOE_DTYPE_F32, "f32"},
    {FMOE_DTYPE_BF16, "bf16"},
    {FMOE_DTYPE_F16, "f16"},
    {FMOE_DTYPE_FP8_E4M3FN, "fp8e4m3"},
    {FMOE_DTYPE_FP8_E4M3FNUZ, "fp8e4m3fnuz"},
    {FMOE_DTYPE_FP8_E5M2, "fp8e5m2"},
    {FMOE_DTYPE_INT8, "int8"},
    {FMOE_DTYPE_INT4, "int4"},
    {FMOE_DTYPE_FP4_E2M1X2, "fp4"},
};

/* Weight scale types; F32 is the default and never written. */
static const dtype_token scale_tokens[] = {
    {FMOE_DTYPE_F32, "f32"},     {FMOE_DTYPE_BF16, "bf16"}, {FMOE_DTYPE_F16, "f16"}, {FMOE_DTYPE_FP8_E4M3FN, "fp8e4m3"},
    {FMOE_DTYPE_UE8M0, "ue8m0"},
};

static const char *token_of(const dtype_token *table, size_t n, fmoe_dtype dtype)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].dtype == dtype)
            return table[i].token;
    return NULL;
}

static const char *value_token(fmoe_dtype dtype)
{
    return token_of(value_tokens, COUNT_OF(value_tokens), dtype);
}

static const char *scale_token(fmoe_dtype dtype)
{
    return token_of(scale_tokens, COUNT_OF(scale_tokens), dtype);
}

static int is_unquantized(fmoe_dtype dtype)
{
    return dtype == FMOE_DTYPE_F32 || dtype == FMOE_DTYPE_BF16 || dtype == FMOE_DTYPE_F16;
}

/* Zero points only exist for integer grids; no float format we know of
 * has one, so "asym" on a float type is a mistake, not a scheme. */
static int is_integer(fmoe_dtype dtype)
{
    return dtype == FMOE_DTYPE_INT8 || dtype == FMOE_DTYPE_INT4;
}

/* "tensor", "group128", "block128x128", ... ("?" for an unknown value). */
static void strategy_text(int32_t strategy, uint32_t group, uint32_t block_n, uint32_t block_k, char *buf, size_t cap)
{
    switch (strategy) {
    case FMOE_QSTRATEGY_NONE:
        snprintf(buf, cap, "none");
        break;
    case FMOE_QSTRATEGY_TENSOR:
        snprintf(buf, cap, "tensor");
        break;
    case FMOE_QSTRATEGY_CHANNEL:
        snprintf(buf, cap, "channel");
        break;
    case FMOE_QSTRATEGY_TOKEN:
        snprintf(buf, cap, "token");
        break;
    case FMOE_QSTRATEGY_GROUP:
        snprintf(buf, cap, "group%" PRIu32, group);
        break;
    case FMOE_QSTRATEGY_BLOCK:
        snprintf(buf, cap, "block%" PRIu32 "x%" PRIu32, block_n, block_k);
        break;
    case FMOE_QSTRATEGY_TENSOR_GROUP:
        snprintf(buf, cap, "tgroup%" PRIu32, group);
        break;
    default:
        snprintf(buf, cap, "%" PRId32 "?", strategy);
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Validation (shared by fmoe_scheme_key and fmoe_scheme_parse)              */
/* ------------------------------------------------------------------------ */

/* Reasons are written in key vocabulary where a key can express the mistake
 * and in field names where only a hand-built struct can. */
typedef struct reason {
    char text[256];
} reason;

static int reject(reason *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int reject(reason *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text, sizeof r->text, fmt, ap);
    va_end(ap);
    return 0;
}

static int size_in_range(uint32_t n)
{
    return n >= 1 && n <= FMOE_SCHEME_MAX_GROUP;
}

static int check_unquantized(const fmoe_scheme *s, reason *r)
{
    const char *name = value_token(s->w_dtype);
    if (s->w_strategy || s->w_group_size || s->w_block_n || s->w_block_k || s->w_scale_dtype || s->w_symmetric ||
        s->w_actorder)
        return reject(r, "unquantized weights (%s) need w_strategy none and every other w_* field 0", name);
    if (s->a_dtype || s->a_strategy || s->a_group_size || s->a_dynamic || s->a_symmetric)
        return reject(r, "an unquantized scheme (\"%s\") has no activation side", name);
    return 1;
}

static int check_weight_strategy(const fmoe_scheme *s, const char *name, reason *r)
{
    int grouped = s->w_strategy == FMOE_QSTRATEGY_GROUP || s->w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP;
    int blocked = s->w_strategy == FMOE_QSTRATEGY_BLOCK;
    switch (s->w_strategy) {
    case FMOE_QSTRATEGY_NONE:
        return reject(r, "weight dtype \"%s\" needs a strategy (tensor, channel, group<N>, block<N>x<K>, tgroup<N>)",
                      name);
    case FMOE_QSTRATEGY_TOKEN:
        return reject(r, "attribute \"token\" applies to activations only");
    case FMOE_QSTRATEGY_TENSOR:
    case FMOE_QSTRATEGY_CHANNEL:
    case FMOE_QSTRATEGY_GROUP:
    case FMOE_QSTRATEGY_BLOCK:
    case FMOE_QSTRATEGY_TENSOR_GROUP:
        break;
    default:
        return reject(r, "w_strategy %" PRId32 " is unknown", s->w_strategy);
    }
    if (grouped && !size_in_range(s->w_group_size))
        return reject(r, "w_group_size %" PRIu32 " is out of range (1..%u)", s->w_group_size, FMOE_SCHEME_MAX_GROUP);
    if (!grouped && s->w_group_size)
        return reject(r, "w_group_size must be 0 without a group strategy, not %" PRIu32, s->w_group_size);
    if (blocked && (!size_in_range(s->w_block_n) || !size_in_range(s->w_block_k)))
        return reject(r, "w_block_n x w_block_k %" PRIu32 "x%" PRIu32 " is out of range (1..%u)", s->w_block_n,
                      s->w_block_k, FMOE_SCHEME_MAX_GROUP);
    if (!blocked && (s->w_block_n || s->w_block_k))
        return reject(r, "w_block_n and w_block_k must be 0 without the block strategy");
    return 1;
}

static int check_weights(const fmoe_scheme *s, reason *r)
{
    if (is_unquantized(s->w_dtype))
        return check_unquantized(s, r);
    const char *name = value_token(s->w_dtype);
    if (!name)
        return reject(r, "w_dtype %" PRId32 " (%s) is not a scheme value type", s->w_dtype,
                      fmoe_dtype_name(s->w_dtype));
    if (!check_weight_strategy(s, name, r))
        return 0;
    if (!scale_token(s->w_scale_dtype))
        return reject(r, "w_scale_dtype %" PRId32 " (%s) is not a scale type (f32, bf16, f16, fp8e4m3, ue8m0)",
                      s->w_scale_dtype, fmoe_dtype_name(s->w_scale_dtype));
    if (s->w_symmetric > 1)
        return reject(r, "w_symmetric must be 0 or 1, not %" PRIu32, s->w_symmetric);
    if (!s->w_symmetric && !is_integer(s->w_dtype))
        return reject(r, "\"asym\" needs an integer type (int8, int4), not %s", name);
    if (s->w_actorder == FMOE_ACTORDER_NONE)
        return 1;
    if (s->w_actorder != FMOE_ACTORDER_GROUP && s->w_actorder != FMOE_ACTORDER_WEIGHT)
        return reject(r, "w_actorder %" PRId32 " is unknown", s->w_actorder);
    if (s->w_strategy != FMOE_QSTRATEGY_GROUP) {
        char text[48];
        strategy_text(s->w_strategy, s->w_group_size, s->w_block_n, s->w_block_k, text, sizeof text);
        return reject(r, "\"%s\" needs the group<N> strategy, not %s",
                      s->w_actorder == FMOE_ACTORDER_GROUP ? "actorder" : "actorder-weight", text);
    }
    return 1;
}

static int check_activation_strategy(const fmoe_scheme *s, const char *name, reason *r)
{
    int grouped = s->a_strategy == FMOE_QSTRATEGY_GROUP || s->a_strategy == FMOE_QSTRATEGY_TENSOR_GROUP;
    switch (s->a_strategy) {
    case FMOE_QSTRATEGY_NONE:
        return reject(r, "activation dtype \"%s\" needs a strategy (tensor, token, group<N>, tgroup<N>)", name);
    case FMOE_QSTRATEGY_CHANNEL:
        return reject(r, "attribute \"channel\" applies to weights only");
    case FMOE_QSTRATEGY_BLOCK:
        return reject(r, "attribute \"block<N>x<K>\" applies to weights only");
    case FMOE_QSTRATEGY_TENSOR:
    case FMOE_QSTRATEGY_TOKEN:
    case FMOE_QSTRATEGY_GROUP:
    case FMOE_QSTRATEGY_TENSOR_GROUP:
        break;
    default:
        return reject(r, "a_strategy %" PRId32 " is unknown", s->a_strategy);
    }
    if (grouped && !size_in_range(s->a_group_size))
        return reject(r, "a_group_size %" PRIu32 " is out of range (1..%u)", s->a_group_size, FMOE_SCHEME_MAX_GROUP);
    if (!grouped && s->a_group_size)
        return reject(r, "a_group_size must be 0 without a group strategy, not %" PRIu32, s->a_group_size);
    return 1;
}

static int check_activations(const fmoe_scheme *s, reason *r)
{
    if (s->a_dtype == FMOE_DTYPE_INVALID) {
        if (s->a_strategy || s->a_group_size || s->a_dynamic || s->a_symmetric)
            return reject(r, "unquantized activations (a_dtype 0) need every other a_* field 0");
        return 1;
    }
    const char *name = value_token(s->a_dtype);
    if (!name || is_unquantized(s->a_dtype))
        return reject(r, "a_dtype %" PRId32 " (%s) is not a quantized value type", s->a_dtype,
                      fmoe_dtype_name(s->a_dtype));
    if (!check_activation_strategy(s, name, r))
        return 0;
    if (s->a_dynamic > 1)
        return reject(r, "a_dynamic must be 0 or 1, not %" PRIu32, s->a_dynamic);
    if (s->a_symmetric > 1)
        return reject(r, "a_symmetric must be 0 or 1, not %" PRIu32, s->a_symmetric);
    if (!s->a_symmetric && !is_integer(s->a_dtype))
        return reject(r, "\"asym\" needs an integer type (int8, int4), not %s", name);
    /* A static scale comes from the checkpoint, so it cannot depend on
     * which tokens arrive: only a per-tensor scale can be static. */
    if (s->a_strategy != FMOE_QSTRATEGY_TENSOR && !s->a_dynamic) {
        char text[48];
        strategy_text(s->a_strategy, s->a_group_size, 0, 0, text, sizeof text);
        return reject(r, "activation strategy \"%s\" needs \"dynamic\" (only a per-tensor scale can be static)", text);
    }
    return 1;
}

static int scheme_check(const fmoe_scheme *s, reason *r)
{
    if (s->struct_size < FMOE_SCHEME_SIZE_V1)
        return reject(r, "struct_size %zu is smaller than %zu (set it to sizeof(fmoe_scheme))", s->struct_size,
                      (size_t)FMOE_SCHEME_SIZE_V1);
    if (!check_weights(s, r))
        return 0;
    return is_unquantized(s->w_dtype) || check_activations(s, r);
}

fmoe_status fmoe_scheme_validate(const fmoe_scheme *scheme)
{
    reason r;
    if (!scheme)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "scheme: NULL");
    if (!scheme_check(scheme, &r))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "scheme: %s", r.text);
    return FMOE_STATUS_OK;
}

int fmoe_scheme_is_quantized(const fmoe_scheme *scheme)
{
    return scheme && scheme->w_strategy != FMOE_QSTRATEGY_NONE;
}

/* ------------------------------------------------------------------------ */
/* Scheme -> key                                                             */
/* ------------------------------------------------------------------------ */

/* The key under construction, with room to spare: running out of it is
 * recorded (and reported as a bug) rather than silently cut. */
typedef struct key_text {
    char buf[2 * FMOE_SCHEME_KEY_MAX];
    size_t len;
    int overflow;
} key_text;

static void key_put(key_text *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void key_put(key_text *k, const char *fmt, ...)
{
    size_t room = sizeof k->buf - k->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(k->buf + k->len, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        k->overflow = 1;
        k->len = sizeof k->buf - 1;
        return;
    }
    k->len += (size_t)n;
}

static void key_put_strategy(key_text *k, int32_t strategy, uint32_t group, uint32_t block_n, uint32_t block_k)
{
    char text[48];
    strategy_text(strategy, group, block_n, block_k, text, sizeof text);
    key_put(k, ":%s", text);
}

/* Only called on a validated scheme: every token lookup succeeds. */
static void key_write(const fmoe_scheme *s, key_text *k)
{
    key_put(k, "%s", value_token(s->w_dtype));
    if (is_unquantized(s->w_dtype))
        return;
    key_put_strategy(k, s->w_strategy, s->w_group_size, s->w_block_n, s->w_block_k);
    if (s->w_actorder == FMOE_ACTORDER_GROUP)
        key_put(k, ":actorder");
    if (s->w_actorder == FMOE_ACTORDER_WEIGHT)
        key_put(k, ":actorder-weight");
    if (s->w_scale_dtype != FMOE_DTYPE_F32)
        key_put(k, ":scale-%s", scale_token(s->w_scale_dtype));
    if (!s->w_symmetric)
        key_put(k, ":asym");
    if (s->a_dtype == FMOE_DTYPE_INVALID)
        return;
    key_put(k, "/%s", value_token(s->a_dtype));
    key_put_strategy(k, s->a_strategy, s->a_group_size, 0, 0);
    if (s->a_dynamic)
        key_put(k, ":dynamic");
    if (!s->a_symmetric)
        key_put(k, ":asym");
}

fmoe_status fmoe_scheme_key(const fmoe_scheme *scheme, char *key, size_t cap)
{
    fmoe_error_clear();
    if (!key)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_scheme_key: key buffer is NULL");
    if (cap > 0)
        key[0] = '\0'; /* whatever fails below, the caller holds a string */
    fmoe_status st = fmoe_scheme_validate(scheme);
    if (st != FMOE_STATUS_OK)
        return st;
    key_text k = {.len = 0};
    key_write(scheme, &k);
    /* The grammar bounds every key below FMOE_SCHEME_KEY_MAX (tests prove
     * the longest one); exceeding it is a bug here, not a caller error. */
    if (k.overflow || k.len + 1 > FMOE_SCHEME_KEY_MAX)
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "scheme key \"%s\" exceeds FMOE_SCHEME_KEY_MAX", k.buf);
    if (k.len + 1 > cap)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "scheme key \"%s\" needs %zu bytes, buffer has %zu", k.buf,
                              k.len + 1, cap);
    memcpy(key, k.buf, k.len + 1);
    return FMOE_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* Key -> scheme                                                             */
/* ------------------------------------------------------------------------ */

/* A piece of the key, not NUL-terminated. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* For "%.*s"; keys longer than INT_MAX are only quoted in part. */
#define SPAN_FMT(s) (int)((s).n > INT_MAX ? INT_MAX : (s).n), (s).p

static int span_is(span s, const char *text)
{
    return strlen(text) == s.n && memcmp(s.p, text, s.n) == 0;
}

/* 1 and the rest of `s` after `prefix` in *rest if `s` starts with it. */
static int span_after(span s, const char *prefix, span *rest)
{
    size_t n = strlen(prefix);
    if (s.n < n || memcmp(s.p, prefix, n) != 0)
        return 0;
    *rest = (span){s.p + n, s.n - n};
    return 1;
}

/* Digits only, value in 1..FMOE_SCHEME_MAX_GROUP. */
static int span_size(span s, uint32_t *out)
{
    uint32_t v = 0;
    if (s.n == 0)
        return 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return 0;
        v = v * 10 + (uint32_t)(s.p[i] - '0');
        if (v > FMOE_SCHEME_MAX_GROUP) /* stop before it can wrap */
            return 0;
    }
    *out = v;
    return v >= 1;
}

static int span_dtype(const dtype_token *table, size_t n, span s, fmoe_dtype *out)
{
    for (size_t i = 0; i < n; i++) {
        if (span_is(s, table[i].token)) {
            *out = table[i].dtype;
            return 1;
        }
    }
    return 0;
}

/* "f32, bf16, ..." with each token prefixed by `prefix`. */
static void token_list(const dtype_token *table, size_t n, const char *prefix, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s%s", i ? ", " : "", prefix, table[i].token);
}

/* Which attribute a token sets; a side holds one value per slot. */
enum { SLOT_STRATEGY, SLOT_ACTORDER, SLOT_SCALE, SLOT_DYNAMIC, SLOT_SYMMETRY, SLOT_COUNT };

#define SIDE_WEIGHTS     1u
#define SIDE_ACTIVATIONS 2u

typedef struct attr {
    int slot;
    unsigned sides;  /* SIDE_* it may appear on */
    int32_t value;   /* strategy, actorder, scale dtype, dynamic or symmetric */
    uint32_t n1, n2; /* group size, or block n and k */
} attr;

typedef struct fixed_attr {
    const char *text;
    int slot;
    unsigned sides;
    int32_t value;
} fixed_attr;

/* "sym" and "static" spell out defaults; the canonical key omits them. */
static const fixed_attr fixed_attrs[] = {
    {"tensor", SLOT_STRATEGY, SIDE_WEIGHTS | SIDE_ACTIVATIONS, FMOE_QSTRATEGY_TENSOR},
    {"channel", SLOT_STRATEGY, SIDE_WEIGHTS, FMOE_QSTRATEGY_CHANNEL},
    {"token", SLOT_STRATEGY, SIDE_ACTIVATIONS, FMOE_QSTRATEGY_TOKEN},
    {"asym", SLOT_SYMMETRY, SIDE_WEIGHTS | SIDE_ACTIVATIONS, 0},
    {"sym", SLOT_SYMMETRY, SIDE_WEIGHTS | SIDE_ACTIVATIONS, 1},
    {"actorder", SLOT_ACTORDER, SIDE_WEIGHTS, FMOE_ACTORDER_GROUP},
    {"actorder-weight", SLOT_ACTORDER, SIDE_WEIGHTS, FMOE_ACTORDER_WEIGHT},
    {"dynamic", SLOT_DYNAMIC, SIDE_ACTIVATIONS, 1},
    {"static", SLOT_DYNAMIC, SIDE_ACTIVATIONS, 0},
};

#define ATTR_EXPECTED \
    "tensor, channel, token, group<N>, block<N>x<K>, tgroup<N>, asym, sym, actorder, actorder-weight, " \
    "scale-<dtype>, dynamic, static"

/* A parse error: `scheme "<key>": <detail>`. */
static fmoe_status parse_fail(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fmoe_status parse_fail(const char *key, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "scheme \"%s\": %s", key, detail);
}

static fmoe_status parse_sized(const char *key, span tok, span digits, int32_t strategy, attr *a)
{
    a->slot = SLOT_STRATEGY;
    a->sides = SIDE_WEIGHTS | SIDE_ACTIVATIONS;
    a->value = strategy;
    if (!span_size(digits, &a->n1))
        return parse_fail(key, "bad size in \"%.*s\" (expected %s<N> with N in 1..%u)", SPAN_FMT(tok),
                          strategy == FMOE_QSTRATEGY_GROUP ? "group" : "tgroup", FMOE_SCHEME_MAX_GROUP);
    return FMOE_STATUS_OK;
}

static fmoe_status parse_block(const char *key, span tok, span dims, attr *a)
{
    a->slot = SLOT_STRATEGY;
    a->sides = SIDE_WEIGHTS;
    a->value = FMOE_QSTRATEGY_BLOCK;
    const char *x = memchr(dims.p, 'x', dims.n);
    size_t nlen = x ? (size_t)(x - dims.p) : dims.n;
    span n = {dims.p, nlen};
    span k = {dims.p + nlen + (x != NULL), x ? dims.n - nlen - 1 : 0};
    if (!x || !span_size(n, &a->n1) || !span_size(k, &a->n2))
        return parse_fail(key, "bad size in \"%.*s\" (expected block<N>x<K> with N and K in 1..%u)", SPAN_FMT(tok),
                          FMOE_SCHEME_MAX_GROUP);
    return FMOE_STATUS_OK;
}

static fmoe_status parse_scale(const char *key, span tok, span name, attr *a)
{
    fmoe_dtype dtype;
    a->slot = SLOT_SCALE;
    a->sides = SIDE_WEIGHTS;
    if (!span_dtype(scale_tokens, COUNT_OF(scale_tokens), name, &dtype)) {
        char list[128];
        token_list(scale_tokens, COUNT_OF(scale_tokens), "scale-", list, sizeof list);
        return parse_fail(key, "unknown scale dtype in \"%.*s\" (expected %s)", SPAN_FMT(tok), list);
    }
    a->value = dtype;
    return FMOE_STATUS_OK;
}

static fmoe_status parse_attr(const char *key, span tok, attr *a)
{
    span rest;
    *a = (attr){0};
    for (size_t i = 0; i < COUNT_OF(fixed_attrs); i++) {
        if (span_is(tok, fixed_attrs[i].text)) {
            a->slot = fixed_attrs[i].slot;
            a->sides = fixed_attrs[i].sides;
            a->value = fixed_attrs[i].value;
            return FMOE_STATUS_OK;
        }
    }
    if (span_after(tok, "tgroup", &rest))
        return parse_sized(key, tok, rest, FMOE_QSTRATEGY_TENSOR_GROUP, a);
    if (span_after(tok, "group", &rest))
        return parse_sized(key, tok, rest, FMOE_QSTRATEGY_GROUP, a);
    if (span_after(tok, "block", &rest))
        return parse_block(key, tok, rest, a);
    if (span_after(tok, "scale-", &rest))
        return parse_scale(key, tok, rest, a);
    return parse_fail(key, "unknown attribute \"%.*s\" (expected " ATTR_EXPECTED ")", SPAN_FMT(tok));
}

/* One side as parsed: the dtype and the attribute given for each slot. */
typedef struct side {
    fmoe_dtype dtype;
    attr attrs[SLOT_COUNT];
    span given[SLOT_COUNT]; /* the token that set the slot; p NULL if none */
} side;

static const char *side_name(unsigned which)
{
    return which == SIDE_WEIGHTS ? "weight" : "activation";
}

/* Next ':'-separated token of `text` from *pos; 0 when none is left. */
static int next_token(span text, size_t *pos, span *tok)
{
    if (*pos > text.n)
        return 0;
    const char *start = text.p + *pos;
    const char *colon = memchr(start, ':', text.n - *pos);
    size_t n = colon ? (size_t)(colon - start) : text.n - *pos;
    *tok = (span){start, n};
    *pos += n + 1;
    return 1;
}

static fmoe_status parse_dtype(const char *key, span tok, unsigned which, fmoe_dtype *out)
{
    if (tok.n == 0)
        return parse_fail(key, "missing %s dtype", side_name(which));
    if (!span_dtype(value_tokens, COUNT_OF(value_tokens), tok, out)) {
        char list[128];
        token_list(value_tokens, COUNT_OF(value_tokens), "", list, sizeof list);
        return parse_fail(key, "unknown dtype \"%.*s\" (expected %s)", SPAN_FMT(tok), list);
    }
    if (which == SIDE_ACTIVATIONS && is_unquantized(*out))
        return parse_fail(key, "activation dtype \"%.*s\" is not quantized (leave out the activation side)",
                          SPAN_FMT(tok));
    return FMOE_STATUS_OK;
}

/* Put one attribute into its slot, refusing repeats and contradictions. */
static fmoe_status side_add(const char *key, side *sd, unsigned which, span tok, const attr *a)
{
    if (!(a->sides & which))
        return parse_fail(key, "attribute \"%.*s\" applies to %s only", SPAN_FMT(tok),
                          which == SIDE_WEIGHTS ? "activations" : "weights");
    span prev = sd->given[a->slot];
    const attr *old = &sd->attrs[a->slot];
    int same = old->value == a->value && old->n1 == a->n1 && old->n2 == a->n2; /* group128 = group0128 */
    if (prev.p && same)
        return parse_fail(key, "duplicate attribute \"%.*s\"", SPAN_FMT(tok));
    if (prev.p)
        return parse_fail(key, "conflicting attributes \"%.*s\" and \"%.*s\"", SPAN_FMT(prev), SPAN_FMT(tok));
    sd->attrs[a->slot] = *a;
    sd->given[a->slot] = tok;
    return FMOE_STATUS_OK;
}

static fmoe_status parse_side(const char *key, span text, unsigned which, side *sd)
{
    size_t pos = 0;
    span tok, prev;
    memset(sd, 0, sizeof *sd);
    next_token(text, &pos, &tok);
    fmoe_status st = parse_dtype(key, tok, which, &sd->dtype);
    if (st != FMOE_STATUS_OK)
        return st;
    prev = tok;
    int unquantized = is_unquantized(sd->dtype);
    while (next_token(text, &pos, &tok)) {
        if (unquantized)
            return parse_fail(key, "unquantized dtype \"%.*s\" takes no attributes (got \"%.*s\")", SPAN_FMT(prev),
                              SPAN_FMT(tok));
        if (tok.n == 0)
            return parse_fail(key, "empty attribute after \"%.*s\"", SPAN_FMT(prev));
        attr a;
        st = parse_attr(key, tok, &a);
        if (st == FMOE_STATUS_OK)
            st = side_add(key, sd, which, tok, &a);
        if (st != FMOE_STATUS_OK)
            return st;
        prev = tok;
    }
    /* Strategy-less quantized sides are left to scheme_check, whose message
     * lists the strategies this side accepts. */
    return FMOE_STATUS_OK;
}

/* The slot's value, or `fallback` when the key did not give it. */
static int32_t side_value(const side *sd, int slot, int32_t fallback)
{
    return sd->given[slot].p ? sd->attrs[slot].value : fallback;
}

static void side_to_weights(const side *sd, fmoe_scheme *s)
{
    s->w_dtype = sd->dtype;
    if (is_unquantized(sd->dtype))
        return;
    const attr *strategy = &sd->attrs[SLOT_STRATEGY];
    s->w_strategy = side_value(sd, SLOT_STRATEGY, FMOE_QSTRATEGY_NONE);
    if (s->w_strategy == FMOE_QSTRATEGY_BLOCK) {
        s->w_block_n = strategy->n1;
        s->w_block_k = strategy->n2;
    } else {
        s->w_group_size = strategy->n1;
    }
    s->w_scale_dtype = side_value(sd, SLOT_SCALE, FMOE_DTYPE_F32);
    s->w_symmetric = (uint32_t)side_value(sd, SLOT_SYMMETRY, 1);
    s->w_actorder = side_value(sd, SLOT_ACTORDER, FMOE_ACTORDER_NONE);
}

static void side_to_activations(const side *sd, fmoe_scheme *s)
{
    s->a_dtype = sd->dtype;
    s->a_strategy = side_value(sd, SLOT_STRATEGY, FMOE_QSTRATEGY_NONE);
    s->a_group_size = sd->attrs[SLOT_STRATEGY].n1;
    s->a_dynamic = (uint32_t)side_value(sd, SLOT_DYNAMIC, 0);
    s->a_symmetric = (uint32_t)side_value(sd, SLOT_SYMMETRY, 1);
}

static fmoe_status scheme_from_key(const char *key, fmoe_scheme *out)
{
    size_t len = strlen(key);
    if (len == 0)
        return parse_fail(key, "empty key");
    const char *slash = memchr(key, '/', len);
    if (slash && memchr(slash + 1, '/', len - (size_t)(slash - key) - 1))
        return parse_fail(key, "more than one \"/\" (expected weights[/activations])");
    span wtext = {key, slash ? (size_t)(slash - key) : len};
    side w, a;
    fmoe_status st = parse_side(key, wtext, SIDE_WEIGHTS, &w);
    if (st != FMOE_STATUS_OK)
        return st;
    if (slash && is_unquantized(w.dtype))
        return parse_fail(key, "an unquantized scheme (\"%.*s\") has no activation side", SPAN_FMT(wtext));
    /* Each side is checked as soon as it is read, so the error reported is
     * the first one in reading order. */
    fmoe_scheme s;
    reason r;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    side_to_weights(&w, &s);
    if (!check_weights(&s, &r))
        return parse_fail(key, "%s", r.text);
    if (slash) {
        span atext = {slash + 1, len - wtext.n - 1};
        st = parse_side(key, atext, SIDE_ACTIVATIONS, &a);
        if (st != FMOE_STATUS_OK)
            return st;
        side_to_activations(&a, &s);
        if (!check_activations(&s, &r))
            return parse_fail(key, "%s", r.text);
    }
    memcpy(out, &s, sizeof s); /* padding included, so callers may memcmp */
    return FMOE_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* Public entry points                                                       */
/* ------------------------------------------------------------------------ */

void fmoe_scheme_init_unquantized(fmoe_scheme *scheme, fmoe_dtype dtype)
{
    if (!scheme)
        return;
    memset(scheme, 0, sizeof *scheme);
    scheme->struct_size = sizeof *scheme;
    scheme->w_dtype = dtype;
    scheme->w_strategy = FMOE_QSTRATEGY_NONE;
}

/* Fills the whole struct (sizeof(fmoe_scheme), struct_size set) on success
 * and leaves it untouched on failure. */
fmoe_status fmoe_scheme_parse(const char *key, fmoe_scheme *scheme)
{
    fmoe_error_clear();
    if (!key)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_scheme_parse: key is NULL");
    if (!scheme)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_scheme_parse: scheme is NULL");
    return scheme_from_key(key, scheme);
}
