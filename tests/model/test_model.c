/*
 * tests/model/test_model.c - model config.json reading (core/model): the
 * real values of each family's released config (tests/data/model_configs),
 * its MoE layer pattern and its checkpoint names.
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"
#include "test_util.h"

static fmoe_model *load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/model_configs/%s", FMOE_TEST_DATA_DIR, name);
    fmoe_model *m = NULL;
    fmoe_status st = fmoe_model_config_load(path, &m);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s: %s", name, fmoe_last_error());
    ck_assert_ptr_nonnull(m);
    return m;
}

static fmoe_layer_config layer_config(const fmoe_model *m, uint32_t layer)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    fmoe_status st = fmoe_model_layer_config(m, layer, &c);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(fmoe_layer_config_validate(&c), FMOE_STATUS_OK);
    return c;
}

static fmoe_model_names names_of(const fmoe_model *m, uint32_t layer)
{
    fmoe_model_names n;
    memset(&n, 0xAB, sizeof n);
    n.struct_size = sizeof n;
    fmoe_status st = fmoe_model_layer_names(m, layer, &n);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_last_error());
    return n;
}

static fmoe_model_shared shared_of(const fmoe_model *m, uint32_t layer)
{
    fmoe_model_shared s;
    memset(&s, 0xAB, sizeof s);
    s.struct_size = sizeof s;
    fmoe_status st = fmoe_model_layer_shared(m, layer, &s);
    ck_assert_msg(st == FMOE_STATUS_OK, "%s", fmoe_last_error());
    return s;
}

/* Parallel fields and max_num_tokens stay at the defaults. */
static void assert_parallel_defaults(const fmoe_layer_config *c)
{
    ck_assert_uint_eq(c->tp_size, 1);
    ck_assert_uint_eq(c->tp_rank, 0);
    ck_assert_uint_eq(c->ep_size, 1);
    ck_assert_uint_eq(c->ep_rank, 0);
    ck_assert_int_eq(c->placement, FMOE_PLACEMENT_LINEAR);
    ck_assert_uint_eq(c->enable_eplb, 0);
    ck_assert_uint_eq(c->num_redundant_experts, 0);
    ck_assert_uint_eq(c->max_num_tokens, 8192);
}

static void assert_silu_plain(const fmoe_layer_config *c)
{
    ck_assert_int_eq(c->activation, FMOE_ACT_SILU);
    ck_assert_uint_eq(c->gated, 1);
    ck_assert_uint_eq(c->has_bias, 0);
    ck_assert(c->swiglu_limit == 0.0f);
    ck_assert_uint_eq(c->apply_router_weight_on_input, 0);
}

static void assert_no_fused(const fmoe_model_names *n)
{
    ck_assert_ptr_null(n->fused_gate_up);
    ck_assert_ptr_null(n->fused_gate_up_bias);
    ck_assert_ptr_null(n->fused_down);
    ck_assert_ptr_null(n->fused_down_bias);
    ck_assert_ptr_null(n->mxfp4_gate_up_blocks);
    ck_assert_ptr_null(n->mxfp4_gate_up_scales);
    ck_assert_ptr_null(n->mxfp4_down_blocks);
    ck_assert_ptr_null(n->mxfp4_down_scales);
}

START_TEST(mixtral_8x7b)
{
    fmoe_model *m = load("mixtral-8x7b.json");
    ck_assert_str_eq(fmoe_model_family(m), "mixtral");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 32);
    ck_assert_int_eq(fmoe_model_dtype(m), FMOE_DTYPE_BF16);
    for (uint32_t i = 0; i < 32; i++)
        ck_assert(fmoe_model_layer_is_moe(m, i));
    ck_assert(!fmoe_model_layer_is_moe(m, 32));
    fmoe_layer_config c = layer_config(m, 31);
    ck_assert_uint_eq(c.num_experts, 8);
    ck_assert_uint_eq(c.top_k, 2);
    ck_assert_uint_eq(c.hidden_size, 4096);
    ck_assert_uint_eq(c.intermediate_size, 14336);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.renormalize, 1);
    ck_assert_uint_eq(c.grouped_topk, 0);
    ck_assert_uint_eq(c.has_correction_bias, 0);
    ck_assert(c.routed_scaling_factor == 1.0f);
    ck_assert_int_eq(c.act_dtype, FMOE_DTYPE_BF16);
    assert_silu_plain(&c);
    assert_parallel_defaults(&c);

    fmoe_model_names n = names_of(m, 3);
    ck_assert_str_eq(n.router_weight, "model.layers.3.block_sparse_moe.gate.weight");
    ck_assert_ptr_null(n.router_bias);
    ck_assert_ptr_null(n.correction_bias);
    ck_assert_str_eq(n.experts, "model.layers.3.block_sparse_moe.experts");
    ck_assert_str_eq(n.expert_gate, "w1");
    ck_assert_str_eq(n.expert_up, "w3");
    ck_assert_str_eq(n.expert_down, "w2");
    assert_no_fused(&n);
    ck_assert_ptr_null(n.shared);
    ck_assert_ptr_null(n.shared_gate_weight);
    fmoe_model_shared s = shared_of(m, 3);
    ck_assert_uint_eq(s.count, 0);
    ck_assert_uint_eq(s.intermediate_size, 0);
    ck_assert_uint_eq(s.gated, 0);

    fmoe_expert_modules em;
    fmoe_expert_modules_init(&em);
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, 3, &em), FMOE_STATUS_OK);
    ck_assert_str_eq(em.prefix, "model.layers.3.block_sparse_moe.experts");
    ck_assert_uint_eq(em.num_experts, 8);
    ck_assert_str_eq(em.gate, "w1");
    ck_assert_str_eq(em.up, "w3");
    ck_assert_str_eq(em.down, "w2");
    ck_assert_uint_eq(em.fused, 0);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(qwen15_moe_a27b)
{
    fmoe_model *m = load("qwen1.5-moe-a2.7b.json");
    ck_assert_str_eq(fmoe_model_family(m), "qwen2_moe");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 24);
    for (uint32_t i = 0; i < 24; i++)
        ck_assert(fmoe_model_layer_is_moe(m, i));
    fmoe_layer_config c = layer_config(m, 0);
    ck_assert_uint_eq(c.num_experts, 60);
    ck_assert_uint_eq(c.top_k, 4);
    ck_assert_uint_eq(c.hidden_size, 2048);
    ck_assert_uint_eq(c.intermediate_size, 1408);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.renormalize, 0);
    ck_assert_uint_eq(c.grouped_topk, 0);
    assert_silu_plain(&c);

    fmoe_model_shared s = shared_of(m, 0);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.intermediate_size, 5632);
    ck_assert_uint_eq(s.gated, 1);
    fmoe_model_names n = names_of(m, 7);
    ck_assert_str_eq(n.router_weight, "model.layers.7.mlp.gate.weight");
    ck_assert_str_eq(n.experts, "model.layers.7.mlp.experts");
    ck_assert_str_eq(n.expert_gate, "gate_proj");
    ck_assert_str_eq(n.expert_up, "up_proj");
    ck_assert_str_eq(n.expert_down, "down_proj");
    ck_assert_str_eq(n.shared, "model.layers.7.mlp.shared_expert");
    ck_assert_str_eq(n.shared_gate_weight, "model.layers.7.mlp.shared_expert_gate.weight");
    ck_assert_ptr_null(n.correction_bias);
    assert_no_fused(&n);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(qwen2_57b_a14b)
{
    fmoe_model *m = load("qwen2-57b-a14b.json");
    ck_assert_str_eq(fmoe_model_family(m), "qwen2_moe");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 28);
    fmoe_layer_config c = layer_config(m, 27);
    ck_assert_uint_eq(c.num_experts, 64);
    ck_assert_uint_eq(c.top_k, 8);
    ck_assert_uint_eq(c.hidden_size, 3584);
    ck_assert_uint_eq(c.intermediate_size, 2560);
    ck_assert_uint_eq(c.renormalize, 0);
    fmoe_model_shared s = shared_of(m, 27);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.intermediate_size, 20480);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(qwen3_30b_a3b)
{
    fmoe_model *m = load("qwen3-30b-a3b.json");
    ck_assert_str_eq(fmoe_model_family(m), "qwen3_moe");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 48);
    for (uint32_t i = 0; i < 48; i++)
        ck_assert(fmoe_model_layer_is_moe(m, i));
    fmoe_layer_config c = layer_config(m, 47);
    ck_assert_uint_eq(c.num_experts, 128);
    ck_assert_uint_eq(c.top_k, 8);
    ck_assert_uint_eq(c.hidden_size, 2048);
    ck_assert_uint_eq(c.intermediate_size, 768);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.renormalize, 1);
    assert_silu_plain(&c);
    fmoe_model_shared s = shared_of(m, 47);
    ck_assert_uint_eq(s.count, 0);
    fmoe_model_names n = names_of(m, 47);
    ck_assert_str_eq(n.router_weight, "model.layers.47.mlp.gate.weight");
    ck_assert_str_eq(n.experts, "model.layers.47.mlp.experts");
    ck_assert_ptr_null(n.shared);
    ck_assert_ptr_null(n.shared_gate_weight);
    fmoe_model_destroy(m);
}
END_TEST

/* decoder_sparse_step and mlp_only_layers, as vLLM's Qwen2/3 decoder layer. */
START_TEST(qwen_layer_pattern)
{
    const char *json = "{\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 8, \"num_experts\": 4,"
                       " \"num_experts_per_tok\": 2, \"hidden_size\": 16, \"moe_intermediate_size\": 8,"
                       " \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3, 5]}";
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_parse(json, strlen(json), NULL, &m), FMOE_STATUS_OK);
    /* (i + 1) % 2 == 0 -> 1, 3, 5, 7; minus 3 and 5. */
    const int expect[8] = {0, 1, 0, 0, 0, 0, 0, 1};
    for (uint32_t i = 0; i < 8; i++)
        ck_assert_int_eq(fmoe_model_layer_is_moe(m, i), expect[i]);
    ck_assert_int_eq(fmoe_model_dtype(m), FMOE_DTYPE_F32); /* no torch_dtype */
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 3, &c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "config.json: layer 3 is a dense layer, not a MoE layer "
                                        "(decoder_sparse_step = 2, mlp_only_layers = [3, 5])");
    ck_assert_int_eq(fmoe_model_layer_config(m, 8, &c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "config.json: layer 8 is out of range (num_hidden_layers = 8)");
    fmoe_model_names n = {.struct_size = sizeof n};
    ck_assert_int_eq(fmoe_model_layer_names(m, 0, &n), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_model_layer_names(m, 7, &n), FMOE_STATUS_OK);
    ck_assert_str_eq(n.router_weight, "model.layers.7.mlp.gate.weight");
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(deepseek_v2_lite)
{
    fmoe_model *m = load("deepseek-v2-lite.json");
    ck_assert_str_eq(fmoe_model_family(m), "deepseek_v2");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 27);
    ck_assert(!fmoe_model_layer_is_moe(m, 0));
    for (uint32_t i = 1; i < 27; i++)
        ck_assert(fmoe_model_layer_is_moe(m, i));
    fmoe_layer_config c = layer_config(m, 1);
    ck_assert_uint_eq(c.num_experts, 64);
    ck_assert_uint_eq(c.top_k, 6);
    ck_assert_uint_eq(c.hidden_size, 2048);
    ck_assert_uint_eq(c.intermediate_size, 1408);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.renormalize, 0);
    ck_assert_uint_eq(c.grouped_topk, 0); /* n_group = 1 */
    ck_assert_uint_eq(c.has_correction_bias, 0);
    ck_assert(c.routed_scaling_factor == 1.0f);
    assert_silu_plain(&c);
    fmoe_model_shared s = shared_of(m, 1);
    ck_assert_uint_eq(s.count, 2);
    ck_assert_uint_eq(s.intermediate_size, 2816);
    ck_assert_uint_eq(s.gated, 0);
    fmoe_model_names n = names_of(m, 1);
    ck_assert_str_eq(n.router_weight, "model.layers.1.mlp.gate.weight");
    ck_assert_ptr_null(n.correction_bias);
    ck_assert_str_eq(n.shared, "model.layers.1.mlp.shared_experts");
    ck_assert_ptr_null(n.shared_gate_weight);

    fmoe_layer_config d;
    fmoe_layer_config_init(&d);
    ck_assert_int_eq(fmoe_model_layer_config(m, 0, &d), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     FMOE_TEST_DATA_DIR "/model_configs/deepseek-v2-lite.json: layer 0 is a "
                                        "dense layer, not a MoE layer (first_k_dense_replace = 1, moe_layer_freq = 1)");
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(deepseek_v3)
{
    fmoe_model *m = load("deepseek-v3.json");
    ck_assert_str_eq(fmoe_model_family(m), "deepseek_v3");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 61);
    for (uint32_t i = 0; i < 61; i++)
        ck_assert_int_eq(fmoe_model_layer_is_moe(m, i), i >= 3);
    fmoe_layer_config c = layer_config(m, 60);
    ck_assert_uint_eq(c.num_experts, 256);
    ck_assert_uint_eq(c.top_k, 8);
    ck_assert_uint_eq(c.hidden_size, 7168);
    ck_assert_uint_eq(c.intermediate_size, 2048);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SIGMOID);
    ck_assert_uint_eq(c.renormalize, 1);
    ck_assert_uint_eq(c.grouped_topk, 1);
    ck_assert_uint_eq(c.num_expert_group, 8);
    ck_assert_uint_eq(c.topk_group, 4);
    ck_assert_uint_eq(c.has_correction_bias, 1);
    ck_assert(c.routed_scaling_factor == 2.5f);
    ck_assert_int_eq(c.act_dtype, FMOE_DTYPE_BF16);
    assert_silu_plain(&c);
    assert_parallel_defaults(&c);
    fmoe_model_shared s = shared_of(m, 3);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.intermediate_size, 2048);
    fmoe_model_names n = names_of(m, 3);
    ck_assert_str_eq(n.router_weight, "model.layers.3.mlp.gate.weight");
    ck_assert_str_eq(n.correction_bias, "model.layers.3.mlp.gate.e_score_correction_bias");
    ck_assert_ptr_null(n.router_bias);
    ck_assert_str_eq(n.experts, "model.layers.3.mlp.experts");
    ck_assert_str_eq(n.expert_gate, "gate_proj");
    ck_assert_str_eq(n.shared, "model.layers.3.mlp.shared_experts");
    assert_no_fused(&n);
    fmoe_model_destroy(m);
}
END_TEST

/* Absent optional keys take the transformers class defaults (V3: 8/4
 * groups, noaux_tc, sigmoid, renormalize, 2.5, first 3 layers dense). */
START_TEST(deepseek_v3_defaults)
{
    const char *json = "{\"model_type\": \"deepseek_v3\", \"num_hidden_layers\": 5, \"n_routed_experts\": 64,"
                       " \"num_experts_per_tok\": 8, \"hidden_size\": 64, \"moe_intermediate_size\": 32,"
                       " \"n_shared_experts\": null}";
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_parse(json, strlen(json), "v3.json", &m), FMOE_STATUS_OK);
    ck_assert(!fmoe_model_layer_is_moe(m, 2));
    ck_assert(fmoe_model_layer_is_moe(m, 3));
    fmoe_layer_config c = layer_config(m, 4);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SIGMOID);
    ck_assert_uint_eq(c.renormalize, 1);
    ck_assert_uint_eq(c.grouped_topk, 1);
    ck_assert_uint_eq(c.num_expert_group, 8);
    ck_assert_uint_eq(c.topk_group, 4);
    ck_assert_uint_eq(c.has_correction_bias, 1);
    ck_assert(c.routed_scaling_factor == 2.5f);
    fmoe_model_shared s = shared_of(m, 4);
    ck_assert_uint_eq(s.count, 0);
    fmoe_model_names n = names_of(m, 4);
    ck_assert_ptr_null(n.shared);
    fmoe_model_destroy(m);
}
END_TEST

/* DeepSeek-V2 (not Lite): group-limited greedy, 160 experts in 8 groups. */
START_TEST(deepseek_v2_grouped)
{
    const char *json = "{\"architectures\": [\"DeepseekV2ForCausalLM\"], \"model_type\": \"deepseek_v2\","
                       " \"num_hidden_layers\": 60, \"n_routed_experts\": 160, \"num_experts_per_tok\": 6,"
                       " \"hidden_size\": 5120, \"moe_intermediate_size\": 1536, \"n_shared_experts\": 2,"
                       " \"first_k_dense_replace\": 1, \"n_group\": 8, \"topk_group\": 3,"
                       " \"topk_method\": \"group_limited_greedy\", \"routed_scaling_factor\": 16,"
                       " \"torch_dtype\": \"bfloat16\"}";
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_parse(json, strlen(json), NULL, &m), FMOE_STATUS_OK);
    fmoe_layer_config c = layer_config(m, 1);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.grouped_topk, 1);
    ck_assert_uint_eq(c.num_expert_group, 8);
    ck_assert_uint_eq(c.topk_group, 3);
    ck_assert_uint_eq(c.has_correction_bias, 0);
    ck_assert_uint_eq(c.renormalize, 0);
    ck_assert(c.routed_scaling_factor == 16.0f);
    fmoe_model_shared s = shared_of(m, 1);
    ck_assert_uint_eq(s.intermediate_size, 3072);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(gpt_oss_20b)
{
    fmoe_model *m = load("gpt-oss-20b.json");
    ck_assert_str_eq(fmoe_model_family(m), "gpt_oss");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 24);
    ck_assert(fmoe_model_layer_is_moe(m, 0));
    ck_assert(fmoe_model_layer_is_moe(m, 23));
    fmoe_layer_config c = layer_config(m, 5);
    ck_assert_uint_eq(c.num_experts, 32);
    ck_assert_uint_eq(c.top_k, 4);
    ck_assert_uint_eq(c.hidden_size, 2880);
    ck_assert_uint_eq(c.intermediate_size, 2880);
    ck_assert_int_eq(c.activation, FMOE_ACT_SWIGLUOAI);
    ck_assert_uint_eq(c.gated, 1);
    ck_assert_uint_eq(c.has_bias, 1);
    ck_assert(c.swiglu_alpha == 1.702f);
    ck_assert(c.swiglu_limit == 7.0f);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SOFTMAX);
    ck_assert_uint_eq(c.renormalize, 1);
    ck_assert_uint_eq(c.apply_router_weight_on_input, 0);
    ck_assert_int_eq(c.act_dtype, FMOE_DTYPE_BF16);

    fmoe_model_names n = names_of(m, 5);
    ck_assert_str_eq(n.router_weight, "model.layers.5.mlp.router.weight");
    ck_assert_str_eq(n.router_bias, "model.layers.5.mlp.router.bias");
    ck_assert_ptr_null(n.correction_bias);
    ck_assert_str_eq(n.experts, "model.layers.5.mlp.experts");
    ck_assert_ptr_null(n.expert_gate);
    ck_assert_ptr_null(n.expert_up);
    ck_assert_ptr_null(n.expert_down);
    ck_assert_str_eq(n.fused_gate_up, "model.layers.5.mlp.experts.gate_up_proj");
    ck_assert_str_eq(n.fused_gate_up_bias, "model.layers.5.mlp.experts.gate_up_proj_bias");
    ck_assert_str_eq(n.fused_down, "model.layers.5.mlp.experts.down_proj");
    ck_assert_str_eq(n.fused_down_bias, "model.layers.5.mlp.experts.down_proj_bias");
    ck_assert_uint_eq(n.fused_interleaved, 1);
    ck_assert_str_eq(n.mxfp4_gate_up_blocks, "model.layers.5.mlp.experts.gate_up_proj_blocks");
    ck_assert_str_eq(n.mxfp4_gate_up_scales, "model.layers.5.mlp.experts.gate_up_proj_scales");
    ck_assert_str_eq(n.mxfp4_down_blocks, "model.layers.5.mlp.experts.down_proj_blocks");
    ck_assert_str_eq(n.mxfp4_down_scales, "model.layers.5.mlp.experts.down_proj_scales");
    ck_assert_ptr_null(n.shared);
    fmoe_model_shared s = shared_of(m, 5);
    ck_assert_uint_eq(s.count, 0);

    fmoe_expert_modules em;
    fmoe_expert_modules_init(&em);
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, 5, &em), FMOE_STATUS_OK);
    ck_assert_str_eq(em.prefix, "model.layers.5.mlp.experts");
    ck_assert_uint_eq(em.fused, 1);
    fmoe_model_destroy(m);
}
END_TEST

START_TEST(llama4_scout)
{
    fmoe_model *m = load("llama4-scout-17b-16e.json");
    ck_assert_str_eq(fmoe_model_family(m), "llama4");
    ck_assert_uint_eq(fmoe_model_layer_count(m), 48);
    ck_assert_int_eq(fmoe_model_dtype(m), FMOE_DTYPE_BF16);
    for (uint32_t i = 0; i < 48; i++)
        ck_assert(fmoe_model_layer_is_moe(m, i));
    fmoe_layer_config c = layer_config(m, 0);
    ck_assert_uint_eq(c.num_experts, 16);
    ck_assert_uint_eq(c.top_k, 1);
    ck_assert_uint_eq(c.hidden_size, 5120);
    ck_assert_uint_eq(c.intermediate_size, 8192);
    ck_assert_int_eq(c.scoring, FMOE_SCORING_SIGMOID);
    ck_assert_uint_eq(c.renormalize, 0);
    ck_assert_uint_eq(c.apply_router_weight_on_input, 1);
    ck_assert_uint_eq(c.grouped_topk, 0);
    ck_assert_int_eq(c.activation, FMOE_ACT_SILU);
    ck_assert_uint_eq(c.has_bias, 0);

    fmoe_model_names n = names_of(m, 0);
    ck_assert_str_eq(n.router_weight, "language_model.model.layers.0.feed_forward.router.weight");
    ck_assert_ptr_null(n.router_bias);
    ck_assert_str_eq(n.experts, "language_model.model.layers.0.feed_forward.experts");
    ck_assert_str_eq(n.fused_gate_up, "language_model.model.layers.0.feed_forward.experts.gate_up_proj");
    ck_assert_str_eq(n.fused_down, "language_model.model.layers.0.feed_forward.experts.down_proj");
    ck_assert_ptr_null(n.fused_gate_up_bias);
    ck_assert_ptr_null(n.fused_down_bias);
    ck_assert_uint_eq(n.fused_interleaved, 0);
    ck_assert_str_eq(n.expert_gate, "gate_proj");
    ck_assert_ptr_null(n.mxfp4_gate_up_blocks);
    ck_assert_str_eq(n.shared, "language_model.model.layers.0.feed_forward.shared_expert");
    ck_assert_ptr_null(n.shared_gate_weight);
    fmoe_model_shared s = shared_of(m, 0);
    ck_assert_uint_eq(s.count, 1);
    ck_assert_uint_eq(s.intermediate_size, 8192);
    ck_assert_uint_eq(s.gated, 0);
    fmoe_model_destroy(m);
}
END_TEST

/* Maverick-style interleaving, text-only architecture. */
START_TEST(llama4_text_interleaved)
{
    const char *json = "{\"architectures\": [\"Llama4ForCausalLM\"], \"model_type\": \"llama4_text\","
                       " \"num_hidden_layers\": 6, \"num_local_experts\": 128, \"num_experts_per_tok\": 1,"
                       " \"hidden_size\": 5120, \"intermediate_size\": 8192, \"intermediate_size_mlp\": 16384,"
                       " \"interleave_moe_layer_step\": 2, \"moe_layers\": [1, 3, 5], \"dtype\": \"bfloat16\"}";
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_parse(json, strlen(json), NULL, &m), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_model_family(m), "llama4_text");
    ck_assert_int_eq(fmoe_model_dtype(m), FMOE_DTYPE_BF16);
    for (uint32_t i = 0; i < 6; i++)
        ck_assert_int_eq(fmoe_model_layer_is_moe(m, i), i % 2 == 1);
    fmoe_model_names n = names_of(m, 5);
    ck_assert_str_eq(n.router_weight, "model.layers.5.feed_forward.router.weight");
    ck_assert_str_eq(n.fused_gate_up, "model.layers.5.feed_forward.experts.gate_up_proj");
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    ck_assert_int_eq(fmoe_model_layer_config(m, 4, &c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "config.json: layer 4 is a dense layer, not a MoE layer (interleave_moe_layer_step = 2)");
    fmoe_model_destroy(m);
}
END_TEST

/* A caller compiled against a shorter struct gets only what fits. */
START_TEST(struct_sizes)
{
    fmoe_model *m = load("mixtral-8x7b.json");
    fmoe_model_names n;
    memset(&n, 0, sizeof n);
    n.struct_size = offsetof(fmoe_model_names, router_weight);
    ck_assert_int_eq(fmoe_model_layer_names(m, 0, &n), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(n.router_weight);
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.struct_size = 8;
    ck_assert_int_eq(fmoe_model_layer_config(m, 0, &c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(fmoe_model_layer_config(NULL, 0, &c), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(fmoe_model_family(NULL));
    ck_assert_uint_eq(fmoe_model_layer_count(NULL), 0);
    ck_assert_int_eq(fmoe_model_layer_is_moe(NULL, 0), 0);
    fmoe_model_destroy(NULL);
    fmoe_model_destroy(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("families");
    tcase_add_test(tc, mixtral_8x7b);
    tcase_add_test(tc, qwen15_moe_a27b);
    tcase_add_test(tc, qwen2_57b_a14b);
    tcase_add_test(tc, qwen3_30b_a3b);
    tcase_add_test(tc, qwen_layer_pattern);
    tcase_add_test(tc, deepseek_v2_lite);
    tcase_add_test(tc, deepseek_v3);
    tcase_add_test(tc, deepseek_v3_defaults);
    tcase_add_test(tc, deepseek_v2_grouped);
    tcase_add_test(tc, gpt_oss_20b);
    tcase_add_test(tc, llama4_scout);
    tcase_add_test(tc, llama4_text_interleaved);
    tcase_add_test(tc, struct_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 13);
}
