/*
 * core/quant/pyregex.c - Python regex -> POSIX ERE, then regcomp (see
 * pyregex.h for why and for what is refused).
 *
 * The translation walks the pattern once. Outside brackets it rewrites
 * class escapes (\d -> [0-9]), non-capturing groups ("(?:" -> "("), lazy
 * quantifiers and literal braces; inside brackets it collects the members
 * and writes them back in the order POSIX needs (a literal ']' first,
 * '[' and '^' late, '-' last), because POSIX gives brackets no escapes.
 */
#include "core/quant/pyregex.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The translated pattern under construction. */
typedef struct ere {
    char *p;
    size_t len, cap;
    int oom;
} ere;

static void put_n(ere *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void put(ere *o, const char *s)
{
    put_n(o, s, strlen(s));
}

static void put_c(ere *o, char c)
{
    put_n(o, &c, 1);
}

static int refuse(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* The members of \d, \w, \s (NULL for other letters); *negated for the
 * upper-case forms. */
static const char *class_members(char c, int *negated)
{
    *negated = isupper((unsigned char)c) != 0;
    switch (tolower((unsigned char)c)) {
    case 'd': return "0-9";
    case 'w': return "A-Za-z0-9_";
    case 's': return " \t\n\r\f\v";
    default: return NULL;
    }
}

/* \n, \t, ... as the byte they stand for; 0 if `c` is not one. */
static char control_escape(char c)
{
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    default: return 0;
    }
}

#define ERE_SPECIAL ".[]()*+?{}|^$\\"

/* One escape outside brackets, `s` on the letter after the backslash. */
static int escape_outside(ere *o, char c, char *why, size_t cap)
{
    int negated;
    const char *members = class_members(c, &negated);
    if (members) {
        put(o, negated ? "[^" : "[");
        put(o, members);
        put(o, "]");
        return 0;
    }
    if (control_escape(c)) {
        put_c(o, control_escape(c));
        return 0;
    }
    switch (c) {
    case 'A': put(o, "^"); return 0;
    case 'Z':
    case 'z': put(o, "$"); return 0;
    case 'b':
    case 'B': put(o, c == 'b' ? "\\b" : "\\B"); return 0; /* GNU regcomp has both */
    default: break;
    }
    if (isdigit((unsigned char)c))
        return refuse(why, cap, "back-references (\\%c) are not supported", c);
    if (isalpha((unsigned char)c))
        return refuse(why, cap, "the escape \\%c is not supported", c);
    if (strchr(ERE_SPECIAL, c)) {
        put_c(o, '\\');
        put_c(o, c);
    } else {
        put_c(o, c); /* \- \/ \: ... are plain characters */
    }
    return 0;
}

/* A bracket expression starting at p[*i] == '['; *i ends after its ']'. */
static int bracket(ere *o, const char *p, size_t *i, char *why, size_t cap)
{
    size_t k = *i + 1;
    int negate = 0, rbracket = 0, lbracket = 0, caret = 0, dash = 0;
    ere items = {0};
    if (p[k] == '^') {
        negate = 1;
        k++;
    }
    if (p[k] == ']') { /* first: literal in both dialects */
        rbracket = 1;
        k++;
    }
    for (;; k++) {
        char c = p[k];
        if (c == '\0') {
            free(items.p);
            return refuse(why, cap, "unterminated character set");
        }
        if (c == ']')
            break;
        if (c == '\\') {
            char e = p[++k];
            int neg;
            const char *members = class_members(e, &neg);
            if (e == '\0') {
                free(items.p);
                return refuse(why, cap, "the pattern ends with a backslash");
            }
            if (members && neg) {
                free(items.p);
                return refuse(why, cap, "\\%c inside a character set is not supported", e);
            }
            if (members)
                put(&items, members);
            else if (control_escape(e))
                put_c(&items, control_escape(e));
            else if (e == ']')
                rbracket = 1;
            else if (e == '[')
                lbracket = 1;
            else if (e == '^')
                caret = 1;
            else if (e == '-')
                dash = 1;
            else if (isalnum((unsigned char)e)) {
                free(items.p);
                return refuse(why, cap, "the escape \\%c is not supported", e);
            } else
                put_c(&items, e); /* \\ \. ...: the character itself */
            continue;
        }
        if (c == '[')
            lbracket = 1; /* never next to ':', '.', '=' (POSIX classes) */
        else if (c == '^')
            caret = 1;
        else if (c == '-' && (items.len == 0 || p[k + 1] == ']'))
            dash = 1;
        else
            put_c(&items, c);
    }
    if (items.oom) {
        free(items.p);
        o->oom = 1;
        return 0;
    }
    *i = k + 1;
    if (!negate && caret && !rbracket && !lbracket && !dash && items.len == 0) {
        put(o, "\\^");
        return 0;
    }
    put(o, negate ? "[^" : "[");
    if (rbracket)
        put_c(o, ']');
    if (items.len)
        put(o, items.p);
    if (lbracket)
        put_c(o, '[');
    if (caret)
        put_c(o, '^');
    if (dash)
        put_c(o, '-');
    put_c(o, ']');
    free(items.p);
    return 0;
}

/* "{m}", "{m,}", "{m,n}" or "{,n}" at p[i]; its length, or 0 when the brace
 * is a literal (Python reads any other brace as itself). */
static size_t interval_length(const char *p, size_t i)
{
    size_t k = i + 1, digits = 0;
    while (isdigit((unsigned char)p[k])) {
        k++;
        digits++;
    }
    if (p[k] == ',') {
        k++;
        while (isdigit((unsigned char)p[k])) {
            k++;
            digits++;
        }
    }
    return p[k] == '}' && digits ? k - i + 1 : 0;
}

/* After a quantifier: drop a lazy '?', refuse a possessive '+'. */
static int after_quantifier(const char *p, size_t *i, char *why, size_t cap)
{
    if (p[*i] == '?')
        (*i)++;
    else if (p[*i] == '+')
        return refuse(why, cap, "possessive quantifiers are not supported");
    return 0;
}

static int translate(const char *p, ere *o, char *why, size_t cap)
{
    size_t i = 0;
    while (p[i]) {
        char c = p[i];
        if (c == '\\') {
            if (!p[i + 1])
                return refuse(why, cap, "the pattern ends with a backslash");
            if (escape_outside(o, p[i + 1], why, cap) != 0)
                return -1;
            i += 2;
        } else if (c == '[') {
            if (bracket(o, p, &i, why, cap) != 0)
                return -1;
        } else if (c == '(' && p[i + 1] == '?') {
            if (p[i + 2] != ':')
                return refuse(why, cap, "\"(?\" groups other than \"(?:\" (lookarounds, flags, named groups) "
                                        "are not supported");
            put_c(o, '(');
            i += 3;
        } else if (c == '*' || c == '+' || c == '?') {
            put_c(o, c);
            i++;
            if (after_quantifier(p, &i, why, cap) != 0)
                return -1;
        } else if (c == '{') {
            size_t n = interval_length(p, i);
            if (!n) {
                put(o, "\\{");
                i++;
                continue;
            }
            put_c(o, '{');
            if (p[i + 1] == ',')
                put_c(o, '0'); /* Python's {,n} is {0,n} */
            put_n(o, p + i + 1, n - 1);
            i += n;
            if (after_quantifier(p, &i, why, cap) != 0)
                return -1;
        } else if (c == '}') {
            put(o, "[}]");
            i++;
        } else {
            put_c(o, c);
            i++;
        }
    }
    return 0;
}

int fmoe_pyregex_compile(const char *pattern, regex_t *re, char *why, size_t cap)
{
    ere o = {0};
    put(&o, "^(");
    if (translate(pattern, &o, why, cap) != 0) {
        free(o.p);
        return -1;
    }
    put(&o, ")");
    if (o.oom) {
        free(o.p);
        return refuse(why, cap, "out of memory");
    }
    /* "^()" is not valid everywhere; an empty pattern matches every name. */
    const char *text = strcmp(o.p, "^()") == 0 ? "^" : o.p;
    int rc = regcomp(re, text, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[160];
        regerror(rc, re, msg, sizeof msg);
        free(o.p);
        return refuse(why, cap, "%s", msg);
    }
    free(o.p);
    return 0;
}

int fmoe_pyregex_match(const regex_t *re, const char *name)
{
    return regexec(re, name, 0, NULL, 0) == 0;
}
