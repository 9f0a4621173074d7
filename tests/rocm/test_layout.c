/*
 * tests/rocm/test_layout.c - what the rocm plugin's query serves and why
 * not (layout.h), the parameters it declares for each scheme (the
 * reference's names and shapes), and its workspace: buffers aligned and
 * disjoint, moe_sorting's capacity the same formula as sorting.c.
 */
#include <string.h>

#include "plugins/rocm/layout.h"
#include "plugins/rocm/sorting.h"
#include "tests/test_util.h"

static fmoe_scheme bf16(void)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = FMOE_DTYPE_BF16;
    s.w_symmetric = 1;
    s.a_symmetric = 1;
    return s;
}

static fmoe_scheme fp8(int32_t w, int32_t a, int dynamic)
{
    fmoe_scheme s = bf16();
    s.w_dtype = s.a_dtype = FMOE_DTYPE_FP8_E4M3FN;
    s.w_strategy = w;
    s.a_strategy = a;
    s.a_dynamic = (uint32_t)dynamic;
    s.w_scale_dtype = FMOE_DTYPE_F32;
    if (w == FMOE_QSTRATEGY_BLOCK) {
        s.w_block_n = s.w_block_k = 128;
        s.a_group_size = 128;
    }
    return s;
}

static fmoe_layer_config config(void)
{
    fmoe_layer_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.num_experts = 8;
    c.top_k = 2;
    c.hidden_size = 256;
    c.intermediate_size = 128;
    c.activation = FMOE_ACT_SILU;
    c.gated = 1;
    c.act_dtype = FMOE_DTYPE_BF16;
    c.tp_size = 1;
    c.ep_size = 1;
    c.max_num_tokens = 64;
    return c;
}

START_TEST(schemes_served)
{
    char why[256];
    fmoe_scheme s = bf16();
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), FMRO_Q_BF16);
    s = fp8(FMOE_QSTRATEGY_TENSOR, FMOE_QSTRATEGY_TENSOR, 0);
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), FMRO_Q_TENSOR);
    s = fp8(FMOE_QSTRATEGY_CHANNEL, FMOE_QSTRATEGY_TOKEN, 1);
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), FMRO_Q_CHANNEL);
    s = fp8(FMOE_QSTRATEGY_BLOCK, FMOE_QSTRATEGY_GROUP, 1);
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), FMRO_Q_BLOCK);
    s.w_scale_dtype = FMOE_DTYPE_UE8M0;
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "UE8M0"));
    s = fp8(FMOE_QSTRATEGY_CHANNEL, FMOE_QSTRATEGY_TOKEN, 0);
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), -1);
    s = bf16();
    s.w_dtype = FMOE_DTYPE_F16;
    ck_assert_int_eq(fmro_scheme_quant(&s, why, sizeof why), -1);
}
END_TEST

START_TEST(configs_refused_with_reason)
{
    char why[256];
    fmoe_scheme s = bf16();
    fmoe_layer_config c = config();
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), 0);
    c.activation = FMOE_ACT_SWIGLUOAI;
    c.swiglu_limit = 7.0f;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), 0);
    c.activation = FMOE_ACT_GELU_TANH;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "SiLU, GELU and gpt-oss SwiGLU"));
    c = config();
    c.gated = 0;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "gated"));
    c = config();
    c.act_dtype = FMOE_DTYPE_F16;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
    c = config();
    c.apply_router_weight_on_input = 1;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "doweight_stage1"));
    c.top_k = 1;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), 0);
    c = config();
    c.enable_eplb = 1;
    c.num_redundant_experts = 2;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
    c = config();
    c.top_k = 256;
    ck_assert_int_eq(fmro_check_config(&c, &s, why, sizeof why), -1);
}
END_TEST

START_TEST(declared_like_the_reference)
{
    char why[256];
    fmoe_param_desc d[FMRO_MAX_PARAMS];
    uint32_t n = 0;
    fmoe_layer_config c = config();
    fmoe_scheme s = fp8(FMOE_QSTRATEGY_BLOCK, FMOE_QSTRATEGY_GROUP, 1);
    c.has_bias = 1;
    ck_assert_int_eq(fmro_declare(&c, &s, 200, 128, 4, d, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(d[0].name, "w13_weight");
    ck_assert_int_eq(d[0].shape[1], 256);
    ck_assert_int_eq(d[0].shape[2], 200);
    ck_assert_str_eq(d[2].name, "w13_weight_scale");
    ck_assert_int_eq(d[2].shape[0], 4);
    ck_assert_int_eq(d[2].shape[1], 2);
    ck_assert_int_eq(d[2].shape[2], 2);
    ck_assert_str_eq(d[3].name, "w2_weight_scale");
    ck_assert_int_eq(d[3].shape[1], 2);
    ck_assert_int_eq(d[3].shape[2], 1);
    ck_assert_str_eq(d[4].name, "w13_bias");
    ck_assert_int_eq(d[4].dtype, FMOE_DTYPE_BF16);
    /* a block across gate/up is refused with vLLM's words */
    ck_assert_int_eq(fmro_declare(&c, &s, 200, 96, 4, d, &n, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "block_n = 128"));
    s = fp8(FMOE_QSTRATEGY_TENSOR, FMOE_QSTRATEGY_TENSOR, 0);
    c.has_bias = 0;
    ck_assert_int_eq(fmro_declare(&c, &s, 64, 32, 4, d, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(d[4].name, "w13_input_scale");
    ck_assert_int_eq(d[4].shape[1], 2);
    s.a_dynamic = 1;
    ck_assert_int_eq(fmro_declare(&c, &s, 64, 32, 4, d, &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 4);
}
END_TEST

START_TEST(workspace_disjoint)
{
    char why[256];
    fmro_ws ws;
    ck_assert_int_eq(fmro_workspace_layout(1000, 8, 130, 33, 257, FMRO_Q_BLOCK, 128, &ws, why, sizeof why), 0);
    ck_assert_uint_eq(ws.capacity, fmro_sorting_capacity(1000, 8, 257, FMRO_SORT_BLOCK));
    ck_assert_uint_eq(ws.blocks, fmro_sorting_blocks(1000, 8, 257, FMRO_SORT_BLOCK));
    size_t off[] = {ws.counts,        ws.starts,    ws.pos_of,   ws.sorted_ids, ws.sorted_w,
                    ws.sorted_expert, ws.num_valid, ws.amax,     ws.a1,         ws.a1_scale,
                    ws.act,           ws.a2,        ws.a2_scale, ws.y,          ws.total};
    size_t C = ws.capacity, need[] = {257 * 4,    257 * 4,      8000 * 4,   C * 4,  C * 4,     ws.blocks * 4, 8, 8,
                                      1000 * 160, 1000 * 2 * 4, C * 64 * 2, C * 64, C * 1 * 4, C * 130 * 4};
    for (size_t i = 0; i + 1 < sizeof off / sizeof off[0]; i++) {
        ck_assert_uint_eq(off[i] % 256, 0);
        ck_assert_uint_ge(off[i + 1], off[i] + need[i]);
    }
    ck_assert_uint_eq(fmro_pad(33), 64);
    ck_assert_uint_eq(fmro_pad(64), 64);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rocm_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, schemes_served);
    tcase_add_test(tc, configs_refused_with_reason);
    tcase_add_test(tc, declared_like_the_reference);
    tcase_add_test(tc, workspace_disjoint);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
