/* base/error.c - thread-local error text (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"

static _Thread_local char error_text[FMOE_ERROR_MAX];

static void mark_truncated(int written)
{
    if (written >= (int)sizeof error_text)
        memcpy(error_text + sizeof error_text - 4, "...", 4);
}

fmoe_status fmoe_error_setv(fmoe_status status, const char *fmt, va_list ap)
{
    mark_truncated(vsnprintf(error_text, sizeof error_text, fmt, ap));
    return status;
}

fmoe_status fmoe_error_set(fmoe_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fmoe_error_setv(status, fmt, ap);
    va_end(ap);
    return status;
}

void fmoe_error_prefix(const char *fmt, ...)
{
    char prefix[512];
    char old[FMOE_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_text, sizeof old);
    mark_truncated(snprintf(error_text, sizeof error_text, "%s: %s", prefix, old));
}

void fmoe_error_clear(void)
{
    error_text[0] = '\0';
}

const char *fmoe_error_text(void)
{
    return error_text;
}

const char *fmoe_last_error(void)
{
    return error_text;
}
