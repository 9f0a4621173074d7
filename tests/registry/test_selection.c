/*
 * tests/registry/test_selection.c - the selection policy: score, preference
 * order, backends named per scheme (strict, or fallback when opted in),
 * application-pinned backends, and the dispatch log.
 */
#include <stdlib.h>

#include "tests/registry/registry_fixtures.h"

static fmoe_scheme bf16(void)
{
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
    return s;
}

/* Context over reference + fixture_ok (+ fixture_refuse), with an optional config text. */
static fmoe_context *ctx_with(const char *config_text, fx_log *lg)
{
    static char cfg[600];
    const char *cfg_path = NULL;
    if (config_text) {
        char dir[512];
        fx_tempdir(dir, sizeof dir);
        snprintf(cfg, sizeof cfg, "%s/fusedmoe.toml", dir);
        fx_write(cfg, config_text);
        cfg_path = cfg;
    }
    const char *files[] = {REFERENCE_MANIFEST, FIXTURE_SO_FIXTURE_OK, FIXTURE_SO_FIXTURE_REFUSE};
    return fx_context(files, 3, cfg_path, 0, lg);
}

static const char *chosen_plugin(const fmoe_selection *sel)
{
    int32_t i = fmoe_selection_chosen(sel);
    ck_assert_int_ge(i, 0);
    static fmoe_candidate c;
    c.struct_size = sizeof c;
    ck_assert_int_eq(fmoe_selection_candidate(sel, (uint32_t)i, &c), FMOE_STATUS_OK);
    ck_assert_int_eq(c.verdict, FMOE_VERDICT_SELECTED);
    return c.plugin;
}

START_TEST(highest_score_wins)
{
    fmoe_context *ctx = ctx_with(NULL, NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_OK);
    ck_assert_str_eq(chosen_plugin(sel), "fixture_ok");
    ck_assert_str_eq(fmoe_selection_summary(sel), "highest score (10) among the backends that accepted");
    ck_assert_str_eq(fmoe_selection_scheme_key(sel), "bf16");
    /* Every plugin is a candidate with a verdict and a reason. */
    ck_assert_uint_eq(fmoe_selection_candidate_count(sel), 3);
    fmoe_candidate c = {.struct_size = sizeof c};
    ck_assert_int_eq(fmoe_selection_candidate(sel, 2, &c), FMOE_STATUS_OK);
    ck_assert_str_eq(c.plugin, "fixture_refuse");
    ck_assert_int_eq(c.verdict, FMOE_VERDICT_REFUSED);
    ck_assert_str_eq(c.reason, "fixture refuses every layer");
    ck_assert_int_eq(fmoe_selection_candidate(sel, 0, &c), FMOE_STATUS_OK);
    ck_assert_str_eq(c.plugin, "reference");
    ck_assert_int_eq(c.verdict, FMOE_VERDICT_ACCEPTED);
    ck_assert_uint_eq(c.score, 1);
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(preference_beats_score)
{
    fmoe_context *ctx = ctx_with("[select]\nprefer = [\"ref*\", \"fixture_ok\"]\n", NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_OK);
    ck_assert_str_eq(chosen_plugin(sel), "reference");
    ck_assert_str_eq(fmoe_selection_summary(sel), "position 0 in the preference order ([select] prefer)");
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(env_backends_order_overrides_toml)
{
    setenv("FMOE_BACKENDS", "fixture_ok,reference", 1);
    char dir[512], cfg[600];
    fx_tempdir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/c.toml", dir);
    fx_write(cfg, "[select]\nprefer = [\"reference\"]\n");
    const char *files[] = {REFERENCE_MANIFEST, FIXTURE_SO_FIXTURE_OK};
    fmoe_context *ctx = fx_context(files, 2, cfg, 1, NULL);
    fmoe_layer_config c = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &c, &s, &sel), FMOE_STATUS_OK);
    ck_assert_str_eq(chosen_plugin(sel), "fixture_ok");
    ck_assert_str_eq(fmoe_selection_summary(sel), "position 0 in the preference order (FMOE_BACKENDS)");
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(named_backend_is_strict)
{
    fmoe_context *ctx = ctx_with("[select.schemes]\n\"bf*\" = \"fixture_refuse\"\n", NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_layer *layer = NULL;
    ck_assert_int_eq(fmoe_layer_create(ctx, &cfg, &s, NULL, &layer), FMOE_STATUS_UNSUPPORTED);
    ck_assert_ptr_null(layer);
    char want[2048];
    snprintf(want, sizeof want,
             "backend 'fixture_refuse', named for scheme 'bf*' in %s, cannot serve this layer:\n"
             "  fixture_refuse on cpu: fixture refuses every layer\n"
             "(set [select] fallback = true to allow others)",
             fmoe_context_config_path(ctx));
    ck_assert_str_eq(fmoe_last_error(), want);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(named_backend_falls_back_when_allowed)
{
    fx_log lg = {0};
    fmoe_context *ctx = ctx_with("[select]\nfallback = true\n[select.schemes]\n\"bf16\" = \"fixture_refuse\"\n", &lg);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_OK);
    ck_assert_str_eq(chosen_plugin(sel), "fixture_ok");
    ck_assert_str_eq(fmoe_selection_summary(sel), "fallback from 'fixture_refuse': highest score");
    /* The fallback is logged as a warning (level 1) with the refusal. */
    ck_assert_ptr_nonnull(strstr(lg.text, "1 [select] backend 'fixture_refuse', named for scheme 'bf16'"));
    ck_assert_ptr_nonnull(strstr(lg.text, "falling back ([select] fallback = true)"));
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(named_backend_missing)
{
    fmoe_context *ctx = ctx_with("[select.schemes]\n\"bf16\" = \"cuda\"\n", NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_UNSUPPORTED);
    ck_assert_int_eq(fmoe_selection_chosen(sel), -1);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "cannot serve this layer:\n  no plugin of that name was found"));
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(unserved_scheme_lists_every_reason)
{
    fmoe_context *ctx = ctx_with(NULL, NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s;
    /* e4m3fnuz checkpoints: served by ROCm backends, not by the reference. */
    ck_assert_int_eq(fmoe_scheme_parse("fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic", &s), FMOE_STATUS_OK);
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_UNSUPPORTED);
    ck_assert_str_eq(
        fmoe_last_error(),
        "no backend can serve scheme 'fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic' for this layer:\n"
        "  reference: does not serve scheme 'fp8e4m3fnuz:channel/fp8e4m3fnuz:token:dynamic' (serves f32, bf16, f16, "
        "fp8e4m3:tensor/fp8e4m3:tensor*, fp8e4m3:channel/fp8e4m3:token:dynamic, "
        "fp8e4m3:block*/fp8e4m3:group*:dynamic, fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic, "
        "fp4:group32:scale-ue8m0*, fp4:tgroup16:scale-fp8e4m3*, int[48]:channel*, int[48]:group*, "
        "int8:tensor/int8:token:dynamic*)\n"
        "  fixture_ok on cpu: fixture serves unquantized layers only\n"
        "  fixture_refuse on cpu: fixture refuses every layer");
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(application_pins_backend)
{
    /* The TOML names fixture_ok for bf16, the application asks for reference. */
    fmoe_context *ctx = ctx_with("[select.schemes]\n\"bf16\" = \"fixture_ok\"\n", NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_layer_options o;
    fmoe_layer_options_init(&o);
    o.backend = "reference";
    fmoe_layer *layer = NULL;
    ck_assert_int_eq(fmoe_layer_create(ctx, &cfg, &s, &o, &layer), FMOE_STATUS_OK);
    ck_assert_str_eq(chosen_plugin(fmoe_layer_selection(layer)), "reference");
    fmoe_layer_destroy(layer);
    o.backend = "fixture_refuse";
    ck_assert_int_eq(fmoe_layer_create(ctx, &cfg, &s, &o, &layer), FMOE_STATUS_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "  fixture_refuse on cpu: fixture refuses every layer"));
    ck_assert_ptr_nonnull(
        strstr(fmoe_last_error(), "  reference: not requested (the layer asks for backend 'fixture_refuse')"));
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(unavailable_device_is_a_candidate_with_reason)
{
    const char *files[] = {FIXTURE_SO_FIXTURE_NO_DEVICE};
    fmoe_context *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_UNSUPPORTED);
    fmoe_candidate c = {.struct_size = sizeof c};
    ck_assert_int_eq(fmoe_selection_candidate(sel, 0, &c), FMOE_STATUS_OK);
    ck_assert_int_eq(c.verdict, FMOE_VERDICT_UNAVAILABLE);
    ck_assert_str_eq(c.reason, "device cpu:0 unavailable: fixture has no usable device");
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(bad_layer_config_rejected_before_selection)
{
    fmoe_context *ctx = ctx_with(NULL, NULL);
    fmoe_layer_config cfg = fx_layer();
    cfg.top_k = 9;
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(sel);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "top_k"));
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(dispatch_log_has_one_line_per_decision)
{
    char dir[512], log[600], text[1024];
    fx_tempdir(dir, sizeof dir);
    snprintf(log, sizeof log, "%s/dispatch.jsonl", dir);
    snprintf(text, sizeof text, "[log]\ndispatch = \"%s\"\n", log);
    fmoe_context *ctx = ctx_with(text, NULL);
    fmoe_layer_config cfg = fx_layer();
    fmoe_scheme s = bf16();
    fmoe_selection *sel = NULL;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fmoe_context_explain(ctx, &cfg, &s, &sel), FMOE_STATUS_OK);
        fmoe_selection_destroy(sel);
    }
    fmoe_context_destroy(ctx);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[8192];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        ck_assert_ptr_nonnull(strstr(line, "{\"v\":1,\"event\":\"select\",\"status\":\"ok\",\"scheme\":\"bf16\","
                                           "\"chosen\":\"fixture_ok/unquantized\""));
        ck_assert_ptr_nonnull(strstr(line, "\"replay\":\"fusedmoe explain --scheme bf16 --experts 4 --top-k 2 "
                                           "--hidden 8 --intermediate 6 --dtype f32\""));
    }
    fclose(f);
    ck_assert_int_eq(lines, 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("selection");
    TCase *tc = tcase_create("selection");
    tcase_add_test(tc, highest_score_wins);
    tcase_add_test(tc, preference_beats_score);
    tcase_add_test(tc, env_backends_order_overrides_toml);
    tcase_add_test(tc, named_backend_is_strict);
    tcase_add_test(tc, named_backend_falls_back_when_allowed);
    tcase_add_test(tc, named_backend_missing);
    tcase_add_test(tc, unserved_scheme_lists_every_reason);
    tcase_add_test(tc, application_pins_backend);
    tcase_add_test(tc, unavailable_device_is_a_candidate_with_reason);
    tcase_add_test(tc, bad_layer_config_rejected_before_selection);
    tcase_add_test(tc, dispatch_log_has_one_line_per_decision);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 11);
}
