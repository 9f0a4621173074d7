/*
 * cli/conform/conform.h - `fusedmoe conform`: what the parts of the
 * conformance suite share (docs/CONFORMANCE.md).
 *
 * A run checks one or more plugins. Each check is a *case* with a stable id
 * "<mode>/<...>" and one verdict: PASS, FAIL or UNSUPPORTED (the plugin,
 * or the reference it is measured against, declines it: not an error). A
 * run passes only if no case FAILs. Every case can be replayed alone with
 * --filter <id> --seed N; its repro line says exactly that.
 *
 * Plugins are loaded by libfusedmoe's production loader (a context built
 * like every other command's); abi mode then drives the loaded image's
 * entry point directly (conform_abi.c says how, without loading anything).
 */
#ifndef FMOE_CLI_CONFORM_H
#define FMOE_CLI_CONFORM_H

#include <stddef.h>
#include <stdint.h>

#include "cli/cli.h"
#include "fusedmoe/fusedmoe.h"

#define CF_PASS        0
#define CF_FAIL        1
#define CF_UNSUPPORTED 2

#define CF_MODE_ABI     (1u << 0)
#define CF_MODE_SUPPORT (1u << 1)
#define CF_MODE_TEST    (1u << 2)
#define CF_MODE_STRESS  (1u << 3)
#define CF_MODE_EP      (1u << 4)
#define CF_MODE_ALL     (CF_MODE_ABI | CF_MODE_SUPPORT | CF_MODE_TEST | CF_MODE_STRESS | CF_MODE_EP)

typedef struct cf_opts {
    const char *plugin;      /* --plugin NAME|PATH, or NULL for every loaded plugin */
    const char *scheme_glob; /* --scheme KEY|GLOB, or NULL for all */
    const char *filter;      /* --filter SUBSTR over case ids, or NULL */
    const char *json_path;   /* --json FILE, or NULL */
    uint32_t modes;          /* CF_MODE_* */
    uint64_t seed;
    int seed_given;
    int exhaustive;
    int verbose; /* print PASS lines too */
} cf_opts;

typedef struct cf_case {
    char *plugin;
    char *id;
    int status;   /* CF_* */
    char *detail; /* one line: why it failed / was unsupported, or a note */
    double seconds;
} cf_case;

/* The plugin under test, as the production loader saw it. */
typedef struct cf_plugin {
    const char *name;
    const char *path;     /* shared library */
    const char *manifest; /* "" if none */
    const char *schemes;  /* manifest globs, comma-separated */
    int32_t state;        /* FMOE_PLUGIN_STATE_* */
    const char *reason;
} cf_plugin;

typedef struct cf_run {
    const cli_globals *g;
    const cf_opts *o;
    fmoe_context *ctx;
    const cf_plugin *plugin; /* current plugin */
    const char *mode;        /* current mode name: "abi", ... */
    cf_case *cases;
    size_t n_cases, cap_cases;
    /* the open case */
    char cur_id[256];
    double cur_t0;
    int open;
    /* progress (TTY only) */
    int tty;
    size_t progress_total, progress_done;
} cf_run;

/* --- report.c ------------------------------------------------------------ */

/* Start case "<mode>/<id>" (printf format). Returns 0 when --filter leaves
 * it out: the caller skips it and must not call cf_end. */
int cf_begin(cf_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Close the open case with a verdict and a one-line detail (may be NULL). */
void cf_end(cf_run *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether case "<mode>/<id>" would run under --filter (for skipping work). */
int cf_selected(const cf_run *r, const char *id);

/* The command line that repeats one case. */
void cf_repro_line(const cf_run *r, const char *case_id, char *buf, size_t cap);

/* Progress on stderr when it is a terminal: `total` cases expected in this mode. */
void cf_progress_start(cf_run *r, size_t total);
void cf_progress_clear(cf_run *r);

/* The summary table (stdout) and the JSON file; returns the exit code. */
int cf_report_finish(cf_run *r, double seconds);
void cf_run_free(cf_run *r);

/* Crash reporting: a fatal signal inside a plugin prints the open case and
 * its repro line, then exits 1 (a crash is a FAIL). */
void cf_install_crash_handler(void);

/* --- the modes ----------------------------------------------------------- */

void cf_mode_abi(cf_run *r);
void cf_mode_support(cf_run *r);
void cf_mode_test(cf_run *r);
void cf_mode_stress(cf_run *r);
void cf_mode_ep(cf_run *r); /* mode_ep.c: N ranks of an EP group equal one device */

#endif
