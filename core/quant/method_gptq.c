/*
 * core/quant/method_gptq.c - quant_method "gptq" (AutoGPTQ / GPTQModel;
 * vLLM GPTQConfig and GPTQMarlinConfig):
 *
 *   {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true,
 *    "sym": true, "dynamic": {"-:.*mlp\\.gate$": {}, "+:.*down_proj": {"bits": 8}}}
 *
 *  - bits and group_size are required (vLLM raises without them); desc_act
 *    and sym default to transformers' GPTQConfig defaults (false, true);
 *  - group_size -1 is one group per output channel, and then desc_act is
 *    meaningless and dropped (vLLM GPTQMarlinConfig does the same);
 *  - desc_act on groups is act-order: a g_idx per input row (actorder);
 *  - "dynamic" (GPTQModel) holds per-module rules in order, the first
 *    whose regex matches the module (re.match) wins: "-:<regex>" leaves the
 *    module unquantized, "+:<regex>" or a bare regex overrides bits,
 *    group_size, desc_act and sym for it;
 *  - modules_in_block_to_quantize, when given, lists the modules of a
 *    block that are quantized (names relative to the block: a module is
 *    listed when its name ends with "." + entry); the rest are not.
 *
 * GPTQ stores int32-packed integers like compressed-tensors' pack-quantized
 * format, and is read as that; only bits 4 and 8 run as MoE layers.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/quant/module_match.h"
#include "core/quant/quant.h"

typedef struct gptq_params {
    long long bits;
    long long group_size;
    int desc_act;
    int sym;
} gptq_params;

typedef struct gptq_rule {
    name_pattern pattern;
    int skip;              /* "-:" rule */
    gptq_params overrides; /* on top of the base parameters */
    int has_bits, has_group_size, has_desc_act, has_sym;
} gptq_rule;

typedef struct gptq_state {
    gptq_params base;
    gptq_rule *rules;
    size_t n_rules;
    char **in_block;
    size_t n_in_block;
    int has_in_block;
} gptq_state;

static void gptq_destroy(void *state)
{
    gptq_state *s = state;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_rules; i++)
        name_pattern_free(&s->rules[i].pattern);
    free(s->rules);
    qjson_free_strings(s->in_block, s->n_in_block);
    free(s);
}

/* bits and group_size, range-checked at their own path. */
static fmoe_status check_params(qjson *j, const gptq_params *p, int has_bits, int has_group)
{
    fmoe_status st = FMOE_STATUS_OK;
    size_t mark;
    if (has_bits && (p->bits < 1 || p->bits > 32)) {
        mark = qjson_enter_key(j, "bits");
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "expected 1 to 32 bits, got %lld", p->bits);
        qjson_leave(j, mark);
    } else if (has_group && p->group_size != -1 && (p->group_size < 1 || p->group_size > (long long)QARGS_MAX_SIZE)) {
        mark = qjson_enter_key(j, "group_size");
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                        "expected -1 (per channel) or a group size from 1 to 1048576, got %lld", p->group_size);
        qjson_leave(j, mark);
    }
    return st;
}

/* The four parameters of `obj` onto *p; `required` for the top level. */
static fmoe_status read_params(qjson *j, const json_t *obj, int required, gptq_params *p, gptq_rule *flags)
{
    int hb = 0, hg = 0, hd = 0, hs = 0;
    fmoe_status st = qjson_int(j, obj, "bits", required, &p->bits, &hb);
    if (st == FMOE_STATUS_OK)
        st = qjson_int(j, obj, "group_size", required, &p->group_size, &hg);
    if (st == FMOE_STATUS_OK)
        st = qjson_bool(j, obj, "desc_act", 0, &p->desc_act, &hd);
    if (st == FMOE_STATUS_OK)
        st = qjson_bool(j, obj, "sym", 0, &p->sym, &hs);
    if (st == FMOE_STATUS_OK)
        st = check_params(j, p, hb, hg);
    if (flags) {
        flags->has_bits = hb;
        flags->has_group_size = hg;
        flags->has_desc_act = hd;
        flags->has_sym = hs;
    }
    return st;
}

static fmoe_status read_rule(qjson *j, const char *key, const json_t *value, gptq_rule *r)
{
    memset(r, 0, sizeof *r);
    r->skip = strncmp(key, "-:", 2) == 0;
    const char *regex = r->skip || strncmp(key, "+:", 2) == 0 ? key + 2 : key;
    if (!json_is_object(value))
        return qjson_expected(j, value, "an object");
    fmoe_status st = read_params(j, value, 0, &r->overrides, r);
    if (st == FMOE_STATUS_OK)
        st = name_pattern_regex(j, key, regex, &r->pattern);
    return st;
}

static fmoe_status read_dynamic(qjson *j, const json_t *qcfg, gptq_state *s)
{
    json_t *rules = NULL;
    int given = 0;
    fmoe_status st = qjson_object(j, qcfg, "dynamic", 0, &rules, &given);
    if (st != FMOE_STATUS_OK || !given || json_object_size(rules) == 0)
        return st;
    s->rules = calloc(json_object_size(rules), sizeof *s->rules);
    if (!s->rules)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    size_t mark = qjson_enter_key(j, "dynamic");
    const char *key;
    json_t *value;
    json_object_foreach(rules, key, value) {
        size_t at = qjson_enter_key(j, key);
        st = read_rule(j, key, value, &s->rules[s->n_rules]);
        qjson_leave(j, at);
        if (st != FMOE_STATUS_OK)
            break;
        s->n_rules++;
    }
    qjson_leave(j, mark);
    return st;
}

/* modules_in_block_to_quantize: a list of names or of lists of names. */
static fmoe_status read_in_block(qjson *j, const json_t *qcfg, gptq_state *s)
{
    json_t *outer = NULL;
    int given = 0;
    fmoe_status st = qjson_array(j, qcfg, "modules_in_block_to_quantize", 0, &outer, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    s->has_in_block = 1;
    size_t mark = qjson_enter_key(j, "modules_in_block_to_quantize");
    for (size_t i = 0; i < json_array_size(outer) && st == FMOE_STATUS_OK; i++) {
        json_t *item = json_array_get(outer, i);
        size_t at = qjson_enter_index(j, i);
        size_t count = json_is_array(item) ? json_array_size(item) : 1;
        char **grown = realloc(s->in_block, (s->n_in_block + count + 1) * sizeof *grown);
        if (!grown) {
            st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        } else {
            s->in_block = grown;
            for (size_t k = 0; k < count && st == FMOE_STATUS_OK; k++) {
                json_t *name = json_is_array(item) ? json_array_get(item, k) : item;
                size_t inner = json_is_array(item) ? qjson_enter_index(j, k) : j->len;
                if (!json_is_string(name))
                    st = qjson_expected(j, name, json_is_array(item) ? "a string" : "a string or a list of strings");
                else if ((st = qjson_strdup(json_string_value(name), &s->in_block[s->n_in_block])) == FMOE_STATUS_OK)
                    s->n_in_block++;
                qjson_leave(j, inner);
            }
        }
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    return st;
}

static fmoe_status gptq_parse(qjson *j, const json_t *qcfg, void **state)
{
    const char *format = NULL;
    int lm_head = 0;
    gptq_state *s = calloc(1, sizeof *s);
    if (!s)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    s->base.sym = 1;
    fmoe_status st = read_params(j, qcfg, 1, &s->base, NULL);
    if (st == FMOE_STATUS_OK)
        st = read_dynamic(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        st = read_in_block(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        name_sort(s->in_block, s->n_in_block);
    /* Loading details (gptq_v2 zero points, a quantized lm_head): typed, unused here. */
    if (st == FMOE_STATUS_OK)
        st = qjson_string(j, qcfg, "checkpoint_format", 0, &format, NULL);
    if (st == FMOE_STATUS_OK)
        st = qjson_bool(j, qcfg, "lm_head", 0, &lm_head, NULL);
    if (st != FMOE_STATUS_OK) {
        gptq_destroy(s);
        return st;
    }
    *state = s;
    return FMOE_STATUS_OK;
}

/* The module or one of its dotted suffixes ("mlp.experts.0.up_proj", ...,
 * "up_proj") is listed; the list is sorted, so this costs a few binary
 * searches whatever its length. */
static int listed_in_block(const gptq_state *s, const char *module)
{
    for (const char *p = module; p;) {
        if (name_sorted_find(s->in_block, s->n_in_block, p, strlen(p)))
            return 1;
        p = strchr(p, '.');
        p = p ? p + 1 : NULL;
    }
    return 0;
}

static fmoe_status gptq_resolve(const void *state, const char *module, qspec *out)
{
    const gptq_state *s = state;
    gptq_params p = s->base;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < s->n_rules; i++) {
        const gptq_rule *r = &s->rules[i];
        int hit = name_pattern_matches(&r->pattern, module);
        if (hit < 0)
            return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!hit)
            continue;
        if (r->skip)
            return FMOE_STATUS_OK;
        p.bits = r->has_bits ? r->overrides.bits : p.bits;
        p.group_size = r->has_group_size ? r->overrides.group_size : p.group_size;
        p.desc_act = r->has_desc_act ? r->overrides.desc_act : p.desc_act;
        p.sym = r->has_sym ? r->overrides.sym : p.sym;
        break;
    }
    if (s->has_in_block && !listed_in_block(s, module))
        return FMOE_STATUS_OK;
    if (p.bits != 4 && p.bits != 8)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "GPTQ with bits = %lld is not supported for MoE layers (expected 4 or 8)", p.bits);
    out->quantized = 1;
    out->format = "pack-quantized";
    qargs_defaults(&out->weights);
    out->weights.num_bits = (uint32_t)p.bits;
    out->weights.symmetric = p.sym;
    out->weights.strategy = p.group_size == -1 ? QS_CHANNEL : QS_GROUP;
    out->weights.group_size = (int32_t)p.group_size;
    out->weights.actorder = p.desc_act && p.group_size != -1 ? QORDER_GROUP : QORDER_NONE;
    return FMOE_STATUS_OK;
}

const quant_method fmoe_qm_gptq = {
    .name = "gptq",
    .parse = gptq_parse,
    .resolve = gptq_resolve,
    .destroy = gptq_destroy,
};
