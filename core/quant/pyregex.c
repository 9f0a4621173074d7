/*
 * core/quant/pyregex.c - Python regex -> syntax tree -> nfa.h program (see
 * pyregex.h for the subset and the bounds).
 *
 * Three passes, so that no work is spent on a pattern that is refused:
 * parse into a tree (the pattern's length and the nesting depth bound the
 * tree and the recursion), compute the program size the tree would emit
 * (saturating, so "(a{65535}){65535}" is a number, not a loop), and emit
 * only when that size is within the limit. The parser follows Python's
 * sre_parse where the two could disagree: "{" that does not start a
 * well-formed repeat is a literal, "{,n}" is "{0,n}", "{,}" is "*", a "]"
 * first in a set is a literal, a "-" next to "]" is a literal.
 */
#include "core/quant/pyregex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "core/quant/nfa.h"

struct fmoe_pyregex {
    nfa prog;
};

#define INF UINT32_MAX /* no upper bound on a repeat */

enum { N_EMPTY, N_BYTE, N_SET, N_ASSERT, N_CAT, N_ALT, N_REPEAT };

/* A tree node; children are a list through `first` / `next` (-1 ends). */
typedef struct node {
    uint8_t kind, byte; /* byte: N_BYTE's value, N_ASSERT's kind */
    int first, next;
    uint32_t lo, hi; /* N_REPEAT */
    nfa_set set;     /* N_SET */
} node;

typedef struct parser {
    const char *p; /* the next character */
    node *nodes;
    int n, cap;
    unsigned depth;
    char *why;
    size_t why_cap;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->why, ps->why_cap, fmt, ap);
        va_end(ap);
    }
    ps->failed = 1;
    return -1;
}

/* A new node's index, or -1 (failed set). */
static int new_node(parser *ps, int kind)
{
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 64;
        node *grown = realloc(ps->nodes, (size_t)cap * sizeof *grown);
        if (!grown)
            return fail(ps, "out of memory");
        ps->nodes = grown;
        ps->cap = cap;
    }
    node *nd = &ps->nodes[ps->n];
    memset(nd, 0, sizeof *nd);
    nd->kind = (uint8_t)kind;
    nd->first = nd->next = -1;
    return ps->n++;
}

/* ---- escapes and sets ------------------------------------------------------ */

static void set_digits(nfa_set *s)
{
    nfa_set_add_range(s, '0', '9');
}

static void set_word(nfa_set *s)
{
    nfa_set_add_range(s, 'a', 'z');
    nfa_set_add_range(s, 'A', 'Z');
    set_digits(s);
    nfa_set_add(s, '_');
}

static void set_space(nfa_set *s)
{
    static const char spaces[] = " \t\n\r\f\v";
    for (const char *c = spaces; *c; c++)
        nfa_set_add(s, (unsigned char)*c);
}

/* \d \w \s and their negations into *s; 0 if `c` is none of them. */
static int class_escape(char c, nfa_set *s)
{
    nfa_set t;
    nfa_set_clear(&t);
    switch (c) {
    case 'd':
    case 'D':
        set_digits(&t);
        break;
    case 'w':
    case 'W':
        set_word(&t);
        break;
    case 's':
    case 'S':
        set_space(&t);
        break;
    default:
        return 0;
    }
    if (c == 'D' || c == 'W' || c == 'S')
        nfa_set_invert(&t);
    nfa_set_add_set(s, &t);
    return 1;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A character escape (the letter after '\' at ps->p, consumed): its byte
 * in *out and 1, 0 if it is not one, -1 after a failure. `in_set`: inside
 * [...], where \b is a backspace. */
static int char_escape(parser *ps, int in_set, unsigned char *out)
{
    char c = *ps->p;
    static const char from[] = "ntrfva", to[] = "\n\t\r\f\v\a";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        ps->p++;
        *out = (unsigned char)to[hit - from];
        return 1;
    }
    if (in_set && c == 'b') {
        ps->p++;
        *out = '\b';
        return 1;
    }
    if (c == 'x') {
        int hi = hex_value(ps->p[1]), lo = hi < 0 ? -1 : hex_value(ps->p[2]);
        if (lo < 0)
            return fail(ps, "\\x needs two hex digits");
        ps->p += 3;
        *out = (unsigned char)(hi * 16 + lo);
        return 1;
    }
    if (c >= '0' && c <= '9')
        return fail(ps, "back-references and octal escapes (\\%c) are not supported", c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return fail(ps, "the escape \\%c is not supported", c);
    if (!c)
        return fail(ps, "the pattern ends with a backslash");
    ps->p++;
    *out = (unsigned char)c; /* \. \\ \- \[ ...: the character itself */
    return 1;
}

/* One member of a set at ps->p: a byte (1, *byte) or a class (2, added to
 * *s); -1 on failure. */
static int set_member(parser *ps, nfa_set *s, unsigned char *byte)
{
    if (*ps->p != '\\') {
        *byte = (unsigned char)*ps->p++;
        return 1;
    }
    ps->p++;
    if (class_escape(*ps->p, s)) {
        ps->p++;
        return 2;
    }
    return char_escape(ps, 1, byte) < 0 ? -1 : 1;
}

/* [...] with ps->p after the '['. */
static int parse_set(parser *ps)
{
    int id = new_node(ps, N_SET);
    if (id < 0)
        return -1;
    nfa_set s;
    nfa_set_clear(&s);
    int negate = *ps->p == '^';
    ps->p += negate;
    const char *start = ps->p;
    for (;;) {
        if (!*ps->p)
            return fail(ps, "unterminated character set");
        if (*ps->p == ']' && ps->p != start) {
            ps->p++;
            break;
        }
        unsigned char lo = 0, hi = 0;
        int kind = set_member(ps, &s, &lo);
        if (kind < 0)
            return -1;
        if (ps->p[0] != '-' || ps->p[1] == ']' || !ps->p[1]) {
            if (kind == 1)
                nfa_set_add(&s, lo);
            continue;
        }
        ps->p++; /* a range */
        int kind2 = set_member(ps, &s, &hi);
        if (kind2 < 0)
            return -1;
        if (kind != 1 || kind2 != 1 || hi < lo)
            return fail(ps, "bad character range");
        nfa_set_add_range(&s, lo, hi);
    }
    if (negate)
        nfa_set_invert(&s);
    ps->nodes[id].set = s;
    return id;
}

/* ---- the grammar ------------------------------------------------------------ */

static int parse_alt(parser *ps);

static int leaf_byte(parser *ps, unsigned char c)
{
    int id = new_node(ps, N_BYTE);
    if (id >= 0)
        ps->nodes[id].byte = c;
    return id;
}

static int leaf_assert(parser *ps, int kind)
{
    int id = new_node(ps, N_ASSERT);
    if (id >= 0)
        ps->nodes[id].byte = (uint8_t)kind;
    return id;
}

static int leaf_class(parser *ps, char c)
{
    int id = new_node(ps, N_SET);
    if (id < 0)
        return -1;
    nfa_set_clear(&ps->nodes[id].set);
    class_escape(c, &ps->nodes[id].set);
    return id;
}

/* An escape outside a set, ps->p after the '\'. */
static int parse_escape(parser *ps)
{
    char c = *ps->p;
    static const char anchors[] = "AZbB";
    static const int kinds[] = {NFA_AT_START, NFA_AT_END, NFA_AT_WORD_BOUNDARY, NFA_AT_NOT_WORD_BOUNDARY};
    const char *a = c ? strchr(anchors, c) : NULL;
    if (a) {
        ps->p++;
        return leaf_assert(ps, kinds[a - anchors]);
    }
    if (c && strchr("dDwWsS", c)) {
        ps->p++;
        return leaf_class(ps, c);
    }
    unsigned char b;
    if (char_escape(ps, 0, &b) < 0)
        return -1;
    return leaf_byte(ps, b);
}

static int parse_group(parser *ps)
{
    if (ps->p[0] == '?') {
        if (ps->p[1] != ':')
            return fail(ps, "\"(?\" groups other than \"(?:\" (lookarounds, flags, named groups) are not "
                            "supported");
        ps->p += 2;
    }
    if (++ps->depth > FMOE_LIMIT_PATTERN_DEPTH)
        return fail(ps, "groups nest more than %u deep", FMOE_LIMIT_PATTERN_DEPTH);
    int inner = parse_alt(ps);
    ps->depth--;
    if (inner < 0)
        return -1;
    if (*ps->p != ')')
        return fail(ps, "missing ), unterminated subpattern");
    ps->p++;
    return inner;
}

static int parse_atom(parser *ps)
{
    char c = *ps->p++;
    switch (c) {
    case '(':
        return parse_group(ps);
    case '[':
        return parse_set(ps);
    case '\\':
        return parse_escape(ps);
    case '^':
        return leaf_assert(ps, NFA_AT_START);
    case '$':
        return leaf_assert(ps, NFA_AT_END_OR_FINAL_NL);
    case '.': {
        int id = new_node(ps, N_SET);
        if (id >= 0) {
            nfa_set_clear(&ps->nodes[id].set);
            nfa_set_add(&ps->nodes[id].set, '\n');
            nfa_set_invert(&ps->nodes[id].set); /* any byte but a newline */
        }
        return id;
    }
    default:
        return leaf_byte(ps, (unsigned char)c);
    }
}

/* A decimal repeat count, saturated (anything over the program limit is
 * refused by the size pass anyway). */
static uint32_t count_at(const char *p, const char *end)
{
    uint32_t v = 0;
    for (; p < end; p++)
        v = v > 100000000u ? v : v * 10 + (uint32_t)(*p - '0');
    return v;
}

/* "{m}", "{m,}", "{,n}", "{m,n}", "{,}" at ps->p (on the '{'): 1 with the
 * bounds, consumed; 0 when the brace is a literal (Python's rule). */
static int parse_braces(parser *ps, uint32_t *lo, uint32_t *hi)
{
    const char *p = ps->p + 1, *lo_start = p;
    if (*p == '}')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    const char *lo_end = p, *hi_start = p, *hi_end = p;
    int comma = *p == ',';
    if (comma) {
        hi_start = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        hi_end = p;
    }
    if (*p != '}')
        return 0;
    *lo = count_at(lo_start, lo_end);
    *hi = !comma ? *lo : hi_end > hi_start ? count_at(hi_start, hi_end) : INF;
    ps->p = p + 1;
    return 1;
}

/* A quantifier after an atom, if there is one: *lo, *hi and 1. */
static int parse_quantifier(parser *ps, uint32_t *lo, uint32_t *hi)
{
    char c = *ps->p;
    if (c == '*' || c == '+' || c == '?') {
        *lo = c == '+';
        *hi = c == '?' ? 1 : INF;
        ps->p++;
    } else if (c != '{' || !parse_braces(ps, lo, hi)) {
        return 0;
    }
    if (*lo > *hi)
        return fail(ps, "min repeat greater than max repeat");
    if (*ps->p == '?')
        ps->p++; /* lazy: the same answer for re.match */
    else if (*ps->p == '+')
        return fail(ps, "possessive quantifiers are not supported");
    return 1;
}

static int is_quantifier_start(parser *ps)
{
    uint32_t lo, hi;
    parser probe = *ps;
    char c = *ps->p;
    return c == '*' || c == '+' || c == '?' || (c == '{' && parse_braces(&probe, &lo, &hi));
}

/* A sequence up to '|', ')' or the end. */
static int parse_cat(parser *ps)
{
    int cat = new_node(ps, N_CAT), last = -1;
    if (cat < 0)
        return -1;
    while (*ps->p && *ps->p != '|' && *ps->p != ')') {
        if (is_quantifier_start(ps))
            return fail(ps, "nothing to repeat");
        int atom = parse_atom(ps);
        if (atom < 0)
            return -1;
        uint32_t lo = 0, hi = 0;
        int q = parse_quantifier(ps, &lo, &hi);
        if (q < 0)
            return -1;
        if (q) {
            if (ps->nodes[atom].kind == N_ASSERT)
                return fail(ps, "nothing to repeat");
            if (is_quantifier_start(ps))
                return fail(ps, "multiple repeat");
            int rep = new_node(ps, N_REPEAT);
            if (rep < 0)
                return -1;
            ps->nodes[rep].first = atom;
            ps->nodes[rep].lo = lo;
            ps->nodes[rep].hi = hi;
            atom = rep;
        }
        if (last < 0)
            ps->nodes[cat].first = atom;
        else
            ps->nodes[last].next = atom;
        last = atom;
    }
    return cat;
}

static int parse_alt(parser *ps)
{
    int first = parse_cat(ps);
    if (first < 0 || *ps->p != '|')
        return first;
    int alt = new_node(ps, N_ALT), last = first;
    if (alt < 0)
        return -1;
    ps->nodes[alt].first = first;
    while (*ps->p == '|') {
        ps->p++;
        int next = parse_cat(ps);
        if (next < 0)
            return -1;
        ps->nodes[last].next = next;
        last = next;
    }
    return alt;
}

/* ---- size and emission ---------------------------------------------------------- */

#define TOO_BIG ((uint64_t)FMOE_LIMIT_PATTERN_PROGRAM + 1)

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b > TOO_BIG ? TOO_BIG : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return a && b > TOO_BIG / a ? TOO_BIG : a * b > TOO_BIG ? TOO_BIG : a * b;
}

/* Instructions node `id` emits, saturated at TOO_BIG. */
static uint64_t size_of(const node *nodes, int id)
{
    const node *nd = &nodes[id];
    uint64_t total = 0, k = 0;
    switch (nd->kind) {
    case N_EMPTY:
        return 0;
    case N_BYTE:
    case N_SET:
    case N_ASSERT:
        return 1;
    case N_CAT:
    case N_ALT:
        for (int c = nd->first; c >= 0; c = nodes[c].next, k++)
            total = sat_add(total, size_of(nodes, c));
        return nd->kind == N_ALT && k ? sat_add(total, 2 * (k - 1)) : total;
    default: { /* N_REPEAT */
        uint64_t e = size_of(nodes, nd->first);
        if (nd->hi == INF) /* lo - 1 copies and a plus loop, or a star loop */
            return nd->lo ? sat_add(sat_mul(nd->lo, e), 1) : sat_add(e, 2);
        return sat_add(sat_mul(nd->lo, e), sat_mul((uint64_t)nd->hi - nd->lo, sat_add(e, 1)));
    }
    }
}

static void emit(nfa *m, const node *nodes, int id);

static void emit_alt(nfa *m, const node *nodes, const node *nd)
{
    uint32_t pending = UINT32_MAX; /* the JMPs to patch, chained through x */
    for (int c = nd->first; c >= 0; c = nodes[c].next) {
        if (nodes[c].next < 0) {
            emit(m, nodes, c);
            break;
        }
        uint32_t split = nfa_emit(m, NFA_SPLIT, 0, 0, 0);
        emit(m, nodes, c);
        uint32_t jmp = nfa_emit(m, NFA_JMP, 0, pending, 0);
        pending = jmp;
        if (!m->oom) {
            m->code[split].x = split + 1;
            m->code[split].y = m->n;
        }
    }
    while (!m->oom && pending != UINT32_MAX) {
        uint32_t next = m->code[pending].x;
        m->code[pending].x = m->n;
        pending = next;
    }
}

static void emit_repeat(nfa *m, const node *nodes, const node *nd)
{
    int e = nd->first;
    if (nd->hi == INF) {
        for (uint32_t i = 1; i < nd->lo; i++)
            emit(m, nodes, e);
        if (nd->lo) { /* L: e; SPLIT L, out */
            uint32_t start = m->n;
            emit(m, nodes, e);
            nfa_emit(m, NFA_SPLIT, 0, start, m->n + 1);
        } else { /* L: SPLIT L+1, out; e; JMP L */
            uint32_t split = nfa_emit(m, NFA_SPLIT, 0, 0, 0);
            emit(m, nodes, e);
            nfa_emit(m, NFA_JMP, 0, split, 0);
            if (!m->oom) {
                m->code[split].x = split + 1;
                m->code[split].y = m->n;
            }
        }
        return;
    }
    for (uint32_t i = 0; i < nd->lo; i++)
        emit(m, nodes, e);
    /* Optional copies: skipping one skips the rest, so each SPLIT exits to
     * the end (chained through y until known). */
    uint32_t pending = UINT32_MAX;
    for (uint32_t i = nd->lo; i < nd->hi; i++) {
        uint32_t split = nfa_emit(m, NFA_SPLIT, 0, 0, pending);
        if (!m->oom)
            m->code[split].x = split + 1;
        pending = split;
        emit(m, nodes, e);
    }
    while (!m->oom && pending != UINT32_MAX) {
        uint32_t next = m->code[pending].y;
        m->code[pending].y = m->n;
        pending = next;
    }
}

static void emit(nfa *m, const node *nodes, int id)
{
    const node *nd = &nodes[id];
    switch (nd->kind) {
    case N_BYTE:
        nfa_emit(m, NFA_BYTE, nd->byte, 0, 0);
        break;
    case N_SET:
        nfa_emit_set(m, &nd->set);
        break;
    case N_ASSERT:
        nfa_emit(m, NFA_ASSERT, nd->byte, m->n + 1, 0);
        break;
    case N_CAT:
        for (int c = nd->first; c >= 0; c = nodes[c].next)
            emit(m, nodes, c);
        break;
    case N_ALT:
        emit_alt(m, nodes, nd);
        break;
    case N_REPEAT:
        emit_repeat(m, nodes, nd);
        break;
    default:
        break;
    }
}

/* ---- the interface -------------------------------------------------------------- */

int fmoe_pyregex_compile(const char *pattern, fmoe_pyregex **out, char *why, size_t cap)
{
    *out = NULL;
    size_t len = strlen(pattern);
    if (len > FMOE_LIMIT_PATTERN_BYTES) {
        snprintf(why, cap, "the pattern has %zu bytes, more than the %u allowed", len, FMOE_LIMIT_PATTERN_BYTES);
        return -1;
    }
    parser ps = {.p = pattern, .why = why, .why_cap = cap};
    int root = parse_alt(&ps);
    if (root >= 0 && *ps.p == ')')
        root = fail(&ps, "unbalanced parenthesis");
    uint64_t size = root >= 0 ? sat_add(size_of(ps.nodes, root), 1) : 0;
    if (root >= 0 && size > FMOE_LIMIT_PATTERN_PROGRAM)
        root = fail(&ps,
                    "compiles to more than %u instructions (repeat counts multiply the size of what they "
                    "repeat)",
                    FMOE_LIMIT_PATTERN_PROGRAM);
    fmoe_pyregex *re = root >= 0 ? calloc(1, sizeof *re) : NULL;
    if (root >= 0 && !re)
        root = fail(&ps, "out of memory");
    if (root >= 0) {
        emit(&re->prog, ps.nodes, root);
        nfa_emit(&re->prog, NFA_MATCH, 0, 0, 0);
        if (re->prog.oom)
            root = fail(&ps, "out of memory");
    }
    free(ps.nodes);
    if (root < 0) {
        fmoe_pyregex_free(re);
        return -1;
    }
    *out = re;
    return 0;
}

int fmoe_pyregex_match(const fmoe_pyregex *re, const char *name)
{
    return nfa_run(&re->prog, name, NFA_PREFIX);
}

uint32_t fmoe_pyregex_size(const fmoe_pyregex *re)
{
    return re->prog.n;
}

void fmoe_pyregex_free(fmoe_pyregex *re)
{
    if (!re)
        return;
    nfa_free(&re->prog);
    free(re);
}
