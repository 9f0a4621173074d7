/*
 * core/model/model.c - the public entry points of include/fusedmoe/model.h:
 * parse config.json, pick the family, run its reader (family_*.c), check
 * the result and build the names (naming.c); then the per-layer queries.
 *
 * The family is picked the way vLLM picks a model class: the first entry
 * of "architectures" that we know. Without "architectures", "model_type"
 * decides (as transformers' AutoConfig does). When both are given they
 * must agree: a config whose model_type belongs to another family would
 * have its keys read under the wrong names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/text_file.h"
#include "core/model/model.h"
#include "fusedmoe/fusedmoe.h"

static const model_family *const families[] = {
    &fmoe_family_mixtral,     &fmoe_family_qwen2_moe,   &fmoe_family_qwen3_moe,
    &fmoe_family_deepseek_v2, &fmoe_family_deepseek_v3, &fmoe_family_deepseek_v4,
    &fmoe_family_gpt_oss,     &fmoe_family_llama4,      &fmoe_family_llama4_text,
};
#define FAMILY_COUNT (sizeof families / sizeof families[0])

#define ARCHITECTURES_TEXT \
    "MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV2ForCausalLM, " \
    "DeepseekV3ForCausalLM, DeepseekV4ForCausalLM, GptOssForCausalLM, Llama4ForConditionalGeneration, " \
    "Llama4ForCausalLM"
#define MODEL_TYPES_TEXT \
    "mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, deepseek_v4, gpt_oss, llama4, llama4_text"

static int in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

/* ---- helpers for the family readers -------------------------------------- */

fmoe_status model_set_layers(fmoe_model *m, uint32_t num_layers)
{
    m->num_layers = num_layers;
    m->is_moe = calloc(num_layers, 1);
    m->hash_routed = calloc(num_layers, 1);
    if (!m->is_moe || !m->hash_routed)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    return FMOE_STATUS_OK;
}

void model_all_layers_moe(fmoe_model *m, const char *pattern)
{
    memset(m->is_moe, 1, m->num_layers);
    snprintf(m->pattern, sizeof m->pattern, "%s", pattern);
}

fmoe_status model_check_top_k(model_reader *r, const char *experts_key, const char *top_k_key)
{
    const fmoe_layer_config *c = &r->model->cfg;
    if (c->top_k <= c->num_experts)
        return FMOE_STATUS_OK;
    return mjson_fail_at(&r->j, top_k_key, FMOE_STATUS_INVALID_ARGUMENT, "%u exceeds %s = %u", c->top_k, experts_key,
                         c->num_experts);
}

fmoe_status model_uint_spellings(model_reader *r, const char *const *keys, int required, uint32_t lo, uint32_t hi,
                                 uint32_t *out, const char **used)
{
    const char *first = NULL;
    uint32_t value = 0;
    if (used)
        *used = keys[0];
    for (const char *const *k = keys; *k; k++) {
        if (!qjson_member(r->obj, *k))
            continue;
        uint32_t v = 0;
        fmoe_status st = mjson_uint(&r->j, r->obj, *k, 1, lo, hi, &v);
        if (st != FMOE_STATUS_OK)
            return st;
        if (!first) {
            first = *k;
            value = v;
        } else if (v != value) {
            return mjson_fail_at(&r->j, *k, FMOE_STATUS_INVALID_ARGUMENT,
                                 "%u disagrees with %s = %u (two spellings of one setting)", v, first, value);
        }
    }
    if (first) {
        *out = value;
        if (used)
            *used = first;
        return FMOE_STATUS_OK;
    }
    if (!required)
        return FMOE_STATUS_OK;
    char also[160];
    size_t len = 0;
    also[0] = '\0';
    for (const char *const *k = keys + 1; *k && len < sizeof also; k++)
        len += (size_t)snprintf(also + len, sizeof also - len, "%s\"%s\"", k == keys + 1 ? " (or " : " or ", *k);
    if (keys[1] && len < sizeof also)
        snprintf(also + len, sizeof also - len, ")");
    return qjson_fail(&r->j, FMOE_STATUS_INVALID_ARGUMENT, "missing required key \"%s\"%s", keys[0], also);
}

/* ---- choosing the family ----------------------------------------------- */

static fmoe_status family_by_architectures(qjson *j, char **archs, size_t n, const model_family **out)
{
    for (size_t a = 0; a < n; a++) {
        for (size_t f = 0; f < FAMILY_COUNT; f++) {
            if (in_list(families[f]->architectures, archs[a])) {
                *out = families[f];
                return FMOE_STATUS_OK;
            }
        }
    }
    size_t mark = qjson_enter_key(j, "architectures");
    fmoe_status st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED,
                                "\"%s\"%s is not a supported MoE architecture; expected one of %s", archs[0],
                                n > 1 ? " (nor are the others)" : "", ARCHITECTURES_TEXT);
    qjson_leave(j, mark);
    return st;
}

static fmoe_status pick_family(qjson *j, const json_t *root, const model_family **out)
{
    const char *model_type = NULL;
    int has_type = 0;
    fmoe_status st = qjson_string(j, root, "model_type", 0, &model_type, &has_type);
    if (st != FMOE_STATUS_OK)
        return st;
    char **archs = NULL;
    size_t n = 0;
    st = qjson_string_list(j, root, "architectures", &archs, &n);
    if (st != FMOE_STATUS_OK)
        return st;

    if (n > 0) {
        st = family_by_architectures(j, archs, n, out);
        if (st == FMOE_STATUS_OK && has_type && !in_list((*out)->model_types, model_type))
            st = mjson_fail_at(j, "model_type", FMOE_STATUS_INVALID_ARGUMENT,
                               "\"%s\" does not match architectures (%s), expected \"%s\"", model_type,
                               (*out)->architectures[0], (*out)->model_types[0]);
        qjson_free_strings(archs, n);
        return st;
    }
    qjson_free_strings(archs, n);
    if (!has_type)
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                          "missing required key \"architectures\" or \"model_type\" (which model is this?)");
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        if (in_list(families[f]->model_types, model_type)) {
            *out = families[f];
            return FMOE_STATUS_OK;
        }
    }
    return mjson_fail_at(j, "model_type", FMOE_STATUS_UNSUPPORTED,
                         "\"%s\" is not a supported MoE model; expected one of %s", model_type, MODEL_TYPES_TEXT);
}

/* torch_dtype (transformers < 4.56) or dtype (newer); F32 when absent.
 * Only the activation dtypes a layer runs in. */
static fmoe_status read_dtype_from(qjson *j, const json_t *obj, fmoe_dtype *out, int *given)
{
    static const struct {
        const char *name;
        fmoe_dtype dtype;
    } names[] = {
        {"float32", FMOE_DTYPE_F32}, {"float", FMOE_DTYPE_F32}, {"bfloat16", FMOE_DTYPE_BF16},
        {"float16", FMOE_DTYPE_F16}, {"half", FMOE_DTYPE_F16},
    };
    const char *keys[2] = {"torch_dtype", "dtype"};
    const char *first = NULL; /* torch_dtype's text, for the message */
    *given = 0;
    for (size_t k = 0; k < 2; k++) {
        const char *text = NULL;
        int has = 0;
        fmoe_status st = qjson_string(j, obj, keys[k], 0, &text, &has);
        if (st != FMOE_STATUS_OK)
            return st;
        if (!has)
            continue;
        const char *name = strncmp(text, "torch.", 6) == 0 ? text + 6 : text;
        fmoe_dtype dt = FMOE_DTYPE_INVALID;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(name, names[i].name) == 0)
                dt = names[i].dtype;
        if (dt == FMOE_DTYPE_INVALID)
            return mjson_expected_at(j, obj, keys[k], "\"float32\", \"bfloat16\" or \"float16\"");
        if (*given && dt != *out)
            return mjson_fail_at(j, keys[k], FMOE_STATUS_INVALID_ARGUMENT,
                                 "\"%s\" disagrees with torch_dtype = \"%s\" (two spellings of one setting)", text,
                                 first);
        first = text;
        *out = dt;
        *given = 1;
    }
    return FMOE_STATUS_OK;
}

static fmoe_status read_dtype(qjson *j, const json_t *root, const json_t *text_cfg, fmoe_dtype *out)
{
    int given = 0;
    *out = FMOE_DTYPE_F32;
    fmoe_status st = read_dtype_from(j, root, out, &given);
    if (st != FMOE_STATUS_OK || given || text_cfg == root)
        return st;
    size_t mark = qjson_enter_key(j, "text_config");
    st = read_dtype_from(j, text_cfg, out, &given);
    qjson_leave(j, mark);
    return st;
}

/* ---- parsing ------------------------------------------------------------ */

static fmoe_status parse_root(const json_t *root, fmoe_model *m)
{
    qjson j;
    qjson_init(&j, m->source);
    if (!json_is_object(root))
        return qjson_expected(&j, root, "an object");
    fmoe_status st = pick_family(&j, root, &m->family);
    if (st != FMOE_STATUS_OK)
        return st;

    model_reader r = {.j = j, .obj = root, .model = m};
    if (m->family->text_config) {
        json_t *text = NULL;
        st = qjson_object(&j, root, m->family->text_config, 1, &text, NULL);
        if (st != FMOE_STATUS_OK)
            return st;
        r.obj = text;
        qjson_enter_key(&r.j, m->family->text_config);
    }
    st = read_dtype(&j, root, r.obj, &m->dtype);
    if (st != FMOE_STATUS_OK)
        return st;

    fmoe_layer_config_init(&m->cfg);
    st = m->family->read(&r);
    if (st != FMOE_STATUS_OK)
        return st;
    m->cfg.act_dtype = m->dtype;

    /* The readers check what they read with its key; this is the net for
     * a combination they did not foresee. */
    st = fmoe_layer_config_validate(&m->cfg);
    if (st != FMOE_STATUS_OK) {
        fmoe_error_prefix("%s", m->source);
        return st;
    }
    return model_build_names(m);
}

FMOE_API void fmoe_model_destroy(fmoe_model *m)
{
    if (!m)
        return;
    if (m->names) {
        for (size_t i = 0; i < (size_t)m->num_layers * MN_COUNT; i++)
            free(m->names[i]);
        free(m->names);
    }
    free(m->is_moe);
    free(m->hash_routed);
    free(m->source);
    free(m);
}

FMOE_API fmoe_status fmoe_model_config_parse(const char *json, size_t len, const char *source, fmoe_model **out)
{
    fmoe_error_clear();
    if (!out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_model_config_parse: out must not be NULL");
    *out = NULL;
    if (!json)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_model_config_parse: json must not be NULL");
    if (!source)
        source = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s:%d:%d: %s", source, jerr.line, jerr.column, jerr.text);
    fmoe_model *m = calloc(1, sizeof *m);
    fmoe_status st = m ? qjson_strdup(source, &m->source) : fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == FMOE_STATUS_OK)
        st = parse_root(root, m);
    json_decref(root);
    if (st != FMOE_STATUS_OK) {
        fmoe_model_destroy(m);
        return st;
    }
    *out = m;
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_model_config_load(const char *path, fmoe_model **out)
{
    fmoe_error_clear();
    if (!path || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_model_config_load: path and out must not be NULL");
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    fmoe_status st = fmoe_read_text_file(path, FMOE_LIMIT_CONFIG_BYTES, "config.json", &buf, &len);
    if (st == FMOE_STATUS_OK)
        st = fmoe_model_config_parse(buf, len, path, out);
    free(buf);
    return st;
}

/* ---- queries ------------------------------------------------------------ */

FMOE_API const char *fmoe_model_family(const fmoe_model *m)
{
    return m ? m->family->name : NULL;
}

FMOE_API uint32_t fmoe_model_layer_count(const fmoe_model *m)
{
    return m ? m->num_layers : 0;
}

FMOE_API int fmoe_model_layer_is_moe(const fmoe_model *m, uint32_t layer)
{
    return m && layer < m->num_layers && m->is_moe[layer];
}

FMOE_API fmoe_dtype fmoe_model_dtype(const fmoe_model *m)
{
    return m ? m->dtype : FMOE_DTYPE_INVALID;
}

/* OK when `layer` is a MoE layer of m; otherwise the error says why. */
static fmoe_status check_moe_layer(const char *fn, const fmoe_model *m, uint32_t layer, const void *arg, size_t size,
                                   size_t need)
{
    if (!m || !arg)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: model and output must not be NULL", fn);
    if (size < need)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: struct_size = %zu, expected at least %zu", fn, size,
                              need);
    if (layer >= m->num_layers)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: layer %u is out of range (num_hidden_layers = %u)",
                              m->source, layer, m->num_layers);
    if (!m->is_moe[layer])
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: layer %u is a dense layer, not a MoE layer (%s)",
                              m->source, layer, m->pattern);
    return FMOE_STATUS_OK;
}

/* Version 1 of fmoe_layer_config ends with max_num_tokens. */
#define LAYER_CONFIG_V1_SIZE (offsetof(fmoe_layer_config, max_num_tokens) + sizeof(uint32_t))

FMOE_API fmoe_status fmoe_model_layer_config(const fmoe_model *m, uint32_t layer, fmoe_layer_config *cfg)
{
    fmoe_error_clear();
    fmoe_status st = check_moe_layer("fmoe_model_layer_config", m, layer, cfg, cfg ? cfg->struct_size : 0,
                                     LAYER_CONFIG_V1_SIZE);
    if (st != FMOE_STATUS_OK)
        return st;
    if (m->hash_routed[layer])
        return fmoe_error_set(
            FMOE_STATUS_UNSUPPORTED,
            "%s: layer %u is hash-routed (%s): its experts are picked by token id, tid2eid[input_ids], "
            "which a layer routed from router logits cannot do (the layers routed by their logits are "
            "served)",
            m->source, layer, m->hash_key);
    size_t size = cfg->struct_size < sizeof *cfg ? cfg->struct_size : sizeof *cfg;
    memcpy(cfg, &m->cfg, size);
    cfg->struct_size = size;
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_model_layer_shared(const fmoe_model *m, uint32_t layer, fmoe_model_shared *shared)
{
    fmoe_error_clear();
    fmoe_status st = check_moe_layer("fmoe_model_layer_shared", m, layer, shared, shared ? shared->struct_size : 0,
                                     offsetof(fmoe_model_shared, gated) + sizeof shared->gated);
    if (st != FMOE_STATUS_OK)
        return st;
    shared->count = m->shared_count;
    shared->intermediate_size = m->shared_intermediate;
    shared->gated = m->shared_gated;
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_model_layer_names(const fmoe_model *m, uint32_t layer, fmoe_model_names *names)
{
    fmoe_error_clear();
    fmoe_status st = check_moe_layer("fmoe_model_layer_names", m, layer, names, names ? names->struct_size : 0,
                                     offsetof(fmoe_model_names, shared_gate_weight) + sizeof(const char *));
    if (st != FMOE_STATUS_OK)
        return st;
    char *const *n = m->names + (size_t)layer * MN_COUNT;
    static const model_expert_names fused_only = {NULL, NULL, NULL};
    const model_naming *nm = m->family->naming;
    const model_expert_names *e = nm->experts ? nm->experts : &fused_only;
    names->router_weight = n[MN_ROUTER_WEIGHT];
    names->router_bias = n[MN_ROUTER_BIAS];
    names->correction_bias = n[MN_CORRECTION_BIAS];
    names->experts = n[MN_EXPERTS];
    names->expert_gate = e->gate;
    names->expert_up = e->up;
    names->expert_down = e->down;
    names->fused_gate_up = n[MN_FUSED_GATE_UP];
    names->fused_gate_up_bias = n[MN_FUSED_GATE_UP_BIAS];
    names->fused_down = n[MN_FUSED_DOWN];
    names->fused_down_bias = n[MN_FUSED_DOWN_BIAS];
    names->fused_interleaved = nm->fused_interleaved;
    names->mxfp4_gate_up_blocks = n[MN_MXFP4_GATE_UP_BLOCKS];
    names->mxfp4_gate_up_scales = n[MN_MXFP4_GATE_UP_SCALES];
    names->mxfp4_down_blocks = n[MN_MXFP4_DOWN_BLOCKS];
    names->mxfp4_down_scales = n[MN_MXFP4_DOWN_SCALES];
    names->shared = n[MN_SHARED];
    names->shared_gate_weight = n[MN_SHARED_GATE];
    return FMOE_STATUS_OK;
}

FMOE_API fmoe_status fmoe_model_layer_expert_modules(const fmoe_model *m, uint32_t layer,
                                                     struct fmoe_expert_modules *modules)
{
    fmoe_error_clear();
    fmoe_status st = check_moe_layer("fmoe_model_layer_expert_modules", m, layer, modules,
                                     modules ? modules->struct_size : 0,
                                     offsetof(fmoe_expert_modules, fused) + sizeof modules->fused);
    if (st != FMOE_STATUS_OK)
        return st;
    const model_naming *nm = m->family->naming;
    modules->prefix = m->names[(size_t)layer * MN_COUNT + MN_EXPERTS];
    modules->num_experts = m->cfg.num_experts;
    modules->fused = nm->experts == NULL;
    if (!modules->fused) {
        modules->gate = nm->experts->gate;
        modules->up = nm->experts->up;
        modules->down = nm->experts->down;
    }
    return FMOE_STATUS_OK;
}
