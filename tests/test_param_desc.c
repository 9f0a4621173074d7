/*
 * tests/test_param_desc.c - fusedmoe/kit/param_desc.h, the parameter
 * records the cuda and rocm plugins declare: every field of one per-expert
 * parameter (nothing left from what the slot held), the per-tensor scales'
 * [E, 2] / [E] shapes, and the bf16 / fp8 W8A8 sets (names, shapes, shard
 * axes, scale dtypes, the block-shape errors), written after what the
 * caller declared before.
 */
#include <string.h>

#include "fusedmoe/kit/param_desc.h"
#include "tests/test_util.h"

/* One declared parameter, compared field by field. */
static void expect(const fmoe_param_desc *d, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role,
                   int32_t scale_kind, int32_t shard_axis, uint32_t ndim, int64_t e, int64_t d1, int64_t d2)
{
    ck_assert_msg(strcmp(d->name, name) == 0, "declared %s where %s was expected", d->name, name);
    ck_assert_uint_eq(d->struct_size, sizeof *d);
    ck_assert_int_eq(d->dtype, dtype);
    ck_assert_int_eq(d->projection, proj);
    ck_assert_int_eq(d->role, role);
    ck_assert_int_eq(d->scale_kind, scale_kind);
    ck_assert_int_eq(d->shard_axis, shard_axis);
    ck_assert_uint_eq(d->ndim, ndim);
    ck_assert_int_eq(d->shape[0], e);
    ck_assert_int_eq(d->shape[1], d1);
    ck_assert_int_eq(d->shape[2], d2);
    ck_assert_int_eq(d->shape[3], 0);
    ck_assert_uint_eq(d->per_expert, 1);
    ck_assert_uint_eq(d->flags, 0);
}

static fmoe_layer_config config(int gated, uint32_t tp_size)
{
    fmoe_layer_config c;
    memset(&c, 0, sizeof c);
    c.gated = (uint32_t)gated;
    c.tp_size = tp_size;
    return c;
}

static fmoe_scheme fp8_scheme(int32_t w_strategy, int32_t a_strategy, int a_dynamic)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = s.a_dtype = FMOE_DTYPE_FP8_E4M3FN;
    s.w_strategy = w_strategy;
    s.a_strategy = a_strategy;
    s.w_scale_dtype = FMOE_DTYPE_F32;
    s.w_symmetric = s.a_symmetric = 1;
    s.a_dynamic = (uint32_t)a_dynamic;
    return s;
}

/* Declares a layer's set from d[start] on; returns where it ended. */
static uint32_t declared(const fmoe_layer_config *c, const fmoe_scheme *s, uint32_t hidden, uint32_t inter, uint32_t E,
                         fmoe_param_desc *d, uint32_t start)
{
    uint32_t k = start;
    char why[256] = "";
    ck_assert_msg(fmoe_declare_fp8_experts(c, s, hidden, inter, E, d, &k, why, sizeof why) == 0, "refused: %s", why);
    return k;
}

START_TEST(test_expert_param_fills_every_field)
{
    fmoe_param_desc d;
    memset(&d, 0xA5, sizeof d); /* a reused slot: nothing of it may survive */
    fmoe_declare_expert_param(&d, "w2_weight", FMOE_DTYPE_BF16, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 7,
                              3, 4096, 1536);
    expect(&d, "w2_weight", FMOE_DTYPE_BF16, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, 7, 4096, 1536);
    memset(&d, 0xA5, sizeof d);
    fmoe_declare_expert_param(&d, "w13_bias", FMOE_DTYPE_F16, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 3, 2,
                              640, 0);
    expect(&d, "w13_bias", FMOE_DTYPE_F16, FMOE_PROJ_W13, FMOE_ROLE_BIAS, FMOE_SCALE_NONE, 0, 2, 3, 640, 0);
}
END_TEST

START_TEST(test_tensor_scale_shapes)
{
    fmoe_param_desc d;
    memset(&d, 0x5A, sizeof d);
    fmoe_declare_tensor_scale(&d, "w13_weight_scale", FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, 1, 5);
    expect(&d, "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_TENSOR, -1, 2, 5,
           2, 0);
    memset(&d, 0x5A, sizeof d);
    fmoe_declare_tensor_scale(&d, "w2_input_scale", FMOE_PROJ_W2, FMOE_ROLE_INPUT_SCALE, 0, 9);
    expect(&d, "w2_input_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_INPUT_SCALE, FMOE_SCALE_TENSOR, -1, 1, 9, 0,
           0);
}
END_TEST

START_TEST(test_bf16_layer)
{
    fmoe_layer_config c = config(0, 1);
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = FMOE_DTYPE_BF16;
    fmoe_param_desc d[8];
    ck_assert_uint_eq(declared(&c, &s, 2048, 768, 4, d, 0), 2);
    /* Not gated: w13 holds only the up projection, [E, I, H]. */
    expect(&d[0], "w13_weight", FMOE_DTYPE_BF16, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, 4, 768, 2048);
    expect(&d[1], "w2_weight", FMOE_DTYPE_BF16, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, 4, 2048, 768);
}
END_TEST

START_TEST(test_fp8_tensor_static_and_dynamic)
{
    fmoe_layer_config c = config(1, 2);
    fmoe_scheme s = fp8_scheme(FMOE_QSTRATEGY_TENSOR, FMOE_QSTRATEGY_TENSOR, 0);
    fmoe_param_desc d[8];
    memset(d, 0xA5, sizeof d);
    d[0].name = "caller's";
    ck_assert_uint_eq(declared(&c, &s, 1024, 256, 6, d, 1), 7); /* after what the caller declared */
    ck_assert_str_eq(d[0].name, "caller's");
    int32_t ws = FMOE_ROLE_WEIGHT_SCALE, is = FMOE_ROLE_INPUT_SCALE, t = FMOE_SCALE_TENSOR;
    expect(&d[1], "w13_weight", FMOE_DTYPE_FP8_E4M3FN, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, 3, 6, 512,
           1024);
    expect(&d[2], "w2_weight", FMOE_DTYPE_FP8_E4M3FN, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, 3, 6, 1024,
           256);
    expect(&d[3], "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, ws, t, -1, 2, 6, 2, 0);
    expect(&d[4], "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, ws, t, -1, 1, 6, 0, 0);
    expect(&d[5], "w13_input_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, is, t, -1, 2, 6, 2, 0);
    expect(&d[6], "w2_input_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, is, t, -1, 1, 6, 0, 0);
    /* Dynamic activations have no input scales; not gated, w13's is [E]. */
    c = config(0, 1);
    s.a_dynamic = 1;
    ck_assert_uint_eq(declared(&c, &s, 1024, 256, 6, d, 0), 4);
    expect(&d[2], "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, ws, t, -1, 1, 6, 0, 0);
}
END_TEST

START_TEST(test_fp8_channel)
{
    fmoe_layer_config c = config(1, 1);
    fmoe_scheme s = fp8_scheme(FMOE_QSTRATEGY_CHANNEL, FMOE_QSTRATEGY_TOKEN, 1);
    fmoe_param_desc d[8];
    ck_assert_uint_eq(declared(&c, &s, 512, 384, 3, d, 0), 4);
    /* One scale per output row: w13's rows split for TP (axis 0), w2's are
     * hidden and not split. */
    expect(&d[2], "w13_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, 0, 3,
           3, 768, 1);
    expect(&d[3], "w2_weight_scale", FMOE_DTYPE_F32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_CHANNEL, -1, 3, 3,
           512, 1);
}
END_TEST

START_TEST(test_fp8_blocks)
{
    fmoe_layer_config c = config(1, 1);
    fmoe_scheme s = fp8_scheme(FMOE_QSTRATEGY_BLOCK, FMOE_QSTRATEGY_GROUP, 1);
    s.w_block_n = 64;
    s.w_block_k = 128;
    s.a_group_size = 128;
    s.w_scale_dtype = FMOE_DTYPE_UE8M0; /* kept, not forced to f32 */
    fmoe_param_desc d[8];
    /* hidden 7000 and (unsharded) intermediate 192 end in ragged blocks of
     * their own: ceil(7000/128) = 55, ceil(7000/64) = 110, ceil(192/128) = 2. */
    ck_assert_uint_eq(declared(&c, &s, 7000, 192, 8, d, 0), 4);
    int32_t ws = FMOE_ROLE_WEIGHT_SCALE, b = FMOE_SCALE_BLOCK;
    expect(&d[2], "w13_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W13, ws, b, 0, 3, 8, 2 * (192 / 64), 55);
    expect(&d[3], "w2_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W2, ws, b, 1, 3, 8, 110, 2);
}
END_TEST

START_TEST(test_fp8_block_errors)
{
    fmoe_scheme s = fp8_scheme(FMOE_QSTRATEGY_BLOCK, FMOE_QSTRATEGY_GROUP, 1);
    s.w_block_n = s.w_block_k = 128;
    fmoe_param_desc d[8];
    uint32_t k = 0;
    char why[256] = "";
    fmoe_layer_config c = config(1, 1);
    ck_assert_int_eq(fmoe_declare_fp8_experts(&c, &s, 1024, 192, 2, d, &k, why, sizeof why), -1);
    ck_assert_str_eq(why, "The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
                          "block_n = 128.");
    /* A ragged down-projection block only matters when TP splits it. */
    s.w_block_n = 64;
    c = config(1, 2);
    ck_assert_int_eq(fmoe_declare_fp8_experts(&c, &s, 1024, 192, 2, d, &k, why, sizeof why), -1);
    ck_assert_str_eq(why,
                     "The input_size of down's weight = 192 is not divisible by weight quantization block_k = 128.");
    ck_assert_uint_eq(k, 0);
}
END_TEST

/* Seeded sizes: the bf16 and fp8 sets' shapes follow E, H, I and gating. */
START_TEST(test_shapes_follow_sizes)
{
    fmoe_rng rng = fmoe_rng_for(1);
    for (int i = 0; i < 200; i++) {
        uint32_t E = 1 + (uint32_t)(fmoe_rng_u64(&rng) % 64), H = 128 * (1 + (uint32_t)(fmoe_rng_u64(&rng) % 64));
        uint32_t I = 128 * (1 + (uint32_t)(fmoe_rng_u64(&rng) % 32));
        int gated = (int)(fmoe_rng_u64(&rng) % 2);
        fmoe_layer_config c = config(gated, 1);
        fmoe_scheme s = fp8_scheme(FMOE_QSTRATEGY_CHANNEL, FMOE_QSTRATEGY_TOKEN, 1);
        fmoe_param_desc d[8];
        ck_assert_uint_eq(declared(&c, &s, H, I, E, d, 0), 4);
        int64_t rI = (gated ? 2 : 1) * (int64_t)I;
        ck_assert_msg(d[0].shape[0] == E && d[0].shape[1] == rI && d[0].shape[2] == H,
                      "seed %llu: w13 [%lld %lld %lld] for E %u H %u I %u gated %d",
                      (unsigned long long)fmoe_test_seed(), (long long)d[0].shape[0], (long long)d[0].shape[1],
                      (long long)d[0].shape[2], E, H, I, gated);
        ck_assert_msg(d[1].shape[0] == E && d[1].shape[1] == H && d[1].shape[2] == I, "seed %llu: w2 shape",
                      (unsigned long long)fmoe_test_seed());
        ck_assert_msg(d[2].shape[1] == rI && d[3].shape[1] == H, "seed %llu: channel scale rows",
                      (unsigned long long)fmoe_test_seed());
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("param_desc");
    TCase *tc = tcase_create("param_desc");
    tcase_add_test(tc, test_expert_param_fills_every_field);
    tcase_add_test(tc, test_tensor_scale_shapes);
    tcase_add_test(tc, test_bf16_layer);
    tcase_add_test(tc, test_fp8_tensor_static_and_dynamic);
    tcase_add_test(tc, test_fp8_channel);
    tcase_add_test(tc, test_fp8_blocks);
    tcase_add_test(tc, test_fp8_block_errors);
    tcase_add_test(tc, test_shapes_follow_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 8);
}
