/*
 * core/quant/pyregex.h - Python regular expressions, as checkpoint configs
 * write them ("re:.*mlp\\.experts\\.\\d+\\.down_proj$"), matched the way
 * Python's re.match does: anchored at the start of the name, not at its end.
 *
 * The patterns come from checkpoints, so they are compiled here into the
 * bounded machine of nfa.h instead of being handed to a regex library
 * whose compile memory or match time a crafted pattern controls: a
 * pattern is at most FMOE_LIMIT_PATTERN_BYTES long, nests groups at most
 * FMOE_LIMIT_PATTERN_DEPTH deep and compiles to at most
 * FMOE_LIMIT_PATTERN_PROGRAM instructions (the size is computed before
 * anything is emitted, so "(a{1000}){1000}" is refused, not built), and a
 * match costs at most (name length + 1) x (instructions) steps.
 *
 * The syntax is Python's, for the subset real configs use and a little
 * more: literals, ".", classes [...] with ranges and negation, \d \w \s
 * and their negations, \n \t \r \f \v \a \xhh, groups (...) and (?:...),
 * alternation, the quantifiers * + ? {m} {m,} {,n} {m,n} and their lazy
 * forms (laziness does not change whether re.match finds a match), the
 * anchors ^ $ \A \Z and \b \B. Anything whose meaning would differ or that
 * a linear-time machine cannot do is refused with a reason, never matched
 * as something else: back-references, lookarounds, inline flags, named
 * groups, possessive quantifiers, unknown escapes. Names are matched as
 * bytes, and \d \w \s are their ASCII sets (module names are ASCII).
 */
#ifndef FMOE_CORE_QUANT_PYREGEX_H
#define FMOE_CORE_QUANT_PYREGEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct fmoe_pyregex fmoe_pyregex;

/* Compile `pattern`: 0 and *out (free with fmoe_pyregex_free), or -1 with
 * the reason in `why` (nothing to free). */
int fmoe_pyregex_compile(const char *pattern, fmoe_pyregex **out, char *why, size_t cap);

/* 1 if the pattern matches at the start of `name`, 0 if not, -1 if memory
 * ran out. */
int fmoe_pyregex_match(const fmoe_pyregex *re, const char *name);

/* Instructions of the compiled program: the most steps a match spends per
 * byte of the name. */
uint32_t fmoe_pyregex_size(const fmoe_pyregex *re);

void fmoe_pyregex_free(fmoe_pyregex *re);

#endif
