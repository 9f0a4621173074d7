/*
 * plugins/reference/method_wna16.c - weight-only int4/int8 (W4A16, W8A16),
 * compressed-tensors pack-quantized / GPTQ:
 *   int4|int8:channel | :group<g> [:actorder] [:scale-bf16|f16] [:asym]
 * Activations stay in the act dtype; weights dequantize as
 *   w[n, k] = (q[n, k] - zp[g(k), n]) * scale[g(k), n],   zp = 0 if symmetric,
 *   g(k) = g_idx[k] (act-order) or k / group (channel: one group).
 *
 * Parameters (vLLM CompressedTensorsWNA16MarlinMoEMethod, spec/interface.md
 * §8.4; pf = 32 / bits, G13 = H / g, G2 = I / g or I_full / g with act-order):
 *   w13_weight_packed     int32 [E, H/pf, rI]   transposed (disk: [rI, H/pf])
 *   w2_weight_packed      int32 [E, I/pf, H]    transposed
 *   w13_weight_scale      [E, G13, rI]          transposed
 *   w2_weight_scale       [E, G2, H]            transposed; with act-order
 *                                               loaded in full (LOAD_FULL)
 *   asym: w13_weight_zero_point int32 [E, G13, rI/pf], w2_weight_zero_point
 *         int32 [E, G2, H/pf], transposed, packed along N
 *   act-order: w13_weight_g_idx int32 [E, H], w2_weight_g_idx int32 [E, I]
 *
 * finalize unpacks the words (codecs), converts scales to f32 and, with
 * act-order, sorts K by group (vLLM marlin_sort_g_idx) and permutes the
 * stored rows; the expert loop permutes the activations to match.
 */
#include "fusedmoe/formats.h"
#include "plugins/reference/quant.h"

static int wna16_serves(const fmoe_scheme *s)
{
    int bits = s->w_dtype == FMOE_DTYPE_INT4 || s->w_dtype == FMOE_DTYPE_INT8;
    int strategy = s->w_strategy == FMOE_QSTRATEGY_GROUP || s->w_strategy == FMOE_QSTRATEGY_CHANNEL;
    int scale = s->w_scale_dtype == FMOE_DTYPE_F32 || s->w_scale_dtype == FMOE_DTYPE_BF16 ||
                s->w_scale_dtype == FMOE_DTYPE_F16;
    int order = s->w_actorder == FMOE_ACTORDER_NONE ||
                (s->w_actorder == FMOE_ACTORDER_GROUP && s->w_strategy == FMOE_QSTRATEGY_GROUP);
    return bits && strategy && scale && order && s->a_strategy == FMOE_QSTRATEGY_NONE;
}

typedef struct sizes {
    int32_t bits;
    uint32_t pf, g13, g2, G13, G2; /* group sizes and counts of w13 / w2 */
    int grouped, act_order, asym;
} sizes;

static sizes sizes_of(const refq_instance *in)
{
    const fmoe_scheme *s = &in->scheme;
    sizes z = {.bits = s->w_dtype == FMOE_DTYPE_INT4 ? 4 : 8};
    z.pf = 32u / (uint32_t)z.bits;
    z.grouped = s->w_strategy == FMOE_QSTRATEGY_GROUP;
    z.act_order = s->w_actorder == FMOE_ACTORDER_GROUP;
    z.asym = !s->w_symmetric;
    z.g13 = z.grouped ? s->w_group_size : in->hidden;
    z.g2 = z.grouped ? s->w_group_size : in->inter;
    z.G13 = in->hidden / z.g13;
    /* Act-order w2 scales are not TP-sharded: g_idx names global groups. */
    z.G2 = z.grouped ? (z.act_order ? in->cfg.intermediate_size : in->inter) / z.g2 : 1;
    return z;
}

static fmoe_status check_sizes(refq_instance *in, fmoe_error *err, const sizes *z)
{
    uint32_t g = in->scheme.w_group_size;
    if (in->hidden % z->pf)
        return refq_size_error(in, err, "WNA16: hidden_size %u is not divisible by the int32 pack factor %u",
                               in->hidden, z->pf);
    if (in->inter % z->pf)
        return refq_size_error(in, err,
                               "WNA16: intermediate_size_per_partition %u is not divisible by the int32 pack factor %u",
                               in->inter, z->pf);
    if (!z->grouped)
        return FMOE_STATUS_OK;
    if (in->hidden % g)
        return refq_size_error(in, err, "WNA16: hidden_size %u is not divisible by group_size %u", in->hidden, g);
    if (!z->act_order && in->inter % g)
        return refq_size_error(in, err,
                               "WNA16: intermediate_size_per_partition %u is not divisible by group_size %u (scale "
                               "groups would cross TP shards)",
                               in->inter, g);
    if (z->act_order && in->cfg.intermediate_size % g)
        return refq_size_error(in, err, "WNA16: intermediate_size %u is not divisible by group_size %u",
                               in->cfg.intermediate_size, g);
    return FMOE_STATUS_OK;
}

static fmoe_status wna16_declare(refq_instance *in, fmoe_error *err)
{
    sizes z = sizes_of(in);
    fmoe_status st = check_sizes(in, err, &z);
    if (st != FMOE_STATUS_OK)
        return st;
    int64_t rI = (int64_t)in->r * in->inter, H = in->hidden, I = in->inter;
    int32_t kind = z.grouped ? FMOE_SCALE_GROUP : FMOE_SCALE_CHANNEL;
    uint32_t T = FMOE_PARAM_TRANSPOSED, w2_flags = T | (z.act_order ? FMOE_PARAM_LOAD_FULL : 0);
    int32_t w2_axis = z.grouped ? 0 : -1; /* a channel scale has one group: nothing to shard */
    fmoe_dtype sd = in->scheme.w_scale_dtype, i32 = FMOE_DTYPE_INT32;
    refq_param(in, "w13_weight_packed", i32, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, T, 3, H / z.pf, rI);
    refq_param(in, "w2_weight_packed", i32, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, T, 3, I / z.pf, H);
    refq_param(in, "w13_weight_scale", sd, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE, kind, 1, T, 3, z.G13, rI);
    refq_param(in, "w2_weight_scale", sd, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, kind, w2_axis, w2_flags, 3, z.G2, H);
    if (z.asym) {
        refq_param(in, "w13_weight_zero_point", i32, FMOE_PROJ_W13, FMOE_ROLE_ZERO_POINT, kind, 1, T, 3, z.G13,
                   rI / z.pf);
        refq_param(in, "w2_weight_zero_point", i32, FMOE_PROJ_W2, FMOE_ROLE_ZERO_POINT, kind, w2_axis, w2_flags, 3,
                   z.G2, H / z.pf);
    }
    if (z.act_order) {
        refq_param(in, "w13_weight_g_idx", i32, FMOE_PROJ_W13, FMOE_ROLE_G_IDX, FMOE_SCALE_NONE, -1, 0, 2, H, 0);
        refq_param(in, "w2_weight_g_idx", i32, FMOE_PROJ_W2, FMOE_ROLE_G_IDX, FMOE_SCALE_NONE, 0, 0, 2, I, 0);
    }
    refq_param_biases(in);
    return FMOE_STATUS_OK;
}

/* One projection: unpack, scales, zero points, act-order. */
static int build(refq_instance *in, refq_matrix *m, const sizes *z, uint32_t rows, uint32_t cols, uint32_t groups,
                 uint32_t group, const fmoe_tensor *w, const fmoe_tensor *s, const fmoe_tensor *zp,
                 const fmoe_tensor *gidx)
{
    *m = (refq_matrix){.format = REFQ_W_INT,
                       .experts = in->local_experts,
                       .rows = rows,
                       .cols = cols,
                       .groups = groups,
                       .group = group};
    if (refq_int_values_kn(m, z->bits, w->data) != 0 || refq_int_scales(m, s->data, s->dtype, 1) != 0)
        return -1;
    if (zp && refq_int_zero_points(m, z->bits, zp->data) != 0)
        return -1;
    return gidx ? refq_int_act_order(m, gidx->data) : 0;
}

static fmoe_status wna16_finalize(refq_instance *in, const fmoe_tensor *const *p, fmoe_error *err)
{
    sizes z = sizes_of(in);
    uint32_t rI = in->r * in->inter, H = in->hidden, I = in->inter;
    const fmoe_tensor *gi13 = refq_get(in, p, "w13_weight_g_idx"), *gi2 = refq_get(in, p, "w2_weight_g_idx");
    if (build(in, &in->w13, &z, rI, H, z.G13, z.g13, p[0], p[2], refq_get(in, p, "w13_weight_zero_point"), gi13) != 0)
        return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                   "w13: cannot unpack the weights (out of memory, or a g_idx entry outside [0, %u))",
                                   z.G13);
    if (build(in, &in->w2, &z, H, I, z.G2, z.g2, p[1], p[3], refq_get(in, p, "w2_weight_zero_point"), gi2) != 0)
        return in->host->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                   "w2: cannot unpack the weights (out of memory, or a g_idx entry outside [0, %u))",
                                   z.G2);
    in->a1 = in->a2 = (refq_actq){.kind = REFQ_A_NONE};
    return FMOE_STATUS_OK;
}

const refq_family refq_family_wna16 = REFQ_FAMILY("wna16", "wna16", wna16_serves, wna16_declare, wna16_finalize);
