/* base/strbuf.c - growable strings (strbuf.h). */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(fmoe_strbuf *b, size_t extra)
{
    if (b->failed)
        return 0;
    if (b->len + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->failed = 1;
            return 0;
        }
        cap *= 2;
    }
    char *t = realloc(b->text, cap);
    if (!t) {
        b->failed = 1;
        return 0;
    }
    b->text = t;
    b->cap = cap;
    return 1;
}

void fmoe_strbuf_append(fmoe_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void fmoe_strbuf_append_json(fmoe_strbuf *b, const char *s)
{
    fmoe_strbuf_append(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fmoe_strbuf_append(b, "\\%c", *p);
        else if (*p < 0x20)
            fmoe_strbuf_append(b, "\\u%04x", *p);
        else
            fmoe_strbuf_append(b, "%c", *p);
    }
    fmoe_strbuf_append(b, "\"");
}

const char *fmoe_strbuf_text(const fmoe_strbuf *b)
{
    return b->text ? b->text : "";
}

int fmoe_strbuf_ok(const fmoe_strbuf *b)
{
    return !b->failed;
}

void fmoe_strbuf_free(fmoe_strbuf *b)
{
    free(b->text);
    memset(b, 0, sizeof *b);
}
