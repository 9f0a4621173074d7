/*
 * tests/cuda/test_cuda_layout.c - the CUDA plugin's host-side logic, no GPU
 * needed (runs in CI):
 *   - scheme acceptance and the reasons for refusals;
 *   - declared parameters equal the reference plugin's (name, dtype, shape,
 *     role, shard axis) for every served scheme, so the same checkpoints load;
 *   - the workspace layout: aligned, disjoint, large enough;
 *   - the row-tile bound covers every routing;
 *   - the built plugin loads and probes without a GPU (score 0 + reason)
 *     and refuses CPU devices in query;
 *   - its init takes the declared options and refuses bad ones by name.
 * Usage: test_cuda_layout [REFERENCE_PLUGIN_SO CUDA_PLUGIN_SO] (default:
 * the plugins this build made).
 */
#include <check.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/cuda/cuda_api.h"
#include "plugins/cuda/layout.h"
#include "tests/cpu/direct_plugin.h"

typedef struct loaded {
    const fmoe_plugin *plugin;
    void *state;
} loaded;

/* The plugins' paths: the build's (compiled in), or the command line's
 * (a build packed and unpacked elsewhere, as tools/device/pack.sh does for
 * the device machine, has its plugins at other paths). */
static const char *reference_path = FMCU_TEST_REFERENCE_PLUGIN;
static const char *cuda_path = FMCU_TEST_CUDA_PLUGIN;

static loaded load_plugin(const char *path)
{
    loaded l = {dp_load(path), NULL};
    ck_assert_int_eq(dp_init(l.plugin, NULL, 0, &l.state), FMOE_STATUS_OK);
    return l;
}

/* ------------------------------------------------------------------------ */

static fmoe_scheme scheme_of(fmoe_dtype w, int32_t ws, fmoe_dtype sd, uint32_t bn, uint32_t bk, int32_t as,
                             uint32_t dyn)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = w;
    s.w_strategy = ws;
    s.w_scale_dtype = sd;
    s.w_block_n = bn;
    s.w_block_k = bk;
    if (ws != FMOE_QSTRATEGY_NONE) {
        s.a_dtype = w;
        s.a_strategy = as;
        s.a_group_size = as == FMOE_QSTRATEGY_GROUP ? bk : 0;
        s.a_dynamic = dyn;
        s.a_symmetric = 1;
        s.w_symmetric = 1;
    }
    return s;
}

#define FP8 FMOE_DTYPE_FP8_E4M3FN

static fmoe_scheme served[14];
static const int n_served = 14;

/* A 4-bit or int weight scheme (weight-only unless a4: fp4 W4A4, activations
 * on the weights' grid). */
static fmoe_scheme wq_scheme(fmoe_dtype w, int32_t ws, uint32_t group, fmoe_dtype sd, int sym, int actorder, int a4)
{
    fmoe_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.w_dtype = w;
    s.w_strategy = ws;
    s.w_group_size = group;
    s.w_scale_dtype = sd;
    s.w_symmetric = (uint32_t)sym;
    s.w_actorder = actorder ? FMOE_ACTORDER_GROUP : FMOE_ACTORDER_NONE;
    if (a4) {
        s.a_dtype = w;
        s.a_strategy = ws;
        s.a_group_size = group;
        s.a_dynamic = 1;
        s.a_symmetric = 1;
    }
    return s;
}

static void make_served(void)
{
    served[0] = scheme_of(FMOE_DTYPE_BF16, FMOE_QSTRATEGY_NONE, 0, 0, 0, 0, 0);
    served[1] = scheme_of(FP8, FMOE_QSTRATEGY_TENSOR, FMOE_DTYPE_F32, 0, 0, FMOE_QSTRATEGY_TENSOR, 0);
    served[2] = scheme_of(FP8, FMOE_QSTRATEGY_TENSOR, FMOE_DTYPE_F32, 0, 0, FMOE_QSTRATEGY_TENSOR, 1);
    served[3] = scheme_of(FP8, FMOE_QSTRATEGY_CHANNEL, FMOE_DTYPE_F32, 0, 0, FMOE_QSTRATEGY_TOKEN, 1);
    served[4] = scheme_of(FP8, FMOE_QSTRATEGY_BLOCK, FMOE_DTYPE_F32, 128, 128, FMOE_QSTRATEGY_GROUP, 1);
    served[5] = scheme_of(FP8, FMOE_QSTRATEGY_BLOCK, FMOE_DTYPE_UE8M0, 128, 128, FMOE_QSTRATEGY_GROUP, 1);
    served[6] = wq_scheme(FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, 128, FMOE_DTYPE_BF16, 1, 0, 0);
    served[7] = wq_scheme(FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_F32, 0, 1, 0);
    served[8] = wq_scheme(FMOE_DTYPE_INT8, FMOE_QSTRATEGY_CHANNEL, 0, FMOE_DTYPE_F16, 1, 0, 0);
    served[9] = wq_scheme(FMOE_DTYPE_INT8, FMOE_QSTRATEGY_GROUP, 64, FMOE_DTYPE_F32, 0, 0, 0);
    served[10] = wq_scheme(FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0, 1, 0, 0);
    served[11] = wq_scheme(FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_TENSOR_GROUP, 16, FP8, 1, 0, 0);
    served[12] = wq_scheme(FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_TENSOR_GROUP, 16, FP8, 1, 0, 1);
    served[13] = wq_scheme(FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0, 1, 0, 1);
}

static fmoe_layer_config config(uint32_t gated, uint32_t bias, uint32_t tp, fmoe_dtype act);

START_TEST(schemes)
{
    char why[256];
    make_served();
    const int expect[14] = {FMCU_Q_NONE,  FMCU_Q_TENSOR, FMCU_Q_TENSOR,   FMCU_Q_CHANNEL, FMCU_Q_BLOCK,
                            FMCU_Q_BLOCK, FMCU_Q_WNA16,  FMCU_Q_WNA16,    FMCU_Q_WNA16,   FMCU_Q_WNA16,
                            FMCU_Q_MXFP4, FMCU_Q_NVFP4,  FMCU_Q_NVFP4_A4, FMCU_Q_MXFP4_A4};
    for (int i = 0; i < n_served; i++)
        ck_assert_int_eq(fmcu_scheme_quant(&served[i], why, sizeof why), expect[i]);
    fmoe_scheme f16 = scheme_of(FMOE_DTYPE_F16, FMOE_QSTRATEGY_NONE, 0, 0, 0, 0, 0);
    ck_assert_int_eq(fmcu_scheme_quant(&f16, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "bf16"));
    fmoe_scheme b32 = scheme_of(FP8, FMOE_QSTRATEGY_BLOCK, FMOE_DTYPE_F32, 128, 32, FMOE_QSTRATEGY_GROUP, 1);
    ck_assert_int_eq(fmcu_scheme_quant(&b32, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "block_k"));
    fmoe_scheme chan_static = scheme_of(FP8, FMOE_QSTRATEGY_CHANNEL, FMOE_DTYPE_F32, 0, 0, FMOE_QSTRATEGY_TOKEN, 0);
    ck_assert_int_eq(fmcu_scheme_quant(&chan_static, why, sizeof why), -1);
    fmoe_scheme int4 = scheme_of(FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, FMOE_DTYPE_BF16, 0, 0, 0, 0);
    ck_assert_int_eq(fmcu_scheme_quant(&int4, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "multiple of 16"));
    /* Refused 4-bit and int schemes: W4A8, MXFP4 W4A4 with static activation
     * scales, act-order fp4. */
    fmoe_scheme w4a8 = wq_scheme(FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, 128, FMOE_DTYPE_F32, 1, 0, 0);
    w4a8.a_dtype = FP8;
    w4a8.a_strategy = FMOE_QSTRATEGY_TOKEN;
    ck_assert_int_eq(fmcu_scheme_quant(&w4a8, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "weight-only"));
    fmoe_scheme mx4 = wq_scheme(FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0, 1, 0, 1);
    mx4.a_dynamic = 0;
    ck_assert_int_eq(fmcu_scheme_quant(&mx4, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "W4A4 (dynamic group32 fp4 activations)"));
    fmoe_scheme g48 = wq_scheme(FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, 40, FMOE_DTYPE_F32, 1, 0, 0);
    ck_assert_int_eq(fmcu_scheme_quant(&g48, why, sizeof why), -1);
    /* MXFP4 needs bf16 activations (2^e does not fit f16's range). */
    fmoe_layer_config c = config(1, 0, 1, FMOE_DTYPE_F16);
    ck_assert_int_eq(fmcu_check_config(&c, &served[10], 256, 512, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "MXFP4"));
    ck_assert_int_eq(fmcu_check_config(&c, &served[13], 256, 512, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "MXFP4: bf16 activations only"));
    ck_assert_int_eq(fmcu_check_config(&c, &served[11], 256, 512, why, sizeof why), 0);
}
END_TEST

static fmoe_layer_config config(uint32_t gated, uint32_t bias, uint32_t tp, fmoe_dtype act)
{
    fmoe_layer_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.num_experts = 8;
    c.top_k = 2;
    c.hidden_size = 256;
    c.intermediate_size = 512;
    c.activation = FMOE_ACT_SILU;
    c.gated = gated;
    c.has_bias = bias;
    c.swiglu_alpha = 1.702f;
    c.act_dtype = act;
    c.scoring = FMOE_SCORING_SOFTMAX;
    c.renormalize = 1;
    c.routed_scaling_factor = 1.0f;
    c.tp_size = tp;
    c.ep_size = 1;
    c.placement = FMOE_PLACEMENT_LINEAR;
    c.max_num_tokens = 64;
    return c;
}

START_TEST(config_limits)
{
    char why[256];
    make_served();
    fmoe_layer_config c = config(1, 0, 1, FMOE_DTYPE_BF16);
    ck_assert_int_eq(fmcu_check_config(&c, &served[0], 256, 512, why, sizeof why), 0);
    ck_assert_int_eq(fmcu_check_config(&c, &served[0], 250, 512, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "multiples"));
    c.act_dtype = FMOE_DTYPE_F16;
    ck_assert_int_eq(fmcu_check_config(&c, &served[0], 256, 512, why, sizeof why), -1);
    ck_assert_int_eq(fmcu_check_config(&c, &served[4], 256, 512, why, sizeof why), 0);
    c.act_dtype = FMOE_DTYPE_F32;
    ck_assert_int_eq(fmcu_check_config(&c, &served[4], 256, 512, why, sizeof why), -1);
    c = config(1, 0, 1, FMOE_DTYPE_BF16);
    c.top_k = 64;
    ck_assert_int_eq(fmcu_check_config(&c, &served[0], 256, 512, why, sizeof why), -1);
    c = config(1, 0, 1, FMOE_DTYPE_BF16);
    c.num_experts = 4096;
    ck_assert_int_eq(fmcu_check_config(&c, &served[0], 256, 512, why, sizeof why), -1);
}
END_TEST

/* Declared parameters equal the reference plugin's, for every served scheme,
 * gated or not, with and without biases, TP 1 and 2. */
START_TEST(params_match_reference)
{
    make_served();
    loaded ref = load_plugin(reference_path);
    char why[256];
    for (int si = 0; si < n_served; si++)
        for (int variant = 0; variant < 8; variant++) {
            uint32_t gated = variant & 1, bias = (variant >> 1) & 1, tp = (variant & 4) ? 2 : 1;
            fmoe_layer_config c = config(gated, bias, tp, FMOE_DTYPE_BF16);
            uint32_t inter = c.intermediate_size / tp;
            fmoe_query_args q = {.struct_size = sizeof q,
                                 .state = ref.state,
                                 .config = &c,
                                 .scheme = &served[si],
                                 .scheme_key = "test",
                                 .device_kind = FMOE_DEVICE_CPU};
            ck_assert_int_eq(ref.plugin->query(&q), FMOE_STATUS_OK);
            fmoe_create_args ca = {.struct_size = sizeof ca,
                                   .state = ref.state,
                                   .config = &c,
                                   .scheme = &served[si],
                                   .device_kind = FMOE_DEVICE_CPU,
                                   .hidden_size = c.hidden_size,
                                   .intermediate_per_rank = inter,
                                   .num_local_experts = 8,
                                   .num_global_experts = 8};
            ck_assert_int_eq(q.method->create(&ca), FMOE_STATUS_OK);
            fmoe_declare_params_args da = {.struct_size = sizeof da, .instance = ca.instance};
            ck_assert_int_eq(q.method->declare_params(&da), FMOE_STATUS_OK);
            fmoe_param_desc mine[FMCU_MAX_PARAMS];
            uint32_t n = 0;
            ck_assert_int_eq(fmcu_declare(&c, &served[si], c.hidden_size, inter, 8, mine, &n, why, sizeof why), 0);
            ck_assert_uint_eq(n, da.n_params);
            for (uint32_t i = 0; i < n; i++) {
                const fmoe_param_desc *r = da.params[i], *m = &mine[i];
                ck_assert_str_eq(m->name, r->name);
                ck_assert_int_eq(m->dtype, r->dtype);
                ck_assert_uint_eq(m->ndim, r->ndim);
                for (uint32_t d = 0; d < m->ndim; d++)
                    ck_assert_int_eq(m->shape[d], r->shape[d]);
                ck_assert_int_eq(m->projection, r->projection);
                ck_assert_int_eq(m->role, r->role);
                ck_assert_int_eq(m->scale_kind, r->scale_kind);
                ck_assert_int_eq(m->shard_axis, r->shard_axis);
                ck_assert_uint_eq(m->per_expert, r->per_expert);
                ck_assert_uint_eq(m->flags, r->flags);
            }
            fmoe_destroy_args xa = {.struct_size = sizeof xa, .instance = ca.instance};
            q.method->destroy(&xa);
        }
    ref.plugin->shutdown(ref.state);
}
END_TEST

START_TEST(block_shape_refused_like_reference)
{
    make_served();
    char why[256];
    fmoe_param_desc d[FMCU_MAX_PARAMS];
    uint32_t n;
    fmoe_layer_config c = config(1, 0, 1, FMOE_DTYPE_BF16);
    ck_assert_int_eq(fmcu_declare(&c, &served[4], 256, 192, 8, d, &n, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "block_n = 128"));
}
END_TEST

START_TEST(workspace)
{
    fmcu_ws ws;
    for (int32_t quant = FMCU_Q_NONE; quant <= FMCU_Q_BLOCK; quant++) {
        fmcu_workspace_layout(100, 8, 320, 256, 16, 64, quant, 128, &ws);
        const size_t *off = (const size_t *)&ws;
        size_t n = sizeof ws / sizeof(size_t) - 1;
        for (size_t i = 0; i < n; i++) {
            ck_assert_uint_eq(off[i] % 256, 0);
            if (i)
                ck_assert_uint_gt(off[i], off[i - 1]);
        }
        ck_assert_uint_ge(ws.total, ws.logits_stage + 100 * 64 * 4);
        ck_assert_uint_ge(ws.y - ws.act, 800 * 256 * 2);          /* act [P, I] act dtype */
        ck_assert_uint_ge(ws.logits_stage - ws.y, 800 * 320 * 2); /* y [P, H] */
        if (quant == FMCU_Q_BLOCK)
            ck_assert_uint_ge(ws.act - ws.a1_scale, 100 * 3 * 4); /* 320 / 128 -> 3 groups */
    }
    /* The plan's per-expert buffers with more experts than 256 bytes hold. */
    fmcu_workspace_layout(100, 8, 320, 256, 300, 300, FMCU_Q_NONE, 128, &ws);
    ck_assert_uint_ge(ws.plan_sync - ws.offsets, 301 * 4);
    ck_assert_uint_ge(ws.plan_cursor - ws.plan_sync, 301 * 4); /* counts [E] + done counter */
    ck_assert_uint_ge(ws.sorted - ws.plan_cursor, 300 * 4);
}
END_TEST

/* The prefill path's buffers (plugins/cuda/prefill.h): a sorted row per
 * pair of the GEMM1 input (bf16 or fp8) with its scales, a [P, 2I] bf16
 * GEMM1 output, the pair positions, the per-expert GEMM arguments and the
 * CUTLASS workspace, each disjoint from the next. */
START_TEST(prefill_workspace)
{
    fmcu_ws ws;
    for (int32_t quant = FMCU_Q_NONE; quant <= FMCU_Q_BLOCK; quant++) {
        fmcu_workspace_layout(100, 8, 384, 256, 16, 64, quant, 128, &ws);
        size_t P = 800, es = quant == FMCU_Q_NONE ? 2 : 1;
        ck_assert_uint_gt(ws.pf_a1, ws.logits_stage);
        ck_assert_uint_ge(ws.pf_a1_scale - ws.pf_a1, P * 384 * es);
        if (quant == FMCU_Q_BLOCK)
            ck_assert_uint_ge(ws.pf_h - ws.pf_a1_scale, P * 3 * 4); /* 384 / 128 groups per row */
        else if (quant != FMCU_Q_NONE)
            ck_assert_uint_ge(ws.pf_h - ws.pf_a1_scale, P * 4);
        ck_assert_uint_ge(ws.pf_pos - ws.pf_h, P * 2 * 256 * 2);
        ck_assert_uint_ge(ws.pf_args - ws.pf_pos, P * 4);
        ck_assert_uint_ge(ws.pf_scalars - ws.pf_args, 16 * FMCU_PF_ARGS_PER_EXPERT + FMCU_PF_ARGS_FIXED);
        ck_assert_uint_ge(ws.pf_cutlass - ws.pf_scalars, FMCU_PF_SCALARS);
        ck_assert_uint_ge(ws.total - ws.pf_cutlass, FMCU_PF_CUTLASS_WS);
        ck_assert_uint_eq(ws.pf_cutlass % 256, 0);
    }
}
END_TEST

/* The tile bound holds for any assignment of pairs to experts. */
START_TEST(tile_bound)
{
    uint64_t seed = 12345;
    for (int trial = 0; trial < 2000; trial++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t E = 1 + (uint32_t)(seed >> 33) % 300;
        int64_t pairs = 1 + (int64_t)((seed >> 20) % 5000);
        uint32_t bm = fmcu_row_tile(pairs, 1, E);
        ck_assert(bm == 16 || bm == 32 || bm == 64);
        int64_t counts[300] = {0};
        for (int64_t p = 0; p < pairs; p++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            counts[(seed >> 33) % ((trial & 1) ? E : (E < 3 ? E : 3))]++;
        }
        for (uint32_t t = 16; t <= 64; t *= 2) {
            int64_t tiles = 0;
            for (uint32_t e = 0; e < E; e++)
                tiles += (counts[e] + t - 1) / t;
            ck_assert_int_le(tiles, fmcu_max_tiles(pairs, E, t));
            ck_assert_int_le(fmcu_max_tiles(pairs, E, t), fmcu_max_tiles(pairs, E, 16));
        }
    }
    ck_assert_uint_eq(fmcu_row_tile(1, 8, 128), 16);
    ck_assert_uint_eq(fmcu_row_tile(4096, 8, 128), 64);
}
END_TEST

/* The plugin itself, on this machine (CI has no GPU). */
START_TEST(probe_without_gpu_is_not_fatal)
{
    loaded l = load_plugin(cuda_path);
    ck_assert_str_eq(l.plugin->name, "cuda");
    fmoe_device_report reps[4];
    fmoe_device_report *ptrs[4];
    for (int i = 0; i < 4; i++) {
        memset(&reps[i], 0, sizeof reps[i]);
        reps[i].struct_size = sizeof reps[i];
        ptrs[i] = &reps[i];
    }
    fmoe_probe_args pa = {.struct_size = sizeof pa, .state = l.state, .reports = ptrs, .capacity = 4};
    ck_assert_int_eq(l.plugin->probe(&pa), FMOE_STATUS_OK);
    ck_assert_uint_ge(pa.count, 1);
    for (uint32_t i = 0; i < pa.count; i++) {
        ck_assert_int_eq(reps[i].kind, FMOE_DEVICE_CUDA);
        if (!reps[i].available) {
            ck_assert_uint_eq(reps[i].score, 0);
            ck_assert_uint_gt(strlen(reps[i].reason), 0);
        }
    }
    make_served();
    fmoe_layer_config c = config(1, 0, 1, FMOE_DTYPE_BF16);
    fmoe_query_args q = {.struct_size = sizeof q,
                         .state = l.state,
                         .config = &c,
                         .scheme = &served[0],
                         .scheme_key = "bf16",
                         .device_kind = FMOE_DEVICE_CPU};
    ck_assert_int_eq(l.plugin->query(&q), FMOE_STATUS_UNSUPPORTED);
    ck_assert_uint_gt(strlen(q.reason), 0);
    q.device_kind = FMOE_DEVICE_CUDA;
    ck_assert_int_eq(l.plugin->query(&q), FMOE_STATUS_OK);
    ck_assert_ptr_nonnull(q.method);
    ck_assert_ptr_nonnull(q.method->apply);
    ck_assert_ptr_nonnull(q.method->apply_logits);
    l.plugin->shutdown(l.state);
}
END_TEST

/* init takes every declared option (the host passes them all, as text)
 * and refuses a bad value or an unknown name, naming the option. */
START_TEST(init_parses_the_options)
{
    const fmoe_plugin *p = dp_load(cuda_path);
    void *state = NULL;
    static const char *const all[][2] = {
        {"tier", "stream"},
        {"plan_wide_pairs", "1"},
        {"decode_tail", "false"},
        {"decode_fused", "on"},
        {"decode_fused_w13", "registers"},
        {"prefill_warp_rows", "false"},
        {"prefill_half_tiles", "false"},
        {"prefill_tile_order", "counter"},
    };
    ck_assert_int_eq(dp_init(p, all[0], 8, &state), FMOE_STATUS_OK);
    ck_assert_ptr_nonnull(state);
    p->shutdown(state);

    static const char *const bad_tier[][2] = {{"decode_tail", "true"}, {"tier", "fast"}};
    ck_assert_int_eq(dp_init(p, bad_tier[0], 2, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(dp_error, "option 'tier': expected auto, stream, tiled or prefill, got 'fast'");
    static const char *const bad_int[][2] = {{"plan_wide_pairs", "many"}};
    ck_assert_int_eq(dp_init(p, bad_int[0], 1, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(dp_error, "option 'plan_wide_pairs': expected"));
    static const char *const unknown[][2] = {{"isa", "avx2"}};
    ck_assert_int_eq(dp_init(p, unknown[0], 1, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(dp_error, "option 'isa': not an option of the cuda plugin"));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 1 && argc != 3) {
        fprintf(stderr, "usage: test_cuda_layout [REFERENCE_PLUGIN_SO CUDA_PLUGIN_SO]\n");
        return 2;
    }
    if (argc == 3) {
        reference_path = argv[1];
        cuda_path = argv[2];
    }
    Suite *s = suite_create("cuda_layout");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, schemes);
    tcase_add_test(tc, config_limits);
    tcase_add_test(tc, params_match_reference);
    tcase_add_test(tc, block_shape_refused_like_reference);
    tcase_add_test(tc, workspace);
    tcase_add_test(tc, prefill_workspace);
    tcase_add_test(tc, tile_bound);
    tcase_add_test(tc, probe_without_gpu_is_not_fatal);
    tcase_add_test(tc, init_parses_the_options);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
