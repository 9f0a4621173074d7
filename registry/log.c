/* registry/log.c - log sink, verbosity and the JSONL dispatch log (see log.h). */
#include "registry/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void fmoe_logger_init(fmoe_logger *lg, fmoe_log_fn fn, void *user)
{
    memset(lg, 0, sizeof *lg);
    lg->fn = fn;
    lg->user = user;
    lg->level = FMOE_LOG_WARN;
    pthread_mutex_init(&lg->lock, NULL);
}

void fmoe_logger_close(fmoe_logger *lg)
{
    if (lg->dispatch)
        fclose(lg->dispatch);
    lg->dispatch = NULL;
    pthread_mutex_destroy(&lg->lock);
}

static int level_from_name(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return FMOE_LOG_WARN;
    return -1;
}

int fmoe_logger_set_level(fmoe_logger *lg, const char *name)
{
    int level = level_from_name(name);
    if (level < 0)
        return -1;
    lg->level = level;
    return 0;
}

static int has_category(const fmoe_logger *lg, const char *name)
{
    for (int i = 0; i < lg->n_categories; i++)
        if (strcmp(lg->categories[i], name) == 0)
            return 1;
    return 0;
}

fmoe_status fmoe_logger_apply_spec(fmoe_logger *lg, const char *spec, const char *source)
{
    size_t n = 0;
    char **words = fmoe_split_list(spec, ',', &n);
    if (!words)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", source);
    fmoe_status st = FMOE_STATUS_OK;
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++) {
        const char *w = words[i];
        int level = level_from_name(w);
        if (level >= 0)
            lg->level = level;
        else if (strcmp(w, "all") == 0)
            lg->level = FMOE_LOG_DEBUG;
        else if (has_category(lg, w))
            continue;
        else if (strlen(w) >= FMOE_LOG_CATEGORY_CAP)
            st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: category '%.40s...' is longer than %d characters",
                                source, w, FMOE_LOG_CATEGORY_CAP - 1);
        else if (lg->n_categories == FMOE_LOG_MAX_CATEGORIES)
            st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                "%s: category '%s' is one more than the %d a log can raise", source, w,
                                FMOE_LOG_MAX_CATEGORIES);
        else
            snprintf(lg->categories[lg->n_categories++], FMOE_LOG_CATEGORY_CAP, "%s", w);
    }
    free(words);
    return st;
}

fmoe_status fmoe_logger_open_dispatch(fmoe_logger *lg, const char *path)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return fmoe_error_set(FMOE_STATUS_IO_ERROR, "cannot open dispatch log '%s' for appending: %s", path,
                              strerror(errno));
    if (lg->dispatch)
        fclose(lg->dispatch);
    lg->dispatch = f;
    return FMOE_STATUS_OK;
}

static int category_raised(const fmoe_logger *lg, const char *category)
{
    for (int i = 0; i < lg->n_categories; i++) {
        size_t n = strlen(lg->categories[i]);
        /* "plugin" raises "plugin:cuda" too. */
        if (strncmp(category, lg->categories[i], n) == 0 && (category[n] == '\0' || category[n] == ':'))
            return 1;
    }
    return 0;
}

int fmoe_logger_enabled(const fmoe_logger *lg, int level, const char *category)
{
    return level <= lg->level || category_raised(lg, category);
}

void fmoe_log(fmoe_logger *lg, int level, const char *category, const char *fmt, ...)
{
    if (!lg || !fmoe_logger_enabled(lg, level, category))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (lg->fn) {
        lg->fn(lg->user, level, category, msg);
        return;
    }
    pthread_mutex_lock(&lg->lock);
    fprintf(stderr, "fusedmoe %s [%s] %s\n", level_names[level < 0 ? 0 : level > 3 ? 3 : level], category, msg);
    pthread_mutex_unlock(&lg->lock);
}

void fmoe_log_dispatch_record(fmoe_logger *lg, const char *json)
{
    if (!lg->dispatch)
        return;
    pthread_mutex_lock(&lg->lock);
    fprintf(lg->dispatch, "%s\n", json);
    fflush(lg->dispatch);
    pthread_mutex_unlock(&lg->lock);
}

static void append_char(char *buf, size_t cap, size_t *len, char c)
{
    if (*len + 1 < cap) {
        buf[(*len)++] = c;
        buf[*len] = '\0';
    }
}

void fmoe_json_append_string(char *buf, size_t cap, size_t *len, const char *s)
{
    append_char(buf, cap, len, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            append_char(buf, cap, len, '\\');
            append_char(buf, cap, len, (char)*p);
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            for (char *e = esc; *e; e++)
                append_char(buf, cap, len, *e);
        } else {
            append_char(buf, cap, len, (char)*p);
        }
    }
    append_char(buf, cap, len, '"');
}
