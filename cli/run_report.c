/* cli/run_report.c - the report of `fusedmoe run`, as text or JSON, and its
 * rerun command line. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/config_args.h"
#include "cli/json_out.h"
#include "cli/run.h"
#include "cli/selection_out.h"

/* Append text to buf as it is, after a space. */
static void append_raw(char *buf, size_t cap, const char *s)
{
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", len ? " " : "", s);
}

/* Append `s` to buf as one shell word, quoted only when it has to be. */
static void append_word(char *buf, size_t cap, const char *s)
{
    static const char plain_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@%+-";
    int plain = s[0] != '\0' && strspn(s, plain_chars) == strlen(s);
    if (plain) {
        append_raw(buf, cap, s);
        return;
    }
    /* '...', each ' inside written as '\'' */
    size_t len = strlen(buf);
    if (len && len + 1 < cap)
        buf[len++] = ' ';
    if (len + 1 < cap)
        buf[len++] = '\'';
    for (const char *p = s; *p && len + 5 < cap; p++) {
        if (*p == '\'') {
            memcpy(buf + len, "'\\''", 4);
            len += 4;
        } else {
            buf[len++] = *p;
        }
    }
    if (len + 1 < cap)
        buf[len++] = '\'';
    buf[len < cap ? len : cap - 1] = '\0';
}

/* The command line that repeats this run exactly. */
void run_rerun_line(const cli_globals *g, const run_opts *o, char *buf, size_t cap)
{
    char num[32], args[1024];
    buf[0] = '\0';
    append_word(buf, cap, "fusedmoe");
    if (g->config_path) {
        append_word(buf, cap, "--config");
        append_word(buf, cap, g->config_path);
    }
    for (uint32_t i = 0; i < g->n_plugin_files; i++) {
        append_word(buf, cap, "--plugin");
        append_word(buf, cap, g->plugin_files[i]);
    }
    append_word(buf, cap, "run");
    append_word(buf, cap, "--scheme");
    append_word(buf, cap, o->scheme_key);
    snprintf(num, sizeof num, "%u", o->tokens);
    append_word(buf, cap, "--tokens");
    append_word(buf, cap, num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)o->seed);
    append_word(buf, cap, "--seed");
    append_word(buf, cap, num);
    if (o->backend) {
        append_word(buf, cap, "--backend");
        append_word(buf, cap, o->backend);
    }
    if (o->logits)
        append_word(buf, cap, "--logits");
    /* The layer flags are plain words already (numbers and names). */
    fmoe_layer_config_format_args(&o->cfg, args, sizeof args);
    append_raw(buf, cap, args);
}

static json_t *json_number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

int run_print_json(const run_report *r)
{
    const run_opts *o = r->o;
    json_t *root = json_object();
    cli_json_set(root, "seed", o->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)o->seed) : json_null());
    cli_json_set(root, "rerun", cli_json_string(r->rerun));
    cli_json_set(root, "scheme", cli_json_string(fmoe_selection_scheme_key(r->sel)));
    cli_json_set(root, "tokens", json_integer(o->tokens));
    cli_json_set(root, "routing", json_string(o->logits ? "logits" : "topk"));
    cli_json_set(root, "layer", cli_layer_json(&o->cfg));
    cli_json_set(root, "selection", cli_selection_json(r->sel));
    cli_json_set(root, "backend", json_string(r->selected));
    cli_json_set(root, "oracle", json_string(r->oracle));
    json_t *err = json_object();
    cli_json_set(err, "max_abs", json_number(r->err.max_abs));
    cli_json_set(err, "max_rel", json_number(r->err.max_rel));
    cli_json_set(err, "nmse", json_number(r->err.nmse));
    cli_json_set(err, "elements", json_integer(r->err.elements));
    cli_json_set(err, "outside", json_integer(r->err.outside));
    cli_json_set(err, "nonfinite", json_integer(r->err.nonfinite));
    cli_json_set(root, "errors", err);
    json_t *tol = json_object();
    cli_json_set(tol, "atol", json_real(r->tol.atol));
    cli_json_set(tol, "rtol", json_real(r->tol.rtol));
    cli_json_set(tol, "dtype", json_string(fmoe_dtype_name(r->tol.dtype)));
    cli_json_set(root, "tolerance", tol);
    int pass = run_passed(&r->err);
    cli_json_set(root, "pass", json_boolean(pass));
    cli_json_set(root, "result", json_string(pass ? "PASS" : "FAIL"));
    json_t *tm = json_object();
    cli_json_set(tm, "runs", json_integer(r->timing.runs));
    cli_json_set(tm, "median_s", json_number(r->timing.median_s));
    cli_json_set(tm, "tokens_per_s", json_number(r->timing.median_s > 0 ? o->tokens / r->timing.median_s : NAN));
    cli_json_set(root, "timing", tm);
    return cli_json_print(root);
}

void run_print_text(const run_report *r)
{
    const run_opts *o = r->o;
    const run_errors *e = &r->err;
    char args[1024];
    fmoe_layer_config_format_args(&o->cfg, args, sizeof args);
    printf("seed:       %llu%s\n", (unsigned long long)o->seed, o->seed_given ? "" : " (fresh; --seed repeats it)");
    printf("rerun:      %s\n", r->rerun);
    printf("layer:      %s\n", args);
    printf("scheme:     %s, %u tokens, routing %s\n", fmoe_selection_scheme_key(r->sel), o->tokens,
           o->logits ? "by each layer from router logits" : "given (fmoe_reference_route)");
    printf("backend:    %s\n", r->selected);
    printf("why:        %s\n", fmoe_selection_summary(r->sel));
    printf("oracle:     %s\n", r->oracle);
    printf("max abs:    %.3e\n", e->max_abs);
    printf("max rel:    %.3e (max|out-ref| %.3e / max|ref| %.3e)\n", e->max_rel, e->max_abs, e->max_ref);
    printf("nmse:       %.3e\n", e->nmse);
    printf("tolerance:  |out-ref| <= %.0e + %.0e*|ref| per element (%s)\n", r->tol.atol, r->tol.rtol,
           fmoe_dtype_name(r->tol.dtype));
    if (run_passed(e)) {
        printf("result:     PASS (all %lld elements within tolerance)\n", (long long)e->elements);
    } else {
        char text[512];
        run_failure_text(e, &r->tol, o->cfg.hidden_size, text, sizeof text);
        printf("result:     FAIL: %s\n", text);
    }
    if (r->timing.median_s > 0)
        printf("speed:      %.1f tokens/s (median %.3f ms over %d forwards of %u tokens)\n",
               o->tokens / r->timing.median_s, r->timing.median_s * 1e3, r->timing.runs, o->tokens);
    else
        printf("speed:      too fast to measure (%d forwards of %u tokens)\n", r->timing.runs, o->tokens);
}
