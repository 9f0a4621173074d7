/*
 * base/error.h - the library's error text: one thread-local slot, set where
 * an error is detected and read by the application with fmoe_last_error().
 */
#ifndef FMOE_BASE_ERROR_H
#define FMOE_BASE_ERROR_H

#include <stdarg.h>

#include "fusedmoe/common.h"

/* Longest error text kept; longer messages are truncated with "...". */
#define FMOE_ERROR_MAX 2048

/* Set this thread's error text (printf format) and return `status`, so that
 * callers can write `return fmoe_error_set(FMOE_STATUS_..., "...")`. */
fmoe_status fmoe_error_set(fmoe_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
fmoe_status fmoe_error_setv(fmoe_status status, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Prefix the current text with "<prefix>: " (context added on the way up). */
void fmoe_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Clear the text; every public entry point does this first. */
void fmoe_error_clear(void);

/* The current text ("" if none). */
const char *fmoe_error_text(void);

#endif
