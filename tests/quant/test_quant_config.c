/*
 * tests/quant/test_quant_config.c - HF quantization_config -> scheme.
 *
 * Each reader (compressed-tensors, fp8, modelopt, gptq, mxfp4) on configs
 * shaped like the ones real producers write, each branch of the MoE
 * selection tree (spec/interface.md §9.3) with vLLM's message, per-module
 * resolution over every expert (ignore lists, regex targets, GPTQ dynamic
 * rules) and the errors a malformed config gets, each with its exact text.
 * Expected keys are written out by hand from docs/SCHEMES.md.
 */
#include <stdio.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

#define LAYER "model.layers.0.mlp.experts"

/* Parse `json` and resolve the default layer (E experts, HF names). */
static fmoe_status scheme_of(const char *json, uint32_t experts, char *key, size_t cap)
{
    fmoe_quant_config *qc = NULL;
    fmoe_status st = fmoe_quant_config_parse(json, strlen(json), NULL, &qc);
    if (st != FMOE_STATUS_OK)
        return st;
    fmoe_expert_modules m;
    fmoe_expert_modules_init(&m);
    m.prefix = LAYER;
    m.num_experts = experts;
    fmoe_scheme s;
    st = fmoe_quant_config_scheme(qc, &m, &s);
    if (st == FMOE_STATUS_OK)
        ck_assert_int_eq(fmoe_scheme_key(&s, key, cap), FMOE_STATUS_OK);
    fmoe_quant_config_destroy(qc);
    return st;
}

static void expect_key(const char *json, const char *want)
{
    char key[FMOE_SCHEME_KEY_MAX] = "";
    fmoe_status st = scheme_of(json, 4, key, sizeof key);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s\n-> %s", json, fmoe_last_error());
    ck_assert_msg(strcmp(key, want) == 0, "%s\n-> '%s', want '%s'", json, key, want);
}

static void expect_error(const char *json, fmoe_status want_st, const char *want_msg)
{
    char key[FMOE_SCHEME_KEY_MAX] = "";
    fmoe_status st = scheme_of(json, 4, key, sizeof key);
    ck_assert_msg(st == want_st, "%s\n-> status %d (%s), key '%s'; want %d", json, st, fmoe_last_error(), key, want_st);
    ck_assert_str_eq(fmoe_last_error(), want_msg);
}

/* A compressed-tensors config with one group targeting Linear. */
#define CT(format, weights, input, ignore) \
    "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", " \
    "\"format\": \"" format "\", \"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], " \
    "\"weights\": " weights ", \"input_activations\": " input "}}, \"ignore\": " ignore "}}"

#define W_INT4_G128 \
    "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 128, \"symmetric\": true, " \
    "\"dynamic\": false}"
#define W_FP8_CHANNEL \
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"channel\", \"symmetric\": true, \"dynamic\": false}"
#define W_FP8_TENSOR \
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor\", \"symmetric\": true, \"dynamic\": false}"
#define A_FP8_TOKEN \
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"token\", \"symmetric\": true, \"dynamic\": true}"
#define A_FP8_TENSOR_STATIC \
    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor\", \"symmetric\": true, \"dynamic\": false}"
#define W_NVFP4 \
    "{\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16, \"symmetric\": true, " \
    "\"dynamic\": false}"
#define A_NVFP4 \
    "{\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16, \"symmetric\": true, " \
    "\"dynamic\": \"local\"}"
#define IGNORE_STD "[\"lm_head\", \"re:.*mlp.gate$\"]"

START_TEST(test_compressed_tensors_schemes)
{
    /* The three examples of spec/interface.md §9.3. */
    expect_key(CT("pack-quantized", W_INT4_G128, "null", IGNORE_STD), "int4:group128");
    expect_key(CT("float-quantized", W_FP8_CHANNEL, A_FP8_TOKEN, IGNORE_STD), "fp8e4m3:channel/fp8e4m3:token:dynamic");
    expect_key(CT("nvfp4-pack-quantized", W_NVFP4, A_NVFP4, IGNORE_STD),
               "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic");
    /* W4A16 NVFP4: no input activations. */
    expect_key(CT("nvfp4-pack-quantized", W_NVFP4, "null", IGNORE_STD), "fp4:tgroup16:scale-fp8e4m3");
    expect_key(CT("float-quantized", W_FP8_TENSOR, A_FP8_TENSOR_STATIC, "[]"), "fp8e4m3:tensor/fp8e4m3:tensor");
    expect_key(CT("float-quantized", W_FP8_TENSOR,
                  "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"tensor\", \"dynamic\": true}", "[]"),
               "fp8e4m3:tensor/fp8e4m3:tensor:dynamic");
    expect_key(CT("float-quantized",
                  "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"block\", \"block_structure\": [128, 128], "
                  "\"symmetric\": true, \"dynamic\": false}",
                  "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"group\", \"group_size\": 128, "
                  "\"symmetric\": true, \"dynamic\": true}",
                  "[]"),
               "fp8e4m3:block128x128/fp8e4m3:group128:dynamic");
    /* Act-order, asymmetric, channel-wise (group_size -1 and None), int8. */
    expect_key(CT("pack-quantized",
                  "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 128, "
                  "\"actorder\": \"group\"}",
                  "null", "[]"),
               "int4:group128:actorder");
    expect_key(CT("pack-quantized",
                  "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 64, "
                  "\"symmetric\": false}",
                  "null", "[]"),
               "int4:group64:asym");
    expect_key(CT("pack-quantized", "{\"num_bits\": 4, \"type\": \"int\", \"group_size\": -1}", "null", "[]"),
               "int4:channel");
    expect_key(CT("pack-quantized", "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}", "null", "[]"),
               "int8:channel");
    /* actorder "weight" changes calibration, not the format. */
    expect_key(CT("pack-quantized",
                  "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 128, "
                  "\"actorder\": \"weight\"}",
                  "null", "[]"),
               "int4:group128");
    /* INT8 W8A8 and the two W4A8 paths. */
    expect_key(CT("int-quantized", "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}",
                  "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"token\", \"dynamic\": true}", "[]"),
               "int8:channel/int8:token:dynamic");
    expect_key(CT("int-quantized", "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"channel\"}",
                  "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"token\", \"dynamic\": true, "
                  "\"symmetric\": false}",
                  "[]"),
               "int4:channel/int8:token:dynamic:asym");
    expect_key(CT("int-quantized", "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 32}",
                  "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"token\", \"dynamic\": true}", "[]"),
               "int4:group32:scale-bf16/int8:token:dynamic:asym");
    expect_key(CT("float-quantized",
                  "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 128}",
                  "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"token\", \"dynamic\": true}", "[]"),
               "int4:group128/fp8e4m3:token:dynamic");
    /* MXFP4 weights, with MXFP4 activations or none. */
    expect_key(CT("mxfp4-pack-quantized",
                  "{\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"group\", \"group_size\": 32}", "null", "[]"),
               "fp4:group32:scale-ue8m0");
}
END_TEST

START_TEST(test_selection_errors)
{
    expect_error(CT("int-quantized", W_INT4_G128, "null", "[]"), FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0: format \"int-quantized\" quantizes "
                 "activations, but the group has no input_activations (only float weights may leave them out: "
                 "W8A16-FP8)");
    expect_error(CT("naive-quantized", "{\"num_bits\": 3, \"type\": \"int\", \"strategy\": \"channel\"}", "{}", "[]"),
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0: format \"naive-quantized\" quantizes "
                 "activations, but the group has no input_activations (only float weights may leave them out: "
                 "W8A16-FP8)");
    expect_error(CT("dense", "{\"num_bits\": 4, \"type\": \"int\", \"strategy\": \"channel\"}", "null", "[]"),
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: For Fused MoE layers, only format 'pack-quantized' and bits "
                 "[4, 8] are supported, but got format 'dense' and bits 4.");
    expect_error(CT("nvfp4-pack-quantized", W_NVFP4, A_FP8_TOKEN, "[]"), FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: For NVFP4 weights, input quantization must also be NVFP4 "
                 "format or None for NVFP4A16, found {type=float num_bits=8 strategy=token symmetric=true "
                 "dynamic=true}");
    expect_error(CT("float-quantized", W_FP8_CHANNEL, A_FP8_TENSOR_STATIC, "[]"), FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: For FP8 Fused MoE layer, we require either per tensor or "
                 "channelwise, dynamic per token quantization.");
    expect_error(CT("float-quantized",
                    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"block\", \"block_structure\": [128, "
                    "128]}",
                    A_FP8_TENSOR_STATIC, "[]"),
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: The block-wise quantization only supports dynamic activation "
                 "scheme for now, but got static activation scheme.");
    expect_error(CT("float-quantized", "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}", A_FP8_TOKEN,
                    "[]"),
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: Unsupported FusedMoe scheme: weights {type=int num_bits=8 "
                 "strategy=channel symmetric=true dynamic=false}, input_activations {type=float num_bits=8 "
                 "strategy=token symmetric=true dynamic=true}");
}
END_TEST

/* Resolution runs over every expert, not only expert 0 (vLLM's TODO). */
START_TEST(test_every_expert_is_checked)
{
    expect_error(CT("pack-quantized", W_INT4_G128, "null", "[\"" LAYER ".3.down_proj\"]"), FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: " LAYER ": All MoE projections need to have same quantization scheme but found "
                 "multiple: " LAYER ".0.gate_proj is 'int4:group128', " LAYER ".3.down_proj is 'bf16'");
    /* A regex ignore that catches all experts makes the layer unquantized. */
    expect_key(CT("pack-quantized", W_INT4_G128, "null", "[\"re:.*mlp\\\\.experts\\\\..*\"]"), "bf16");
    /* A second group that targets expert 2's up_proj by regex. */
    expect_error("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
                 "\"pack-quantized\", \"config_groups\": {\"g0\": {\"targets\": [\"re:.*experts\\\\.2\\\\.up_proj$\"], "
                 "\"weights\": {\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}}, \"g1\": "
                 "{\"targets\": [\"Linear\"], \"weights\": " W_INT4_G128 "}}}}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: " LAYER ": All MoE projections need to have same quantization scheme but found "
                 "multiple: " LAYER ".0.gate_proj is 'int4:group128', " LAYER ".2.up_proj is 'int8:channel'");
    /* A group whose only target is an attention class is dropped. */
    expect_key("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
               "\"pack-quantized\", \"config_groups\": {\"attn\": {\"targets\": [\"LlamaAttention\"], \"weights\": "
               "{\"num_bits\": 8, \"type\": \"int\", \"strategy\": \"channel\"}}, \"g1\": {\"targets\": "
               "[\"Linear\"], \"weights\": " W_INT4_G128 "}}}}",
               "int4:group128");
    /* A module no target names is not quantized; dtype from torch_dtype. */
    expect_key("{\"torch_dtype\": \"float16\", \"quantization_config\": {\"quant_method\": "
               "\"compressed-tensors\", \"format\": \"pack-quantized\", \"config_groups\": {\"g\": {\"targets\": "
               "[\"re:.*self_attn.*\"], \"weights\": " W_INT4_G128 "}}}}",
               "f16");
}
END_TEST

START_TEST(test_mixtral_names_and_expert_count)
{
    const char *json = CT("pack-quantized", W_INT4_G128, "null", "[\"model.layers.1.block_sparse_moe.experts.7.w2\"]");
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), "mixtral/config.json", &qc), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_quant_config_method(qc), "compressed-tensors");
    ck_assert_int_eq(fmoe_quant_config_dtype(qc), FMOE_DTYPE_BF16);
    fmoe_expert_modules m;
    fmoe_expert_modules_init(&m);
    m.prefix = "model.layers.1.block_sparse_moe.experts";
    m.gate = "w1";
    m.up = "w3";
    m.down = "w2";
    m.num_experts = 7; /* expert 7 is not in this layer: no conflict */
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &s), FMOE_STATUS_OK);
    m.num_experts = 8;
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "mixtral/config.json: model.layers.1.block_sparse_moe.experts: All MoE projections need to have "
                     "same quantization scheme but found multiple: model.layers.1.block_sparse_moe.experts.0.w1 is "
                     "'int4:group128', model.layers.1.block_sparse_moe.experts.7.w2 is 'bf16'");
    m.gate = "w1.x";
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &s), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "fmoe_quant_config_scheme: modules.gate/up/down must be plain names without '.'");
    fmoe_quant_config_destroy(qc);
}
END_TEST

START_TEST(test_fp8_config)
{
    /* DeepSeek-V3 */
    expect_key("{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": "
               "\"fp8\", \"weight_block_size\": [128, 128]}}",
               "fp8e4m3:block128x128/fp8e4m3:group128:dynamic");
    /* DeepSeek-V3.1: power-of-two scales */
    expect_key("{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\", "
               "\"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}}",
               "fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic");
    expect_key("{\"quantization_config\": {\"activation_scheme\": \"static\", \"quant_method\": \"fp8\"}}",
               "fp8e4m3:tensor/fp8e4m3:tensor");
    expect_key("{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\"}}",
               "fp8e4m3:tensor/fp8e4m3:tensor:dynamic");
    expect_key("{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"activation_scheme\": \"dynamic\", "
               "\"quant_method\": \"fp8\", \"modules_to_not_convert\": [\"model.layers.0.mlp\"]}}",
               "bf16");
    expect_error("{\"quantization_config\": {\"activation_scheme\": \"static\", \"quant_method\": \"fp8\", "
                 "\"weight_block_size\": [128, 128]}}",
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: The block-wise quantization only supports dynamic activation "
                 "scheme for now, but got static activation scheme.");
    expect_error("{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\", "
                 "\"weight_block_size\": [128]}}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.weight_block_size: The quantization block size of weight must "
                 "have 2 dimensions, but got 1 dimensions");
    expect_error("{\"quantization_config\": {\"quant_method\": \"fp8\"}}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config: missing required key \"activation_scheme\"");
    expect_error("{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\", "
                 "\"fmt\": \"e5m2\"}}",
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: quantization_config.fmt: \"e5m2\" is not supported (fp8 checkpoints are read as "
                 "e4m3)");
}
END_TEST

/* DeepSeek-V4: fp8 config with expert_dtype "fp4" (top level, or inside
 * quantization_config) makes the routed experts MXFP4 on FP8 per-32
 * activations (docs/SCHEMES.md, docs/MEGAMOE.md). */
#define V4_QCFG(extra) \
    "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", " \
    "\"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]" extra "}"
#define V4_KEY "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"

START_TEST(test_deepseek_v4_fp4_experts)
{
    expect_key("{\"expert_dtype\": \"fp4\", \"torch_dtype\": \"bfloat16\", " V4_QCFG("") "}", V4_KEY);
    expect_key("{\"torch_dtype\": \"bfloat16\", " V4_QCFG(", \"expert_dtype\": \"fp4\"") "}", V4_KEY);
    expect_key("{\"expert_dtype\": \"fp4\", " V4_QCFG(", \"expert_dtype\": \"fp4\"") "}", V4_KEY);
    /* static activation_scheme: the FP4 expert kernels quantize per forward anyway */
    expect_key("{\"expert_dtype\": \"fp4\", \"quantization_config\": {\"activation_scheme\": \"static\", "
               "\"quant_method\": \"fp8\"}}",
               V4_KEY);
    /* fp8 experts: the block-FP8 scheme of the config */
    expect_key("{\"expert_dtype\": \"fp8\", " V4_QCFG("") "}",
               "fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic");
    /* an excluded expert layer stays unquantized */
    expect_key("{\"expert_dtype\": \"fp4\", \"torch_dtype\": \"bfloat16\", " V4_QCFG(
                   ", \"modules_to_not_convert\": [\"model.layers.0.mlp\"]") "}",
               "bf16");
    expect_error("{\"expert_dtype\": \"int4\", " V4_QCFG("") "}", FMOE_STATUS_UNSUPPORTED,
                 "config.json: expert_dtype: \"int4\" is not supported (expected \"fp4\": MXFP4 experts, or \"fp8\": "
                 "the block-FP8 ones)");
    expect_error("{\"expert_dtype\": 4, " V4_QCFG("") "}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: expert_dtype: expected a string, got 4");
    expect_error("{\"expert_dtype\": \"fp8\", " V4_QCFG(", \"expert_dtype\": \"fp4\"") "}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: expert_dtype: \"fp8\" disagrees with quantization_config.expert_dtype");
    /* Other readers ignore it: a compressed-tensors MXFP4 config asking for
     * FP8 activations keeps vLLM's refusal. */
    expect_error(CT("mxfp4-pack-quantized",
                    "{\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"group\", \"group_size\": 32}",
                    "{\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"group\", \"group_size\": 32, "
                    "\"dynamic\": true}",
                    "[]"),
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: For MXFP4 weights, input quantization must also be MXFP4 "
                 "format or None for MXFP4A16, found {type=float num_bits=8 strategy=group group_size=32 "
                 "symmetric=true dynamic=true}");

    /* V4 names: layers.N.ffn.experts.<e>.w1 / w3 / w2 */
    const char *json = "{\"expert_dtype\": \"fp4\", " V4_QCFG(
        ", \"modules_to_not_convert\": [\"layers.3.ffn.shared_experts\"]") "}";
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), NULL, &qc), FMOE_STATUS_OK);
    fmoe_expert_modules m;
    fmoe_expert_modules_init(&m);
    m.prefix = "layers.3.ffn.experts";
    m.num_experts = 8;
    m.gate = "w1";
    m.up = "w3";
    m.down = "w2";
    fmoe_scheme sc;
    char key[FMOE_SCHEME_KEY_MAX];
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &sc), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_scheme_key(&sc, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, V4_KEY);
    fmoe_quant_config_destroy(qc);
}
END_TEST

START_TEST(test_modelopt_config)
{
    expect_key("{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quantization\": {\"quant_algo\": "
               "\"NVFP4\", \"group_size\": 16, \"exclude_modules\": [\"lm_head\"]}}}",
               "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic");
    expect_key("{\"quantization_config\": {\"quant_method\": \"modelopt_fp4\", \"quant_algo\": \"NVFP4\", "
               "\"group_size\": 16, \"ignore\": [\"lm_head\"]}}",
               "fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic");
    expect_key("{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\"}}",
               "fp8e4m3:tensor/fp8e4m3:tensor");
    expect_key("{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": "
               "\"FP8_PER_CHANNEL_PER_TOKEN\"}}",
               "fp8e4m3:channel/fp8e4m3:token:dynamic");
    expect_key("{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"W4A16_NVFP4\"}}",
               "fp4:tgroup16:scale-fp8e4m3");
    /* ModelOpt's wildcard exclusion. */
    expect_key("{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"modelopt\", "
               "\"quant_algo\": \"FP8\", \"exclude_modules\": [\"model.layers.*.mlp.experts*\"]}}",
               "bf16");
    /* The same file, copied in as hf_quant_config.json (the root is the config). */
    const char *hf = "{\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8\"}";
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(hf, strlen(hf), "hf_quant_config.json", &qc), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_quant_config_method(qc), "modelopt");
    fmoe_quant_config_destroy(qc);
}
END_TEST

START_TEST(test_gptq_config)
{
    expect_key("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
               "\"desc_act\": true, \"sym\": true}}",
               "int4:group128:actorder");
    expect_key("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
               "\"desc_act\": false, \"sym\": false}}",
               "int4:group128:asym");
    /* Channel-wise: desc_act is meaningless and dropped. */
    expect_key("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 8, \"group_size\": -1, "
               "\"desc_act\": true}}",
               "int8:channel");
    /* GPTQModel dynamic rules: expert 1's down_proj in 8 bits. */
    expect_error("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
                 "\"dynamic\": {\"+:.*experts\\\\.1\\\\.down_proj\": {\"bits\": 8}}}}",
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: " LAYER ": All MoE projections need to have same quantization scheme but found "
                 "multiple: " LAYER ".0.gate_proj is 'int4:group128', " LAYER ".1.down_proj is 'int8:group128'");
    expect_error("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 3, \"group_size\": 128}}",
                 FMOE_STATUS_UNSUPPORTED,
                 "config.json: " LAYER ".0.gate_proj: GPTQ with bits = 3 is not supported for MoE layers (expected "
                 "4 or 8)");
}
END_TEST

START_TEST(test_mxfp4_fused)
{
    const char *json = "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"mxfp4\", "
                       "\"modules_to_not_convert\": [\"model.layers.*.self_attn\", \"model.layers.*.mlp.router\", "
                       "\"model.embed_tokens\", \"lm_head\"]}}";
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(json, strlen(json), NULL, &qc), FMOE_STATUS_OK);
    fmoe_expert_modules m;
    fmoe_expert_modules_init(&m);
    m.prefix = "model.layers.5.mlp.experts";
    m.fused = 1;
    fmoe_scheme s;
    char key[FMOE_SCHEME_KEY_MAX];
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &s), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_scheme_key(&s, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, "fp4:group32:scale-ue8m0");
    /* The router is excluded by the glob (it is not an expert). */
    m.prefix = "model.layers.5.mlp.router";
    ck_assert_int_eq(fmoe_quant_config_scheme(qc, &m, &s), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_scheme_key(&s, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, "bf16");
    fmoe_quant_config_destroy(qc);
}
END_TEST

START_TEST(test_unquantized_and_methods)
{
    expect_key("{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"torch_dtype\": \"bfloat16\"}", "bf16");
    expect_key("{\"dtype\": \"float16\"}", "f16");
    expect_key("{}", "f32");
    expect_key("{\"torch_dtype\": \"bfloat16\", \"compression_config\": {\"quant_method\": \"compressed-tensors\", "
               "\"format\": \"pack-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"], "
               "\"weights\": " W_INT4_G128 "}}}}",
               "int4:group128");
    expect_error("{\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4}}", FMOE_STATUS_UNSUPPORTED,
                 "config.json: quantization_config.quant_method: quantization method \"awq\" is not supported "
                 "(fusedmoe reads compressed-tensors, fp8, modelopt, modelopt_fp4, gptq, mxfp4)");
    expect_error("{\"torch_dtype\": \"int8\"}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: torch_dtype: expected \"float32\", \"bfloat16\" or \"float16\", got \"int8\"");
    expect_error("{\"quantization_config\": []}", FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config: expected an object, got an array");
}
END_TEST

START_TEST(test_malformed)
{
    expect_error(CT("pack-quantized",
                    "{\"num_bits\": \"4\", \"type\": \"int\", \"strategy\": \"group\", \"group_size\": 128}", "null",
                    "[]"),
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0.weights.num_bits: expected an integer, got "
                 "\"4\"");
    expect_error(CT("pack-quantized", "{\"num_bits\": 4, \"bits\": 4}", "null", "[]"), FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0.weights.bits: unknown key (QuantizationArgs "
                 "has num_bits, type, symmetric, group_size, strategy, block_structure, dynamic, actorder, "
                 "scale_dtype, zp_dtype, observer, observer_kwargs)");
    expect_error(CT("pack-quantized", "{\"num_bits\": 4, \"strategy\": \"group\"}", "null", "[]"),
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0.weights: strategy group requires group_size "
                 "to be set to a positive value");
    expect_error(CT("pack-quantized", "{\"num_bits\": 4, \"strategy\": \"channel\", \"actorder\": \"group\"}", "null",
                    "[]"),
                 FMOE_STATUS_INVALID_ARGUMENT,
                 "config.json: quantization_config.config_groups.group_0.weights: Must use group or tensor_group "
                 "quantization strategy in order to apply group activation ordering");
    char key[FMOE_SCHEME_KEY_MAX];
    ck_assert_int_eq(scheme_of(CT("pack-quantized", W_INT4_G128, "null", "[\"re:(?<=x)y\"]"), 4, key, sizeof key),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strncmp(fmoe_last_error(), "config.json: quantization_config.ignore[0]: ", 44) == 0, "%s",
                  fmoe_last_error());
    /* Not JSON; duplicate keys (Python would keep the last silently). */
    const char *bad = "{\"quantization_config\": {\"quant_method\": \"fp8\",\n  \"activation_scheme\": }}";
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_parse(bad, strlen(bad), "x/config.json", &qc), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_null(qc);
    ck_assert_msg(strncmp(fmoe_last_error(), "x/config.json:2:", 16) == 0, "%s", fmoe_last_error());
    const char *dup = "{\"torch_dtype\": \"bfloat16\", \"torch_dtype\": \"float16\"}";
    ck_assert_int_eq(fmoe_quant_config_parse(dup, strlen(dup), NULL, &qc), FMOE_STATUS_PARSE_ERROR);
    ck_assert_msg(strstr(fmoe_last_error(), "duplicate object key") != NULL, "%s", fmoe_last_error());
    ck_assert_int_eq(fmoe_quant_config_load(FMOE_TEST_DATA_DIR "/no/such/config.json", &qc), FMOE_STATUS_NOT_FOUND);
    ck_assert_str_eq(fmoe_last_error(), FMOE_TEST_DATA_DIR "/no/such/config.json: No such file or directory");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant_config");
    TCase *tc = tcase_create("quant_config");
    tcase_add_test(tc, test_compressed_tensors_schemes);
    tcase_add_test(tc, test_selection_errors);
    tcase_add_test(tc, test_every_expert_is_checked);
    tcase_add_test(tc, test_mixtral_names_and_expert_count);
    tcase_add_test(tc, test_fp8_config);
    tcase_add_test(tc, test_deepseek_v4_fp4_experts);
    tcase_add_test(tc, test_modelopt_config);
    tcase_add_test(tc, test_gptq_config);
    tcase_add_test(tc, test_mxfp4_fused);
    tcase_add_test(tc, test_unquantized_and_methods);
    tcase_add_test(tc, test_malformed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 11);
}
