/*
 * tests/model/test_model_errors.c - every rejection of the model config
 * reader (core/model), each with its status and exact message: the file,
 * the JSON key path, what was expected.
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"
#include "test_util.h"

typedef struct kv {
    const char *key, *value; /* value: JSON text */
} kv;

static const kv mixtral[] = {
    {"architectures", "[\"MixtralForCausalLM\"]"},
    {"model_type", "\"mixtral\""},
    {"num_hidden_layers", "4"},
    {"num_local_experts", "8"},
    {"num_experts_per_tok", "2"},
    {"hidden_size", "64"},
    {"intermediate_size", "32"},
    {"hidden_act", "\"silu\""},
    {"torch_dtype", "\"bfloat16\""},
};

static const kv qwen2[] = {
    {"model_type", "\"qwen2_moe\""},
    {"num_hidden_layers", "4"},
    {"num_experts", "8"},
    {"num_experts_per_tok", "2"},
    {"hidden_size", "64"},
    {"moe_intermediate_size", "32"},
    {"shared_expert_intermediate_size", "64"},
};

/* As transformers 5 saves it: "num_local_experts" (Qwen3MoeConfig's
 * attribute_map target), not "num_experts". */
static const kv qwen3[] = {
    {"architectures", "[\"Qwen3MoeForCausalLM\"]"},
    {"model_type", "\"qwen3_moe\""},
    {"num_hidden_layers", "2"},
    {"num_local_experts", "8"},
    {"num_experts_per_tok", "2"},
    {"hidden_size", "32"},
    {"moe_intermediate_size", "16"},
    {"norm_topk_prob", "true"},
    {"dtype", "\"float32\""},
};

static const kv deepseek[] = {
    {"architectures", "[\"DeepseekV3ForCausalLM\"]"},
    {"model_type", "\"deepseek_v3\""},
    {"num_hidden_layers", "4"},
    {"n_routed_experts", "16"},
    {"num_experts_per_tok", "4"},
    {"hidden_size", "64"},
    {"moe_intermediate_size", "32"},
    {"n_shared_experts", "1"},
    {"first_k_dense_replace", "1"},
    {"n_group", "4"},
    {"topk_group", "2"},
    {"topk_method", "\"noaux_tc\""},
    {"scoring_func", "\"sigmoid\""},
    {"routed_scaling_factor", "2.5"},
};

static const kv gpt_oss[] = {
    {"model_type", "\"gpt_oss\""}, {"num_hidden_layers", "2"}, {"num_local_experts", "8"},
    {"num_experts_per_tok", "2"},  {"hidden_size", "64"},      {"intermediate_size", "64"},
};

static const kv llama4_text[] = {
    {"model_type", "\"llama4_text\""},  {"num_hidden_layers", "4"}, {"num_local_experts", "16"},
    {"num_experts_per_tok", "1"},       {"hidden_size", "64"},      {"intermediate_size", "32"},
    {"interleave_moe_layer_step", "2"},
};

/* The base object with `key` set to `value` (replaced, or appended when
 * absent; removed when value is NULL). */
static char *build(const kv *base, size_t n, const char *key, const char *value)
{
    static char buf[4096];
    size_t len = (size_t)snprintf(buf, sizeof buf, "{");
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = base[i].value;
        if (key && strcmp(base[i].key, key) == 0) {
            seen = 1;
            v = value;
        }
        if (v)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\"%s\": %s", len > 1 ? ", " : "", base[i].key, v);
    }
    if (key && !seen && value)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\"%s\": %s", len > 1 ? ", " : "", key, value);
    snprintf(buf + len, sizeof buf - len, "}");
    return buf;
}

#define WITH(base, key, value) build(base, sizeof base / sizeof base[0], key, value)

static void expect(const char *json, fmoe_status status, const char *message)
{
    fmoe_model *m = (fmoe_model *)1;
    fmoe_status st = fmoe_model_config_parse(json, strlen(json), NULL, &m);
    ck_assert_msg(st == status, "status %d (%s) for %s", st, fmoe_last_error(), json);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(fmoe_last_error(), message);
}

static void expect_ok(const char *json)
{
    fmoe_model *m = NULL;
    fmoe_status st = fmoe_model_config_parse(json, strlen(json), NULL, &m);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s: %s", json, fmoe_last_error());
    fmoe_model_destroy(m);
}

/* Parses, and the last layer (a MoE layer in every base) has E experts and top-k k. */
static void expect_experts(const char *json, uint32_t experts, uint32_t top_k)
{
    fmoe_model *m = NULL;
    fmoe_status st = fmoe_model_config_parse(json, strlen(json), NULL, &m);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s: %s", json, fmoe_last_error());
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, fmoe_model_layer_count(m) - 1, &c), FMOE_STATUS_OK);
    ck_assert_msg(c.num_experts == experts, "%s: num_experts %u, expected %u", json, c.num_experts, experts);
    ck_assert_msg(c.top_k == top_k, "%s: top_k %u, expected %u", json, c.top_k, top_k);
    fmoe_model_destroy(m);
}

/* `json` (an object) with one more member `key` = `value` appended. */
static const char *plus(const char *json, const char *key, const char *value)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%.*s, \"%s\": %s}", (int)strlen(json) - 1, json, key, value);
    return buf;
}

#define INVALID     FMOE_STATUS_INVALID_ARGUMENT
#define UNSUPPORTED FMOE_STATUS_UNSUPPORTED

START_TEST(bases_are_valid)
{
    expect_ok(WITH(mixtral, NULL, NULL));
    expect_ok(WITH(qwen2, NULL, NULL));
    expect_ok(WITH(deepseek, NULL, NULL));
    expect_ok(WITH(gpt_oss, NULL, NULL));
    expect_ok(WITH(llama4_text, NULL, NULL));
    expect_ok(WITH(qwen3, NULL, NULL));
}
END_TEST

/* The expert count under every name the family's transformers config class
 * reads (attribute_map, transformers 5.23): alone, both agreeing, both
 * disagreeing (refused, naming both); and the names a class does not read
 * are not read here either. */
START_TEST(expert_count_spellings)
{
    /* Qwen3-MoE: saved as num_local_experts, also read as num_experts. */
    expect_experts(WITH(qwen3, NULL, NULL), 8, 2);
    expect_experts(plus(WITH(qwen3, "num_local_experts", NULL), "num_experts", "6"), 6, 2);
    expect_experts(WITH(qwen3, "num_experts", "8"), 8, 2);
    expect(WITH(qwen3, "num_experts", "16"), INVALID,
           "config.json: num_experts: 16 disagrees with num_local_experts = 8 (two spellings of one setting)");
    expect(WITH(qwen3, "num_local_experts", NULL), INVALID,
           "config.json: missing required key \"num_local_experts\" (or \"num_experts\")");
    expect(WITH(qwen3, "num_experts", "\"8\""), INVALID, "config.json: num_experts: expected an integer, got \"8\"");
    expect(plus(WITH(qwen3, "num_local_experts", NULL), "num_experts", "1"), INVALID,
           "config.json: num_experts_per_tok: 2 exceeds num_experts = 1");

    /* Qwen2-MoE: num_experts only (Qwen2MoeConfig has no attribute_map: a
     * num_local_experts there would leave transformers at its default 60). */
    expect(plus(WITH(qwen2, "num_experts", NULL), "num_local_experts", "8"), INVALID,
           "config.json: missing required key \"num_experts\"");

    /* Mixtral: num_local_experts, also read as num_experts. */
    expect_experts(plus(WITH(mixtral, "num_local_experts", NULL), "num_experts", "4"), 4, 2);
    expect(WITH(mixtral, "num_experts", "4"), INVALID,
           "config.json: num_experts: 4 disagrees with num_local_experts = 8 (two spellings of one setting)");
    expect(plus(WITH(mixtral, "num_local_experts", NULL), "num_experts", "1"), INVALID,
           "config.json: num_experts_per_tok: 2 exceeds num_experts = 1");

    /* DeepSeek-V3: n_routed_experts, also read as num_local_experts (not
     * num_experts). */
    expect_experts(plus(WITH(deepseek, "n_routed_experts", NULL), "num_local_experts", "16"), 16, 4);
    expect(WITH(deepseek, "num_local_experts", "32"), INVALID,
           "config.json: num_local_experts: 32 disagrees with n_routed_experts = 16 (two spellings of one setting)");
    expect(plus(WITH(deepseek, "n_routed_experts", NULL), "num_experts", "16"), INVALID,
           "config.json: missing required key \"n_routed_experts\" (or \"num_local_experts\")");
    expect(plus(WITH(deepseek, "n_routed_experts", NULL), "num_local_experts", "10"), INVALID,
           "config.json: n_group: 4 does not divide num_local_experts = 10");

    /* DeepSeek-V2: n_routed_experts, also read as num_experts. */
    const char *v2 = "{\"model_type\": \"deepseek_v2\", \"num_hidden_layers\": 2, \"num_experts\": 8,"
                     " \"num_experts_per_tok\": 2, \"hidden_size\": 32, \"moe_intermediate_size\": 16,"
                     " \"n_shared_experts\": null, \"n_group\": null, \"topk_group\": null}";
    expect_experts(v2, 8, 2);
    expect(plus(v2, "n_routed_experts", "6"), INVALID,
           "config.json: num_experts: 8 disagrees with n_routed_experts = 6 (two spellings of one setting)");

    /* gpt-oss: num_local_experts, also read as num_experts. */
    expect_experts(plus(WITH(gpt_oss, "num_local_experts", NULL), "num_experts", "4"), 4, 2);
    expect(WITH(gpt_oss, "num_experts", "4"), INVALID,
           "config.json: num_experts: 4 disagrees with num_local_experts = 8 (two spellings of one setting)");

    /* Llama-4: num_local_experts only (Llama4TextConfig has no attribute_map). */
    expect(plus(WITH(llama4_text, "num_local_experts", NULL), "num_experts", "16"), INVALID,
           "config.json: missing required key \"num_local_experts\"");
}
END_TEST

START_TEST(document)
{
    expect("{\"model_type\": ", FMOE_STATUS_PARSE_ERROR, "config.json:1:15: unexpected token near end of file");
    expect("[1]", INVALID, "config.json: expected an object, got an array");
    expect("{\"a\": 1, \"a\": 2}", FMOE_STATUS_PARSE_ERROR, "config.json:1:12: duplicate object key near '\"a\"'");
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_load("/nonexistent/config.json", &m), FMOE_STATUS_NOT_FOUND);
    ck_assert_str_eq(fmoe_last_error(), "/nonexistent/config.json: No such file or directory");
    ck_assert_int_eq(fmoe_model_config_parse("{}", 2, NULL, NULL), INVALID);
    ck_assert_str_eq(fmoe_last_error(), "fmoe_model_config_parse: out must not be NULL");
}
END_TEST

START_TEST(family)
{
    expect("{\"hidden_size\": 4}", INVALID,
           "config.json: missing required key \"architectures\" or \"model_type\" (which model is this?)");
    expect(WITH(qwen2, "model_type", "\"llama\""), UNSUPPORTED,
           "config.json: model_type: \"llama\" is not a supported MoE model; expected one of mixtral, qwen2_moe, "
           "qwen3_moe, deepseek_v2, deepseek_v3, kimi_k2, deepseek_v4, gpt_oss, llama4, llama4_text");
    expect(WITH(mixtral, "architectures", "[\"LlamaForCausalLM\"]"), UNSUPPORTED,
           "config.json: architectures: \"LlamaForCausalLM\" is not a supported MoE architecture; expected one of "
           "MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV2ForCausalLM, "
           "DeepseekV3ForCausalLM, DeepseekV4ForCausalLM, GptOssForCausalLM, Llama4ForConditionalGeneration, "
           "Llama4ForCausalLM");
    expect(WITH(mixtral, "model_type", "\"qwen3_moe\""), INVALID,
           "config.json: model_type: \"qwen3_moe\" does not match architectures (MixtralForCausalLM), expected "
           "\"mixtral\"");
    expect(WITH(mixtral, "model_type", "3"), INVALID, "config.json: model_type: expected a string, got 3");
    expect(WITH(mixtral, "architectures", "[\"MixtralForCausalLM\", 7]"), INVALID,
           "config.json: architectures[1]: expected a string, got 7");
    /* A later known entry is used, as vLLM does. */
    expect_ok(WITH(mixtral, "architectures", "[\"Foo\", \"MixtralForCausalLM\"]"));
}
END_TEST

START_TEST(types_and_ranges)
{
    expect(WITH(mixtral, "num_local_experts", "\"8\""), INVALID,
           "config.json: num_local_experts: expected an integer, got \"8\"");
    expect(WITH(mixtral, "num_local_experts", "8.0"), INVALID,
           "config.json: num_local_experts: expected an integer, got 8.0");
    expect(WITH(mixtral, "num_local_experts", "0"), INVALID,
           "config.json: num_local_experts: expected an integer in [1, 65536], got 0");
    expect(WITH(mixtral, "hidden_size", NULL), INVALID, "config.json: missing required key \"hidden_size\"");
    expect(WITH(mixtral, "num_hidden_layers", "5000"), INVALID,
           "config.json: num_hidden_layers: expected an integer in [1, 4096], got 5000");
    expect(WITH(mixtral, "num_experts_per_tok", "9"), INVALID,
           "config.json: num_experts_per_tok: 9 exceeds num_local_experts = 8");
    expect(WITH(mixtral, "torch_dtype", "\"float8_e4m3fn\""), INVALID,
           "config.json: torch_dtype: expected \"float32\", \"bfloat16\" or \"float16\", got \"float8_e4m3fn\"");
    expect(WITH(mixtral, "dtype", "\"float16\""), INVALID,
           "config.json: dtype: \"float16\" disagrees with torch_dtype = \"bfloat16\" (two spellings of one setting)");
    expect(WITH(mixtral, "hidden_act", "\"gelu\""), UNSUPPORTED,
           "config.json: hidden_act: \"gelu\" is not supported; the experts of this family are implemented for "
           "\"silu\" only");
    expect(WITH(mixtral, "hidden_act", "1"), INVALID, "config.json: hidden_act: expected a string, got 1");
}
END_TEST

START_TEST(qwen)
{
    expect(WITH(qwen2, "shared_expert_intermediate_size", NULL), INVALID,
           "config.json: missing required key \"shared_expert_intermediate_size\"");
    expect(WITH(qwen2, "norm_topk_prob", "1"), INVALID, "config.json: norm_topk_prob: expected true or false, got 1");
    expect(WITH(qwen2, "decoder_sparse_step", "0"), INVALID,
           "config.json: decoder_sparse_step: expected an integer in [1, 4096], got 0");
    expect(WITH(qwen2, "mlp_only_layers", "[0, 4]"), INVALID,
           "config.json: mlp_only_layers[1]: expected a layer index in [0, 3], got 4");
    expect(WITH(qwen2, "mlp_only_layers", "[\"1\"]"), INVALID,
           "config.json: mlp_only_layers[0]: expected a layer index in [0, 3], got \"1\"");
    expect(WITH(qwen2, "mlp_only_layers", "3"), INVALID, "config.json: mlp_only_layers: expected an array, got 3");
    expect(WITH(qwen2, "num_experts_per_tok", "9"), INVALID,
           "config.json: num_experts_per_tok: 9 exceeds num_experts = 8");
}
END_TEST

START_TEST(deepseek_routing)
{
    expect(WITH(deepseek, "scoring_func", "\"sqrtsoftplus\""), UNSUPPORTED,
           "config.json: scoring_func: \"sqrtsoftplus\" is not supported; expected \"softmax\" or \"sigmoid\"");
    expect(WITH(deepseek, "topk_method", "\"aux_free\""), UNSUPPORTED,
           "config.json: topk_method: \"aux_free\" is not supported; expected \"greedy\", \"group_limited_greedy\" "
           "or \"noaux_tc\"");
    expect(WITH(deepseek, "topk_method", "\"greedy\""), UNSUPPORTED,
           "config.json: topk_method: \"greedy\" with n_group = 4 and topk_group = 2: transformers ignores the "
           "groups, vLLM applies them; expected topk_group = n_group or \"group_limited_greedy\"");
    expect(WITH(deepseek, "n_group", "3"), INVALID, "config.json: n_group: 3 does not divide n_routed_experts = 16");
    expect(WITH(deepseek, "topk_group", "5"), INVALID, "config.json: topk_group: 5 exceeds n_group = 4");
    expect(WITH(deepseek, "n_group", "16"), INVALID,
           "config.json: num_experts_per_tok: 4 exceeds the 2 experts in topk_group = 2 groups of 1");
}
END_TEST

START_TEST(deepseek_values)
{
    expect(WITH(deepseek, "routed_scaling_factor", "0"), INVALID,
           "config.json: routed_scaling_factor: expected a number > 0, got 0");
    expect(WITH(deepseek, "routed_scaling_factor", "\"2.5\""), INVALID,
           "config.json: routed_scaling_factor: expected a number, got \"2.5\"");
    expect(WITH(deepseek, "n_shared_experts", NULL), INVALID,
           "config.json: missing required key \"n_shared_experts\" (null if the model has none)");
    expect(WITH(deepseek, "first_k_dense_replace", "5"), INVALID,
           "config.json: first_k_dense_replace: expected an integer in [0, 4], got 5");
    expect(WITH(deepseek, "moe_layer_freq", "0"), INVALID,
           "config.json: moe_layer_freq: expected an integer in [1, 4096], got 0");
    expect(WITH(deepseek, "n_routed_experts", "null"), INVALID,
           "config.json: missing required key \"n_routed_experts\" (or \"num_local_experts\")");
    expect(WITH(deepseek, "num_experts_per_tok", "17"), INVALID,
           "config.json: num_experts_per_tok: 17 exceeds n_routed_experts = 16");
}
END_TEST

START_TEST(gpt_oss_values)
{
    expect(WITH(gpt_oss, "swiglu_limit", "0"), INVALID, "config.json: swiglu_limit: expected a number > 0, got 0");
    expect(WITH(gpt_oss, "swiglu_limit", "true"), INVALID, "config.json: swiglu_limit: expected a number, got true");
    expect(WITH(gpt_oss, "experts_per_token", "4"), INVALID,
           "config.json: experts_per_token: 4 disagrees with num_experts_per_tok = 2 (two spellings of one setting)");
    /* The older spelling alone is enough. */
    const char *older = build(gpt_oss, 6, "num_experts_per_tok", NULL);
    char json[4096];
    snprintf(json, sizeof json, "%.*s, \"experts_per_token\": 3}", (int)strlen(older) - 1, older);
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_parse(json, strlen(json), NULL, &m), FMOE_STATUS_OK);
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 0, &c), FMOE_STATUS_OK);
    ck_assert_uint_eq(c.top_k, 3);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(llama4_values)
{
    expect(WITH(llama4_text, "num_experts_per_tok", "2"), UNSUPPORTED,
           "config.json: num_experts_per_tok: 2 is not supported; Llama-4 applies the router weight on the input, "
           "which needs 1");
    expect(WITH(llama4_text, "moe_layers", "[1, 2]"), INVALID,
           "config.json: moe_layers[1]: expected 3 (interleave_moe_layer_step = 2), got 2");
    expect(WITH(llama4_text, "moe_layers", "[1]"), INVALID,
           "config.json: moe_layers: lists 1 layers, expected 2 (interleave_moe_layer_step = 2)");
    expect(WITH(llama4_text, "moe_layers", "[1, 3, 5]"), INVALID,
           "config.json: moe_layers[2]: expected no more than 2 entries (interleave_moe_layer_step = 2), got 5");
    expect("{\"architectures\": [\"Llama4ForConditionalGeneration\"], \"model_type\": \"llama4\"}", INVALID,
           "config.json: missing required key \"text_config\"");
    expect("{\"model_type\": \"llama4\", \"text_config\": {\"num_hidden_layers\": 2, \"num_local_experts\": \"16\"}}",
           INVALID, "config.json: text_config.num_local_experts: expected an integer, got \"16\"");
    expect("{\"model_type\": \"llama4\", \"text_config\": {\"num_hidden_layers\": 2, \"num_local_experts\": 16}}",
           INVALID, "config.json: text_config: missing required key \"num_experts_per_tok\"");
    expect("{\"model_type\": \"llama4\", \"text_config\": {\"torch_dtype\": \"int8\"}}", INVALID,
           "config.json: text_config.torch_dtype: expected \"float32\", \"bfloat16\" or \"float16\", got \"int8\"");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, bases_are_valid);
    tcase_add_test(tc, expert_count_spellings);
    tcase_add_test(tc, document);
    tcase_add_test(tc, family);
    tcase_add_test(tc, types_and_ranges);
    tcase_add_test(tc, qwen);
    tcase_add_test(tc, deepseek_routing);
    tcase_add_test(tc, deepseek_values);
    tcase_add_test(tc, gpt_oss_values);
    tcase_add_test(tc, llama4_values);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 10);
}
