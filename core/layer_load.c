/*
 * core/layer_load.c - the parameters a method declared: host buffers
 * (poisoned with 0xFF bytes, NaN for every float type, so anything left
 * unwritten is visible), the loaded bitmap, fmoe_layer_load and the
 * completeness check finalize runs.
 *
 * One expert's checkpoint tensor is copied into its local slot(s):
 *   - EP: a logical expert another rank owns is skipped (*taken = 0);
 *   - EPLB: every local physical replica of the logical expert is filled;
 *   - TP: the tensor is narrowed along the parameter's shard axis to this
 *     rank's 1/tp share (a size tp does not divide is an error, never a floor);
 *   - W1/W3 go to the first/second half of a gated W13 shard axis;
 *   - padding a method asked for (roundup_sizes) is zero-filled.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/layer.h"
#include "core/tensor.h"
#include "fusedmoe/kit/eplb.h"
#include "fusedmoe/kit/half.h"

#define ROUTING_BIAS_NAME "e_score_correction_bias"

static const char *shard_name(int32_t shard)
{
    switch (shard) {
    case FMOE_SHARD_W1:
        return "w1";
    case FMOE_SHARD_W2:
        return "w2";
    case FMOE_SHARD_W3:
        return "w3";
    case FMOE_SHARD_FULL:
        return "full";
    default:
        return "?";
    }
}

static fmoe_status check_desc(const fmoe_layer *layer, const fmoe_param_desc *d, uint32_t i)
{
    const char *who = layer->chosen->plugin->name;
    if (!d || d->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_param_desc, flags))
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter descriptor %u is NULL or too small", who, i);
    if (!d->name || !d->name[0] || strcmp(d->name, ROUTING_BIAS_NAME) == 0)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %u has no name or a reserved one", who, i);
    if (fmoe_dtype_size(d->dtype) == 0)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s has non-storage dtype %d", who, d->name,
                              d->dtype);
    if (d->ndim < 1 || d->ndim > FMOE_MAX_DIMS)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s has ndim %u", who, d->name, d->ndim);
    for (uint32_t a = 0; a < d->ndim; a++)
        if (d->shape[a] <= 0)
            return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s has empty axis %u", who, d->name, a);
    if (d->per_expert > 1)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s: per_expert is %u, expected 0 or 1", who,
                              d->name, d->per_expert);
    uint32_t want = (d->flags & FMOE_PARAM_GLOBAL_EXPERTS) ? layer->global_experts : layer->local_experts;
    if (d->per_expert && d->shape[0] != (int64_t)want)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s axis 0 has %lld experts, expected %u", who,
                              d->name, (long long)d->shape[0], want);
    int32_t slice_dims = (int32_t)d->ndim - (int32_t)d->per_expert;
    if (d->shard_axis < -1 || d->shard_axis >= slice_dims)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s: shard_axis %d out of range", who, d->name,
                              d->shard_axis);
    if (d->projection < FMOE_PROJ_NONE || d->projection > FMOE_PROJ_W2 || d->role < FMOE_ROLE_WEIGHT ||
        d->role >= FMOE_ROLE_ROUTING_BIAS)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s: unknown projection or role", who, d->name);
    if ((d->flags & FMOE_PARAM_TRANSPOSED) && slice_dims != 2)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s: only 2-D slices can be transposed", who,
                              d->name);
    for (uint32_t j = 0; j < i; j++)
        if (strcmp(layer->params[j].name, d->name) == 0)
            return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s declared twice", who, d->name);
    return FMOE_STATUS_OK;
}

/* A gated W13 per-tensor scale holds one value per half: slice shape [2],
 * w1's scale at 0 and w3's at 1 (vLLM's layout). */
static int is_scale_pair(const fmoe_layer *layer, const fmoe_param_desc *d)
{
    return d->projection == FMOE_PROJ_W13 && layer->cfg.gated && d->shard_axis < 0 &&
           d->scale_kind == FMOE_SCALE_TENSOR && d->ndim == d->per_expert + 1 && d->shape[d->ndim - 1] == 2;
}

static fmoe_status init_slot(fmoe_layer *layer, fmoe_param_slot *s, const fmoe_param_desc *d)
{
    s->desc = *d;
    s->desc.struct_size = sizeof s->desc;
    s->name = strdup(d->name);
    if (!s->name)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    s->desc.name = s->name;
    s->n_experts = d->per_expert ? (uint32_t)d->shape[0] : 1;
    s->pair = is_scale_pair(layer, d);
    s->n_shards = (d->projection == FMOE_PROJ_W13 && layer->cfg.gated && (d->shard_axis >= 0 || s->pair)) ? 2 : 1;
    /* The plugin's declared shape is an input like any other: a product of
     * axes that overflows must fail here, naming the plugin, not leave a
     * zeroed descriptor (numel 1) whose first load blames the checkpoint. */
    const char *who = layer->chosen->plugin->name;
    char shape[FMOE_SHAPE_TEXT_MAX];
    fmoe_shape_format(d->shape, d->ndim, shape, sizeof shape);
    if (fmoe_tensor_init(&s->tensor, d->dtype, d->ndim, d->shape, NULL) != FMOE_STATUS_OK)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR,
                              "%s: parameter %s declares shape %s of %s, whose size does not fit in memory addresses",
                              who, d->name, shape, fmoe_dtype_name(d->dtype));
    int64_t numel = fmoe_tensor_numel(&s->tensor);
    size_t esize = fmoe_dtype_size(d->dtype);
    if (numel <= 0 || (uint64_t)numel > SIZE_MAX / esize)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: parameter %s declares shape %s of %s, which is too large",
                              who, d->name, shape, fmoe_dtype_name(d->dtype));
    s->nbytes = (size_t)numel * esize;
    s->tensor.data = malloc(s->nbytes);
    s->loaded = calloc((size_t)s->n_experts * s->n_shards, 1);
    if (!s->tensor.data || !s->loaded)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory for parameter %s (%zu bytes)", d->name,
                              s->nbytes);
    memset(s->tensor.data, 0xFF, s->nbytes);
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_layer_alloc_params(fmoe_layer *layer, const fmoe_param_desc *const *descs, uint32_t n)
{
    if (n && !descs)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s: declare_params returned %u params but no array",
                              layer->chosen->plugin->name, n);
    uint32_t total = n + (layer->cfg.has_correction_bias ? 1 : 0);
    layer->params = calloc(total ? total : 1, sizeof *layer->params);
    if (!layer->params)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        fmoe_status st = check_desc(layer, descs[i], i);
        if (st == FMOE_STATUS_OK)
            st = init_slot(layer, &layer->params[i], descs[i]);
        layer->n_params = i + 1;
        if (st != FMOE_STATUS_OK)
            return st;
    }
    layer->n_method_params = n;
    if (layer->cfg.has_correction_bias) {
        /* Routing belongs to the core (or a monolithic method), so the core
         * declares the selection bias itself. */
        fmoe_param_desc d = {.struct_size = sizeof d,
                             .name = ROUTING_BIAS_NAME,
                             .dtype = FMOE_DTYPE_F32,
                             .ndim = 1,
                             .shape = {layer->cfg.num_experts},
                             .projection = FMOE_PROJ_NONE,
                             .role = FMOE_ROLE_ROUTING_BIAS,
                             .shard_axis = -1};
        layer->routing_bias = (int32_t)n;
        layer->n_params = n + 1;
        fmoe_status st = init_slot(layer, &layer->params[n], &d);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    return FMOE_STATUS_OK;
}

void fmoe_layer_free_params(fmoe_layer *layer)
{
    for (uint32_t i = 0; i < layer->n_params; i++) {
        free(layer->params[i].name);
        free(layer->params[i].tensor.data);
        free(layer->params[i].loaded);
    }
    free(layer->params);
    layer->params = NULL;
    layer->n_params = 0;
}

uint32_t fmoe_layer_param_count(const fmoe_layer *layer)
{
    return layer ? layer->n_params : 0;
}

fmoe_status fmoe_layer_param(const fmoe_layer *layer, uint32_t index, fmoe_param_info *info)
{
    fmoe_error_clear();
    if (!layer || !info || info->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_param_info, name))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_param: NULL argument or struct_size too small");
    if (index >= layer->n_params)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_param: index %u out of range (%u params)",
                              index, layer->n_params);
    const fmoe_param_desc *d = &layer->params[index].desc;
    fmoe_param_info v = {.struct_size = info->struct_size,
                         .name = d->name,
                         .dtype = d->dtype,
                         .ndim = d->ndim,
                         .projection = d->projection,
                         .role = d->role,
                         .per_expert = d->per_expert,
                         .required = !(d->flags & FMOE_PARAM_OPTIONAL)};
    memcpy(v.shape, d->shape, sizeof v.shape);
    memcpy(info, &v, info->struct_size < sizeof v ? info->struct_size : sizeof v);
    return FMOE_STATUS_OK;
}

static fmoe_param_slot *find_param(fmoe_layer *layer, const char *name)
{
    for (uint32_t i = 0; i < layer->n_params; i++)
        if (strcmp(layer->params[i].name, name) == 0)
            return &layer->params[i];
    return NULL;
}

static fmoe_status unknown_param(const fmoe_layer *layer, const char *name)
{
    char list[1024] = "";
    size_t len = 0;
    for (uint32_t i = 0; i < layer->n_params && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", layer->params[i].name);
    return fmoe_error_set(FMOE_STATUS_NOT_FOUND, "layer (%s/%s) has no parameter '%s' (declared: %s)",
                          layer->chosen->plugin->name, layer->method->name, name, list);
}

/* The copy of one block: dst and src both as (shape, strides) views with
 * element size esize. Dimensions beyond ndim are 1. */
typedef struct view {
    uint32_t ndim;
    int64_t shape[FMOE_MAX_DIMS];
    int64_t strides[FMOE_MAX_DIMS];
    char *data;
} view;

static void copy_block(const view *dst, const view *src, size_t esize)
{
    int64_t n[FMOE_MAX_DIMS] = {1, 1, 1, 1}, ds[FMOE_MAX_DIMS] = {0}, ss[FMOE_MAX_DIMS] = {0};
    uint32_t off = FMOE_MAX_DIMS - src->ndim; /* right-align the dims */
    for (uint32_t a = 0; a < src->ndim; a++) {
        n[off + a] = src->shape[a];
        ds[off + a] = dst->strides[a];
        ss[off + a] = src->strides[a];
    }
    for (int64_t i0 = 0; i0 < n[0]; i0++)
        for (int64_t i1 = 0; i1 < n[1]; i1++)
            for (int64_t i2 = 0; i2 < n[2]; i2++)
                for (int64_t i3 = 0; i3 < n[3]; i3++) {
                    int64_t d = i0 * ds[0] + i1 * ds[1] + i2 * ds[2] + i3 * ds[3];
                    int64_t s = i0 * ss[0] + i1 * ss[1] + i2 * ss[2] + i3 * ss[3];
                    memcpy(dst->data + d * (int64_t)esize, src->data + s * (int64_t)esize, esize);
                }
}

static void zero_block(const view *dst, size_t esize)
{
    int64_t n[FMOE_MAX_DIMS] = {1, 1, 1, 1}, ds[FMOE_MAX_DIMS] = {0};
    uint32_t off = FMOE_MAX_DIMS - dst->ndim;
    for (uint32_t a = 0; a < dst->ndim; a++) {
        n[off + a] = dst->shape[a];
        ds[off + a] = dst->strides[a];
    }
    for (int64_t i0 = 0; i0 < n[0]; i0++)
        for (int64_t i1 = 0; i1 < n[1]; i1++)
            for (int64_t i2 = 0; i2 < n[2]; i2++)
                for (int64_t i3 = 0; i3 < n[3]; i3++)
                    memset(dst->data + (i0 * ds[0] + i1 * ds[1] + i2 * ds[2] + i3 * ds[3]) * (int64_t)esize, 0, esize);
}

static int layer_is_padded(const fmoe_layer *layer)
{
    return layer->hidden != layer->cfg.hidden_size || layer->inter != layer->inter_ckpt;
}

/* Copy `t` (one expert's checkpoint slice) into local slot `e` of `s`. */
/* One input scale for both halves of W13 (compressed-tensors' static
 * per-tensor activations: gate and up see the same input, so calibration
 * gives them the same scale). Both w1's and w3's copies are loaded into the
 * one slot, and the second must agree with the first: a checkpoint whose
 * halves disagree would be quantized with whichever came last. The loaded
 * byte records which halves wrote it. */
#define LOADED_FROM_W1 1u
#define LOADED_FROM_W3 2u

static int shares_input_scale(const fmoe_layer *layer, const fmoe_param_slot *s, int32_t shard)
{
    /* g_idx too: gate and up see the same input, so act-order calibration
     * gives them the same permutation, and one w13 g_idx holds it. */
    int role = s->desc.role == FMOE_ROLE_INPUT_SCALE || s->desc.role == FMOE_ROLE_INPUT_GLOBAL_SCALE ||
               s->desc.role == FMOE_ROLE_G_IDX;
    return role && s->desc.projection == FMOE_PROJ_W13 && layer->cfg.gated && !s->pair && s->n_shards == 1 &&
           (shard == FMOE_SHARD_W1 || shard == FMOE_SHARD_W3);
}

/* Relative agreement to 1e-6: producers compute both from the same input
 * statistics, so they are bit-equal in practice; the slack forgives only
 * last-bit noise of a float32 recomputation. (vLLM compares with an
 * absolute 1e-5, which lets two tiny scales differ by orders of magnitude.) */
static fmoe_status check_input_scales_agree(const fmoe_param_slot *s, uint32_t e, int32_t shard, const view *dst,
                                            const view *src, int32_t expert)
{
    uint8_t other = shard == FMOE_SHARD_W1 ? LOADED_FROM_W3 : LOADED_FROM_W1;
    if (!(s->loaded[e] & other))
        return FMOE_STATUS_OK;
    float have = fmoe_load_float(dst->data, s->desc.dtype, 0), got = fmoe_load_float(src->data, s->desc.dtype, 0);
    float mag = fabsf(have) > fabsf(got) ? fabsf(have) : fabsf(got);
    if (have == got || fabsf(have - got) <= 1e-6f * mag)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                          "%s expert %d: the input scales of w1 and w3 must be equal (they quantize the same input), "
                          "got %.9g from %s and %.9g from %s",
                          s->name, expert, (double)have, shard == FMOE_SHARD_W1 ? "w3" : "w1", (double)got,
                          shard == FMOE_SHARD_W1 ? "w1" : "w3");
}

/* A shared non-scalar W13 slot (g_idx): the second half's copy must equal
 * the first, element for element. Unequal shapes are left to the shape
 * check that follows, which names both. */
static fmoe_status check_shared_equal(const fmoe_layer *layer, const fmoe_param_slot *s, uint32_t e, int32_t shard,
                                      const view *dst, const view *src, int32_t expert)
{
    uint8_t other = shard == FMOE_SHARD_W1 ? LOADED_FROM_W3 : LOADED_FROM_W1;
    if (!(s->loaded[e] & other) || dst->ndim != 1 || src->ndim != 1 || dst->shape[0] != src->shape[0] ||
        layer_is_padded(layer))
        return FMOE_STATUS_OK;
    size_t esize = fmoe_dtype_size(s->desc.dtype);
    for (int64_t i = 0; i < dst->shape[0]; i++) {
        const char *a = dst->data + i * dst->strides[0] * (int64_t)esize;
        const char *b = src->data + i * src->strides[0] * (int64_t)esize;
        if (memcmp(a, b, esize) != 0)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s expert %d: w1 and w3 share this parameter, but their values differ at %lld "
                                  "(one w13 %s cannot hold two)",
                                  s->name, expert, (long long)i, s->name);
    }
    return FMOE_STATUS_OK;
}

static fmoe_status load_slice(fmoe_layer *layer, fmoe_param_slot *s, uint32_t e, int32_t shard, const fmoe_tensor *t,
                              int32_t expert)
{
    const fmoe_param_desc *d = &s->desc;
    uint32_t lead = d->per_expert;
    size_t esize = fmoe_dtype_size(d->dtype);
    view dst = {.ndim = d->ndim - lead,
                .data = (char *)s->tensor.data + (int64_t)e * s->tensor.strides[0] * lead * (int64_t)esize};
    for (uint32_t a = 0; a < dst.ndim; a++) {
        dst.shape[a] = d->shape[a + lead];
        dst.strides[a] = s->tensor.strides[a + lead];
    }
    if (s->pair && shard != FMOE_SHARD_FULL) {
        /* One half's scalar: the element of the pair, not the pair. */
        dst.data += (shard == FMOE_SHARD_W3) * dst.strides[0] * (int64_t)esize;
        dst.ndim = 0;
    }
    view src = {.ndim = t->ndim, .data = t->data};
    /* A scalar may come as a 0-d tensor or as shape [1], as checkpoints store it. */
    if (dst.ndim == 0 && t->ndim == 1 && t->shape[0] == 1)
        src.ndim = 0;
    for (uint32_t a = 0; a < src.ndim; a++) {
        /* A transposed checkpoint slice is read through swapped strides. */
        uint32_t b = (d->flags & FMOE_PARAM_TRANSPOSED) ? t->ndim - 1 - a : a;
        src.shape[a] = t->shape[b];
        src.strides[a] = t->strides[b];
    }
    char shp[64], want[64];
    fmoe_shape_format(src.shape, src.ndim, shp, sizeof shp);
    fmoe_shape_format(dst.shape, dst.ndim, want, sizeof want);
    if (src.ndim != dst.ndim)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s expert %d (%s): tensor %s has %u dims, expected %u (%s)", d->name, expert,
                              shard_name(shard), shp, src.ndim, dst.ndim, want);
    int32_t axis = shard == FMOE_SHARD_FULL || s->pair ? -1 : d->shard_axis;
    uint32_t halves = (shard == FMOE_SHARD_FULL) ? 1 : s->n_shards;
    if (axis >= 0) {
        int64_t full = src.shape[axis];
        uint32_t tp = (d->flags & FMOE_PARAM_LOAD_FULL) ? 1 : layer->cfg.tp_size;
        uint32_t rank = tp == 1 ? 0 : layer->cfg.tp_rank;
        if (full % tp)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s expert %d (%s): axis %d has %lld rows, which tp_size %u does not divide", d->name,
                                  expert, shard_name(shard), axis, (long long)full, tp);
        int64_t per = full / tp;
        src.shape[axis] = per;
        src.data += per * rank * src.strides[axis] * (int64_t)esize;
        int64_t half = dst.shape[axis] / halves;
        if (shard == FMOE_SHARD_W3)
            dst.data += half * dst.strides[axis] * (int64_t)esize;
        dst.shape[axis] = half;
    }
    if (shares_input_scale(layer, s, shard)) {
        fmoe_status st = dst.ndim == 0 ? check_input_scales_agree(s, e, shard, &dst, &src, expert)
                                       : check_shared_equal(layer, s, e, shard, &dst, &src, expert);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    int padded = layer_is_padded(layer);
    for (uint32_t a = 0; a < dst.ndim; a++) {
        int fits = padded ? src.shape[a] <= dst.shape[a] : src.shape[a] == dst.shape[a];
        if (!fits) {
            fmoe_shape_format(src.shape, src.ndim, shp, sizeof shp);
            fmoe_shape_format(dst.shape, dst.ndim, want, sizeof want);
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s expert %d (%s): tensor gives %s%s, the layer expects %s", d->name, expert,
                                  shard_name(shard), shp,
                                  axis >= 0 && layer->cfg.tp_size > 1 ? " after TP narrowing" : "", want);
        }
    }
    if (padded)
        zero_block(&dst, esize);
    copy_block(&dst, &src, esize);
    if (shard == FMOE_SHARD_FULL)
        memset(s->loaded + (size_t)e * s->n_shards, 1, s->n_shards);
    else if (shares_input_scale(layer, s, shard))
        s->loaded[e] |= shard == FMOE_SHARD_W1 ? LOADED_FROM_W1 : LOADED_FROM_W3;
    else
        s->loaded[(size_t)e * s->n_shards + (shard == FMOE_SHARD_W3 && s->n_shards == 2)] = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status check_shard(const fmoe_layer *layer, const fmoe_param_slot *s, int32_t shard)
{
    int32_t proj = s->desc.projection;
    int ok = shard == FMOE_SHARD_FULL || (proj == FMOE_PROJ_W13 && shard == FMOE_SHARD_W1) ||
             (proj == FMOE_PROJ_W13 && shard == FMOE_SHARD_W3 && layer->cfg.gated) ||
             (proj == FMOE_PROJ_W2 && shard == FMOE_SHARD_W2);
    if (ok && shard == FMOE_SHARD_W3 && s->n_shards != 2 && !shares_input_scale(layer, s, shard))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s has no shard axis or scale pair to hold a w3 half",
                              s->name);
    if (!ok)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "shard %s cannot be loaded into %s (%s%s)",
                              shard_name(shard), s->name,
                              proj == FMOE_PROJ_W13  ? "a w13 parameter: w1 or w3"
                              : proj == FMOE_PROJ_W2 ? "a w2 parameter: w2"
                                                     : "not a projection: full",
                              proj == FMOE_PROJ_W13 && !layer->cfg.gated ? "; the layer is not gated, so w1 only" : "");
    return FMOE_STATUS_OK;
}

/* Local slots (into *slots) that hold logical `expert`; returns the count. */
static uint32_t local_slots_of(const fmoe_layer *layer, const fmoe_param_slot *s, int32_t expert, uint32_t *slots)
{
    if (s->desc.flags & FMOE_PARAM_GLOBAL_EXPERTS) {
        slots[0] = (uint32_t)expert;
        return 1;
    }
    uint32_t n = 0;
    uint32_t logical = layer->cfg.num_experts;
    uint32_t count = fmoe_eplb_replica_count(logical, layer->cfg.num_redundant_experts, (uint32_t)expert);
    for (uint32_t r = 0; r < count; r++) {
        uint32_t phys = fmoe_eplb_physical_of(logical, (uint32_t)expert, r);
        if (layer->expert_map[phys] >= 0)
            slots[n++] = (uint32_t)layer->expert_map[phys];
    }
    return n;
}

static fmoe_status load_locked(fmoe_layer *layer, const char *param, int32_t expert, int32_t shard,
                               const fmoe_tensor *tensor, uint32_t *taken);

/* Under the layer's lock: loads from several threads are serialized, and a
 * load racing a finalize sees the layer either before or after it. */
fmoe_status fmoe_layer_load(fmoe_layer *layer, const char *param, int32_t expert, int32_t shard,
                            const fmoe_tensor *tensor, uint32_t *taken)
{
    fmoe_error_clear();
    if (taken)
        *taken = 0;
    if (!layer || !param)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_layer_load: NULL argument");
    pthread_mutex_lock(&layer->lock);
    fmoe_status st = load_locked(layer, param, expert, shard, tensor, taken);
    pthread_mutex_unlock(&layer->lock);
    return st;
}

static fmoe_status load_locked(fmoe_layer *layer, const char *param, int32_t expert, int32_t shard,
                               const fmoe_tensor *tensor, uint32_t *taken)
{
    if (layer->state != FMOE_LAYER_CREATED)
        return fmoe_error_set(FMOE_STATUS_BAD_STATE, "fmoe_layer_load(%s): the layer is already finalized", param);
    fmoe_param_slot *s = find_param(layer, param);
    if (!s)
        return unknown_param(layer, param);
    char what[96];
    snprintf(what, sizeof what, "%s expert %d (%s)", param, expert, shard_name(shard));
    fmoe_status st = fmoe_tensor_expect(tensor, what, s->desc.dtype, tensor ? tensor->ndim : 0, NULL);
    if (st != FMOE_STATUS_OK)
        return st;
    if (tensor->device_kind != FMOE_DEVICE_CPU)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: checkpoint tensors must be in host memory", what);
    if ((st = check_shard(layer, s, shard)) != FMOE_STATUS_OK)
        return st;
    if (!s->desc.per_expert || expert == FMOE_ALL_LOCAL_EXPERTS) {
        if (expert != FMOE_ALL_LOCAL_EXPERTS || shard != FMOE_SHARD_FULL)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s: a whole parameter is loaded with expert = FMOE_ALL_LOCAL_EXPERTS and shard full",
                                  what);
        const int64_t *shape = s->desc.shape;
        if ((st = fmoe_tensor_expect(tensor, param, s->desc.dtype, s->desc.ndim, shape)) != FMOE_STATUS_OK)
            return st;
        view dst = {.ndim = s->desc.ndim, .data = s->tensor.data}, src = {.ndim = tensor->ndim, .data = tensor->data};
        memcpy(dst.shape, shape, sizeof dst.shape);
        memcpy(dst.strides, s->tensor.strides, sizeof dst.strides);
        memcpy(src.shape, tensor->shape, sizeof src.shape);
        memcpy(src.strides, tensor->strides, sizeof src.strides);
        copy_block(&dst, &src, fmoe_dtype_size(s->desc.dtype));
        memset(s->loaded, 1, (size_t)s->n_experts * s->n_shards);
        if (taken)
            *taken = 1;
        return FMOE_STATUS_OK;
    }
    uint32_t limit = (s->desc.flags & FMOE_PARAM_GLOBAL_EXPERTS) ? layer->global_experts : layer->cfg.num_experts;
    if (expert < 0 || (uint32_t)expert >= limit)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expert id out of range [0, %u)", what, limit);
    uint32_t slots[FMOE_MAX_REDUNDANT_EXPERTS + 1];
    uint32_t n = local_slots_of(layer, s, expert, slots);
    for (uint32_t i = 0; i < n; i++)
        if ((st = load_slice(layer, s, slots[i], shard, tensor, expert)) != FMOE_STATUS_OK)
            return st;
    if (taken)
        *taken = n > 0;
    return FMOE_STATUS_OK;
}

/* The global physical id held by local slot e (for messages). */
static int64_t global_of_local(const fmoe_layer *layer, uint32_t e)
{
    for (uint32_t g = 0; g < layer->global_experts; g++)
        if (layer->expert_map[g] == (int32_t)e)
            return g;
    return -1;
}

fmoe_status fmoe_layer_check_loaded(const fmoe_layer *layer)
{
    char missing[1536] = "";
    size_t len = 0;
    uint32_t count = 0;
    for (uint32_t i = 0; i < layer->n_params; i++) {
        const fmoe_param_slot *s = &layer->params[i];
        if (s->desc.flags & FMOE_PARAM_OPTIONAL)
            continue;
        for (uint32_t e = 0; e < s->n_experts; e++)
            for (uint32_t h = 0; h < s->n_shards; h++) {
                if (s->loaded[(size_t)e * s->n_shards + h])
                    continue;
                if (count++ < 8 && len < sizeof missing) {
                    const char *part = s->n_shards == 2 ? (h ? " (w3)" : " (w1)") : "";
                    if (s->desc.per_expert)
                        len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s expert %lld%s",
                                                count > 1 ? ", " : "", s->name,
                                                (s->desc.flags & FMOE_PARAM_GLOBAL_EXPERTS)
                                                    ? (long long)e
                                                    : (long long)global_of_local(layer, e),
                                                part);
                    else
                        len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%s", count > 1 ? ", " : "",
                                                s->name);
                }
            }
    }
    if (count == 0)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_BAD_STATE, "cannot finalize: %u required parameter slot(s) not loaded: %s%s",
                          count, missing, count > 8 ? ", ..." : "");
}
