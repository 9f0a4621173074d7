/*
 * core/quant/pyregex.h - Python regular expressions, as checkpoint configs
 * write them ("re:.*mlp\\.experts\\.\\d+\\.down_proj$"), run with POSIX
 * regcomp/regexec and the semantics of Python's re.match: anchored at the
 * start of the name, not at its end.
 *
 * POSIX extended syntax is close to Python's but not equal: glibc reads
 * "\d" as the letter d, has no "(?:", and treats "{" and backslashes in
 * brackets differently. So the pattern is translated first, and anything
 * that would change meaning in translation (lookarounds, back-references,
 * inline flags, named groups, unknown escapes) is refused with a message
 * instead of being matched as something else.
 *
 * Lazy quantifiers ("*?") become greedy: re.match only asks whether some
 * match starts at position 0, and that answer does not depend on laziness.
 */
#ifndef FMOE_CORE_QUANT_PYREGEX_H
#define FMOE_CORE_QUANT_PYREGEX_H

#include <regex.h>
#include <stddef.h>

/* Compile `pattern` into `re` (REG_EXTENDED | REG_NOSUB, anchored at the
 * start). Returns 0, or -1 with the reason in `why` (nothing to free). */
int fmoe_pyregex_compile(const char *pattern, regex_t *re, char *why, size_t cap);

/* 1 if the compiled pattern matches at the start of `name`. */
int fmoe_pyregex_match(const regex_t *re, const char *name);

#endif
