/*
 * core/quant/method_fp8.c - quant_method "fp8" (vLLM Fp8Config; DeepSeek-V3,
 * Qwen3-FP8, transformers' FineGrainedFP8):
 *
 *   {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
 *    "weight_block_size": [128, 128], "modules_to_not_convert": [...]}
 *
 *  - activation_scheme is required, "static" or "dynamic" (vLLM refuses
 *    anything else);
 *  - weight_block_size: absent = one scale per tensor; else [block_n,
 *    block_k], and then activations are quantized per 1 x block_k group
 *    (the selection tree refuses static activations with blocks);
 *  - fmt: only "e4m3" (the only fp8 checkpoint format vLLM reads; an "e5m2"
 *    checkpoint read as e4m3 would be garbage, so it is refused);
 *  - scale_fmt: "ue8m0" (DeepSeek-V3.1 and later: power-of-two block
 *    scales) gives scale-ue8m0, "float" or absent f32;
 *  - ignored_layers and modules_to_not_convert both list unquantized
 *    modules (vLLM reads the first, transformers the second; a module in
 *    either is unquantized);
 *  - expert_dtype "fp4" (DeepSeek-V4: at the top of config.json, which
 *    model_keys reads; some converters copy it into quantization_config)
 *    makes the routed experts MXFP4 (e2m1, UE8M0 per 32, the checkpoint's
 *    weight + scale [rows, K/32]) on FP8 activations quantized per 32 with
 *    power-of-two scales, whatever weight_block_size says (it is the dense
 *    layers'): fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic. "fp8" (or
 *    absent) keeps the block-FP8 experts. The activations are dynamic
 *    even with activation_scheme "static": the FP4 expert kernels
 *    (DeepGEMM MegaMoE, the V4 reference) only quantize them per forward.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/quant/module_match.h"
#include "core/quant/quant.h"

typedef struct fp8_state {
    int dynamic;
    uint32_t block_n, block_k; /* 0: per tensor */
    fmoe_dtype scale;
    module_list skip;
    int experts_fp4;       /* expert_dtype "fp4" */
    int expert_dtype_read; /* given in quantization_config */
} fp8_state;

static void fp8_destroy(void *state)
{
    fp8_state *s = state;
    if (!s)
        return;
    module_list_free(&s->skip);
    free(s);
}

static fmoe_status read_activation_scheme(qjson *j, const json_t *qcfg, fp8_state *s)
{
    const char *scheme = NULL;
    fmoe_status st = qjson_string(j, qcfg, "activation_scheme", 1, &scheme, NULL);
    if (st != FMOE_STATUS_OK)
        return st;
    if (strcmp(scheme, "static") != 0 && strcmp(scheme, "dynamic") != 0) {
        size_t mark = qjson_enter_key(j, "activation_scheme");
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                        "Unsupported activation scheme \"%s\" (expected \"static\" or \"dynamic\")", scheme);
        qjson_leave(j, mark);
        return st;
    }
    s->dynamic = strcmp(scheme, "dynamic") == 0;
    return FMOE_STATUS_OK;
}

static fmoe_status read_block_size(qjson *j, const json_t *qcfg, fp8_state *s)
{
    json_t *arr = NULL;
    int given = 0;
    fmoe_status st = qjson_array(j, qcfg, "weight_block_size", 0, &arr, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    size_t mark = qjson_enter_key(j, "weight_block_size");
    if (json_array_size(arr) != 2)
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT,
                        "The quantization block size of weight must have 2 dimensions, but got %zu dimensions",
                        json_array_size(arr));
    uint32_t sides[2] = {0, 0};
    for (size_t i = 0; i < 2 && st == FMOE_STATUS_OK; i++) {
        json_t *side = json_array_get(arr, i);
        size_t at = qjson_enter_index(j, i);
        if (!json_is_integer(side))
            st = qjson_expected(j, side, "an integer");
        else if (json_integer_value(side) < 1 || json_integer_value(side) > (json_int_t)QARGS_MAX_SIZE)
            st = qjson_expected(j, side, "a block size from 1 to 1048576");
        else
            sides[i] = (uint32_t)json_integer_value(side);
        qjson_leave(j, at);
    }
    qjson_leave(j, mark);
    s->block_n = sides[0];
    s->block_k = sides[1];
    return st;
}

/* fmt and scale_fmt: the encodings of the values and of the scales. */
static fmoe_status read_formats(qjson *j, const json_t *qcfg, fp8_state *s)
{
    const char *fmt = NULL, *scale_fmt = NULL;
    int has_fmt = 0, has_scale_fmt = 0;
    fmoe_status st = qjson_string(j, qcfg, "fmt", 0, &fmt, &has_fmt);
    if (st == FMOE_STATUS_OK)
        st = qjson_string(j, qcfg, "scale_fmt", 0, &scale_fmt, &has_scale_fmt);
    if (st != FMOE_STATUS_OK)
        return st;
    if (has_fmt && strcmp(fmt, "e4m3") != 0) {
        size_t mark = qjson_enter_key(j, "fmt");
        st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED, "\"%s\" is not supported (fp8 checkpoints are read as e4m3)", fmt);
        qjson_leave(j, mark);
        return st;
    }
    s->scale = FMOE_DTYPE_F32;
    if (!has_scale_fmt || strcmp(scale_fmt, "float") == 0)
        return FMOE_STATUS_OK;
    if (strcmp(scale_fmt, "ue8m0") == 0) {
        s->scale = FMOE_DTYPE_UE8M0;
        return FMOE_STATUS_OK;
    }
    size_t mark = qjson_enter_key(j, "scale_fmt");
    st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED, "\"%s\" is not supported (expected \"float\" or \"ue8m0\")", scale_fmt);
    qjson_leave(j, mark);
    return st;
}

/* expert_dtype at the current path: "fp4" or "fp8"; *given 0 if absent. */
static fmoe_status read_expert_dtype(qjson *j, const json_t *obj, int *fp4, int *given)
{
    const char *text = NULL;
    fmoe_status st = qjson_string(j, obj, "expert_dtype", 0, &text, given);
    if (st != FMOE_STATUS_OK || !*given)
        return st;
    if (strcmp(text, "fp4") == 0 || strcmp(text, "fp8") == 0) {
        *fp4 = strcmp(text, "fp4") == 0;
        return FMOE_STATUS_OK;
    }
    size_t mark = qjson_enter_key(j, "expert_dtype");
    st = qjson_fail(j, FMOE_STATUS_UNSUPPORTED,
                    "\"%s\" is not supported (expected \"fp4\": MXFP4 experts, or \"fp8\": the block-FP8 ones)", text);
    qjson_leave(j, mark);
    return st;
}

/* The top-level expert_dtype; if quantization_config gave one too, they
 * must agree. */
static fmoe_status fp8_model_keys(qjson *j, const json_t *root, void *state)
{
    fp8_state *s = state;
    int fp4 = 0, given = 0;
    fmoe_status st = read_expert_dtype(j, root, &fp4, &given);
    if (st != FMOE_STATUS_OK || !given)
        return st;
    if (s->expert_dtype_read && fp4 != s->experts_fp4) {
        size_t mark = qjson_enter_key(j, "expert_dtype");
        st = qjson_fail(j, FMOE_STATUS_INVALID_ARGUMENT, "\"%s\" disagrees with quantization_config.expert_dtype",
                        fp4 ? "fp4" : "fp8");
        qjson_leave(j, mark);
        return st;
    }
    s->experts_fp4 = fp4;
    return FMOE_STATUS_OK;
}

/* Both skip lists, as one. */
static fmoe_status read_skip(qjson *j, const json_t *qcfg, fp8_state *s)
{
    fmoe_status st = module_list_read(j, qcfg, "ignored_layers", &s->skip);
    if (st == FMOE_STATUS_OK)
        st = module_list_read(j, qcfg, "modules_to_not_convert", &s->skip);
    module_list_finish(&s->skip);
    return st;
}

static fmoe_status fp8_parse(qjson *j, const json_t *qcfg, void **state)
{
    fp8_state *s = calloc(1, sizeof *s);
    if (!s)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_status st = read_activation_scheme(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        st = read_block_size(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        st = read_formats(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        st = read_skip(j, qcfg, s);
    if (st == FMOE_STATUS_OK)
        st = read_expert_dtype(j, qcfg, &s->experts_fp4, &s->expert_dtype_read);
    if (st != FMOE_STATUS_OK) {
        fp8_destroy(s);
        return st;
    }
    *state = s;
    return FMOE_STATUS_OK;
}

static fmoe_status fp8_resolve(const void *state, const char *module, qspec *out)
{
    const fp8_state *s = state;
    memset(out, 0, sizeof *out);
    int skipped = module_list_contains(&s->skip, module);
    if (skipped)
        return skipped < 0 ? fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory") : FMOE_STATUS_OK;
    out->quantized = 1;
    out->has_input = 1;
    qargs_defaults(&out->weights);
    qargs_defaults(&out->input);
    out->weights.type = out->input.type = QTYPE_FLOAT;
    if (s->experts_fp4) { /* MXFP4 experts x FP8 per-32 activations */
        out->mxfp4_fp8 = 1;
        out->weights.num_bits = 4;
        out->weights.strategy = out->input.strategy = QS_GROUP;
        out->weights.group_size = out->input.group_size = 32;
        out->weights.scale_dtype = FMOE_DTYPE_UE8M0;
        out->input.dynamic = QDYN_DYNAMIC;
        return FMOE_STATUS_OK;
    }
    out->weights.scale_dtype = s->scale;
    out->weights.strategy = out->input.strategy = QS_TENSOR;
    out->input.dynamic = s->dynamic ? QDYN_DYNAMIC : QDYN_STATIC;
    if (s->block_n) {
        out->weights.strategy = QS_BLOCK;
        out->weights.block_n = s->block_n;
        out->weights.block_k = s->block_k;
        if (s->dynamic) { /* 1 x block_k activation groups */
            out->input.strategy = QS_GROUP;
            out->input.group_size = (int32_t)s->block_k;
        }
    }
    return FMOE_STATUS_OK;
}

const quant_method fmoe_qm_fp8 = {
    .name = "fp8",
    .parse = fp8_parse,
    .resolve = fp8_resolve,
    .destroy = fp8_destroy,
    .model_keys = fp8_model_keys,
};
