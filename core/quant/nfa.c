/*
 * core/quant/nfa.c - build and run the pattern machine (nfa.h).
 *
 * The run keeps the set of live instructions for the current position
 * (`cur`) and builds the next one (`next`). Adding an instruction follows
 * its empty moves (SPLIT, JMP, an ASSERT that holds at this position) with
 * an explicit stack, and marks each instruction with the position it was
 * added at, so no instruction enters a list twice and loops that match the
 * empty string ((a*)*) end.
 */
#include "core/quant/nfa.h"

#include <stdlib.h>
#include <string.h>

void nfa_set_clear(nfa_set *s)
{
    memset(s, 0, sizeof *s);
}

void nfa_set_add(nfa_set *s, unsigned char c)
{
    s->bits[c >> 5] |= 1u << (c & 31);
}

void nfa_set_add_range(nfa_set *s, unsigned char lo, unsigned char hi)
{
    for (unsigned c = lo; c <= hi; c++)
        nfa_set_add(s, (unsigned char)c);
}

void nfa_set_add_set(nfa_set *s, const nfa_set *t)
{
    for (int i = 0; i < 8; i++)
        s->bits[i] |= t->bits[i];
}

void nfa_set_invert(nfa_set *s)
{
    for (int i = 0; i < 8; i++)
        s->bits[i] = ~s->bits[i];
}

int nfa_set_has(const nfa_set *s, unsigned char c)
{
    return (s->bits[c >> 5] >> (c & 31)) & 1u;
}

uint32_t nfa_emit(nfa *m, uint8_t op, uint8_t arg, uint32_t x, uint32_t y)
{
    if (m->oom)
        return m->n;
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 32;
        nfa_inst *code = realloc(m->code, cap * sizeof *code);
        if (!code) {
            m->oom = 1;
            return m->n;
        }
        m->code = code;
        m->cap = cap;
    }
    m->code[m->n] = (nfa_inst){op, arg, x, y};
    return m->n++;
}

uint32_t nfa_emit_set(nfa *m, const nfa_set *s)
{
    if (m->oom)
        return m->n;
    if (m->n_sets == m->cap_sets) {
        uint32_t cap = m->cap_sets ? m->cap_sets * 2 : 8;
        nfa_set *sets = realloc(m->sets, cap * sizeof *sets);
        if (!sets) {
            m->oom = 1;
            return m->n;
        }
        m->sets = sets;
        m->cap_sets = cap;
    }
    m->sets[m->n_sets] = *s;
    return nfa_emit(m, NFA_SET, 0, m->n_sets++, 0);
}

void nfa_free(nfa *m)
{
    free(m->code);
    free(m->sets);
    memset(m, 0, sizeof *m);
}

/* ---- running ------------------------------------------------------------ */

static int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int assertion_holds(int kind, const unsigned char *s, size_t pos, size_t len)
{
    int before = pos > 0 && is_word(s[pos - 1]), after = pos < len && is_word(s[pos]);
    switch (kind) {
    case NFA_AT_START:
        return pos == 0;
    case NFA_AT_END_OR_FINAL_NL:
        return pos == len || (pos + 1 == len && s[pos] == '\n');
    case NFA_AT_END:
        return pos == len;
    case NFA_AT_WORD_BOUNDARY:
        return before != after;
    case NFA_AT_NOT_WORD_BOUNDARY:
        return len > 0 && before == after; /* Python's \B never matches an empty name */
    default:
        return 0;
    }
}

typedef struct run_state {
    const nfa *m;
    const unsigned char *s;
    size_t len;
    uint32_t *mark;  /* position + 1 at which an instruction was last added */
    uint32_t *stack; /* pending empty moves */
} run_state;

/* Add instruction `pc` and everything its empty moves reach at position
 * `pos` to `list`; returns 1 when NFA_MATCH is among them. */
static int add(run_state *r, uint32_t *list, uint32_t *n, uint32_t pc, size_t pos)
{
    uint32_t top = 0, tag = (uint32_t)pos + 1;
    int matched = 0;
    r->stack[top++] = pc;
    while (top) {
        pc = r->stack[--top];
        if (r->mark[pc] == tag)
            continue;
        r->mark[pc] = tag;
        const nfa_inst *in = &r->m->code[pc];
        switch (in->op) {
        case NFA_JMP:
            r->stack[top++] = in->x;
            break;
        case NFA_SPLIT:
            /* y first so x is taken first: order only matters to no one
             * here (the answer is yes or no), but it keeps runs readable. */
            r->stack[top++] = in->y;
            r->stack[top++] = in->x;
            break;
        case NFA_ASSERT:
            if (assertion_holds(in->arg, r->s, pos, r->len))
                r->stack[top++] = in->x;
            break;
        case NFA_MATCH:
            matched = 1;
            break;
        default: /* BYTE, SET: wait for the next byte */
            list[(*n)++] = pc;
            break;
        }
    }
    return matched;
}

static int accepts(int mode, const unsigned char *s, size_t pos, size_t len)
{
    return mode == NFA_PREFIX || pos == len || s[pos] == '.';
}

int nfa_run(const nfa *m, const char *name, int mode)
{
    if (m->n == 0)
        return 0;
    run_state r = {.m = m, .s = (const unsigned char *)name, .len = strlen(name)};
    /* Per position each instruction is marked once and then pushes at most
     * two more: the stack never holds more than 2n + 1 entries. Layout:
     * mark[n], stack[2n + 1], cur[n], next[n]. */
    size_t n = m->n;
    uint32_t *mem = calloc(5 * n + 1, sizeof *mem);
    if (!mem)
        return -1;
    r.mark = mem;
    r.stack = mem + n;
    uint32_t *cur = mem + 3 * n + 1, *next = mem + 4 * n + 1;
    uint32_t n_cur = 0, n_next = 0;
    int found = add(&r, cur, &n_cur, 0, 0) && accepts(mode, r.s, 0, r.len);
    for (size_t pos = 0; !found && pos < r.len && n_cur; pos++) {
        unsigned char c = r.s[pos];
        n_next = 0;
        int matched = 0;
        for (uint32_t i = 0; i < n_cur; i++) {
            const nfa_inst *in = &m->code[cur[i]];
            int ok = in->op == NFA_BYTE ? in->arg == c : nfa_set_has(&m->sets[in->x], c);
            if (ok)
                matched |= add(&r, next, &n_next, cur[i] + 1, pos + 1);
        }
        found = matched && accepts(mode, r.s, pos + 1, r.len);
        uint32_t *t = cur;
        cur = next;
        next = t;
        n_cur = n_next;
    }
    free(mem);
    return found;
}
