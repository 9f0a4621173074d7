/*
 * cli/conform/report.c - cases, verdicts, repro lines, progress, the
 * summary table and the JSON report of `fusedmoe conform`.
 */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/conform/conform.h"
#include "cli/json_out.h"
#include "cli/table.h"

static const char *const status_names[] = {"PASS", "FAIL", "UNSUPPORTED"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- crash reporting: what a fatal signal prints (async-signal-safe) ------ */

static char crash_text[2048];
static volatile sig_atomic_t crash_armed;

static void on_fatal_signal(int sig)
{
    if (crash_armed) {
        ssize_t w = write(STDERR_FILENO, crash_text, strlen(crash_text));
        (void)w;
    }
    signal(sig, SIG_DFL);
    _exit(CLI_EXIT_CHECK);
}

void cf_install_crash_handler(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* --- repro lines --------------------------------------------------------- */

static void append(char *buf, size_t cap, const char *s)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@%+-";
    size_t len = strlen(buf);
    int quote = !s[0] || strspn(s, plain) != strlen(s);
    snprintf(buf + len, cap - len, "%s%s%s%s", len ? " " : "", quote ? "'" : "", s, quote ? "'" : "");
}

void cf_repro_line(const cf_run *r, const char *case_id, char *buf, size_t cap)
{
    char seed[32];
    buf[0] = '\0';
    append(buf, cap, "fusedmoe");
    if (r->g->config_path) {
        append(buf, cap, "--config");
        append(buf, cap, r->g->config_path);
    }
    for (uint32_t i = 0; i < r->g->n_plugin_files; i++) {
        append(buf, cap, "--plugin");
        append(buf, cap, r->g->plugin_files[i]);
    }
    append(buf, cap, "conform");
    append(buf, cap, "--plugin");
    append(buf, cap, r->o->plugin ? r->o->plugin : r->plugin->name);
    append(buf, cap, "--filter");
    append(buf, cap, case_id);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->o->seed);
    append(buf, cap, "--seed");
    append(buf, cap, seed);
}

/* --- cases --------------------------------------------------------------- */

int cf_selected(const cf_run *r, const char *id)
{
    char full[300];
    snprintf(full, sizeof full, "%s/%s", r->mode, id);
    return !r->o->filter || strstr(full, r->o->filter) != NULL;
}

static void progress_draw(cf_run *r)
{
    if (!r->tty)
        return;
    char bar[21];
    size_t total = r->progress_total ? r->progress_total : 1, done = r->progress_done;
    size_t fill = done >= total ? 20 : done * 20 / total;
    for (size_t i = 0; i < 20; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    fprintf(stderr, "\r\033[K%s %s [%s] %zu/%zu %.60s", r->plugin->name, r->mode, bar, done, r->progress_total,
            r->cur_id);
    fflush(stderr);
}

void cf_progress_start(cf_run *r, size_t total)
{
    r->progress_total = total;
    r->progress_done = 0;
}

void cf_progress_clear(cf_run *r)
{
    if (r->tty) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

int cf_begin(cf_run *r, const char *fmt, ...)
{
    char id[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(id, sizeof id, fmt, ap);
    va_end(ap);
    if (!cf_selected(r, id))
        return 0;
    snprintf(r->cur_id, sizeof r->cur_id, "%.16s/%s", r->mode, id);
    r->cur_t0 = now_s();
    r->open = 1;
    char repro[1536];
    cf_repro_line(r, r->cur_id, repro, sizeof repro);
    crash_armed = 0;
    snprintf(crash_text, sizeof crash_text,
             "\nFAIL %s %s: the plugin crashed (fatal signal) in this case\n  repro: %s\n", r->plugin->name, r->cur_id,
             repro);
    crash_armed = 1;
    progress_draw(r);
    return 1;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void cf_end(cf_run *r, int status, const char *fmt, ...)
{
    char detail[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    crash_armed = 0;
    r->open = 0;
    r->progress_done++;
    double secs = now_s() - r->cur_t0;
    if (r->n_cases == r->cap_cases) {
        size_t nc = r->cap_cases ? r->cap_cases * 2 : 256;
        cf_case *n = realloc(r->cases, nc * sizeof *n);
        if (!n) {
            cli_error("out of memory recording case %s", r->cur_id);
            exit(CLI_EXIT_INTERNAL);
        }
        r->cases = n;
        r->cap_cases = nc;
    }
    cf_case *c = &r->cases[r->n_cases++];
    c->plugin = dup_str(r->plugin->name);
    c->id = dup_str(r->cur_id);
    c->detail = dup_str(detail);
    c->status = status;
    c->seconds = secs;
    if (!c->plugin || !c->id || !c->detail) {
        cli_error("out of memory recording case %s", r->cur_id);
        exit(CLI_EXIT_INTERNAL);
    }
    if (status == CF_PASS && !r->o->verbose) {
        progress_draw(r);
        return;
    }
    cf_progress_clear(r);
    printf("%-11s %s %s%s%s\n", status_names[status], r->plugin->name, r->cur_id, detail[0] ? ": " : "", detail);
    if (status == CF_FAIL) {
        char repro[1536];
        cf_repro_line(r, r->cur_id, repro, sizeof repro);
        printf("            repro: %s\n", repro);
    }
    fflush(stdout);
    progress_draw(r);
}

/* --- summary and JSON ---------------------------------------------------- */

typedef struct tally {
    const char *plugin;
    char mode[16];
    size_t n[3];
} tally;

static void mode_of(const char *id, char *mode, size_t cap)
{
    size_t len = strcspn(id, "/");
    snprintf(mode, cap, "%.*s", (int)(len < cap ? len : cap - 1), id);
}

static size_t tally_cases(const cf_run *r, tally *t, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_cases; i++) {
        const cf_case *c = &r->cases[i];
        char mode[16];
        mode_of(c->id, mode, sizeof mode);
        size_t j = 0;
        while (j < n && (strcmp(t[j].plugin, c->plugin) != 0 || strcmp(t[j].mode, mode) != 0))
            j++;
        if (j == n) {
            if (n == cap)
                continue;
            t[n] = (tally){.plugin = c->plugin};
            snprintf(t[n].mode, sizeof t[n].mode, "%s", mode);
            n++;
        }
        t[j].n[c->status]++;
    }
    return n;
}

static int write_json(const cf_run *r, double seconds, int passed)
{
    json_t *root = json_object(), *cases = json_array(), *plugins = json_array();
    if (!root || !cases || !plugins) {
        json_decref(root);
        json_decref(cases);
        json_decref(plugins);
        cli_error("out of memory writing %s", r->o->json_path);
        return CLI_EXIT_INTERNAL;
    }
    cli_json_set(root, "fusedmoe", cli_json_string(fmoe_version()));
    cli_json_set(root, "seed", json_integer((json_int_t)r->o->seed));
    cli_json_set(root, "exhaustive", json_boolean(r->o->exhaustive));
    cli_json_set(root, "filter", cli_json_string(r->o->filter));
    cli_json_set(root, "scheme", cli_json_string(r->o->scheme_glob));
    cli_json_set(root, "seconds", json_real(seconds));
    cli_json_set(root, "pass", json_boolean(passed));
    cli_json_set(root, "result", json_string(passed ? "PASS" : "FAIL"));
    size_t counts[3] = {0};
    for (size_t i = 0; i < r->n_cases; i++) {
        const cf_case *c = &r->cases[i];
        counts[c->status]++;
        json_t *o = json_object();
        cli_json_set(o, "plugin", cli_json_string(c->plugin));
        cli_json_set(o, "id", cli_json_string(c->id));
        cli_json_set(o, "status", json_string(status_names[c->status]));
        cli_json_set(o, "detail", cli_json_string(c->detail));
        cli_json_set(o, "seconds", json_real(c->seconds));
        if (c->status == CF_FAIL) {
            char repro[1536];
            cf_run tmp = *r;
            cf_plugin p = {.name = c->plugin};
            tmp.plugin = &p;
            cf_repro_line(&tmp, c->id, repro, sizeof repro);
            cli_json_set(o, "repro", cli_json_string(repro));
        }
        json_array_append_new(cases, o);
    }
    tally t[64];
    size_t nt = tally_cases(r, t, 64);
    for (size_t i = 0; i < nt; i++) {
        json_t *o = json_object();
        cli_json_set(o, "plugin", cli_json_string(t[i].plugin));
        cli_json_set(o, "mode", json_string(t[i].mode));
        cli_json_set(o, "pass", json_integer((json_int_t)t[i].n[CF_PASS]));
        cli_json_set(o, "fail", json_integer((json_int_t)t[i].n[CF_FAIL]));
        cli_json_set(o, "unsupported", json_integer((json_int_t)t[i].n[CF_UNSUPPORTED]));
        json_array_append_new(plugins, o);
    }
    json_t *totals = json_object();
    cli_json_set(totals, "pass", json_integer((json_int_t)counts[CF_PASS]));
    cli_json_set(totals, "fail", json_integer((json_int_t)counts[CF_FAIL]));
    cli_json_set(totals, "unsupported", json_integer((json_int_t)counts[CF_UNSUPPORTED]));
    cli_json_set(root, "totals", totals);
    cli_json_set(root, "summary", plugins);
    cli_json_set(root, "cases", cases);
    int rc = json_dump_file(root, r->o->json_path, JSON_INDENT(2)) == 0 ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
    json_decref(root);
    if (rc != CLI_EXIT_OK)
        cli_error("cannot write the JSON report to %s", r->o->json_path);
    return rc;
}

int cf_report_finish(cf_run *r, double seconds)
{
    cf_progress_clear(r);
    size_t counts[3] = {0};
    for (size_t i = 0; i < r->n_cases; i++)
        counts[r->cases[i].status]++;
    int passed = counts[CF_FAIL] == 0;
    tally t[64];
    size_t nt = tally_cases(r, t, 64);
    static const char *const headers[] = {"PLUGIN", "MODE", "PASS", "FAIL", "UNSUPPORTED", "RESULT"};
    cli_table *tab = table_new(6, headers);
    for (size_t i = 0; tab && i < nt; i++) {
        char p[24], f[24], u[24];
        snprintf(p, sizeof p, "%zu", t[i].n[CF_PASS]);
        snprintf(f, sizeof f, "%zu", t[i].n[CF_FAIL]);
        snprintf(u, sizeof u, "%zu", t[i].n[CF_UNSUPPORTED]);
        const char *cells[] = {t[i].plugin, t[i].mode, p, f, u, t[i].n[CF_FAIL] ? "FAIL" : "PASS"};
        table_row(tab, cells);
    }
    printf("\n");
    if (tab)
        table_print(tab, stdout);
    table_free(tab);
    printf("\nseed: %llu\n", (unsigned long long)r->o->seed);
    printf("result: %s (%zu cases: %zu pass, %zu fail, %zu unsupported; %.1f s)\n", passed ? "PASS" : "FAIL",
           r->n_cases, counts[CF_PASS], counts[CF_FAIL], counts[CF_UNSUPPORTED], seconds);
    fflush(stdout);
    int rc = CLI_EXIT_OK;
    if (r->o->json_path)
        rc = write_json(r, seconds, passed);
    if (rc != CLI_EXIT_OK)
        return rc;
    return passed ? CLI_EXIT_OK : CLI_EXIT_CHECK;
}

void cf_run_free(cf_run *r)
{
    for (size_t i = 0; i < r->n_cases; i++) {
        free(r->cases[i].plugin);
        free(r->cases[i].id);
        free(r->cases[i].detail);
    }
    free(r->cases);
    r->cases = NULL;
    r->n_cases = r->cap_cases = 0;
}
