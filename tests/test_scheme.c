/*
 * tests/test_scheme.c - the canonical scheme key (docs/SCHEMES.md): the
 * documented examples round-trip exactly, non-canonical spellings
 * canonicalize, every parse and key error has its exact message, the whole
 * discrete scheme space round-trips struct -> key -> struct, and seeded
 * random structs, spellings and strings keep the key canonical.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/scheme.h"
#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

#define ATTR_LIST \
    "(expected tensor, channel, token, group<N>, block<N>x<K>, tgroup<N>, asym, sym, actorder, actorder-weight, " \
    "scale-<dtype>, dynamic, static)"
#define DTYPE_LIST "(expected f32, bf16, f16, fp8e4m3, fp8e4m3fnuz, fp8e5m2, int8, int4, fp4)"
#define SCALE_LIST "(expected scale-f32, scale-bf16, scale-f16, scale-fp8e4m3, scale-ue8m0)"

static int scheme_equal(const fmoe_scheme *a, const fmoe_scheme *b)
{
    return a->struct_size == b->struct_size && a->w_dtype == b->w_dtype && a->w_strategy == b->w_strategy &&
           a->w_group_size == b->w_group_size && a->w_block_n == b->w_block_n && a->w_block_k == b->w_block_k &&
           a->w_scale_dtype == b->w_scale_dtype && a->w_symmetric == b->w_symmetric && a->w_actorder == b->w_actorder &&
           a->a_dtype == b->a_dtype && a->a_strategy == b->a_strategy && a->a_group_size == b->a_group_size &&
           a->a_dynamic == b->a_dynamic && a->a_symmetric == b->a_symmetric;
}

/* parse(key) must succeed and give back exactly `key`. */
static void assert_round_trip(const char *key, fmoe_scheme *out)
{
    char again[FMOE_SCHEME_KEY_MAX];
    fmoe_status st = fmoe_scheme_parse(key, out);
    ck_assert_msg(st == FMOE_STATUS_OK, "parse \"%s\": %s", key, fmoe_last_error());
    ck_assert_int_eq(fmoe_scheme_key(out, again, sizeof again), FMOE_STATUS_OK);
    ck_assert_str_eq(again, key);
}

/* The examples of docs/SCHEMES.md, with the fields each one must set. */
START_TEST(test_examples_round_trip)
{
    static const char *const examples[] = {
        "bf16",
        "f32",
        "f16",
        "fp8e4m3:tensor/fp8e4m3:tensor",
        "fp8e4m3:channel/fp8e4m3:token:dynamic",
        "fp8e4m3:block128x128/fp8e4m3:group128:dynamic",
        "int4:group128:actorder",
        "int8:channel",
        "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic",
        "fp4:group32:scale-ue8m0",
        "int4:channel/int8:token:dynamic:asym",
        "int4:group32:scale-bf16/int8:token:dynamic:asym",
        "fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic",
        "fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic",
        "int4:group128:actorder-weight:scale-f16:asym",
        "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic",
        "fp4:tgroup16:scale-fp8e4m3",
        "fp8e5m2:tensor",
    };
    fmoe_scheme s;
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        assert_round_trip(examples[i], &s);

    assert_round_trip("fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic", &s);
    ck_assert_uint_eq(s.struct_size, sizeof s);
    ck_assert_int_eq(s.w_dtype, FMOE_DTYPE_FP4_E2M1X2);
    ck_assert_int_eq(s.w_strategy, FMOE_QSTRATEGY_TENSOR_GROUP);
    ck_assert_uint_eq(s.w_group_size, 16);
    ck_assert_uint_eq(s.w_block_n, 0);
    ck_assert_uint_eq(s.w_block_k, 0);
    ck_assert_int_eq(s.w_scale_dtype, FMOE_DTYPE_FP8_E4M3FN);
    ck_assert_uint_eq(s.w_symmetric, 1);
    ck_assert_int_eq(s.w_actorder, FMOE_ACTORDER_NONE);
    ck_assert_int_eq(s.a_dtype, FMOE_DTYPE_FP4_E2M1X2);
    ck_assert_int_eq(s.a_strategy, FMOE_QSTRATEGY_TENSOR_GROUP);
    ck_assert_uint_eq(s.a_group_size, 16);
    ck_assert_uint_eq(s.a_dynamic, 1);
    ck_assert_uint_eq(s.a_symmetric, 1);

    assert_round_trip("fp8e4m3:block128x64/fp8e4m3:group64:dynamic", &s);
    ck_assert_int_eq(s.w_dtype, FMOE_DTYPE_FP8_E4M3FN);
    ck_assert_int_eq(s.w_strategy, FMOE_QSTRATEGY_BLOCK);
    ck_assert_uint_eq(s.w_block_n, 128);
    ck_assert_uint_eq(s.w_block_k, 64);
    ck_assert_uint_eq(s.w_group_size, 0);
    ck_assert_int_eq(s.w_scale_dtype, FMOE_DTYPE_F32);
    ck_assert_int_eq(s.a_strategy, FMOE_QSTRATEGY_GROUP);
    ck_assert_uint_eq(s.a_group_size, 64);

    assert_round_trip("int4:channel/int8:token:dynamic:asym", &s);
    ck_assert_int_eq(s.w_dtype, FMOE_DTYPE_INT4);
    ck_assert_int_eq(s.w_strategy, FMOE_QSTRATEGY_CHANNEL);
    ck_assert_uint_eq(s.w_symmetric, 1);
    ck_assert_int_eq(s.a_dtype, FMOE_DTYPE_INT8);
    ck_assert_int_eq(s.a_strategy, FMOE_QSTRATEGY_TOKEN);
    ck_assert_uint_eq(s.a_group_size, 0);
    ck_assert_uint_eq(s.a_dynamic, 1);
    ck_assert_uint_eq(s.a_symmetric, 0);

    assert_round_trip("int4:group128:actorder", &s);
    ck_assert_int_eq(s.w_actorder, FMOE_ACTORDER_GROUP);
    ck_assert_int_eq(s.a_dtype, FMOE_DTYPE_INVALID);
    ck_assert_int_eq(s.a_strategy, FMOE_QSTRATEGY_NONE);
    ck_assert_uint_eq(s.a_symmetric, 0);

    assert_round_trip("fp8e4m3:tensor/fp8e4m3:tensor", &s);
    ck_assert_int_eq(s.a_strategy, FMOE_QSTRATEGY_TENSOR);
    ck_assert_uint_eq(s.a_dynamic, 0);
}
END_TEST

START_TEST(test_unquantized)
{
    static const struct {
        fmoe_dtype dtype;
        const char *key;
    } cases[] = {{FMOE_DTYPE_F32, "f32"}, {FMOE_DTYPE_BF16, "bf16"}, {FMOE_DTYPE_F16, "f16"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmoe_scheme init, parsed;
        char key[FMOE_SCHEME_KEY_MAX];
        memset(&init, 0x5A, sizeof init);
        fmoe_scheme_init_unquantized(&init, cases[i].dtype);
        ck_assert_int_eq(fmoe_scheme_key(&init, key, sizeof key), FMOE_STATUS_OK);
        ck_assert_str_eq(key, cases[i].key);
        ck_assert_int_eq(fmoe_scheme_parse(cases[i].key, &parsed), FMOE_STATUS_OK);
        /* Both zero the whole struct, padding included. */
        ck_assert_int_eq(memcmp(&init, &parsed, sizeof init), 0);
        ck_assert_int_eq(fmoe_scheme_is_quantized(&parsed), 0);
    }
    fmoe_scheme_init_unquantized(NULL, FMOE_DTYPE_BF16); /* no crash */
    /* init_unquantized does not check; the key does. */
    fmoe_scheme s;
    char key[FMOE_SCHEME_KEY_MAX];
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_INT8);
    ck_assert_int_eq(fmoe_scheme_key(&s, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "scheme: weight dtype \"int8\" needs a strategy (tensor, channel, "
                                        "group<N>, block<N>x<K>, tgroup<N>)");
}
END_TEST

START_TEST(test_canonicalize)
{
    static const struct {
        const char *in, *canonical;
    } cases[] = {
        {"fp8e4m3:channel/fp8e4m3:dynamic:token", "fp8e4m3:channel/fp8e4m3:token:dynamic"},
        {"int4:actorder:group128", "int4:group128:actorder"},
        {"int4:sym:group128:scale-f32", "int4:group128"},
        {"fp8e4m3:tensor:sym/fp8e4m3:static:tensor:sym", "fp8e4m3:tensor/fp8e4m3:tensor"},
        {"int4:asym:scale-bf16:group32:actorder-weight", "int4:group32:actorder-weight:scale-bf16:asym"},
        {"int4:channel/int8:asym:dynamic:token", "int4:channel/int8:token:dynamic:asym"},
        {"fp4:scale-ue8m0:group0032", "fp4:group32:scale-ue8m0"},
        {"fp4:scale-fp8e4m3:tgroup16/fp4:dynamic:sym:tgroup16", "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic"},
        {"fp8e4m3:block0128x00128/fp8e4m3:dynamic:group128", "fp8e4m3:block128x128/fp8e4m3:group128:dynamic"},
        {"int8:channel:sym", "int8:channel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmoe_scheme a, b;
        char key[FMOE_SCHEME_KEY_MAX];
        ck_assert_msg(fmoe_scheme_parse(cases[i].in, &a) == FMOE_STATUS_OK, "%s: %s", cases[i].in, fmoe_last_error());
        ck_assert_int_eq(fmoe_scheme_key(&a, key, sizeof key), FMOE_STATUS_OK);
        ck_assert_str_eq(key, cases[i].canonical);
        ck_assert_int_eq(fmoe_scheme_parse(cases[i].canonical, &b), FMOE_STATUS_OK);
        ck_assert(scheme_equal(&a, &b));
    }
}
END_TEST

START_TEST(test_parse_errors)
{
    static const struct {
        const char *key, *detail;
    } cases[] = {
        /* structure */
        {"", "empty key"},
        {"a/b/c", "more than one \"/\" (expected weights[/activations])"},
        {"/fp8e4m3:token:dynamic", "missing weight dtype"},
        {":int4:group128", "missing weight dtype"},
        {"fp8e4m3:tensor/", "missing activation dtype"},
        {"int4::group128", "empty attribute after \"int4\""},
        {"int4:group128:", "empty attribute after \"group128\""},
        {"fp8e4m3:channel/fp8e4m3:token::dynamic", "empty attribute after \"token\""},
        /* unknown words */
        {"int4:grp128", "unknown attribute \"grp128\" " ATTR_LIST},
        {"int4:channel ", "unknown attribute \"channel \" " ATTR_LIST},
        {"int4:Channel", "unknown attribute \"Channel\" " ATTR_LIST},
        {"fp9:tensor", "unknown dtype \"fp9\" " DTYPE_LIST},
        {"Int4:channel", "unknown dtype \"Int4\" " DTYPE_LIST},
        {"fp8_e4m3fn:tensor", "unknown dtype \"fp8_e4m3fn\" " DTYPE_LIST},
        {"ue8m0:tensor", "unknown dtype \"ue8m0\" " DTYPE_LIST},
        {"int4:channel/fp9:token:dynamic", "unknown dtype \"fp9\" " DTYPE_LIST},
        {"int4:group128:scale-f8", "unknown scale dtype in \"scale-f8\" " SCALE_LIST},
        {"int4:group128:scale-", "unknown scale dtype in \"scale-\" " SCALE_LIST},
        {"int4:group128:scale-int8", "unknown scale dtype in \"scale-int8\" " SCALE_LIST},
        /* sizes */
        {"int4:group0", "bad size in \"group0\" (expected group<N> with N in 1..1048576)"},
        {"int4:group", "bad size in \"group\" (expected group<N> with N in 1..1048576)"},
        {"int4:group-1", "bad size in \"group-1\" (expected group<N> with N in 1..1048576)"},
        {"int4:group+8", "bad size in \"group+8\" (expected group<N> with N in 1..1048576)"},
        {"int4:group12a", "bad size in \"group12a\" (expected group<N> with N in 1..1048576)"},
        {"int4:group1048577", "bad size in \"group1048577\" (expected group<N> with N in 1..1048576)"},
        {"int4:group99999999999999999999", "bad size in \"group99999999999999999999\" (expected group<N> with N in "
                                           "1..1048576)"},
        {"fp4:tgroup0", "bad size in \"tgroup0\" (expected tgroup<N> with N in 1..1048576)"},
        {"fp8e4m3:block128", "bad size in \"block128\" (expected block<N>x<K> with N and K in 1..1048576)"},
        {"fp8e4m3:block128x", "bad size in \"block128x\" (expected block<N>x<K> with N and K in 1..1048576)"},
        {"fp8e4m3:blockx128", "bad size in \"blockx128\" (expected block<N>x<K> with N and K in 1..1048576)"},
        {"fp8e4m3:block0x128", "bad size in \"block0x128\" (expected block<N>x<K> with N and K in 1..1048576)"},
        {"fp8e4m3:block128x128x1", "bad size in \"block128x128x1\" (expected block<N>x<K> with N and K in 1..1048576)"},
        {"fp8e4m3:block128X128", "bad size in \"block128X128\" (expected block<N>x<K> with N and K in 1..1048576)"},
        /* repeats and contradictions */
        {"int4:group128:group128", "duplicate attribute \"group128\""},
        {"int4:group128:group0128", "duplicate attribute \"group0128\""},
        {"int4:channel:group128", "conflicting attributes \"channel\" and \"group128\""},
        {"int4:group128:group64", "conflicting attributes \"group128\" and \"group64\""},
        {"int4:group128:asym:sym", "conflicting attributes \"asym\" and \"sym\""},
        {"int4:group128:actorder:actorder-weight", "conflicting attributes \"actorder\" and \"actorder-weight\""},
        {"int4:group128:scale-bf16:scale-f16", "conflicting attributes \"scale-bf16\" and \"scale-f16\""},
        {"int4:group128:scale-bf16:scale-bf16", "duplicate attribute \"scale-bf16\""},
        {"fp8e4m3:tensor/fp8e4m3:tensor:dynamic:static", "conflicting attributes \"dynamic\" and \"static\""},
        {"fp8e4m3:channel/fp8e4m3:token:dynamic:dynamic", "duplicate attribute \"dynamic\""},
        {"fp8e4m3:tensor/fp8e4m3:tensor:token:dynamic", "conflicting attributes \"tensor\" and \"token\""},
        /* the wrong side */
        {"int8:token", "attribute \"token\" applies to activations only"},
        {"int8:channel:dynamic", "attribute \"dynamic\" applies to activations only"},
        {"int8:channel:static", "attribute \"static\" applies to activations only"},
        {"fp8e4m3:channel/fp8e4m3:channel:dynamic", "attribute \"channel\" applies to weights only"},
        {"fp8e4m3:block128x128/fp8e4m3:block128x128:dynamic", "attribute \"block128x128\" applies to weights only"},
        {"int4:channel/int8:token:dynamic:scale-bf16", "attribute \"scale-bf16\" applies to weights only"},
        {"int4:channel/int8:token:dynamic:actorder", "attribute \"actorder\" applies to weights only"},
        /* unquantized */
        {"bf16:channel", "unquantized dtype \"bf16\" takes no attributes (got \"channel\")"},
        {"f32:grp", "unquantized dtype \"f32\" takes no attributes (got \"grp\")"},
        {"f16:", "unquantized dtype \"f16\" takes no attributes (got \"\")"},
        {"bf16/fp8e4m3:token:dynamic", "an unquantized scheme (\"bf16\") has no activation side"},
        {"bf16/", "an unquantized scheme (\"bf16\") has no activation side"},
        {"fp8e4m3:channel/bf16", "activation dtype \"bf16\" is not quantized (leave out the activation side)"},
        {"fp8e4m3:channel/f32:token", "activation dtype \"f32\" is not quantized (leave out the activation side)"},
        /* missing strategy */
        {"int4", "weight dtype \"int4\" needs a strategy (tensor, channel, group<N>, block<N>x<K>, tgroup<N>)"},
        {"int4:asym:actorder", "weight dtype \"int4\" needs a strategy (tensor, channel, group<N>, block<N>x<K>, "
                               "tgroup<N>)"},
        {"int4/int8:token:dynamic", "weight dtype \"int4\" needs a strategy (tensor, channel, group<N>, "
                                    "block<N>x<K>, tgroup<N>)"},
        {"int4:channel/int8", "activation dtype \"int8\" needs a strategy (tensor, token, group<N>, tgroup<N>)"},
        {"int4:channel/int8:dynamic", "activation dtype \"int8\" needs a strategy (tensor, token, group<N>, "
                                      "tgroup<N>)"},
        /* combinations that name no real scheme */
        {"fp8e4m3:channel:asym", "\"asym\" needs an integer type (int8, int4), not fp8e4m3"},
        {"fp4:group32:scale-ue8m0:asym", "\"asym\" needs an integer type (int8, int4), not fp4"},
        {"int8:channel/fp8e4m3:token:dynamic:asym", "\"asym\" needs an integer type (int8, int4), not fp8e4m3"},
        {"int4:channel:actorder", "\"actorder\" needs the group<N> strategy, not channel"},
        {"int4:tgroup16:actorder-weight", "\"actorder-weight\" needs the group<N> strategy, not tgroup16"},
        {"fp8e4m3:block128x128:actorder", "\"actorder\" needs the group<N> strategy, not block128x128"},
        {"fp8e4m3:channel/fp8e4m3:token", "activation strategy \"token\" needs \"dynamic\" (only a per-tensor "
                                          "scale can be static)"},
        {"fp8e4m3:channel/fp8e4m3:token:static", "activation strategy \"token\" needs \"dynamic\" (only a "
                                                 "per-tensor scale can be static)"},
        {"fp8e4m3:block128x128/fp8e4m3:group128", "activation strategy \"group128\" needs \"dynamic\" (only a "
                                                  "per-tensor scale can be static)"},
        {"fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16", "activation strategy \"tgroup16\" needs \"dynamic\" (only a "
                                                    "per-tensor scale can be static)"},
        /* the first error in reading order wins */
        {"int4:channel:actorder/int8:grp", "\"actorder\" needs the group<N> strategy, not channel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fmoe_scheme s, before;
        char want[1024];
        memset(&s, 0xA5, sizeof s);
        before = s;
        snprintf(want, sizeof want, "scheme \"%s\": %s", cases[i].key, cases[i].detail);
        ck_assert_msg(fmoe_scheme_parse(cases[i].key, &s) == FMOE_STATUS_PARSE_ERROR, "accepted \"%s\"", cases[i].key);
        ck_assert_str_eq(fmoe_last_error(), want);
        ck_assert_msg(memcmp(&s, &before, sizeof s) == 0, "\"%s\" wrote the scheme", cases[i].key);
    }
}
END_TEST

START_TEST(test_parse_arguments)
{
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_scheme_parse(NULL, &s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_scheme_parse: key is NULL");
    ck_assert_int_eq(fmoe_scheme_parse("bf16", NULL), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_scheme_parse: scheme is NULL");
    /* Success clears an earlier error. */
    ck_assert_int_eq(fmoe_scheme_parse("bf16", &s), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_last_error(), "");
    /* A huge key is quoted (truncated by the error slot), never overrun. */
    static char big[100000];
    memset(big, 'a', sizeof big - 1);
    ck_assert_int_eq(fmoe_scheme_parse(big, &s), FMOE_STATUS_PARSE_ERROR);
    ck_assert_uint_eq(strlen(fmoe_last_error()), FMOE_ERROR_MAX - 1);
    ck_assert_int_eq(strncmp(fmoe_last_error(), "scheme \"aaaa", 12), 0);
}
END_TEST

/* A valid base for hand-made invalid structs. */
static fmoe_scheme parsed(const char *key)
{
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_scheme_parse(key, &s), FMOE_STATUS_OK);
    return s;
}

static void assert_key_error(const fmoe_scheme *s, const char *text)
{
    char key[FMOE_SCHEME_KEY_MAX];
    memset(key, 'z', sizeof key);
    ck_assert_int_eq(fmoe_scheme_key(s, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), text);
    ck_assert_int_eq(key[0], '\0');
}

START_TEST(test_key_errors)
{
    char key[FMOE_SCHEME_KEY_MAX], want[256];
    fmoe_scheme s = parsed("bf16");

    ck_assert_int_eq(fmoe_scheme_key(NULL, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "scheme: NULL");
    ck_assert_int_eq(fmoe_scheme_key(&s, NULL, 16), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_scheme_key: key buffer is NULL");

    /* Buffer size: exactly strlen + 1 is enough, one less is not. */
    ck_assert_int_eq(fmoe_scheme_key(&s, key, 5), FMOE_STATUS_OK);
    ck_assert_str_eq(key, "bf16");
    ck_assert_int_eq(fmoe_scheme_key(&s, key, 4), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "scheme key \"bf16\" needs 5 bytes, buffer has 4");
    ck_assert_int_eq(key[0], '\0');
    key[0] = 'q';
    ck_assert_int_eq(fmoe_scheme_key(&s, key, 0), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "scheme key \"bf16\" needs 5 bytes, buffer has 0");
    ck_assert_int_eq(key[0], 'q'); /* cap 0: not one byte written */

    s.struct_size = 0;
    snprintf(want, sizeof want, "scheme: struct_size 0 is smaller than %zu (set it to sizeof(fmoe_scheme))",
             (size_t)FMOE_SCHEME_SIZE_V1);
    assert_key_error(&s, want);

    /* Unquantized weights. */
    s = parsed("bf16");
    s.w_symmetric = 1;
    assert_key_error(&s, "scheme: unquantized weights (bf16) need w_strategy none and every other w_* field 0");
    s = parsed("f32");
    s.w_scale_dtype = FMOE_DTYPE_F32;
    assert_key_error(&s, "scheme: unquantized weights (f32) need w_strategy none and every other w_* field 0");
    s = parsed("bf16");
    s.w_strategy = FMOE_QSTRATEGY_CHANNEL;
    assert_key_error(&s, "scheme: unquantized weights (bf16) need w_strategy none and every other w_* field 0");
    s = parsed("bf16");
    s.a_dtype = FMOE_DTYPE_FP8_E4M3FN;
    assert_key_error(&s, "scheme: an unquantized scheme (\"bf16\") has no activation side");
    s = parsed("bf16");
    s.a_symmetric = 1;
    assert_key_error(&s, "scheme: an unquantized scheme (\"bf16\") has no activation side");

    /* Quantized weights. */
    s = parsed("int4:group128");
    s.w_dtype = FMOE_DTYPE_INT32;
    assert_key_error(&s, "scheme: w_dtype 10 (int32) is not a scheme value type");
    s.w_dtype = FMOE_DTYPE_INVALID;
    assert_key_error(&s, "scheme: w_dtype 0 (unknown) is not a scheme value type");
    s = parsed("int4:group128");
    s.w_strategy = 99;
    assert_key_error(&s, "scheme: w_strategy 99 is unknown");
    s.w_strategy = FMOE_QSTRATEGY_TOKEN;
    assert_key_error(&s, "scheme: attribute \"token\" applies to activations only");
    s = parsed("int4:group128");
    s.w_group_size = 0;
    assert_key_error(&s, "scheme: w_group_size 0 is out of range (1..1048576)");
    s.w_group_size = (1u << 20) + 1;
    assert_key_error(&s, "scheme: w_group_size 1048577 is out of range (1..1048576)");
    s = parsed("int4:channel");
    s.w_group_size = 64;
    assert_key_error(&s, "scheme: w_group_size must be 0 without a group strategy, not 64");
    s = parsed("int4:channel");
    s.w_block_k = 128;
    assert_key_error(&s, "scheme: w_block_n and w_block_k must be 0 without the block strategy");
    s = parsed("fp8e4m3:block128x128");
    s.w_block_k = 0;
    assert_key_error(&s, "scheme: w_block_n x w_block_k 128x0 is out of range (1..1048576)");
    s = parsed("int8:channel");
    s.w_scale_dtype = FMOE_DTYPE_INVALID;
    assert_key_error(&s, "scheme: w_scale_dtype 0 (unknown) is not a scale type (f32, bf16, f16, fp8e4m3, ue8m0)");
    s.w_scale_dtype = FMOE_DTYPE_INT8;
    assert_key_error(&s, "scheme: w_scale_dtype 8 (int8) is not a scale type (f32, bf16, f16, fp8e4m3, ue8m0)");
    s = parsed("int8:channel");
    s.w_symmetric = 2;
    assert_key_error(&s, "scheme: w_symmetric must be 0 or 1, not 2");
    s = parsed("int4:group128");
    s.w_actorder = 7;
    assert_key_error(&s, "scheme: w_actorder 7 is unknown");

    /* Activations. */
    s = parsed("int8:channel");
    s.a_dynamic = 1;
    assert_key_error(&s, "scheme: unquantized activations (a_dtype 0) need every other a_* field 0");
    s = parsed("int8:channel");
    s.a_strategy = FMOE_QSTRATEGY_TOKEN;
    assert_key_error(&s, "scheme: unquantized activations (a_dtype 0) need every other a_* field 0");
    s = parsed("int4:channel/int8:token:dynamic");
    s.a_dtype = FMOE_DTYPE_BF16;
    assert_key_error(&s, "scheme: a_dtype 2 (bf16) is not a quantized value type");
    s.a_dtype = FMOE_DTYPE_UE8M0;
    assert_key_error(&s, "scheme: a_dtype 13 (ue8m0) is not a quantized value type");
    s = parsed("int4:channel/int8:token:dynamic");
    s.a_strategy = FMOE_QSTRATEGY_NONE;
    assert_key_error(&s, "scheme: activation dtype \"int8\" needs a strategy (tensor, token, group<N>, tgroup<N>)");
    s.a_strategy = FMOE_QSTRATEGY_CHANNEL;
    assert_key_error(&s, "scheme: attribute \"channel\" applies to weights only");
    s.a_strategy = FMOE_QSTRATEGY_BLOCK;
    assert_key_error(&s, "scheme: attribute \"block<N>x<K>\" applies to weights only");
    s.a_strategy = -3;
    assert_key_error(&s, "scheme: a_strategy -3 is unknown");
    s = parsed("int4:channel/int8:token:dynamic");
    s.a_group_size = 32;
    assert_key_error(&s, "scheme: a_group_size must be 0 without a group strategy, not 32");
    s = parsed("int4:channel/int8:group32:dynamic");
    s.a_group_size = 0;
    assert_key_error(&s, "scheme: a_group_size 0 is out of range (1..1048576)");
    s = parsed("int4:channel/int8:token:dynamic");
    s.a_dynamic = 3;
    assert_key_error(&s, "scheme: a_dynamic must be 0 or 1, not 3");
    s = parsed("int4:channel/int8:token:dynamic");
    s.a_symmetric = 2;
    assert_key_error(&s, "scheme: a_symmetric must be 0 or 1, not 2");
    s = parsed("fp8e4m3:channel/fp8e4m3:token:dynamic");
    s.a_symmetric = 0;
    assert_key_error(&s, "scheme: \"asym\" needs an integer type (int8, int4), not fp8e4m3");
    s = parsed("fp8e4m3:channel/fp8e4m3:token:dynamic");
    s.a_dynamic = 0;
    assert_key_error(&s, "scheme: activation strategy \"token\" needs \"dynamic\" (only a per-tensor scale can be "
                         "static)");

    /* fmoe_scheme_validate is the same check, without clearing. */
    s = parsed("int4:channel");
    ck_assert_int_eq(fmoe_scheme_validate(&s), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_scheme_is_quantized(&s), 1);
    ck_assert_int_eq(fmoe_scheme_is_quantized(NULL), 0);
    s.w_actorder = FMOE_ACTORDER_WEIGHT;
    ck_assert_int_eq(fmoe_scheme_validate(&s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "scheme: \"actorder-weight\" needs the group<N> strategy, not channel");
    ck_assert_int_eq(fmoe_scheme_validate(NULL), FMOE_STATUS_INVALID_ARGUMENT);
}
END_TEST

/* Check one struct: when valid its key fits, parses back to the same struct
 * and re-keys identically; when invalid the key call refuses it cleanly.
 * Returns the key length, or -1 when invalid. */
static int check_struct(const fmoe_scheme *s)
{
    char key[FMOE_SCHEME_KEY_MAX], again[FMOE_SCHEME_KEY_MAX];
    fmoe_status st = fmoe_scheme_key(s, key, sizeof key);
    if (st != FMOE_STATUS_OK) {
        ck_assert_int_eq(st, FMOE_STATUS_INVALID_ARGUMENT);
        ck_assert_int_eq(strncmp(fmoe_last_error(), "scheme: ", 8), 0);
        ck_assert_int_eq(key[0], '\0');
        return -1;
    }
    fmoe_scheme back;
    st = fmoe_scheme_parse(key, &back);
    ck_assert_msg(st == FMOE_STATUS_OK, "key \"%s\" does not parse: %s", key, fmoe_last_error());
    ck_assert_msg(scheme_equal(s, &back), "key \"%s\" parses to a different scheme", key);
    ck_assert_int_eq(fmoe_scheme_key(&back, again, sizeof again), FMOE_STATUS_OK);
    ck_assert_str_eq(again, key);
    return (int)strlen(key);
}

/* Every combination of the discrete fields (sizes at their maximum, so the
 * longest keys are among them): valid ones round-trip, which also proves
 * that distinct schemes get distinct keys. */
START_TEST(test_exhaustive_round_trip)
{
    static const fmoe_dtype values[] = {
        FMOE_DTYPE_INVALID,    FMOE_DTYPE_F32,          FMOE_DTYPE_BF16,     FMOE_DTYPE_F16,
        FMOE_DTYPE_FP8_E4M3FN, FMOE_DTYPE_FP8_E4M3FNUZ, FMOE_DTYPE_FP8_E5M2, FMOE_DTYPE_INT8,
        FMOE_DTYPE_INT4,       FMOE_DTYPE_FP4_E2M1X2,   FMOE_DTYPE_INT32,
    };
    static const fmoe_dtype scales[] = {FMOE_DTYPE_INVALID, FMOE_DTYPE_F32,        FMOE_DTYPE_BF16,
                                        FMOE_DTYPE_F16,     FMOE_DTYPE_FP8_E4M3FN, FMOE_DTYPE_UE8M0};
    const uint32_t big = FMOE_SCHEME_MAX_GROUP;
    size_t nv = sizeof values / sizeof values[0];
    long valid = 0, weight_sides = 0;
    int longest = 0;
    for (size_t wd = 0; wd < nv; wd++)
        for (int32_t ws = 0; ws <= FMOE_QSTRATEGY_TENSOR_GROUP; ws++)
            for (int32_t ao = 0; ao <= FMOE_ACTORDER_WEIGHT; ao++)
                for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++)
                    for (uint32_t wsym = 0; wsym <= 1; wsym++) {
                        fmoe_scheme s;
                        memset(&s, 0, sizeof s);
                        s.struct_size = sizeof s;
                        s.w_dtype = values[wd];
                        s.w_strategy = ws;
                        s.w_group_size = ws == FMOE_QSTRATEGY_GROUP || ws == FMOE_QSTRATEGY_TENSOR_GROUP ? big : 0;
                        s.w_block_n = s.w_block_k = ws == FMOE_QSTRATEGY_BLOCK ? big : 0;
                        s.w_scale_dtype = scales[sc];
                        s.w_symmetric = wsym;
                        s.w_actorder = ao;
                        weight_sides++;
                        /* An invalid weight side is invalid with any activation side (the
                         * random tests cover that); only valid ones get the inner loops. */
                        if (check_struct(&s) < 0)
                            continue;
                        for (size_t ad = 0; ad < nv; ad++)
                            for (int32_t as = 0; as <= FMOE_QSTRATEGY_TENSOR_GROUP; as++)
                                for (uint32_t dyn = 0; dyn <= 1; dyn++)
                                    for (uint32_t asym = 0; asym <= 1; asym++) {
                                        s.a_dtype = values[ad];
                                        s.a_strategy = as;
                                        s.a_group_size = as == FMOE_QSTRATEGY_GROUP || as == FMOE_QSTRATEGY_TENSOR_GROUP
                                                             ? big
                                                             : 0;
                                        s.a_dynamic = dyn;
                                        s.a_symmetric = asym;
                                        int len = check_struct(&s);
                                        if (len < 0)
                                            continue;
                                        valid++;
                                        if (len > longest)
                                            longest = len;
                                    }
                    }
    ck_assert_int_eq(weight_sides, 11L * 7 * 3 * 6 * 2);
    /* The count pins the rules. Unquantized: 3 (no activation side). A
     * quantized weight side, per dtype and symmetry: 5 strategies plus
     * group with 2 actorders, times 5 scale types = 35; floats (fp8 x3,
     * fp4) are symmetric only, int8/int4 both. Activation sides: none, or
     * per dtype tensor (static or dynamic) and token/group/tgroup (dynamic)
     * = 5, times 2 symmetries for the integers. */
    long weight_valid = 4 * 35 + 2 * 2 * 35;
    long activation_valid = 1 + 4 * 5 + 2 * 2 * 5;
    ck_assert_int_eq(valid, 3 + weight_valid * activation_valid);
    /* The longest key any valid scheme has, well below the limit. */
    ck_assert_int_eq(longest, 88);
    ck_assert_int_lt(longest + 1, FMOE_SCHEME_KEY_MAX);
    fmoe_scheme s;
    assert_round_trip("fp8e4m3fnuz:group1048576:actorder-weight:scale-fp8e4m3/fp8e4m3fnuz:tgroup1048576:dynamic", &s);
}
END_TEST

static uint32_t random_size(fmoe_rng *rng)
{
    switch (fmoe_rng_u64(rng) % 6) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return FMOE_SCHEME_MAX_GROUP;
    case 3:
        return FMOE_SCHEME_MAX_GROUP + 1;
    case 4:
        return (uint32_t)fmoe_rng_u64(rng);
    default:
        return 1u << (fmoe_rng_u64(rng) % 11);
    }
}

/* A struct with fields near their valid ranges and sometimes far outside;
 * sizes are only set where the strategy uses them, most of the time. */
static fmoe_scheme random_struct(fmoe_rng *rng)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = (fmoe_dtype)(fmoe_rng_u64(rng) % 16);
    s.w_strategy = (int32_t)(fmoe_rng_u64(rng) % 8);
    int strict = fmoe_rng_u64(rng) % 8 != 0;
    int grouped = s.w_strategy == FMOE_QSTRATEGY_GROUP || s.w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP;
    if (!strict || grouped)
        s.w_group_size = random_size(rng);
    if (!strict || s.w_strategy == FMOE_QSTRATEGY_BLOCK) {
        s.w_block_n = random_size(rng);
        s.w_block_k = random_size(rng);
    }
    s.w_scale_dtype = (fmoe_dtype)(fmoe_rng_u64(rng) % 16);
    s.w_symmetric = (uint32_t)(fmoe_rng_u64(rng) % 3);
    s.w_actorder = (int32_t)(fmoe_rng_u64(rng) % 4);
    if (fmoe_rng_u64(rng) % 3 == 0)
        return s; /* no activation side */
    s.a_dtype = (fmoe_dtype)(fmoe_rng_u64(rng) % 16);
    s.a_strategy = (int32_t)(fmoe_rng_u64(rng) % 8);
    grouped = s.a_strategy == FMOE_QSTRATEGY_GROUP || s.a_strategy == FMOE_QSTRATEGY_TENSOR_GROUP;
    if (!strict || grouped)
        s.a_group_size = random_size(rng);
    s.a_dynamic = (uint32_t)(fmoe_rng_u64(rng) % 3);
    s.a_symmetric = (uint32_t)(fmoe_rng_u64(rng) % 3);
    return s;
}

START_TEST(test_random_structs)
{
    fmoe_rng rng = fmoe_rng_for(2);
    int valid = 0;
    for (int iter = 0; iter < 200000; iter++) {
        fmoe_scheme s = random_struct(&rng);
        if (check_struct(&s) >= 0)
            valid++;
    }
    ck_assert_int_gt(valid, 100);
}
END_TEST

static uint32_t random_valid_size(fmoe_rng *rng)
{
    return 1 + (uint32_t)(fmoe_rng_u64(rng) % FMOE_SCHEME_MAX_GROUP);
}

static int random_is_integer(fmoe_dtype dtype)
{
    return dtype == FMOE_DTYPE_INT8 || dtype == FMOE_DTYPE_INT4;
}

/* A random valid scheme, drawn directly from the documented rules (and
 * checked by the validator, which also tests the two agree). */
static fmoe_scheme random_valid(fmoe_rng *rng)
{
    static const fmoe_dtype unquantized[] = {FMOE_DTYPE_F32, FMOE_DTYPE_BF16, FMOE_DTYPE_F16};
    static const fmoe_dtype quantized[] = {FMOE_DTYPE_FP8_E4M3FN, FMOE_DTYPE_FP8_E4M3FNUZ, FMOE_DTYPE_FP8_E5M2,
                                           FMOE_DTYPE_INT8,       FMOE_DTYPE_INT4,         FMOE_DTYPE_FP4_E2M1X2};
    static const fmoe_dtype scales[] = {FMOE_DTYPE_F32, FMOE_DTYPE_BF16, FMOE_DTYPE_F16, FMOE_DTYPE_FP8_E4M3FN,
                                        FMOE_DTYPE_UE8M0};
    static const int32_t w_strategies[] = {FMOE_QSTRATEGY_TENSOR, FMOE_QSTRATEGY_CHANNEL, FMOE_QSTRATEGY_GROUP,
                                           FMOE_QSTRATEGY_BLOCK, FMOE_QSTRATEGY_TENSOR_GROUP};
    static const int32_t a_strategies[] = {FMOE_QSTRATEGY_TENSOR, FMOE_QSTRATEGY_TOKEN, FMOE_QSTRATEGY_GROUP,
                                           FMOE_QSTRATEGY_TENSOR_GROUP};
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    if (fmoe_rng_u64(rng) % 8 == 0) {
        s.w_dtype = unquantized[fmoe_rng_u64(rng) % 3];
        ck_assert_int_eq(fmoe_scheme_validate(&s), FMOE_STATUS_OK);
        return s;
    }
    s.w_dtype = quantized[fmoe_rng_u64(rng) % 6];
    s.w_strategy = w_strategies[fmoe_rng_u64(rng) % 5];
    if (s.w_strategy == FMOE_QSTRATEGY_GROUP || s.w_strategy == FMOE_QSTRATEGY_TENSOR_GROUP)
        s.w_group_size = random_valid_size(rng);
    if (s.w_strategy == FMOE_QSTRATEGY_BLOCK) {
        s.w_block_n = random_valid_size(rng);
        s.w_block_k = random_valid_size(rng);
    }
    s.w_scale_dtype = scales[fmoe_rng_u64(rng) % 5];
    s.w_symmetric = random_is_integer(s.w_dtype) ? (uint32_t)(fmoe_rng_u64(rng) % 2) : 1;
    if (s.w_strategy == FMOE_QSTRATEGY_GROUP)
        s.w_actorder = (int32_t)(fmoe_rng_u64(rng) % 3);
    if (fmoe_rng_u64(rng) % 2) {
        s.a_dtype = quantized[fmoe_rng_u64(rng) % 6];
        s.a_strategy = a_strategies[fmoe_rng_u64(rng) % 4];
        if (s.a_strategy == FMOE_QSTRATEGY_GROUP || s.a_strategy == FMOE_QSTRATEGY_TENSOR_GROUP)
            s.a_group_size = random_valid_size(rng);
        s.a_dynamic = s.a_strategy == FMOE_QSTRATEGY_TENSOR ? (uint32_t)(fmoe_rng_u64(rng) % 2) : 1;
        s.a_symmetric = random_is_integer(s.a_dtype) ? (uint32_t)(fmoe_rng_u64(rng) % 2) : 1;
    }
    ck_assert_msg(fmoe_scheme_validate(&s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    return s;
}

/* Respell one side of a key: attributes shuffled, defaults sometimes
 * spelled out. `side` points at "dtype:attr:attr" (NUL-terminated). */
static void respell_side(fmoe_rng *rng, char *side, int weights, char *out, size_t cap)
{
    char *tokens[16];
    size_t n = 0;
    char *save = NULL;
    char *dtype = strtok_r(side, ":", &save);
    for (char *t = strtok_r(NULL, ":", &save); t && n < 12; t = strtok_r(NULL, ":", &save))
        tokens[n++] = t;
    int has_asym = 0, has_scale = 0, has_dynamic = 0;
    for (size_t i = 0; i < n; i++) {
        has_asym |= strcmp(tokens[i], "asym") == 0;
        has_scale |= strncmp(tokens[i], "scale-", 6) == 0;
        has_dynamic |= strcmp(tokens[i], "dynamic") == 0;
    }
    static char sym[] = "sym", scale_f32[] = "scale-f32", static_[] = "static";
    int quantized = n > 0;
    if (quantized && !has_asym && fmoe_rng_u64(rng) % 2)
        tokens[n++] = sym;
    if (quantized && weights && !has_scale && fmoe_rng_u64(rng) % 2)
        tokens[n++] = scale_f32;
    if (quantized && !weights && !has_dynamic && fmoe_rng_u64(rng) % 2)
        tokens[n++] = static_;
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)(fmoe_rng_u64(rng) % i);
        char *t = tokens[i - 1];
        tokens[i - 1] = tokens[j];
        tokens[j] = t;
    }
    size_t len = (size_t)snprintf(out, cap, "%s", dtype);
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, ":%s", tokens[i]);
}

START_TEST(test_random_spellings)
{
    fmoe_rng rng = fmoe_rng_for(3);
    for (int iter = 0; iter < 20000; iter++) {
        fmoe_scheme s = random_valid(&rng);
        char key[FMOE_SCHEME_KEY_MAX], copy[FMOE_SCHEME_KEY_MAX], spelled[512], again[FMOE_SCHEME_KEY_MAX];
        ck_assert_int_eq(fmoe_scheme_key(&s, key, sizeof key), FMOE_STATUS_OK);
        memcpy(copy, key, sizeof copy);
        char *slash = strchr(copy, '/');
        if (slash)
            *slash = '\0';
        respell_side(&rng, copy, 1, spelled, sizeof spelled);
        if (slash) {
            size_t len = strlen(spelled);
            spelled[len] = '/';
            respell_side(&rng, slash + 1, 0, spelled + len + 1, sizeof spelled - len - 1);
        }
        fmoe_scheme back;
        ck_assert_msg(fmoe_scheme_parse(spelled, &back) == FMOE_STATUS_OK, "\"%s\" (from \"%s\"): %s", spelled, key,
                      fmoe_last_error());
        ck_assert_msg(scheme_equal(&s, &back), "\"%s\" (from \"%s\") parses differently", spelled, key);
        ck_assert_int_eq(fmoe_scheme_key(&back, again, sizeof again), FMOE_STATUS_OK);
        ck_assert_str_eq(again, key);
    }
}
END_TEST

/* Strings glued from key fragments: parse either succeeds with a canonical
 * result or fails with a PARSE_ERROR quoting the key - never anything else. */
START_TEST(test_random_strings)
{
    static const char *const pieces[] = {
        "int4",   "int8",  "fp8e4m3", "fp8e4m3fnuz", "fp8e5m2", "fp4",    "bf16",  "f32",      ":",
        ":",      ":",     "/",       "tensor",      "channel", "token",  "group", "tgroup",   "block",
        "128",    "16",    "32",      "0",           "x",       "asym",   "sym",   "actorder", "actorder-weight",
        "scale-", "ue8m0", "fp8e4m3", "bf16",        "dynamic", "static", "",      "\xff",     " ",
    };
    size_t np = sizeof pieces / sizeof pieces[0];
    fmoe_rng rng = fmoe_rng_for(4);
    int ok = 0;
    for (int iter = 0; iter < 200000; iter++) {
        char text[256];
        size_t len = 0;
        text[0] = '\0';
        int count = 1 + (int)(fmoe_rng_u64(&rng) % 10);
        for (int i = 0; i < count; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, "%s", pieces[fmoe_rng_u64(&rng) % np]);
        fmoe_scheme s;
        fmoe_status st = fmoe_scheme_parse(text, &s);
        if (st == FMOE_STATUS_PARSE_ERROR) {
            char head[300];
            snprintf(head, sizeof head, "scheme \"%s\": ", text);
            ck_assert_int_eq(strncmp(fmoe_last_error(), head, strlen(head)), 0);
            continue;
        }
        ck_assert_int_eq(st, FMOE_STATUS_OK);
        ok++;
        ck_assert_int_ge(check_struct(&s), 1);
    }
    ck_assert_int_gt(ok, 100);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("scheme");
    TCase *tc = tcase_create("scheme");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_examples_round_trip);
    tcase_add_test(tc, test_unquantized);
    tcase_add_test(tc, test_canonicalize);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_parse_arguments);
    tcase_add_test(tc, test_key_errors);
    tcase_add_test(tc, test_exhaustive_round_trip);
    tcase_add_test(tc, test_random_structs);
    tcase_add_test(tc, test_random_spellings);
    tcase_add_test(tc, test_random_strings);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 10);
}
