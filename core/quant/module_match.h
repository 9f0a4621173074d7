/*
 * core/quant/module_match.h - how a quantization_config names modules.
 *
 * Two families, because checkpoints use two:
 *
 *  - name patterns (compressed-tensors targets and ignore, GPTQ "dynamic"
 *    keys): a module name written out, or a Python regex matched like
 *    re.match (anchored at the start only; see pyregex.h);
 *  - module lists (fp8 ignored_layers / modules_to_not_convert, ModelOpt
 *    exclude_modules, mxfp4 modules_to_not_convert): an entry excludes the
 *    module it names and everything under it, and may be an fnmatch(3)
 *    glob ("model.layers.*.self_attn", ModelOpt's own wildcard form).
 *
 * A scheme is resolved for every projection of every expert (up to
 * 3 x FMOE_LIMIT_EXPERTS names), so lookups must not cost the length of
 * the lists: literal entries (the long lists real configs carry) are kept
 * sorted and found by binary search; regexes and globs run on the bounded
 * machine of nfa.h. Each compiled pattern's size is added to the qjson's
 * pattern_cost (at most FMOE_LIMIT_PATTERN_TOTAL per config), which
 * quant_config.c uses to bound a layer's matching work before it starts.
 */
#ifndef FMOE_CORE_QUANT_MODULE_MATCH_H
#define FMOE_CORE_QUANT_MODULE_MATCH_H

#include <stddef.h>

#include "core/quant/nfa.h"
#include "core/quant/pyregex.h"
#include "core/quant/qjson.h"

typedef struct name_pattern {
    char *text;       /* as written in the config, for messages */
    fmoe_pyregex *re; /* NULL: a literal name */
} name_pattern;

/* A compressed-tensors entry: "re:<regex>" or a literal name. A regex that
 * does not compile (or that pyregex.h refuses) is INVALID_ARGUMENT at the
 * current JSON path, naming the entry and why. */
fmoe_status name_pattern_ct(qjson *j, const char *text, name_pattern *out);

/* `regex` is a regex with no prefix; `text` is the entry as written. */
fmoe_status name_pattern_regex(qjson *j, const char *text, const char *regex, name_pattern *out);

/* Exact name or regex match against `value`: 1, 0, or -1 when memory ran
 * out. */
int name_pattern_matches(const name_pattern *p, const char *value);

void name_pattern_free(name_pattern *p);
void name_patterns_free(name_pattern *list, size_t n);

/* ---- sorted name lookups ------------------------------------------------- */

/* Sort `names` for name_sorted_find. */
void name_sort(char **names, size_t n);
/* 1 if the first `len` bytes of `s` are one of the sorted `names`. */
int name_sorted_find(char *const *names, size_t n, const char *s, size_t len);

/* ---- an unordered set of compressed-tensors entries (an ignore list) ----- */

typedef struct name_set {
    char **literals; /* sorted once the set is finished */
    size_t n_literals, cap_literals;
    name_pattern *regexes;
    size_t n_regexes;
} name_set;

/* Add one entry ("re:..." or a literal), errors at the current path. */
fmoe_status name_set_add_ct(qjson *j, name_set *s, const char *text);
/* Sort the literals; call once after the last add. */
void name_set_finish(name_set *s);
/* 1 if an entry matches `name`, 0 if none does, -1 when memory ran out. */
int name_set_matches(const name_set *s, const char *name);
void name_set_free(name_set *s);

/* ---- module lists ------------------------------------------------------------ */

typedef struct module_list {
    char **literals; /* entries without glob characters, sorted once finished */
    size_t n_literals, cap_literals;
    nfa *globs;
    char **glob_text; /* as written, parallel to globs */
    size_t n_globs;
} module_list;

/* Add the strings of list `key` of `obj` (absent or null: nothing); an
 * entry that is not a string, or a glob that is malformed or too large, is
 * an error at its path. Call module_list_finish after the last read. */
fmoe_status module_list_read(qjson *j, const json_t *obj, const char *key, module_list *l);
void module_list_finish(module_list *l);

/* 1 if some entry names `module` or one of its ancestors ("a.b" covers
 * "a.b.c", not "a.bc"), literally or as a glob; 0 if none; -1 when memory
 * ran out. */
int module_list_contains(const module_list *l, const char *module);

void module_list_free(module_list *l);

#endif
