/*
 * core/quant/method_modelopt.c - quant_method "modelopt" and "modelopt_fp4"
 * (NVIDIA TensorRT Model Optimizer checkpoints; vLLM ModelOpt*Config).
 *
 * Two layouts, as vLLM reads them:
 *
 *   {"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4",
 *     "group_size": 16, "exclude_modules": ["lm_head"]}}    (hf_quant_config.json
 *                                                             copied in)
 *   {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": [...]}
 *
 * Both method names dispatch on quant_algo (upper-cased, as ModelOpt may
 * write it in lower case), so "modelopt" with NVFP4 is NVFP4.
 *
 *   FP8                        fp8e4m3:tensor/fp8e4m3:tensor (static input scales)
 *   FP8_PER_CHANNEL_PER_TOKEN  fp8e4m3:channel/fp8e4m3:token:dynamic
 *   NVFP4                      fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic
 *   W4A16_NVFP4                fp4:tgroup16:scale-fp8e4m3
 *
 * FP8_PB_WO, NVFP4_AWQ, MXFP8 and MIXED_PRECISION are ModelOpt algorithms
 * fusedmoe does not read for MoE layers (UNSUPPORTED, named); anything else
 * is unknown (UNSUPPORTED, with the list). Excluded modules: exact name,
 * an ancestor, or a ModelOpt wildcard (module_match.h).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/quant/module_match.h"
#include "core/quant/quant.h"

#define ALGO_FP8      1
#define ALGO_FP8_PCPT 2
#define ALGO_NVFP4    3
#define ALGO_W4A16    4

static const struct {
    const char *name;
    int algo; /* 0: a ModelOpt algorithm we do not read */
} algos[] = {
    {"FP8", ALGO_FP8}, {"FP8_PER_CHANNEL_PER_TOKEN", ALGO_FP8_PCPT},
    {"FP8_PB_WO", 0},  {"NVFP4", ALGO_NVFP4},
    {"NVFP4_AWQ", 0},  {"W4A16_NVFP4", ALGO_W4A16},
    {"MXFP8", 0},      {"MIXED_PRECISION", 0},
};

#define SUPPORTED_TEXT "FP8, FP8_PER_CHANNEL_PER_TOKEN, NVFP4, W4A16_NVFP4"

typedef struct modelopt_state {
    int algo;
    uint32_t group_size;
    module_list exclude;
} modelopt_state;

static void modelopt_destroy(void *state)
{
    modelopt_state *s = state;
    if (!s)
        return;
    module_list_free(&s->exclude);
    free(s);
}

/* quant_algo at the current path of `j`, looked up case-insensitively. */
static fmoe_status read_algo(qjson *j, const json_t *where, modelopt_state *s)
{
    const char *text = NULL;
    fmoe_status st = qjson_string(j, where, "quant_algo", 0, &text, NULL);
    if (st != FMOE_STATUS_OK)
        return st;
    if (!text || !text[0])
        return qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "Missing 'quant_algo' in quantization config");
    char upper[64];
    size_t n = 0;
    for (; text[n] && n + 1 < sizeof upper; n++)
        upper[n] = (char)toupper((unsigned char)text[n]);
    upper[n] = '\0';
    size_t mark = qjson_enter_key(j, "quant_algo");
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
        if (strcmp(upper, algos[i].name) != 0)
            continue;
        s->algo = algos[i].algo;
        if (!s->algo)
            st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED,
                            "ModelOpt quant_algo \"%s\" is not supported for MoE layers (supported: " SUPPORTED_TEXT
                            ")",
                            text);
        qjson_leave(j, mark);
        return st;
    }
    st = qjson_fail(
        j, FMOE_STATUS_UNSUPPORTED,
        "unknown ModelOpt quant_algo \"%s\" (ModelOpt algorithms: FP8, FP8_PER_CHANNEL_PER_TOKEN, "
        "FP8_PB_WO, NVFP4, NVFP4_AWQ, W4A16_NVFP4, MXFP8, MIXED_PRECISION; supported for MoE: " SUPPORTED_TEXT ")",
        text);
    qjson_leave(j, mark);
    return st;
}

static fmoe_status read_group_size(qjson *j, const json_t *where, modelopt_state *s)
{
    long long v = 16;
    int given = 0;
    fmoe_status st = qjson_int(j, where, "group_size", 0, &v, &given);
    if (st != FMOE_STATUS_OK)
        return st;
    if (given && (v < 1 || v > (long long)QARGS_MAX_SIZE)) {
        size_t mark = qjson_enter_key(j, "group_size");
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "expected a group size from 1 to 1048576, got %lld", v);
        qjson_leave(j, mark);
        return st;
    }
    s->group_size = (uint32_t)v;
    return FMOE_STATUS_OK;
}

/* `where` holds quant_algo, group_size and the exclusion list `list_key`. */
static fmoe_status read_fields(qjson *j, const json_t *where, const char *list_key, modelopt_state *s)
{
    const char *kv = NULL;
    fmoe_status st = read_algo(j, where, s);
    if (st == FMOE_STATUS_OK)
        st = read_group_size(j, where, s);
    if (st == FMOE_STATUS_OK)
        st = qjson_string(j, where, "kv_cache_quant_algo", 0, &kv, NULL); /* the KV cache is not ours */
    if (st == FMOE_STATUS_OK)
        st = module_list_read(j, where, list_key, &s->exclude);
    return st;
}

static fmoe_status modelopt_parse(qjson *j, const json_t *qcfg, void **state)
{
    json_t *inner = NULL;
    int nested = 0;
    modelopt_state *s = calloc(1, sizeof *s);
    if (!s)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_status st = qjson_object(j, qcfg, "quantization", 0, &inner, &nested);
    if (st == FMOE_STATUS_OK && nested) {
        size_t mark = qjson_enter_key(j, "quantization");
        st = read_fields(j, inner, "exclude_modules", s);
        qjson_leave(j, mark);
    } else if (st == FMOE_STATUS_OK) {
        /* Flat exports write "ignore" (vLLM) or "exclude_modules" (newer
         * ModelOpt); a module in either is excluded. */
        st = read_fields(j, qcfg, "ignore", s);
        if (st == FMOE_STATUS_OK)
            st = module_list_read(j, qcfg, "exclude_modules", &s->exclude);
    }
    module_list_finish(&s->exclude);
    if (st != FMOE_STATUS_OK) {
        modelopt_destroy(s);
        return st;
    }
    *state = s;
    return FMOE_STATUS_OK;
}

static void set_fp8(qargs *a, int strategy, int dynamic)
{
    qargs_defaults(a);
    a->type = QTYPE_FLOAT;
    a->strategy = strategy;
    a->dynamic = dynamic;
}

static void set_nvfp4(qargs *a, uint32_t group_size, int dynamic)
{
    qargs_defaults(a);
    a->type = QTYPE_FLOAT;
    a->num_bits = 4;
    a->strategy = QS_TENSOR_GROUP;
    a->group_size = (int32_t)group_size;
    a->dynamic = dynamic;
}

static fmoe_status modelopt_resolve(const void *state, const char *module, qspec *out)
{
    const modelopt_state *s = state;
    memset(out, 0, sizeof *out);
    int excluded = module_list_contains(&s->exclude, module);
    if (excluded)
        return excluded < 0 ? fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory") : FMOE_STATUS_OK;
    out->quantized = 1;
    out->has_input = s->algo != ALGO_W4A16;
    switch (s->algo) {
    case ALGO_FP8:
        set_fp8(&out->weights, QS_TENSOR, QDYN_STATIC);
        set_fp8(&out->input, QS_TENSOR, QDYN_STATIC);
        break;
    case ALGO_FP8_PCPT:
        set_fp8(&out->weights, QS_CHANNEL, QDYN_STATIC);
        set_fp8(&out->input, QS_TOKEN, QDYN_DYNAMIC);
        break;
    default: /* NVFP4, W4A16_NVFP4 */
        set_nvfp4(&out->weights, s->group_size, QDYN_STATIC);
        set_nvfp4(&out->input, s->group_size, QDYN_LOCAL);
        break;
    }
    return FMOE_STATUS_OK;
}

const quant_method fmoe_qm_modelopt = {
    .name = "modelopt",
    .parse = modelopt_parse,
    .resolve = modelopt_resolve,
    .destroy = modelopt_destroy,
};
