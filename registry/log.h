/*
 * registry/log.h - the context's log: a sink (application callback or
 * stderr), a level threshold with optional per-category verbosity
 * (FMOE_LOG), and the JSONL dispatch log (one record per decision).
 */
#ifndef FMOE_REGISTRY_LOG_H
#define FMOE_REGISTRY_LOG_H

#include <pthread.h>
#include <stdio.h>

#include "fusedmoe/fusedmoe.h"

#define FMOE_LOG_MAX_CATEGORIES 16
/* A category's bytes with its NUL: "plugin:" and the longest name host.c
 * logs under. */
#define FMOE_LOG_CATEGORY_CAP 96

typedef struct fmoe_logger {
    fmoe_log_fn fn; /* NULL: stderr */
    void *user;
    int level; /* messages at or below this level are shown */
    /* Categories raised to DEBUG by FMOE_LOG ("loader", "select", ...). */
    char categories[FMOE_LOG_MAX_CATEGORIES][FMOE_LOG_CATEGORY_CAP];
    int n_categories;
    FILE *dispatch;       /* JSONL dispatch log, or NULL */
    pthread_mutex_t lock; /* serializes the stderr and dispatch writes */
} fmoe_logger;

void fmoe_logger_init(fmoe_logger *lg, fmoe_log_fn fn, void *user);
void fmoe_logger_close(fmoe_logger *lg);

/* Apply a level name ("error".."debug"). 0, or -1 for an unknown name. */
int fmoe_logger_set_level(fmoe_logger *lg, const char *name);

/* Apply an FMOE_LOG value: comma-separated level names and categories
 * ("all" = debug everywhere). Any other word names a category, which is
 * then shown down to debug. A category too long to keep, or one past the
 * FMOE_LOG_MAX_CATEGORIES distinct ones, is INVALID_ARGUMENT naming
 * `source` (where the spec came from) and the word: never dropped. */
fmoe_status fmoe_logger_apply_spec(fmoe_logger *lg, const char *spec, const char *source);

/* Open (append) the dispatch log. INVALID_ARGUMENT / IO_ERROR with text. */
fmoe_status fmoe_logger_open_dispatch(fmoe_logger *lg, const char *path);

int fmoe_logger_enabled(const fmoe_logger *lg, int level, const char *category);
void fmoe_log(fmoe_logger *lg, int level, const char *category, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Write one JSON object (already formatted, no newline) to the dispatch log. */
void fmoe_log_dispatch_record(fmoe_logger *lg, const char *json);

/* Append `s` to `buf` (of capacity cap, current length *len) as a JSON
 * string literal with quotes. Truncates safely. */
void fmoe_json_append_string(char *buf, size_t cap, size_t *len, const char *s);

#endif
