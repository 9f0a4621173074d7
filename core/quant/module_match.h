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
 *    module it names and everything under it, and may be an fnmatch glob
 *    ("model.layers.*.self_attn", ModelOpt's own wildcard form).
 */
#ifndef FMOE_CORE_QUANT_MODULE_MATCH_H
#define FMOE_CORE_QUANT_MODULE_MATCH_H

#include <regex.h>
#include <stddef.h>

#include "core/quant/qjson.h"

typedef struct name_pattern {
    char *text;   /* as written in the config, for messages */
    int is_regex;
    regex_t re;   /* compiled when is_regex */
} name_pattern;

/* A compressed-tensors entry: "re:<regex>" or a literal name. A regex that
 * does not compile (or uses what pyregex.h refuses) is INVALID_ARGUMENT at
 * the current JSON path. */
fmoe_status name_pattern_ct(qjson *j, const char *text, name_pattern *out);

/* `regex` is a regex with no prefix; `text` is the entry as written. */
fmoe_status name_pattern_regex(qjson *j, const char *text, const char *regex, name_pattern *out);

/* Exact name or regex match against `value`. */
int name_pattern_matches(const name_pattern *p, const char *value);

void name_pattern_free(name_pattern *p);
void name_patterns_free(name_pattern *list, size_t n);

/* 1 if some entry names `module` or one of its ancestors, literally or as
 * an fnmatch(3) glob. */
int module_list_contains(char *const *entries, size_t n, const char *module);

#endif
