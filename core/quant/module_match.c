/* core/quant/module_match.c - name patterns and module lists (see module_match.h). */
#include "core/quant/module_match.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/quant/pyregex.h"

fmoe_status name_pattern_regex(qjson *j, const char *text, const char *regex, name_pattern *out)
{
    char why[256];
    memset(out, 0, sizeof *out);
    if (fmoe_pyregex_compile(regex, &out->re, why, sizeof why) != 0)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "bad regular expression \"%s\": %s", text, why);
    out->is_regex = 1;
    fmoe_status st = qjson_strdup(text, &out->text);
    if (st != FMOE_STATUS_OK) {
        regfree(&out->re);
        out->is_regex = 0;
    }
    return st;
}

fmoe_status name_pattern_ct(qjson *j, const char *text, name_pattern *out)
{
    if (strncmp(text, "re:", 3) == 0)
        return name_pattern_regex(j, text, text + 3, out);
    memset(out, 0, sizeof *out);
    return qjson_strdup(text, &out->text);
}

int name_pattern_matches(const name_pattern *p, const char *value)
{
    if (p->is_regex)
        return fmoe_pyregex_match(&p->re, value);
    return strcmp(p->text, value) == 0;
}

void name_pattern_free(name_pattern *p)
{
    if (p->is_regex)
        regfree(&p->re);
    free(p->text);
    memset(p, 0, sizeof *p);
}

void name_patterns_free(name_pattern *list, size_t n)
{
    for (size_t i = 0; i < n && list; i++)
        name_pattern_free(&list[i]);
    free(list);
}

/* `entry` names `module` or an ancestor: fnmatch on the module itself, or
 * on every dotted prefix of it. Walking the prefixes (instead of matching
 * entry + ".*") keeps "model.layers.1" from excluding "model.layers.10". */
static int entry_covers(const char *entry, const char *module)
{
    char stack[512];
    size_t n = strlen(module);
    char *prefix = n < sizeof stack ? stack : malloc(n + 1);
    if (!prefix)
        return strcmp(entry, module) == 0; /* no memory: the literal rule still holds */
    int hit = 0;
    memcpy(prefix, module, n + 1);
    for (size_t k = n + 1; k-- > 0 && !hit;) {
        if (module[k] != '.' && module[k] != '\0')
            continue;
        prefix[k] = '\0';
        hit = fnmatch(entry, prefix, 0) == 0;
    }
    if (prefix != stack)
        free(prefix);
    return hit;
}

int module_list_contains(char *const *entries, size_t n, const char *module)
{
    for (size_t i = 0; i < n; i++)
        if (entry_covers(entries[i], module))
            return 1;
    return 0;
}
