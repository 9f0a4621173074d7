/*
 * tests/test_option_parse.c - the option parsers plugin.h gives every
 * plugin (fmoe_option_parse_bool / _int / _enum): what each accepts, the
 * edges of long long (its most negative value included), bounds, and text
 * that is not a value (signs alone, blanks, trailing characters, digits
 * past 64 bits), which leaves the output untouched.
 */
#include "fusedmoe/plugin.h"
#include "test_util.h"

START_TEST(ints_and_their_edges)
{
    const long long lo = -9223372036854775807LL - 1, hi = 9223372036854775807LL;
    static const struct {
        const char *text;
        long long want;
    } ok[] = {
        {"0", 0},
        {"-0", 0},
        {"+17", 17},
        {"-17", -17},
        {"007", 7},
        {"9223372036854775807", 9223372036854775807LL},
        {"-9223372036854775807", -9223372036854775807LL},
        {"-9223372036854775808", -9223372036854775807LL - 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        long long v = 12345;
        ck_assert_msg(fmoe_option_parse_int(ok[i].text, lo, hi, &v) == 0, "\"%s\" refused", ok[i].text);
        ck_assert_msg(v == ok[i].want, "\"%s\": %lld, expected %lld", ok[i].text, v, ok[i].want);
    }
    static const char *const bad[] = {
        "",
        "-",
        "+",
        " 5",
        "5 ",
        "5x",
        "0x10",
        "1e3",
        "--5",
        "+-5",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "99999999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long v = 12345;
        ck_assert_msg(fmoe_option_parse_int(bad[i], lo, hi, &v) == -1, "\"%s\" accepted as %lld", bad[i], v);
        ck_assert_msg(v == 12345, "\"%s\": output written", bad[i]);
    }
    long long v = 0;
    ck_assert_int_eq(fmoe_option_parse_int(NULL, lo, hi, &v), -1);
    /* Bounds are inclusive. */
    ck_assert_int_eq(fmoe_option_parse_int("1", 1, 64, &v), 0);
    ck_assert_int_eq(fmoe_option_parse_int("64", 1, 64, &v), 0);
    ck_assert_int_eq(v, 64);
    ck_assert_int_eq(fmoe_option_parse_int("0", 1, 64, &v), -1);
    ck_assert_int_eq(fmoe_option_parse_int("65", 1, 64, &v), -1);
    ck_assert_int_eq(fmoe_option_parse_int("-9223372036854775808", lo + 1, hi, &v), -1);
}
END_TEST

START_TEST(bools_and_enums)
{
    int b = 7;
    ck_assert_int_eq(fmoe_option_parse_bool("true", &b), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(fmoe_option_parse_bool("0", &b), 0);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(fmoe_option_parse_bool("1", &b), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(fmoe_option_parse_bool("false", &b), 0);
    ck_assert_int_eq(b, 0);
    static const char *const bad[] = {"True", "yes", "on", "truex", "tru", "", " true", "2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = 7;
        ck_assert_msg(fmoe_option_parse_bool(bad[i], &b) == -1 && b == 7, "\"%s\" accepted", bad[i]);
    }
    ck_assert_int_eq(fmoe_option_parse_bool(NULL, &b), -1);

    static const char *const values[] = {"auto", "fast", "faster", NULL};
    int e = -7;
    ck_assert_int_eq(fmoe_option_parse_enum("fast", values, &e), 0);
    ck_assert_int_eq(e, 1);
    ck_assert_int_eq(fmoe_option_parse_enum("faster", values, &e), 0);
    ck_assert_int_eq(e, 2);
    e = -7;
    ck_assert_int_eq(fmoe_option_parse_enum("fas", values, &e), -1);
    ck_assert_int_eq(fmoe_option_parse_enum("Auto", values, &e), -1);
    ck_assert_int_eq(fmoe_option_parse_enum(NULL, values, &e), -1);
    ck_assert_int_eq(fmoe_option_parse_enum("auto", NULL, &e), -1);
    ck_assert_int_eq(e, -7);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("option_parse");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, ints_and_their_edges);
    tcase_add_test(tc, bools_and_enums);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 2);
}
