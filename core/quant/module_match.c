/* core/quant/module_match.c - name patterns, name sets and module lists (see module_match.h). */
#include "core/quant/module_match.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/limits.h"

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* Count a compiled pattern against the config's total (qjson.h). */
static fmoe_status charge(qjson *j, uint32_t size, const char *text)
{
    j->pattern_cost += size;
    if (j->pattern_cost <= FMOE_LIMIT_PATTERN_TOTAL)
        return FMOE_STATUS_OK;
    return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                      "\"%.200s\": the module-name patterns of this config compile to more than %u instructions "
                      "together",
                      text, FMOE_LIMIT_PATTERN_TOTAL);
}

/* ---- name patterns ------------------------------------------------------------ */

fmoe_status name_pattern_regex(qjson *j, const char *text, const char *regex, name_pattern *out)
{
    char why[256];
    memset(out, 0, sizeof *out);
    if (fmoe_pyregex_compile(regex, &out->re, why, sizeof why) != 0)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "bad regular expression \"%.200s%s\": %s", text,
                          strlen(text) > 200 ? "..." : "", why);
    fmoe_status st = charge(j, fmoe_pyregex_size(out->re), text);
    if (st == FMOE_STATUS_OK)
        st = qjson_strdup(text, &out->text);
    if (st != FMOE_STATUS_OK)
        name_pattern_free(out);
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
    if (p->re)
        return fmoe_pyregex_match(p->re, value);
    return strcmp(p->text, value) == 0;
}

void name_pattern_free(name_pattern *p)
{
    fmoe_pyregex_free(p->re);
    free(p->text);
    memset(p, 0, sizeof *p);
}

void name_patterns_free(name_pattern *list, size_t n)
{
    for (size_t i = 0; i < n && list; i++)
        name_pattern_free(&list[i]);
    free(list);
}

/* ---- sorted names -------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void name_sort(char **names, size_t n)
{
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_names);
}

/* strcmp of `name` against the `len` bytes of `s`. */
static int cmp_prefix(const char *name, const char *s, size_t len)
{
    int c = strncmp(name, s, len);
    if (c)
        return c;
    return name[len] != '\0'; /* name is longer: it sorts after */
}

int name_sorted_find(char *const *names, size_t n, const char *s, size_t len)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_prefix(names[mid], s, len);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Append a copy of `text` to a growing array (doubling, so a list of a
 * million entries costs a million copies, not a million reallocations). */
static fmoe_status push_string(char ***list, size_t *n, size_t *cap, const char *text)
{
    if (*n == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 8;
        char **grown = realloc(*list, grown_cap * sizeof *grown);
        if (!grown)
            return out_of_memory();
        *list = grown;
        *cap = grown_cap;
    }
    char *copy = strdup(text);
    if (!copy)
        return out_of_memory();
    (*list)[(*n)++] = copy;
    return FMOE_STATUS_OK;
}

/* ---- name sets ------------------------------------------------------------------- */

fmoe_status name_set_add_ct(qjson *j, name_set *s, const char *text)
{
    if (strncmp(text, "re:", 3) != 0)
        return push_string(&s->literals, &s->n_literals, &s->cap_literals, text);
    name_pattern *grown = realloc(s->regexes, (s->n_regexes + 1) * sizeof *grown);
    if (!grown)
        return out_of_memory();
    s->regexes = grown;
    fmoe_status st = name_pattern_regex(j, text, text + 3, &grown[s->n_regexes]);
    if (st == FMOE_STATUS_OK)
        s->n_regexes++;
    return st;
}

void name_set_finish(name_set *s)
{
    name_sort(s->literals, s->n_literals);
}

int name_set_matches(const name_set *s, const char *name)
{
    if (name_sorted_find(s->literals, s->n_literals, name, strlen(name)))
        return 1;
    for (size_t i = 0; i < s->n_regexes; i++) {
        int hit = name_pattern_matches(&s->regexes[i], name);
        if (hit)
            return hit;
    }
    return 0;
}

void name_set_free(name_set *s)
{
    for (size_t i = 0; i < s->n_literals; i++)
        free(s->literals[i]);
    free(s->literals);
    name_patterns_free(s->regexes, s->n_regexes);
    memset(s, 0, sizeof *s);
}

/* ---- globs ------------------------------------------------------------------------ */

static int is_glob(const char *s)
{
    return strpbrk(s, "*?[\\") != NULL;
}

/* A named class "[:alpha:]" at p (on the '['): its members into *set and
 * the length consumed, 0 if p is not one, -1 for an unknown name. */
static int glob_named_class(const char *p, nfa_set *set)
{
    static const struct {
        const char *name;
        int (*is)(int);
    } classes[] = {
        {"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank}, {"cntrl", iscntrl},
        {"digit", isdigit}, {"graph", isgraph}, {"lower", islower}, {"print", isprint},
        {"punct", ispunct}, {"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit},
    };
    if (p[0] != '[' || p[1] != ':')
        return 0;
    const char *end = strstr(p + 2, ":]");
    if (!end)
        return 0;
    size_t len = (size_t)(end - (p + 2));
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        if (strlen(classes[i].name) == len && strncmp(classes[i].name, p + 2, len) == 0) {
            for (int c = 0; c < 128; c++) /* the C locale's classes */
                if (classes[i].is(c))
                    nfa_set_add(set, (unsigned char)c);
            return (int)(end + 2 - p);
        }
    }
    return -1;
}

/* A bracket expression at p (on the '['), fnmatch's rules: '!' or '^'
 * negates, a ']' first is a member, '\' quotes the next byte, a-z ranges,
 * [:class:] names. Returns its length, 0 when it has no closing ']' (the
 * '[' is then an ordinary byte), -1 for an unknown class name. */
static int glob_bracket(const char *p, nfa_set *set)
{
    const char *q = p + 1;
    nfa_set_clear(set);
    int negate = *q == '!' || *q == '^';
    q += negate;
    const char *start = q;
    for (;;) {
        if (!*q)
            return 0;
        if (*q == ']' && q != start)
            break;
        int named = glob_named_class(q, set);
        if (named < 0)
            return -1;
        if (named > 0) {
            q += named;
            continue;
        }
        if (*q == '\\' && q[1])
            q++;
        unsigned char lo = (unsigned char)*q++, hi = lo;
        if (q[0] == '-' && q[1] && q[1] != ']') {
            q++;
            if (*q == '\\' && q[1])
                q++;
            hi = (unsigned char)*q++;
        }
        if (lo <= hi)
            nfa_set_add_range(set, lo, hi);
    }
    if (negate)
        nfa_set_invert(set);
    return (int)(q + 1 - p);
}

/* fnmatch(3) without flags as a program: '*' any run of bytes, '?' any
 * byte, brackets, '\' quoting. */
static int glob_compile(const char *glob, nfa *m, char *why, size_t cap)
{
    nfa_set any;
    nfa_set_clear(&any);
    nfa_set_invert(&any);
    memset(m, 0, sizeof *m);
    for (const char *p = glob; *p;) {
        if (*p == '*') { /* L: SPLIT L+1, out; any; JMP L */
            uint32_t split = nfa_emit(m, NFA_SPLIT, 0, 0, 0);
            nfa_emit_set(m, &any);
            nfa_emit(m, NFA_JMP, 0, split, 0);
            if (!m->oom) {
                m->code[split].x = split + 1;
                m->code[split].y = m->n;
            }
            p++;
        } else if (*p == '?') {
            nfa_emit_set(m, &any);
            p++;
        } else if (*p == '[') {
            nfa_set set;
            int len = glob_bracket(p, &set);
            if (len < 0) {
                snprintf(why, cap, "unknown character class in a bracket expression");
                nfa_free(m);
                return -1;
            }
            if (len == 0) {
                nfa_emit(m, NFA_BYTE, '[', 0, 0);
                p++;
            } else {
                nfa_emit_set(m, &set);
                p += len;
            }
        } else {
            if (*p == '\\' && p[1])
                p++;
            nfa_emit(m, NFA_BYTE, (uint8_t)*p, 0, 0);
            p++;
        }
    }
    nfa_emit(m, NFA_MATCH, 0, 0, 0);
    if (m->oom) {
        snprintf(why, cap, "out of memory");
        nfa_free(m);
        return -1;
    }
    return 0;
}

/* ---- module lists ---------------------------------------------------------------- */

static fmoe_status add_glob(qjson *j, module_list *l, const char *entry)
{
    size_t len = strlen(entry);
    if (len > FMOE_LIMIT_PATTERN_BYTES)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "the glob \"%.64s...\" has %zu bytes, more than the %u allowed", entry, len,
                          FMOE_LIMIT_PATTERN_BYTES);
    nfa *globs = realloc(l->globs, (l->n_globs + 1) * sizeof *globs);
    if (globs)
        l->globs = globs;
    char **text = realloc(l->glob_text, (l->n_globs + 1) * sizeof *text);
    if (text)
        l->glob_text = text;
    if (!globs || !text)
        return out_of_memory();
    char why[128];
    if (glob_compile(entry, &l->globs[l->n_globs], why, sizeof why) != 0)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "bad glob \"%s\": %s", entry, why);
    l->glob_text[l->n_globs] = strdup(entry);
    if (!l->glob_text[l->n_globs]) {
        nfa_free(&l->globs[l->n_globs]);
        return out_of_memory();
    }
    l->n_globs++;
    return charge(j, l->globs[l->n_globs - 1].n, entry);
}

fmoe_status module_list_read(qjson *j, const json_t *obj, const char *key, module_list *l)
{
    json_t *arr = NULL;
    int given = 0;
    fmoe_status st = qjson_array(j, obj, key, 0, &arr, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t mark = qjson_enter_key(j, key);
    for (size_t i = 0; i < json_array_size(arr) && st == FMOE_STATUS_OK; i++) {
        json_t *item = json_array_get(arr, i);
        size_t at = qjson_enter_index(j, i);
        if (!json_is_string(item))
            st = qjson_expected(j, item, "a string");
        else if (is_glob(json_string_value(item)))
            st = add_glob(j, l, json_string_value(item));
        else
            st = push_string(&l->literals, &l->n_literals, &l->cap_literals, json_string_value(item));
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    return st;
}

void module_list_finish(module_list *l)
{
    name_sort(l->literals, l->n_literals);
}

int module_list_contains(const module_list *l, const char *module)
{
    /* A literal entry covers the module when it equals the module or one
     * of its dotted prefixes ("model.layers.1" covers "model.layers.1.mlp",
     * never "model.layers.10"). */
    size_t n = strlen(module);
    for (size_t k = 0; k <= n; k++)
        if ((module[k] == '.' || module[k] == '\0') && name_sorted_find(l->literals, l->n_literals, module, k))
            return 1;
    for (size_t i = 0; i < l->n_globs; i++) {
        int hit = nfa_run(&l->globs[i], module, NFA_DOTTED);
        if (hit)
            return hit;
    }
    return 0;
}

void module_list_free(module_list *l)
{
    for (size_t i = 0; i < l->n_literals; i++)
        free(l->literals[i]);
    free(l->literals);
    for (size_t i = 0; i < l->n_globs; i++) {
        nfa_free(&l->globs[i]);
        free(l->glob_text[i]);
    }
    free(l->globs);
    free(l->glob_text);
    memset(l, 0, sizeof *l);
}
