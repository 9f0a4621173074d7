/*
 * core/quant/quant_config.c - the public entry to quantization configs
 * (fusedmoe.h): read config.json, pick the quant_method reader, and decide
 * the scheme of one MoE layer by resolving every projection of every
 * expert.
 *
 * vLLM decides a MoE layer's method from expert 0 alone (a TODO in
 * CompressedTensorsMoEMethod.get_moe_method): a checkpoint whose ignore
 * list or per-module rules single out expert 5's down_proj would load
 * expert 5 with the wrong arithmetic. Here every module is resolved and
 * any difference is an error naming both modules.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/scheme.h"
#include "base/text_file.h"
#include "core/quant/quant.h"

struct fmoe_quant_config {
    char *source;
    const quant_method *method; /* NULL: no quantization_config */
    void *state;
    fmoe_dtype dtype;      /* unquantized storage */
    uint64_t pattern_cost; /* instructions of all its module-name patterns (qjson.h) */
};

static const struct {
    const char *name;
    const quant_method *method;
} readers[] = {
    {"compressed-tensors", &fmoe_qm_compressed_tensors},
    {"fp8", &fmoe_qm_fp8},
    {"modelopt", &fmoe_qm_modelopt},
    {"modelopt_fp4", &fmoe_qm_modelopt},
    {"gptq", &fmoe_qm_gptq},
    {"mxfp4", &fmoe_qm_mxfp4},
};

#define READERS_TEXT "compressed-tensors, fp8, modelopt, modelopt_fp4, gptq, mxfp4"

void fmoe_expert_modules_init(fmoe_expert_modules *m)
{
    memset(m, 0, sizeof *m);
    m->struct_size = sizeof *m;
    m->gate = "gate_proj";
    m->up = "up_proj";
    m->down = "down_proj";
}

void fmoe_quant_config_destroy(fmoe_quant_config *qc)
{
    if (!qc)
        return;
    if (qc->method)
        qc->method->destroy(qc->state);
    free(qc->source);
    free(qc);
}

const char *fmoe_quant_config_method(const fmoe_quant_config *qc)
{
    return qc && qc->method ? qc->method->name : "none";
}

fmoe_dtype fmoe_quant_config_dtype(const fmoe_quant_config *qc)
{
    return qc ? qc->dtype : FMOE_DTYPE_INVALID;
}

/* torch_dtype (transformers < 5) or dtype (>= 5): "bfloat16",
 * "torch.float16", ... Only the types expert weights are stored in. */
static fmoe_status read_dtype(qjson *j, const json_t *root, fmoe_dtype *out)
{
    static const struct {
        const char *name;
        fmoe_dtype dtype;
    } names[] = {
        {"float32", FMOE_DTYPE_F32}, {"float", FMOE_DTYPE_F32}, {"bfloat16", FMOE_DTYPE_BF16},
        {"float16", FMOE_DTYPE_F16}, {"half", FMOE_DTYPE_F16},
    };
    const char *key = qjson_member(root, "torch_dtype") ? "torch_dtype" : "dtype";
    const char *text = NULL;
    int given = 0;
    *out = FMOE_DTYPE_F32;
    fmoe_status st = qjson_string(j, root, key, 0, &text, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    const char *name = strncmp(text, "torch.", 6) == 0 ? text + 6 : text;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].dtype;
            return FMOE_STATUS_OK;
        }
    }
    size_t mark = qjson_enter_key(j, key);
    st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "expected \"float32\", \"bfloat16\" or \"float16\", got \"%s\"",
                    text);
    qjson_leave(j, mark);
    return st;
}

/* The quantization_config object: the root's member, the older name, or
 * the root itself when it has quant_method (hf_quant_config.json style). */
static fmoe_status find_qcfg(qjson *j, const json_t *root, const json_t **qcfg, const char **key)
{
    *qcfg = NULL;
    *key = NULL;
    if (qjson_member(root, "quant_method")) {
        *qcfg = root;
        return FMOE_STATUS_OK;
    }
    static const char *const keys[] = {"quantization_config", "compression_config"};
    for (size_t i = 0; i < 2; i++) {
        json_t *obj = NULL;
        int given = 0;
        fmoe_status st = qjson_object(j, root, keys[i], 0, &obj, &given);
        if (st != FMOE_STATUS_OK)
            return st;
        if (given) {
            *qcfg = obj;
            *key = keys[i];
            return FMOE_STATUS_OK;
        }
    }
    return FMOE_STATUS_OK;
}

static fmoe_status read_method(qjson *j, const json_t *qcfg, fmoe_quant_config *qc)
{
    const char *name = NULL;
    fmoe_status st = qjson_string(j, qcfg, "quant_method", 1, &name, NULL);
    if (st != FMOE_STATUS_OK)
        return st;
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        if (strcmp(name, readers[i].name) == 0) {
            qc->method = readers[i].method;
            return readers[i].method->parse(j, qcfg, &qc->state);
        }
    }
    size_t mark = qjson_enter_key(j, "quant_method");
    st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED,
                    "quantization method \"%s\" is not supported (fusedmoe reads " READERS_TEXT ")", name);
    qjson_leave(j, mark);
    return st;
}

static fmoe_status parse_qcfg(qjson *j, const json_t *root, fmoe_quant_config *qc)
{
    if (!json_is_object(root))
        return qjson_expected(j, root, "a JSON object");
    const json_t *qcfg = NULL;
    const char *key = NULL;
    fmoe_status st = read_dtype(j, root, &qc->dtype);
    if (st == FMOE_STATUS_OK)
        st = find_qcfg(j, root, &qcfg, &key);
    if (st != FMOE_STATUS_OK || !qcfg)
        return st;
    size_t mark = key ? qjson_enter_key(j, key) : j->len;
    st = read_method(j, qcfg, qc);
    qjson_leave(j, mark);
    if (st == FMOE_STATUS_OK && qc->method->model_keys && qcfg != root) {
        st = qc->method->model_keys(j, root, qc->state);
        if (st != FMOE_STATUS_OK) { /* the reader's state is ours to free now */
            qc->method->destroy(qc->state);
            qc->state = NULL;
        }
    }
    return st;
}

static fmoe_status parse_root(const json_t *root, const char *source, fmoe_quant_config *qc)
{
    qjson j;
    qjson_init(&j, source);
    fmoe_status st = parse_qcfg(&j, root, qc);
    qc->pattern_cost = j.pattern_cost;
    return st;
}

fmoe_status fmoe_quant_config_parse(const char *json, size_t len, const char *source, fmoe_quant_config **out)
{
    fmoe_error_clear();
    if (!json || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_quant_config_parse: json and out must not be NULL");
    *out = NULL;
    if (!source)
        source = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s:%d:%d: %s", source, jerr.line, jerr.column, jerr.text);
    fmoe_quant_config *qc = calloc(1, sizeof *qc);
    fmoe_status st = qc ? qjson_strdup(source, &qc->source)
                        : fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == FMOE_STATUS_OK)
        st = parse_root(root, qc->source, qc);
    json_decref(root);
    if (st != FMOE_STATUS_OK) {
        /* A reader that failed has freed its own state. */
        if (qc)
            qc->method = NULL;
        fmoe_quant_config_destroy(qc);
        return st;
    }
    *out = qc;
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_quant_config_load(const char *path, fmoe_quant_config **out)
{
    fmoe_error_clear();
    if (!path || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_quant_config_load: path and out must not be NULL");
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    fmoe_status st = fmoe_read_text_file(path, FMOE_LIMIT_CONFIG_BYTES, "config.json", &buf, &len);
    if (st == FMOE_STATUS_OK)
        st = fmoe_quant_config_parse(buf, len, path, out);
    free(buf);
    return st;
}

/* ---- one layer ------------------------------------------------------------ */

/* The scheme of one module, or an error prefixed with it. */
static fmoe_status module_scheme(const fmoe_quant_config *qc, const char *module, fmoe_scheme *out)
{
    qspec spec;
    memset(&spec, 0, sizeof spec);
    fmoe_status st = qc->method ? qc->method->resolve(qc->state, module, &spec) : FMOE_STATUS_OK;
    if (st == FMOE_STATUS_OK)
        st = fmoe_quant_select(&spec, qc->dtype, out);
    if (st != FMOE_STATUS_OK)
        fmoe_error_prefix("%s: %s", qc->source, module);
    return st;
}

static int valid_name(const char *s)
{
    return s && s[0] && !strchr(s, '.');
}

static fmoe_status check_modules(const fmoe_expert_modules *m)
{
    if (!m || m->struct_size < offsetof(fmoe_expert_modules, fused) + sizeof m->fused)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_quant_config_scheme: modules must be set up with fmoe_expert_modules_init");
    if (!m->prefix || !m->prefix[0])
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_quant_config_scheme: modules.prefix is empty");
    if (strlen(m->prefix) > FMOE_LIMIT_NAME_BYTES)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_quant_config_scheme: modules.prefix has %zu bytes, more than the %u allowed",
                              strlen(m->prefix), FMOE_LIMIT_NAME_BYTES);
    if (m->fused)
        return FMOE_STATUS_OK;
    if (m->num_experts == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_quant_config_scheme: modules.num_experts is 0");
    if (m->num_experts > FMOE_LIMIT_EXPERTS)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_quant_config_scheme: modules.num_experts = %u, more than the %u allowed",
                              m->num_experts, FMOE_LIMIT_EXPERTS);
    if (!valid_name(m->gate) || !valid_name(m->down) || (m->up && !valid_name(m->up)))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_quant_config_scheme: modules.gate/up/down must be plain names without '.'");
    size_t longest = strlen(m->gate) > strlen(m->down) ? strlen(m->gate) : strlen(m->down);
    if (m->up && strlen(m->up) > longest)
        longest = strlen(m->up);
    if (longest > FMOE_LIMIT_NAME_BYTES)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_quant_config_scheme: modules.gate/up/down have up to %zu bytes, more than the %u "
                              "allowed",
                              longest, FMOE_LIMIT_NAME_BYTES);
    return FMOE_STATUS_OK;
}

/*
 * Every projection of every expert is resolved (see the top of the file),
 * and each name is run through the config's regexes and globs, which cost
 * up to (name length + 1) x (their instructions) steps. That product is
 * computed before the first name is formatted and refused past
 * FMOE_LIMIT_MATCH_WORK, so a config of large patterns on a layer of many
 * experts is an error in microseconds, not minutes of matching. Literal
 * entries are binary searches and do not count.
 */
static fmoe_status check_match_work(const fmoe_quant_config *qc, const fmoe_expert_modules *m, uint32_t names,
                                    size_t name_len)
{
    uint64_t work = (uint64_t)names * (name_len + 1) * qc->pattern_cost; /* < 2^18 * 2^12 * 2^17 */
    if (work <= FMOE_LIMIT_MATCH_WORK)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                          "%s: %s: matching %u expert module names against the quantization_config's patterns (%llu "
                          "instructions) would take up to %llu steps, more than the %llu allowed; the config's "
                          "regular expressions or globs are too large for a layer of %u experts",
                          qc->source, m->prefix, names, (unsigned long long)qc->pattern_cost, (unsigned long long)work,
                          (unsigned long long)FMOE_LIMIT_MATCH_WORK, m->num_experts);
}

fmoe_status fmoe_quant_config_scheme(const fmoe_quant_config *qc, const fmoe_expert_modules *m, fmoe_scheme *out)
{
    fmoe_error_clear();
    if (!qc || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_quant_config_scheme: qc and out must not be NULL");
    fmoe_status st = check_modules(m);
    if (st != FMOE_STATUS_OK)
        return st;
    if (m->fused) /* one name: (prefix + 1) x FMOE_LIMIT_PATTERN_TOTAL steps at most */
        return module_scheme(qc, m->prefix, out);

    const char *projs[3] = {m->gate, m->up, m->down};
    size_t name_cap = strlen(m->prefix) + 64 + strlen(m->gate) + strlen(m->down) + (m->up ? strlen(m->up) : 0);
    st = check_match_work(qc, m, m->num_experts * (m->up ? 3u : 2u), name_cap);
    if (st != FMOE_STATUS_OK)
        return st;
    char *first_name = malloc(name_cap), *name = malloc(name_cap);
    char first_key[FMOE_SCHEME_KEY_MAX], key[FMOE_SCHEME_KEY_MAX];
    fmoe_scheme first, s;
    if (!first_name || !name)
        st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t e = 0; e < m->num_experts && st == FMOE_STATUS_OK; e++) {
        for (int p = 0; p < 3 && st == FMOE_STATUS_OK; p++) {
            if (!projs[p])
                continue;
            snprintf(name, name_cap, "%s.%u.%s", m->prefix, e, projs[p]);
            st = module_scheme(qc, name, e == 0 && p == 0 ? &first : &s);
            if (st != FMOE_STATUS_OK)
                break;
            if (e == 0 && p == 0) {
                memcpy(first_name, name, strlen(name) + 1);
                fmoe_scheme_key(&first, first_key, sizeof first_key);
                continue;
            }
            fmoe_scheme_key(&s, key, sizeof key);
            if (strcmp(key, first_key) != 0)
                st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                    "%s: %s: All MoE projections need to have same quantization scheme but found "
                                    "multiple: %s is '%s', %s is '%s'",
                                    qc->source, m->prefix, first_name, first_key, name, key);
        }
    }
    if (st == FMOE_STATUS_OK)
        memcpy(out, &first, sizeof first);
    free(first_name);
    free(name);
    return st;
}
