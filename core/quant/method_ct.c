/*
 * core/quant/method_ct.c - quant_method "compressed-tensors" (llm-compressor
 * checkpoints; spec/interface.md §9.2).
 *
 *   {"quant_method": "compressed-tensors", "format": "pack-quantized",
 *    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {...},
 *                                  "input_activations": null}},
 *    "ignore": ["lm_head", "re:.*mlp.gate$"]}
 *
 * Reading follows vLLM's CompressedTensorsConfig.from_config:
 *  - a group whose only target ends in "Attention" is dropped (attention
 *    quantization goes with the KV cache, not with linear layers);
 *  - targets keep the order in which they first appear; a later group that
 *    names the same target replaces its arguments (a Python dict);
 *  - a group's "format" overrides the global one; input_activations are
 *    read when the format quantizes activations or the group gives them,
 *    and an activation format without them is only valid for float
 *    weights (W8A16-FP8);
 *  - an empty input_activations object means none, as in Python.
 *
 * Resolving a module: an "ignore" entry (exact name or "re:") makes it
 * unquantized; otherwise the first target whose name or regex matches the
 * module wins; otherwise the first target that matches the module's class.
 * Every expert projection in a HF checkpoint is an nn.Linear, so class
 * targets are matched against "Linear" the way vLLM does (target contained
 * in the class name, ignoring case; "re:" targets as regexes). A module no
 * target matches is not quantized.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "core/quant/module_match.h"
#include "core/quant/quant.h"

/* The class of every module this reader is asked about. */
#define MODULE_CLASS "Linear"

typedef struct ct_group {
    qargs weights;
    int has_input;
    qargs input;
    char *format; /* the group's own; NULL: the global one */
} ct_group;

typedef struct ct_target {
    name_pattern pattern;
    size_t group; /* the last group naming this target */
    size_t order; /* position of its first mention (read_groups) */
} ct_target;

/* A literal target by name, for the binary search. */
typedef struct ct_literal {
    const char *name;
    size_t index; /* into targets */
} ct_literal;

typedef struct ct_state {
    char *format; /* global; NULL for None */
    ct_group *groups;
    size_t n_groups;
    ct_target *targets; /* in first-mention order */
    size_t n_targets, cap_targets;
    ct_literal *literals; /* the literal targets, by name */
    size_t n_literals;
    size_t *regexes; /* indices of the regex targets, in order */
    size_t n_regexes;
    size_t class_hit; /* first target matching the class, or n_targets */
    name_set ignore;
} ct_state;

static void ct_destroy(void *state)
{
    ct_state *s = state;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_groups; i++)
        free(s->groups[i].format);
    free(s->groups);
    for (size_t i = 0; i < s->n_targets; i++)
        name_pattern_free(&s->targets[i].pattern);
    free(s->targets);
    free(s->literals);
    free(s->regexes);
    name_set_free(&s->ignore);
    free(s->format);
    free(s);
}

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* Formats whose checkpoints carry quantized activations
 * (compressed-tensors utils.is_activation_quantization_format). */
static int is_activation_format(const char *format)
{
    static const char *const formats[] = {"naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
                                          "mxfp4-pack-quantized"};
    for (size_t i = 0; format && i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(format, formats[i]) == 0)
            return 1;
    return 0;
}

/* QuantizationArgs member `key` of a group (absent, null or {}: *given 0). */
static fmoe_status read_args(qjson *j, const json_t *group, const char *key, int required, qargs *out, int *given)
{
    json_t *obj = NULL;
    *given = 0;
    fmoe_status st = qjson_object(j, group, key, required, &obj, NULL);
    if (st != FMOE_STATUS_OK || !obj || json_object_size(obj) == 0) {
        if (st == FMOE_STATUS_OK && required && obj)
            st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "\"%s\" is empty", key);
        return st;
    }
    size_t mark = qjson_enter_key(j, key);
    st = qargs_read(j, obj, out);
    qjson_leave(j, mark);
    *given = st == FMOE_STATUS_OK;
    return st;
}

/* Append `target` for group `g`; equal targets are merged once all are
 * read (merge_targets), so a config of many targets is not quadratic. */
static fmoe_status add_target(qjson *j, ct_state *s, const char *target, size_t g)
{
    if (s->n_targets == s->cap_targets) {
        size_t cap = s->cap_targets ? s->cap_targets * 2 : 8;
        ct_target *grown = realloc(s->targets, cap * sizeof *grown);
        if (!grown)
            return out_of_memory();
        s->targets = grown;
        s->cap_targets = cap;
    }
    ct_target *t = &s->targets[s->n_targets];
    fmoe_status st = name_pattern_ct(j, target, &t->pattern);
    if (st != FMOE_STATUS_OK)
        return st;
    t->group = g;
    t->order = s->n_targets++;
    return FMOE_STATUS_OK;
}

static int by_text_then_order(const void *a, const void *b)
{
    const ct_target *x = a, *y = b;
    int c = strcmp(x->pattern.text, y->pattern.text);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int by_order(const void *a, const void *b)
{
    const ct_target *x = a, *y = b;
    return (x->order > y->order) - (x->order < y->order);
}

static int by_literal_name(const void *a, const void *b)
{
    return strcmp(((const ct_literal *)a)->name, ((const ct_literal *)b)->name);
}

static int matches_class(const name_pattern *p);

/* A target named twice keeps its first place and takes the last group
 * (a Python dict); then the lookup tables resolve uses. */
static fmoe_status merge_targets(ct_state *s)
{
    size_t n = s->n_targets, kept = 0;
    if (n > 1)
        qsort(s->targets, n, sizeof *s->targets, by_text_then_order);
    for (size_t i = 0; i < n;) {
        size_t end = i + 1;
        while (end < n && strcmp(s->targets[end].pattern.text, s->targets[i].pattern.text) == 0)
            end++;
        ct_target first = s->targets[i];
        first.group = s->targets[end - 1].group;
        for (size_t k = i + 1; k < end; k++)
            name_pattern_free(&s->targets[k].pattern);
        s->targets[kept++] = first;
        i = end;
    }
    s->n_targets = kept;
    if (kept > 1)
        qsort(s->targets, kept, sizeof *s->targets, by_order);
    s->literals = malloc((kept ? kept : 1) * sizeof *s->literals);
    s->regexes = malloc((kept ? kept : 1) * sizeof *s->regexes);
    if (!s->literals || !s->regexes)
        return out_of_memory();
    s->class_hit = kept;
    for (size_t i = 0; i < kept; i++) {
        const name_pattern *p = &s->targets[i].pattern;
        if (p->re)
            s->regexes[s->n_regexes++] = i;
        else
            s->literals[s->n_literals++] = (ct_literal){p->text, i};
        if (s->class_hit == kept) {
            int hit = matches_class(p);
            if (hit < 0)
                return out_of_memory();
            if (hit)
                s->class_hit = i;
        }
    }
    if (s->n_literals > 1)
        qsort(s->literals, s->n_literals, sizeof *s->literals, by_literal_name);
    return FMOE_STATUS_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static fmoe_status read_group_args(qjson *j, ct_state *s, const json_t *group, ct_group *g)
{
    const char *format = NULL;
    int given = 0, has_weights = 0;
    fmoe_status st = qjson_string(j, group, "format", 0, &format, &given);
    if (st == FMOE_STATUS_OK && given)
        st = qjson_strdup(format, &g->format);
    if (st == FMOE_STATUS_OK)
        st = read_args(j, group, "weights", 1, &g->weights, &has_weights);
    if (st == FMOE_STATUS_OK)
        st = read_args(j, group, "input_activations", 0, &g->input, &g->has_input);
    /* Output activations do not change the expert GEMMs; they are still
     * checked, as compressed-tensors would. */
    qargs output;
    int has_output = 0;
    if (st == FMOE_STATUS_OK)
        st = read_args(j, group, "output_activations", 0, &output, &has_output);
    if (st != FMOE_STATUS_OK)
        return st;
    const char *effective = g->format ? g->format : s->format;
    if (is_activation_format(effective) && !g->has_input && g->weights.type != QTYPE_FLOAT)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "format \"%s\" quantizes activations, but the group has no input_activations (only float "
                          "weights may leave them out: W8A16-FP8)",
                          effective);
    return FMOE_STATUS_OK;
}

static fmoe_status read_group(qjson *j, ct_state *s, const json_t *group)
{
    char **targets = NULL;
    size_t n = 0;
    if (!json_is_object(group))
        return qjson_expected(j, group, "an object");
    fmoe_status st = qjson_string_list(j, group, "targets", &targets, &n);
    if (st == FMOE_STATUS_OK && !qjson_member(group, "targets"))
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "missing required key \"targets\"");
    if (st != FMOE_STATUS_OK) {
        qjson_free_strings(targets, n);
        return st;
    }
    if (n == 1 && ends_with(targets[0], "Attention")) {
        qjson_free_strings(targets, n);
        return FMOE_STATUS_OK;
    }
    ct_group *grown = realloc(s->groups, (s->n_groups + 1) * sizeof *grown);
    if (!grown) {
        qjson_free_strings(targets, n);
        return out_of_memory();
    }
    s->groups = grown;
    ct_group *g = &grown[s->n_groups++];
    memset(g, 0, sizeof *g);
    st = read_group_args(j, s, group, g);
    size_t mark = qjson_enter_key(j, "targets");
    for (size_t i = 0; i < n && st == FMOE_STATUS_OK; i++) {
        size_t at = qjson_enter_index(j, i);
        st = add_target(j, s, targets[i], s->n_groups - 1);
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    qjson_free_strings(targets, n);
    return st;
}

static fmoe_status read_groups(qjson *j, ct_state *s, const json_t *qcfg)
{
    json_t *groups = NULL;
    int given = 0;
    fmoe_status st = qjson_object(j, qcfg, "config_groups", 0, &groups, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t mark = qjson_enter_key(j, "config_groups");
    const char *name;
    json_t *group;
    json_object_foreach(groups, name, group) {
        size_t at = qjson_enter_key(j, name);
        st = read_group(j, s, group);
        qjson_leave(j, at);
        if (st != FMOE_STATUS_OK)
            break;
    }
    qjson_leave(j, mark);
    return st;
}

static fmoe_status read_ignore(qjson *j, ct_state *s, const json_t *qcfg)
{
    json_t *list = NULL;
    int given = 0;
    fmoe_status st = qjson_array(j, qcfg, "ignore", 0, &list, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t mark = qjson_enter_key(j, "ignore");
    for (size_t i = 0; i < json_array_size(list) && st == FMOE_STATUS_OK; i++) {
        json_t *item = json_array_get(list, i);
        size_t at = qjson_enter_index(j, i);
        st = json_is_string(item) ? name_set_add_ct(j, &s->ignore, json_string_value(item))
                                  : qjson_expected(j, item, "a string");
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    name_set_finish(&s->ignore);
    return st;
}

static fmoe_status ct_parse(qjson *j, const json_t *qcfg, void **state)
{
    const char *format = NULL;
    int given = 0;
    ct_state *s = calloc(1, sizeof *s);
    if (!s)
        return out_of_memory();
    fmoe_status st = qjson_string(j, qcfg, "format", 0, &format, &given);
    if (st == FMOE_STATUS_OK && given)
        st = qjson_strdup(format, &s->format);
    if (st == FMOE_STATUS_OK)
        st = read_groups(j, s, qcfg);
    if (st == FMOE_STATUS_OK)
        st = merge_targets(s);
    if (st == FMOE_STATUS_OK)
        st = read_ignore(j, s, qcfg);
    if (st != FMOE_STATUS_OK) {
        ct_destroy(s);
        return st;
    }
    *state = s;
    return FMOE_STATUS_OK;
}

/* vLLM's class match: the target, lower-cased, inside the class name
 * (1, 0, -1 when memory ran out). */
static int matches_class(const name_pattern *p)
{
    if (p->re)
        return name_pattern_matches(p, MODULE_CLASS);
    size_t n = strlen(p->text), m = strlen(MODULE_CLASS);
    for (size_t at = 0; n <= m && at + n <= m; at++)
        if (strncasecmp(&MODULE_CLASS[at], p->text, n) == 0)
            return 1;
    return 0;
}

/* The first target (in config order) whose name or regex matches: the
 * literal one by binary search, then any regex before it. n_targets for
 * none, or (size_t)-1 when memory ran out. */
static size_t first_name_hit(const ct_state *s, const char *module)
{
    ct_literal key = {.name = module};
    const ct_literal *lit = bsearch(&key, s->literals, s->n_literals, sizeof key, by_literal_name);
    size_t best = lit ? lit->index : s->n_targets;
    for (size_t k = 0; k < s->n_regexes && s->regexes[k] < best; k++) {
        int hit = name_pattern_matches(&s->targets[s->regexes[k]].pattern, module);
        if (hit < 0)
            return (size_t)-1;
        if (hit)
            return s->regexes[k];
    }
    return best;
}

static fmoe_status ct_resolve(const void *state, const char *module, qspec *out)
{
    const ct_state *s = state;
    memset(out, 0, sizeof *out);
    int ignored = name_set_matches(&s->ignore, module);
    if (ignored)
        return ignored < 0 ? out_of_memory() : FMOE_STATUS_OK;
    size_t i = first_name_hit(s, module);
    if (i == (size_t)-1)
        return out_of_memory();
    if (i == s->n_targets)
        i = s->class_hit;
    if (i == s->n_targets)
        return FMOE_STATUS_OK;
    const ct_target *hit = &s->targets[i];
    const ct_group *g = &s->groups[hit->group];
    out->quantized = 1;
    out->weights = g->weights;
    out->has_input = g->has_input;
    out->input = g->input;
    out->format = g->format ? g->format : s->format;
    return FMOE_STATUS_OK;
}

const quant_method fmoe_qm_compressed_tensors = {
    .name = "compressed-tensors",
    .parse = ct_parse,
    .resolve = ct_resolve,
    .destroy = ct_destroy,
};
