/*
 * tests/reference_quant/test_refq_errors.c - what the quantized reference
 * methods refuse and declare: every size rule of spec/interface.md §8.4 with
 * its exact message, schemes the query refuses, a bad value at finalize,
 * and the declared parameter table of one scheme (names, shapes, flags as
 * seen through fmoe_layer_param).
 */
#include <string.h>

#include "tests/reference_quant/harness.h"

static fmoe_layer_config cfg_of(uint32_t H, uint32_t I, uint32_t tp)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = 4;
    c.top_k = 2;
    c.hidden_size = H;
    c.intermediate_size = I;
    c.act_dtype = FMOE_DTYPE_F32;
    c.tp_size = tp;
    c.max_num_tokens = 4;
    return c;
}

/* Creating (H, I, tp) for `key` fails with `status` and text containing `msg`. */
static void refused(const char *key, uint32_t H, uint32_t I, uint32_t tp, fmoe_status status, const char *msg)
{
    fmoe_context *ctx = refq_context(NULL);
    fmoe_layer_config c = cfg_of(H, I, tp);
    fmoe_layer *layer = NULL;
    fmoe_status st = refq_create_layer(ctx, &c, key, &layer);
    ck_assert_msg(st == status, "%s H=%u I=%u tp=%u: status %d, expected %d (%s)", key, H, I, tp, st, status,
                  fmoe_last_error());
    ck_assert_msg(strstr(fmoe_last_error(), msg) != NULL, "%s: message\n  %s\nlacks\n  %s", key, fmoe_last_error(),
                  msg);
    fmoe_context_destroy(ctx);
}

static void accepted(const char *key, uint32_t H, uint32_t I, uint32_t tp)
{
    fmoe_context *ctx = refq_context(NULL);
    fmoe_layer_config c = cfg_of(H, I, tp);
    fmoe_layer *layer = NULL;
    ck_assert_msg(refq_create_layer(ctx, &c, key, &layer) == FMOE_STATUS_OK, "%s: %s", key, fmoe_last_error());
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}

START_TEST(fp8_block_sizes)
{
    refused("fp8e4m3:block48x32/fp8e4m3:group32:dynamic", 64, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "The output_size of gate's and up's weight = 64 is not divisible by weight quantization block_n = 48.");
    refused("fp8e4m3:block32x64/fp8e4m3:group64:dynamic", 64, 64, 2, FMOE_STATUS_INVALID_ARGUMENT,
            "The input_size of down's weight = 32 is not divisible by weight quantization block_k = 64.");
    accepted("fp8e4m3:block32x64/fp8e4m3:group64:dynamic", 64, 64, 1); /* one rank: a partial K block is fine */
}
END_TEST

START_TEST(wna16_sizes)
{
    refused("int4:group64", 80, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "WNA16: hidden_size 80 is not divisible by group_size 64");
    refused("int4:group64", 64, 64, 2, FMOE_STATUS_INVALID_ARGUMENT,
            "WNA16: intermediate_size_per_partition 32 is not divisible by group_size 64 (scale groups would cross "
            "TP shards)");
    accepted("int4:group64:actorder", 64, 64, 2); /* act-order loads w2 scales in full */
    refused("int4:group64:actorder", 64, 96, 2, FMOE_STATUS_INVALID_ARGUMENT,
            "WNA16: intermediate_size 96 is not divisible by group_size 64");
    refused("int4:channel", 36, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "WNA16: hidden_size 36 is not divisible by the int32 pack factor 8");
    refused("int8:channel", 64, 36, 2, FMOE_STATUS_INVALID_ARGUMENT,
            "WNA16: intermediate_size_per_partition 18 is not divisible by the int32 pack factor 4");
}
END_TEST

START_TEST(fp4_and_mx_sizes)
{
    refused("fp4:tgroup16:scale-fp8e4m3", 40, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "NVFP4: hidden_size 40 is not divisible by the scale group of 16");
    refused("fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic", 64, 48, 2, FMOE_STATUS_INVALID_ARGUMENT,
            "NVFP4: intermediate_size_per_partition 24 is not divisible by the scale group of 16 (a group would "
            "straddle gate/up or a TP shard)");
    refused("fp4:group32:scale-ue8m0", 48, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "MXFP4: hidden_size 48 is not divisible by the scale group of 32");
    refused("fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic", 64, 48, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "MXFP8: intermediate_size_per_partition 48 is not divisible by the scale group of 32");
}
END_TEST

START_TEST(w4a8_sizes)
{
    refused("int4:group32:scale-bf16/int8:token:dynamic:asym", 48, 64, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "W4A8: group_size 32 must divide hidden_size 48 and intermediate_size_per_partition 64");
    refused("int4:group16/fp8e4m3:token:dynamic", 64, 36, 1, FMOE_STATUS_INVALID_ARGUMENT,
            "W4A8: group_size 16 must divide hidden_size 64 and intermediate_size_per_partition 36");
}
END_TEST

START_TEST(unserved_schemes_refused_with_reason)
{
    /* vLLM: "Only symmetric quantization is supported for MoE" (INT8 W8A8). */
    refused("int8:channel/int8:token:dynamic:asym", 64, 64, 1, FMOE_STATUS_UNSUPPORTED,
            "no reference method for 'int8:channel/int8:token:dynamic:asym'");
    refused("fp8e5m2:tensor/fp8e5m2:tensor:dynamic", 64, 64, 1, FMOE_STATUS_UNSUPPORTED, "reference");
}
END_TEST

START_TEST(arm_int4_range_checked_at_finalize)
{
    fmoe_context *ctx = refq_context(NULL);
    fmoe_layer_config c = cfg_of(32, 32, 1);
    c.num_experts = 1;
    c.top_k = 1;
    fmoe_layer *layer = NULL;
    ck_assert_int_eq(refq_create_layer(ctx, &c, "int4:channel/int8:token:dynamic:asym", &layer), FMOE_STATUS_OK);
    static int8_t w[64 * 32];
    static float s[64];
    for (int i = 0; i < 64 * 32; i++)
        w[i] = (int8_t)(i % 15 - 7);
    for (int i = 0; i < 64; i++)
        s[i] = 0.01f;
    w[5] = 9; /* not an int4 value */
    fmoe_tensor t;
    int64_t w13[2] = {32, 32}, w2[2] = {32, 32}, s13[2] = {32, 1};
    fmoe_tensor_init(&t, FMOE_DTYPE_INT8, 2, w13, w);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 0, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight", 0, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
    fmoe_tensor_init(&t, FMOE_DTYPE_INT8, 2, w2, w + 1024);
    ck_assert_int_eq(fmoe_layer_load(layer, "w2_weight", 0, FMOE_SHARD_W2, &t, NULL), FMOE_STATUS_OK);
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, s13, s);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight_scale", 0, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_weight_scale", 0, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_load(layer, "w2_weight_scale", 0, FMOE_SHARD_W2, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_finalize(layer), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "w13_weight: int4 values must be in [-8, 7]") != NULL, "%s",
                  fmoe_last_error());
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* The WNA16 table of spec/interface.md §8.4 as the layer reports it. */
START_TEST(wna16_declared_params)
{
    fmoe_context *ctx = refq_context(NULL);
    fmoe_layer_config c = cfg_of(64, 128, 2); /* I per rank 64 */
    fmoe_layer *layer = NULL;
    ck_assert_int_eq(refq_create_layer(ctx, &c, "int4:group32:actorder:asym", &layer), FMOE_STATUS_OK);
    struct {
        const char *name;
        fmoe_dtype dtype;
        int64_t d1, d2;
    } want[] = {
        {"w13_weight_packed", FMOE_DTYPE_INT32, 64 / 8, 128},    {"w2_weight_packed", FMOE_DTYPE_INT32, 64 / 8, 64},
        {"w13_weight_scale", FMOE_DTYPE_F32, 64 / 32, 128},      {"w2_weight_scale", FMOE_DTYPE_F32, 128 / 32, 64},
        {"w13_weight_zero_point", FMOE_DTYPE_INT32, 2, 128 / 8}, {"w2_weight_zero_point", FMOE_DTYPE_INT32, 4, 64 / 8},
        {"w13_weight_g_idx", FMOE_DTYPE_INT32, 64, 0},           {"w2_weight_g_idx", FMOE_DTYPE_INT32, 64, 0},
    };
    ck_assert_uint_eq(fmoe_layer_param_count(layer), 8);
    for (uint32_t i = 0; i < 8; i++) {
        fmoe_param_info info = {.struct_size = sizeof info};
        ck_assert_int_eq(fmoe_layer_param(layer, i, &info), FMOE_STATUS_OK);
        ck_assert_str_eq(info.name, want[i].name);
        ck_assert_int_eq(info.dtype, want[i].dtype);
        ck_assert_int_eq(info.shape[0], 4);
        ck_assert_int_eq(info.shape[1], want[i].d1);
        if (want[i].d2)
            ck_assert_int_eq(info.shape[2], want[i].d2);
    }
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reference_quant_errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, fp8_block_sizes);
    tcase_add_test(tc, wna16_sizes);
    tcase_add_test(tc, fp4_and_mx_sizes);
    tcase_add_test(tc, w4a8_sizes);
    tcase_add_test(tc, unserved_schemes_refused_with_reason);
    tcase_add_test(tc, arm_int4_range_checked_at_finalize);
    tcase_add_test(tc, wna16_declared_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 7);
}
