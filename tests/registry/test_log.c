/*
 * tests/registry/test_log.c - the context's log (registry/log.c, docs/CONFIG.md
 * "FMOE_LOG"): the level threshold, categories raised to debug (a category
 * raises its ":" sub-categories), level names and "all", and what a spec
 * cannot hold (a category too long, one past the sixteen distinct ones)
 * refused with the word named, never dropped. Then the public side:
 * fmoe_context_options.log_fn receives the context's lines as log_spec
 * asks, and a log_spec the log cannot hold fails fmoe_context_create.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"
#include "registry/log.h"
#include "tests/test_util.h"

/* What a log_fn was handed: the lines, as "level category: msg". */
typedef struct capture {
    char lines[32][256];
    int n;
} capture;

static void capture_fn(void *user, int32_t level, const char *category, const char *msg)
{
    capture *c = user;
    if (c->n < 32)
        snprintf(c->lines[c->n++], sizeof c->lines[0], "%d %s: %s", (int)level, category, msg);
}

static int seen(const capture *c, const char *line)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->lines[i], line) == 0)
            return 1;
    return 0;
}

/* Log one line of each level in `category`; returns how many came through. */
static int shown(fmoe_logger *lg, capture *c, const char *category)
{
    c->n = 0;
    for (int level = FMOE_LOG_ERROR; level <= FMOE_LOG_DEBUG; level++)
        fmoe_log(lg, level, category, "line %d", level);
    return c->n;
}

START_TEST(levels_and_categories)
{
    capture c = {0};
    fmoe_logger lg;
    fmoe_logger_init(&lg, capture_fn, &c);
    /* The default threshold is warn: error and warn lines only. */
    ck_assert_int_eq(shown(&lg, &c, "loader"), 2);
    ck_assert(seen(&c, "0 loader: line 0") && seen(&c, "1 loader: line 1"));
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "info", "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, "loader"), 3);
    /* A category is shown down to debug, its sub-categories too; others keep the level. */
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "warn, select ,plugin", "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, "loader"), 2);
    ck_assert_int_eq(shown(&lg, &c, "select"), 4);
    ck_assert(seen(&c, "3 select: line 3"));
    ck_assert_int_eq(shown(&lg, &c, "plugin:cuda"), 4);
    ck_assert_int_eq(shown(&lg, &c, "plugins"), 2); /* not a sub-category of "plugin" */
    ck_assert_int_eq(shown(&lg, &c, "selection"), 2);
    /* "warning" is warn; "all" is debug everywhere; "error" hides warnings again. */
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "all", "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, "loader"), 4);
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "warning", "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, "loader"), 2);
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "error", "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, "loader"), 1);
    ck_assert_int_eq(fmoe_logger_set_level(&lg, "loud"), -1);
    fmoe_logger_close(&lg);
}
END_TEST

/* A plugin's category is "plugin:" and its name: one of 40 characters is
 * kept whole and raises exactly that plugin (a 24-byte store once cut it
 * to 23 and raised nothing). */
START_TEST(long_plugin_category_kept_whole)
{
    capture c = {0};
    fmoe_logger lg;
    fmoe_logger_init(&lg, capture_fn, &c);
    const char *name = "plugin:a_vendor_backend_with_a_long_name";
    ck_assert_uint_eq(strlen(name), 40);
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, name, "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(shown(&lg, &c, name), 4);
    ck_assert_int_eq(shown(&lg, &c, "plugin:a_vendor_backend_with_a_long_nam"), 2);
    fmoe_logger_close(&lg);
}
END_TEST

START_TEST(spec_the_log_cannot_hold_is_refused)
{
    fmoe_logger lg;
    fmoe_logger_init(&lg, NULL, NULL);
    /* 96 characters: one more than a category holds. */
    char word[97];
    memset(word, 'x', 96);
    word[96] = '\0';
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, word, "FMOE_LOG"), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "FMOE_LOG: category 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' is longer than 95 characters");
    ck_assert_int_eq(lg.n_categories, 0);
    word[95] = '\0'; /* 95 fit */
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, word, "FMOE_LOG"), FMOE_STATUS_OK);
    ck_assert_int_eq(lg.n_categories, 1);
    fmoe_logger_close(&lg);

    /* Sixteen distinct categories fit, repeats count once; a seventeenth is refused. */
    fmoe_logger_init(&lg, NULL, NULL);
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "c0,c1,c2,c3,c4,c5,c6,c7,c0,c8,c9,c10,c11,c12,c13,c14,c15,c15,debug",
                                            "log_spec (--log)"),
                     FMOE_STATUS_OK);
    ck_assert_int_eq(lg.n_categories, 16);
    ck_assert_int_eq(lg.level, FMOE_LOG_DEBUG);
    ck_assert_int_eq(fmoe_logger_apply_spec(&lg, "c3,c16", "log_spec (--log)"), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "log_spec (--log): category 'c16' is one more than the 16 a log can raise");
    fmoe_logger_close(&lg);
}
END_TEST

static fmoe_context_options isolated_options(capture *c, const char *spec)
{
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.ignore_environment = 1;
    o.isolated = 1;
    o.log_fn = capture_fn;
    o.log_user = c;
    o.log_spec = spec;
    return o;
}

/* Through the public API: with log_spec "info" the context's first line
 * (the loader's, naming the version and the configuration) reaches log_fn,
 * with the default threshold it does not, and a spec the log cannot hold
 * fails the context with the reason. */
START_TEST(context_logs_through_log_fn_as_log_spec_asks)
{
    capture c = {0};
    char want[256];
    snprintf(want, sizeof want, "%d loader: fusedmoe %s, plugin ABI %d.%d, configuration (built-in defaults)",
             FMOE_LOG_INFO, fmoe_version(), FMOE_ABI_MAJOR, FMOE_ABI_MINOR);
    fmoe_context *ctx = NULL;
    fmoe_context_options o = isolated_options(&c, "info");
    ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(seen(&c, want), "no line \"%s\" among %d", want, c.n);
    fmoe_context_destroy(ctx);

    c.n = 0;
    o = isolated_options(&c, NULL);
    ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert(!seen(&c, want));
    for (int i = 0; i < c.n; i++) /* warnings and errors only */
        ck_assert_msg(c.lines[i][0] == '0' || c.lines[i][0] == '1', "line below warn: %s", c.lines[i]);
    fmoe_context_destroy(ctx);

    o = isolated_options(&c, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q");
    ctx = (fmoe_context *)&c; /* must be reset to NULL on failure */
    ck_assert_int_eq(fmoe_context_create(&o, &ctx), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_str_eq(fmoe_last_error(), "log_spec (--log): category 'q' is one more than the 16 a log can raise");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, levels_and_categories);
    tcase_add_test(tc, long_plugin_category_kept_whole);
    tcase_add_test(tc, spec_the_log_cannot_hold_is_refused);
    tcase_add_test(tc, context_logs_through_log_fn_as_log_spec_asks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 4);
}
