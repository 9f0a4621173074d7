/*
 * base/strbuf.h - a growable string for text whose length depends on its
 * inputs (JSON lines, listings): appends never truncate silently and
 * never write past the allocation. On out of memory the buffer is marked
 * failed, later appends do nothing, and fmoe_strbuf_ok() says so.
 */
#ifndef FMOE_BASE_STRBUF_H
#define FMOE_BASE_STRBUF_H

#include <stddef.h>

typedef struct fmoe_strbuf {
    char *text; /* NUL-terminated; NULL until the first append */
    size_t len, cap;
    int failed;
} fmoe_strbuf;

void fmoe_strbuf_append(fmoe_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of `s`, quotes included. */
void fmoe_strbuf_append_json(fmoe_strbuf *b, const char *s);
/* The text ("" when empty); valid until the next append or free. */
const char *fmoe_strbuf_text(const fmoe_strbuf *b);
int fmoe_strbuf_ok(const fmoe_strbuf *b);
void fmoe_strbuf_free(fmoe_strbuf *b);

#endif
