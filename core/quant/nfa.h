/*
 * core/quant/nfa.h - the machine that matches module names against the
 * patterns of a quantization_config (Python regexes, pyregex.h; globs,
 * module_match.h).
 *
 * Patterns come from checkpoints, so they are hostile input. A
 * backtracking matcher (or glibc's regcomp, whose memory grows with every
 * nested repeat count) can be made to run or allocate without bound by a
 * pattern of a few bytes. This one is a Thompson NFA run breadth-first
 * (a Pike VM without captures): every instruction is visited at most once
 * per character, so matching a name of L bytes costs at most
 * L x (instructions) steps whatever the pattern, and a program is never
 * larger than FMOE_LIMIT_PATTERN_PROGRAM instructions (base/limits.h; the
 * compilers check the size before emitting anything).
 *
 * Names are matched as bytes; character sets are 256-bit maps.
 */
#ifndef FMOE_CORE_QUANT_NFA_H
#define FMOE_CORE_QUANT_NFA_H

#include <stddef.h>
#include <stdint.h>

enum {
    NFA_BYTE,   /* consume the byte `arg` */
    NFA_SET,    /* consume a byte of set `x` */
    NFA_SPLIT,  /* continue at x and at y */
    NFA_JMP,    /* continue at x */
    NFA_ASSERT, /* an empty-width test (`arg`: one of the NFA_AT_* below) */
    NFA_MATCH,
};

enum {
    NFA_AT_START,           /* ^, \A: the start of the name */
    NFA_AT_END_OR_FINAL_NL, /* $: the end, or before a newline that ends the name (Python) */
    NFA_AT_END,             /* \Z */
    NFA_AT_WORD_BOUNDARY,   /* \b: [A-Za-z0-9_] on one side only */
    NFA_AT_NOT_WORD_BOUNDARY,
};

typedef struct nfa_set {
    uint32_t bits[8];
} nfa_set;

typedef struct nfa_inst {
    uint8_t op, arg;
    uint32_t x, y;
} nfa_inst;

typedef struct nfa {
    nfa_inst *code;
    uint32_t n, cap;
    nfa_set *sets;
    uint32_t n_sets, cap_sets;
    int oom; /* an emit failed for memory: the program is unusable */
} nfa;

/* ---- sets ------------------------------------------------------------- */

void nfa_set_clear(nfa_set *s);
void nfa_set_add(nfa_set *s, unsigned char c);
void nfa_set_add_range(nfa_set *s, unsigned char lo, unsigned char hi);
void nfa_set_add_set(nfa_set *s, const nfa_set *t);
void nfa_set_invert(nfa_set *s);
int nfa_set_has(const nfa_set *s, unsigned char c);

/* ---- building ----------------------------------------------------------- */

/* Append an instruction; its index (also on failure: check m->oom). */
uint32_t nfa_emit(nfa *m, uint8_t op, uint8_t arg, uint32_t x, uint32_t y);
/* Append NFA_SET for a copy of `s`. */
uint32_t nfa_emit_set(nfa *m, const nfa_set *s);

void nfa_free(nfa *m);

/* ---- running ------------------------------------------------------------ */

/* How a match is accepted. */
enum {
    NFA_PREFIX, /* reaching NFA_MATCH after any prefix of the name (Python's re.match) */
    NFA_DOTTED, /* reaching it after the whole name or a prefix followed by '.' (a
                 * module list entry covers the module and everything under it) */
};

/* 1 if `name` is accepted, 0 if not, -1 if memory ran out. */
int nfa_run(const nfa *m, const char *name, int mode);

#endif
