/*
 * tests/registry/test_load_scales.c - what the loader writes for every
 * scale layout (fixture_scales declares one parameter of each), on TP rank 1
 * of 2: scalar pairs, channel / group scales narrowed along their shard
 * axis, a transposed checkpoint, an act-order scale loaded in full, and the
 * errors for shapes TP cannot split. Reads the parameter buffers directly.
 */
#include "core/layer.h"
#include "tests/plugins/fixture_scales.h"
#include "tests/registry/registry_fixtures.h"

enum { E = 4, H = 8, I = 8, G = FS_GROUP, TP = 2, RANK = 1, IP = I / TP };

/* A checkpoint value that says where it came from. */
static float v(int e, int shard, int r, int c)
{
    return (float)(1000 * e + 100 * shard + 10 * r + c);
}

static fmoe_layer *scales_layer(fmoe_context **ctx)
{
    const char *files[] = {FIXTURE_SO_FIXTURE_SCALES};
    *ctx = fx_context(files, 1, NULL, 0, NULL);
    fmoe_layer_config cfg = fx_layer();
    cfg.num_experts = E;
    cfg.hidden_size = H;
    cfg.intermediate_size = I;
    cfg.tp_size = TP;
    cfg.tp_rank = RANK;
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_F32);
    fmoe_layer *layer = NULL;
    ck_assert_msg(fmoe_layer_create(*ctx, &cfg, &s, NULL, &layer) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    return layer;
}

/* Load a [rows, cols] checkpoint tensor filled with v(e, shard, r, c). */
static fmoe_status load2(fmoe_layer *layer, const char *name, int e, int shard, int rows, int cols)
{
    float buf[64];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            buf[r * cols + c] = v(e, shard, r, c);
    const int64_t shape[2] = {rows, cols};
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, shape, buf);
    return fmoe_layer_load(layer, name, e, shard, &t, NULL);
}

static const float *param(const fmoe_layer *layer, int which)
{
    return layer->params[which].tensor.data;
}

START_TEST(scalar_pairs_and_scalars)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    for (int e = 0; e < E; e++) {
        float w1 = v(e, 1, 0, 0), w3 = v(e, 3, 0, 0), w2 = v(e, 2, 0, 0);
        const int64_t one[1] = {1};
        fmoe_tensor t;
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 1, one, &w1); /* shape [1] */
        ck_assert_int_eq(fmoe_layer_load(layer, "w13_tensor_scale", e, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &w3); /* 0-d */
        ck_assert_int_eq(fmoe_layer_load(layer, "w13_tensor_scale", e, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
        fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &w2);
        ck_assert_int_eq(fmoe_layer_load(layer, "w2_tensor_scale", e, FMOE_SHARD_W2, &t, NULL), FMOE_STATUS_OK);
    }
    for (int e = 0; e < E; e++) {
        ck_assert_float_eq(param(layer, FS_W13_TENSOR)[2 * e], v(e, 1, 0, 0));
        ck_assert_float_eq(param(layer, FS_W13_TENSOR)[2 * e + 1], v(e, 3, 0, 0));
        ck_assert_float_eq(param(layer, FS_W2_TENSOR)[e], v(e, 2, 0, 0));
    }
    /* A per-tensor scale is one number. */
    float two[2] = {1.5f, 2.5f};
    const int64_t shape2[1] = {2};
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 1, shape2, two);
    ck_assert_int_eq(fmoe_layer_load(layer, "w2_tensor_scale", 0, FMOE_SHARD_W2, &t, NULL),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "w2_tensor_scale expert 0 (w2): tensor [2] has 1 dims, expected 0 ([])");
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

/* w1 and w3 each carry the expert's input scale; they must agree. */
START_TEST(input_scales_of_w1_and_w3_agree)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    float a = 0.125f, b = 0.125f, c = 0.25f;
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &a);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_input_scale", 2, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &b);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_input_scale", 2, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
    ck_assert_float_eq(param(layer, FS_W13_INPUT)[2], 0.125f);
    /* Reloading w3 with another value now disagrees with w1. */
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &c);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_input_scale", 2, FMOE_SHARD_W3, &t, NULL),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "w13_input_scale expert 2: the input scales of w1 and w3 must be equal (they "
                                        "quantize the same input), got 0.125 from w1 and 0.25 from w3");
    /* Expert 1: w3 first, then a different w1. */
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_input_scale", 1, FMOE_SHARD_W3, &t, NULL), FMOE_STATUS_OK);
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &a);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_input_scale", 1, FMOE_SHARD_W1, &t, NULL),
                     FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "w13_input_scale expert 1: the input scales of w1 and w3 must be equal (they "
                                        "quantize the same input), got 0.25 from w3 and 0.125 from w1");
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(channel_and_group_scales_narrowed_for_tp)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    for (int e = 0; e < E; e++) {
        ck_assert_int_eq(load2(layer, "w13_channel_scale", e, FMOE_SHARD_W1, I, 1), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w13_channel_scale", e, FMOE_SHARD_W3, I, 1), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w2_channel_scale", e, FMOE_SHARD_W2, H, 1), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w13_group_scale", e, FMOE_SHARD_W1, I, H / G), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w13_group_scale", e, FMOE_SHARD_W3, I, H / G), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w2_group_scale", e, FMOE_SHARD_W2, H, I / G), FMOE_STATUS_OK);
    }
    for (int e = 0; e < E; e++) {
        const float *ch = param(layer, FS_W13_CHANNEL) + e * 2 * IP;
        const float *grp = param(layer, FS_W13_GROUP) + e * 2 * IP * (H / G);
        for (int r = 0; r < IP; r++) {
            /* rank 1 holds rows IP..2IP-1 of each half */
            ck_assert_float_eq(ch[r], v(e, 1, IP + r, 0));
            ck_assert_float_eq(ch[IP + r], v(e, 3, IP + r, 0));
            for (int c = 0; c < H / G; c++) {
                ck_assert_float_eq(grp[r * (H / G) + c], v(e, 1, IP + r, c));
                ck_assert_float_eq(grp[(IP + r) * (H / G) + c], v(e, 3, IP + r, c));
            }
        }
        const float *w2c = param(layer, FS_W2_CHANNEL) + e * H;
        const float *w2g = param(layer, FS_W2_GROUP) + e * H * (IP / G);
        for (int h = 0; h < H; h++) {
            ck_assert_float_eq(w2c[h], v(e, 2, h, 0)); /* output channels: whole */
            for (int c = 0; c < IP / G; c++)
                ck_assert_float_eq(w2g[h * (IP / G) + c], v(e, 2, h, IP / G + c));
        }
    }
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(transposed_and_load_full)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    for (int e = 0; e < E; e++) {
        /* Checkpoint [I, H/g]; the parameter slice is [H/g, 2I_pp]. */
        ck_assert_int_eq(load2(layer, "w13_transposed_scale", e, FMOE_SHARD_W1, I, H / G), FMOE_STATUS_OK);
        ck_assert_int_eq(load2(layer, "w13_transposed_scale", e, FMOE_SHARD_W3, I, H / G), FMOE_STATUS_OK);
        /* Act-order w2 scales cover the full I on every rank. */
        ck_assert_int_eq(load2(layer, "w2_actorder_scale", e, FMOE_SHARD_W2, I / G, H), FMOE_STATUS_OK);
    }
    for (int e = 0; e < E; e++) {
        const float *tr = param(layer, FS_W13_TRANSPOSED) + e * (H / G) * 2 * IP;
        for (int g = 0; g < H / G; g++)
            for (int r = 0; r < IP; r++) {
                ck_assert_float_eq(tr[g * 2 * IP + r], v(e, 1, IP + r, g));
                ck_assert_float_eq(tr[g * 2 * IP + IP + r], v(e, 3, IP + r, g));
            }
        const float *full = param(layer, FS_W2_FULL) + e * (I / G) * H;
        for (int g = 0; g < I / G; g++)
            for (int h = 0; h < H; h++)
                ck_assert_float_eq(full[g * H + h], v(e, 2, g, h));
    }
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(tp_cannot_split_odd_rows)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    /* 7 rows do not split over 2 ranks: an error, never a floor. */
    ck_assert_int_eq(load2(layer, "w13_channel_scale", 0, FMOE_SHARD_W1, 7, 1), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "w13_channel_scale expert 0 (w1): axis 0 has 7 rows, which tp_size 2 does not divide");
    ck_assert_int_eq(load2(layer, "w13_channel_scale", 0, FMOE_SHARD_W1, 10, 1), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(
        fmoe_last_error(),
        "w13_channel_scale expert 0 (w1): tensor gives [5, 1] after TP narrowing, the layer expects [4, 1]");
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

START_TEST(finalize_counts_scale_halves)
{
    fmoe_context *ctx;
    fmoe_layer *layer = scales_layer(&ctx);
    float w1 = 0.5f;
    fmoe_tensor t;
    fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &w1);
    ck_assert_int_eq(fmoe_layer_load(layer, "w13_tensor_scale", 2, FMOE_SHARD_W1, &t, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_layer_finalize(layer), FMOE_STATUS_BAD_STATE);
    ck_assert_msg(strstr(fmoe_last_error(), "w13_tensor_scale expert 1 (w1), w13_tensor_scale expert 1 (w3), "
                                            "w13_tensor_scale expert 2 (w3), w13_tensor_scale expert 3 (w1)"),
                  "%s", fmoe_last_error());
    fmoe_layer_destroy(layer);
    fmoe_context_destroy(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("load_scales");
    TCase *tc = tcase_create("load_scales");
    tcase_add_test(tc, scalar_pairs_and_scalars);
    tcase_add_test(tc, input_scales_of_w1_and_w3_agree);
    tcase_add_test(tc, channel_and_group_scales_narrowed_for_tp);
    tcase_add_test(tc, transposed_and_load_full);
    tcase_add_test(tc, tp_cannot_split_odd_rows);
    tcase_add_test(tc, finalize_counts_scale_halves);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
