/*
 * core/model_load.c - fill a layer's declared parameters from the
 * checkpoint tensors of one MoE layer (fusedmoe.h: fmoe_model_load_layer;
 * docs/CHECKPOINTS.md, "Loading a layer").
 *
 * vLLM maps checkpoint names to parameters by substring replacement
 * ("experts.17.up_proj." -> "w13_"), which also matches
 * "shared_experts.17.up_proj."; and it skips, silently, checkpoint tensors
 * no parameter claims. Here names are parsed by path segment under the
 * layer's experts prefix, every tensor under that prefix must land in a
 * declared parameter (or be a known piece of metadata that is checked), and
 * anything else is an error naming the tensor.
 *
 * Two forms (fmoe_model_names): per-expert modules
 * "<experts>.<e>.<gate|up|down>.<suffix>", whose suffix names the parameter
 * ("weight_scale" -> w13_weight_scale / w2_weight_scale); and fused 3-D
 * tensors for all experts, read through strided views per expert (gate and
 * up concatenated or interleaved, stored transposed), including gpt-oss's
 * MXFP4 blocks and scales. TP narrowing, EP placement, EPLB replicas and
 * padding are fmoe_layer_load's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/model.h"

#define PROJ_GATE 0
#define PROJ_UP   1
#define PROJ_DOWN 2

typedef struct load_ctx {
    fmoe_layer *layer;
    const fmoe_checkpoint *ck;
    const fmoe_layer_config *cfg;
    const char *method;  /* quant_method: checkpoint conventions */
    int gptq;            /* GPTQ tensor names and layouts */
    int modelopt;        /* ModelOpt names, dequant-value globals */
    uint32_t group_size; /* of the layer's scheme (GPTQ g_idx checks) */
    fmoe_model_load_stats *stats;
} load_ctx;

static const int32_t proj_shard[3] = {FMOE_SHARD_W1, FMOE_SHARD_W3, FMOE_SHARD_W2};

/* Element i of a checkpoint tensor's bytes. safetensors data has no
 * alignment promise (a header of odd length puts every tensor at an odd
 * address), so values are copied out, never read through a typed pointer. */
static int64_t int64_at(const void *data, int64_t i)
{
    int64_t v;
    memcpy(&v, (const char *)data + i * (int64_t)sizeof v, sizeof v);
    return v;
}

static int32_t int32_at(const void *data, int64_t i)
{
    int32_t v;
    memcpy(&v, (const char *)data + i * (int64_t)sizeof v, sizeof v);
    return v;
}

/* 1 if the layer declares parameter `name`; its info in *info. */
static int declared(const fmoe_layer *layer, const char *name, fmoe_param_info *info)
{
    uint32_t n = fmoe_layer_param_count(layer);
    for (uint32_t i = 0; i < n; i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        if (fmoe_layer_param(layer, i, &p) == FMOE_STATUS_OK && strcmp(p.name, name) == 0) {
            if (info)
                *info = p;
            return 1;
        }
    }
    return 0;
}

/* "w13_weight, w13_weight_scale, ..." for messages. */
static void declared_list(const fmoe_layer *layer, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    uint32_t n = fmoe_layer_param_count(layer);
    for (uint32_t i = 0; i < n && len < cap; i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        if (fmoe_layer_param(layer, i, &p) == FMOE_STATUS_OK)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", p.name);
    }
}

/*
 * Suffixes whose parameter has another name in our methods. DeepSeek's fp8
 * checkpoints call the block scale "weight_scale_inv" (it multiplies, the
 * name notwithstanding), ModelOpt calls the NVFP4 global dequant scale
 * "weight_scale_2", and DeepSeek-V4's original checkpoints call every
 * expert scale "scale" (the MXFP4 UE8M0 scales [rows, K/32], or the block
 * FP8 ones of expert_dtype "fp8"; vLLM renames it weight_scale).
 */
static const struct {
    const char *suffix, *param;
} aliases[] = {
    {"weight_scale_inv", "weight_scale"},
    {"weight_scale_2", "weight_scale_2"},
    {"scale", "weight_scale"},
};

/* Widen a float tensor or view (bf16/f16 -> f32) into a contiguous `buf`
 * so it matches a parameter declared f32: exact, so nothing is lost.
 * Narrowing is refused by fmoe_layer_load's dtype check (it would round). */
static fmoe_status widen(const fmoe_tensor *t, fmoe_dtype want, fmoe_tensor *out, float **buf)
{
    *out = *t;
    *buf = NULL;
    int from_half = t->dtype == FMOE_DTYPE_BF16 || t->dtype == FMOE_DTYPE_F16;
    if (want != FMOE_DTYPE_F32 || !from_half)
        return FMOE_STATUS_OK;
    int64_t n = fmoe_tensor_numel(t);
    *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!*buf)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    /* Walk the (possibly strided) view in row-major order. */
    int64_t idx[FMOE_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (uint32_t a = 0; a < t->ndim; a++)
            off += idx[a] * t->strides[a];
        (*buf)[i] = fmoe_load_float(t->data, t->dtype, off);
        for (int a = (int)t->ndim - 1; a >= 0; a--) {
            if (++idx[a] < t->shape[a])
                break;
            idx[a] = 0;
        }
    }
    return fmoe_tensor_init(out, FMOE_DTYPE_F32, t->ndim, t->shape, *buf);
}

/* Byte-typed values that safetensors stores as U8 (packed e2m1 pairs,
 * UE8M0 scales) or I8 (int4 values in int8): same bytes, retagged. */
static void retag(fmoe_tensor *t, fmoe_dtype want)
{
    int byte_storage = t->dtype == FMOE_DTYPE_UINT8 || t->dtype == FMOE_DTYPE_INT8;
    int byte_type = want == FMOE_DTYPE_FP4_E2M1X2 || want == FMOE_DTYPE_UE8M0 || want == FMOE_DTYPE_UINT8 ||
                    want == FMOE_DTYPE_INT8;
    if (byte_storage && byte_type)
        t->dtype = want;
}

/* Load one checkpoint tensor (or a view of one) into `param`. */
static fmoe_status load_into(load_ctx *c, const char *ck_name, const char *param, int32_t expert, int32_t shard,
                             const fmoe_tensor *t)
{
    fmoe_param_info info = {.struct_size = sizeof info};
    if (!declared(c->layer, param, &info))
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "load_into: %s is not declared", param);
    fmoe_tensor v;
    float *buf = NULL;
    fmoe_status st = widen(t, info.dtype, &v, &buf);
    if (st == FMOE_STATUS_OK) {
        retag(&v, info.dtype);
        uint32_t taken = 0;
        st = fmoe_layer_load(c->layer, param, expert, shard, &v, &taken);
        if (c->stats) {
            c->stats->tensors += st == FMOE_STATUS_OK;
            c->stats->not_local += st == FMOE_STATUS_OK && !taken;
        }
    }
    free(buf);
    if (st != FMOE_STATUS_OK)
        fmoe_error_prefix("%s", ck_name);
    return st;
}

/* compressed-tensors' weight_shape [out, in] of the unpacked weight: the
 * loader checks it against the layer instead of loading it. */
static fmoe_status check_weight_shape(load_ctx *c, const char *name, const fmoe_tensor *t, int proj)
{
    int64_t rows = proj == PROJ_DOWN ? c->cfg->hidden_size : c->cfg->intermediate_size;
    int64_t cols = proj == PROJ_DOWN ? c->cfg->intermediate_size : c->cfg->hidden_size;
    int ok = t->ndim == 1 && t->shape[0] == 2 && (t->dtype == FMOE_DTYPE_INT64 || t->dtype == FMOE_DTYPE_INT32);
    int64_t got[2] = {-1, -1};
    for (int i = 0; ok && i < 2; i++)
        got[i] = t->dtype == FMOE_DTYPE_INT64 ? int64_at(t->data, i) : int32_at(t->data, i);
    if (ok && got[0] == rows && got[1] == cols)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                          "%s: expected the weight shape [%lld, %lld] of this layer (an int64 tensor [2]), got [%lld, "
                          "%lld]",
                          name, (long long)rows, (long long)cols, (long long)got[0], (long long)got[1]);
}

/* The parameter a per-expert suffix goes to, or an error naming both. */
static fmoe_status param_for(load_ctx *c, const char *name, int proj, const char *suffix, char *param, size_t cap)
{
    const char *pre = proj == PROJ_DOWN ? "w2_" : "w13_";
    snprintf(param, cap, "%s%s", pre, suffix);
    if (declared(c->layer, param, NULL))
        return FMOE_STATUS_OK;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(suffix, aliases[i].suffix) != 0)
            continue;
        snprintf(param, cap, "%s%s", pre, aliases[i].param);
        if (declared(c->layer, param, NULL))
            return FMOE_STATUS_OK;
    }
    char list[1024];
    declared_list(c->layer, list, sizeof list);
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                          "%s: the layer's method has no parameter %s%s for it (declared: %s); the checkpoint does not "
                          "match the scheme",
                          name, pre, suffix, list);
}

/* Parse "<e>.<module>.<suffix>" after the experts prefix. */
static int parse_expert_name(const char *rest, const fmoe_model_names *n, uint32_t *e, int *proj, const char **suffix)
{
    char *end = NULL;
    if (rest[0] < '0' || rest[0] > '9')
        return 0;
    unsigned long v = strtoul(rest, &end, 10);
    if (*end != '.' || (rest[0] == '0' && end != rest + 1) || v > UINT32_MAX)
        return 0;
    const char *mod = end + 1;
    const char *mods[3] = {n->expert_gate, n->expert_up, n->expert_down};
    for (int p = 0; p < 3; p++) {
        size_t len = mods[p] ? strlen(mods[p]) : 0;
        if (len && strncmp(mod, mods[p], len) == 0 && mod[len] == '.' && mod[len + 1]) {
            *e = (uint32_t)v;
            *proj = p;
            *suffix = mod + len + 1;
            return 1;
        }
    }
    return 0;
}

/* ---- GPTQ-format tensors ------------------------------------------------------ */

/*
 * AutoGPTQ / GPTQModel store a module as qweight [K/8, N] int32 (8 values of
 * one column packed along K, stored value q + 8), scales [K/g, N] (f16),
 * qzeros [K/g, N/8] and g_idx [K]. That is compressed-tensors'
 * pack-quantized layout transposed: weight_packed [N, K/8] packs the same 8
 * K values of row n into one int32 with the same nibble order and offset,
 * weight_scale is [N, K/g]. So qweight and scales load through transposed
 * views into the same parameters. qzeros of a symmetric checkpoint hold the
 * zero point 8 in GPTQ's v1 encoding (zero - 1 = 7 in every nibble) and are
 * checked, not loaded; asymmetric GPTQ checkpoints are refused for now.
 */
static fmoe_tensor transposed(const fmoe_tensor *t)
{
    fmoe_tensor v = *t;
    v.shape[0] = t->shape[1], v.shape[1] = t->shape[0];
    v.strides[0] = t->strides[1], v.strides[1] = t->strides[0];
    return v;
}

static fmoe_status check_gptq_qzeros(const char *name, const fmoe_tensor *t)
{
    if (t->dtype != FMOE_DTYPE_INT32)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expected int32 qzeros, got %s", name,
                              fmoe_dtype_name(t->dtype));
    int64_t n = fmoe_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if ((uint32_t)int32_at(t->data, i) != 0x77777777u)
            return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                                  "%s: zero points other than 8 (an asymmetric GPTQ checkpoint) are not supported; "
                                  "element %lld is 0x%08x, expected 0x77777777 (GPTQ's v1 encoding of 8)",
                                  name, (long long)i, (unsigned)int32_at(t->data, i));
    return FMOE_STATUS_OK;
}

/* A g_idx without act-order must be the trivial k / group. */
static fmoe_status check_trivial_g_idx(load_ctx *c, const char *name, const fmoe_tensor *t, int proj)
{
    int64_t k = proj == PROJ_DOWN ? c->cfg->intermediate_size : c->cfg->hidden_size;
    uint32_t group = c->group_size ? c->group_size : (uint32_t)k; /* channel-wise: one group */
    int ok = t->dtype == FMOE_DTYPE_INT32 && t->ndim == 1 && t->shape[0] == k;
    for (int64_t i = 0; ok && i < k; i++)
        ok = int32_at(t->data, i) == (int32_t)(i / group);
    return ok ? FMOE_STATUS_OK
              : fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                               "%s: a g_idx that reorders the input, but the scheme has no act-order (desc_act "
                               "false); expected g_idx[k] = k / %u",
                               name, group);
}

/* 1 if handled (status in *st), 0 if `suffix` is not a GPTQ name. */
static int load_gptq(load_ctx *c, const char *name, int proj, uint32_t e, const char *suffix, const fmoe_tensor *t,
                     fmoe_status *st)
{
    const char *pre = proj == PROJ_DOWN ? "w2_" : "w13_";
    char param[64];
    if (strcmp(suffix, "qzeros") == 0) {
        *st = check_gptq_qzeros(name, t);
        return 1;
    }
    if (strcmp(suffix, "g_idx") == 0) {
        snprintf(param, sizeof param, "%sweight_g_idx", pre);
        *st = declared(c->layer, param, NULL) ? load_into(c, name, param, (int32_t)e, proj_shard[proj], t)
                                              : check_trivial_g_idx(c, name, t, proj);
        return 1;
    }
    const char *target = strcmp(suffix, "qweight") == 0  ? "weight_packed"
                         : strcmp(suffix, "scales") == 0 ? "weight_scale"
                                                         : NULL;
    if (!target)
        return 0;
    if (t->ndim != 2) {
        *st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expected a 2-D GPTQ tensor", name);
        return 1;
    }
    if ((*st = param_for(c, name, proj, target, param, sizeof param)) != FMOE_STATUS_OK)
        return 1;
    fmoe_tensor v = transposed(t);
    *st = load_into(c, name, param, (int32_t)e, proj_shard[proj], &v);
    return 1;
}

/* ---- ModelOpt NVFP4 ------------------------------------------------------------ */

/*
 * ModelOpt stores NVFP4 as weight (packed e2m1), weight_scale (e4m3 per 16),
 * weight_scale_2 and input_scale: the global scales as *dequant* values g
 * (x = q * s * g). compressed-tensors stores the same globals as quantize
 * multipliers 1/g (weight_global_scale, input_global_scale). Methods declare
 * the compressed-tensors names, so ModelOpt's are renamed and inverted here,
 * once, and every backend sees one convention.
 */
static int load_modelopt(load_ctx *c, const char *name, int proj, uint32_t e, const char *suffix, const fmoe_tensor *t,
                         fmoe_status *st)
{
    const char *pre = proj == PROJ_DOWN ? "w2_" : "w13_";
    char param[64];
    if (strcmp(suffix, "weight") == 0) {
        snprintf(param, sizeof param, "%sweight_packed", pre);
        if (!declared(c->layer, param, NULL))
            return 0;
        *st = load_into(c, name, param, (int32_t)e, proj_shard[proj], t);
        return 1;
    }
    const char *target = strcmp(suffix, "weight_scale_2") == 0 ? "weight_global_scale"
                         : strcmp(suffix, "input_scale") == 0  ? "input_global_scale"
                                                               : NULL;
    snprintf(param, sizeof param, "%s%s", pre, target ? target : "");
    if (!target || !declared(c->layer, param, NULL))
        return 0;
    int scalar = t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1);
    float g = scalar && t->dtype == FMOE_DTYPE_F32 ? fmoe_load_float(t->data, FMOE_DTYPE_F32, 0) : 0.0f;
    if (!(g > 0.0f) || !isfinite(g)) {
        *st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                             "%s: expected one positive finite f32 global dequant scale (ModelOpt NVFP4)", name);
        return 1;
    }
    float inv = (float)(1.0 / (double)g);
    fmoe_tensor v;
    fmoe_tensor_init(&v, FMOE_DTYPE_F32, 0, NULL, &inv);
    *st = load_into(c, name, param, (int32_t)e, proj_shard[proj], &v);
    return 1;
}

static fmoe_status load_per_expert(load_ctx *c, const char *name, const char *rest, const fmoe_model_names *n)
{
    uint32_t e;
    int proj;
    const char *suffix;
    if (!parse_expert_name(rest, n, &e, &proj, &suffix))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: not a tensor of this layer's experts (expected %s.<expert>.<%s|%s|%s>.<name>)", name,
                              n->experts, n->expert_gate, n->expert_up ? n->expert_up : "-", n->expert_down);
    if (e >= c->cfg->num_experts)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expert %u, but the layer has %u experts", name, e,
                              c->cfg->num_experts);
    if (proj == PROJ_UP && !c->cfg->gated)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: an up projection, but the layer is not gated", name);
    fmoe_tensor t;
    fmoe_status st = fmoe_checkpoint_tensor(c->ck, fmoe_checkpoint_find(c->ck, name), &t);
    if (st != FMOE_STATUS_OK)
        return st;
    char param[128];
    if (c->gptq && load_gptq(c, name, proj, e, suffix, &t, &st))
        return st;
    if (c->modelopt && load_modelopt(c, name, proj, e, suffix, &t, &st))
        return st;
    if (strcmp(suffix, "weight_shape") == 0) {
        snprintf(param, sizeof param, "%s_weight_shape", proj == PROJ_DOWN ? "w2" : "w13");
        if (!declared(c->layer, param, NULL))
            return check_weight_shape(c, name, &t, proj);
    }
    if ((st = param_for(c, name, proj, suffix, param, sizeof param)) != FMOE_STATUS_OK)
        return st;
    return load_into(c, name, param, (int32_t)e, proj_shard[proj], &t);
}

/* ---- fused 3-D tensors ------------------------------------------------------ */

/* The tensor called `name`, checked to be [E, d1(, d2...)] of `ndim` dims. */
static fmoe_status fused_tensor(load_ctx *c, const char *name, uint32_t ndim, const int64_t *tail, fmoe_tensor *t)
{
    size_t i = fmoe_checkpoint_find(c->ck, name);
    if (i == (size_t)-1)
        return fmoe_error_set(FMOE_STATUS_NOT_FOUND, "%s: missing from the checkpoint", name);
    fmoe_status st = fmoe_checkpoint_tensor(c->ck, i, t);
    if (st != FMOE_STATUS_OK)
        return st;
    int ok = t->ndim == ndim && t->shape[0] == (int64_t)c->cfg->num_experts;
    for (uint32_t a = 1; ok && a < ndim; a++)
        ok = t->shape[a] == tail[a - 1];
    if (ok)
        return FMOE_STATUS_OK;
    char want[96] = "", got[96] = "";
    size_t lw = (size_t)snprintf(want, sizeof want, "[%u", c->cfg->num_experts);
    for (uint32_t a = 1; a < ndim; a++)
        lw += (size_t)snprintf(want + lw, sizeof want - lw, ", %lld", (long long)tail[a - 1]);
    snprintf(want + lw, sizeof want - lw, "]");
    size_t lg = (size_t)snprintf(got, sizeof got, "[");
    for (uint32_t a = 0; a < t->ndim; a++)
        lg += (size_t)snprintf(got + lg, sizeof got - lg, "%s%lld", a ? ", " : "", (long long)t->shape[a]);
    snprintf(got + lg, sizeof got - lg, "]");
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expected shape %s for this layer, got %s", name, want,
                          got);
}

/* A 2-D (or 1-D) strided view of expert e's part of a fused tensor. */
static fmoe_tensor view(const fmoe_tensor *t, int64_t e, int64_t offset, uint32_t ndim, const int64_t *shape,
                        const int64_t *strides)
{
    fmoe_tensor v = *t;
    size_t esize = fmoe_dtype_size(t->dtype);
    v.ndim = ndim;
    for (uint32_t a = 0; a < ndim; a++) {
        v.shape[a] = shape[a];
        v.strides[a] = strides[a];
    }
    v.data = (char *)t->data + (size_t)(e * t->strides[0] + offset) * esize;
    return v;
}

/* gate/up of a fused [E, K, 2I] tensor (transposed) as [I, K] views. */
static fmoe_status load_fused_gate_up(load_ctx *c, const char *name, const char *param, int interleaved)
{
    int64_t h = c->cfg->hidden_size, i = c->cfg->intermediate_size;
    int64_t rows = c->cfg->gated ? 2 * i : i;
    const int64_t tail[2] = {h, rows};
    fmoe_tensor t;
    fmoe_status st = fused_tensor(c, name, 3, tail, &t);
    for (uint32_t e = 0; e < c->cfg->num_experts && st == FMOE_STATUS_OK; e++) {
        for (int half = 0; half < (c->cfg->gated ? 2 : 1) && st == FMOE_STATUS_OK; half++) {
            const int64_t shape[2] = {i, h};
            const int64_t strides[2] = {interleaved ? 2 : 1, rows};
            int64_t off = half ? (interleaved ? 1 : i) : 0;
            fmoe_tensor v = view(&t, e, off, 2, shape, strides);
            st = load_into(c, name, param, (int32_t)e, half ? FMOE_SHARD_W3 : FMOE_SHARD_W1, &v);
        }
    }
    return st;
}

static fmoe_status load_fused_gate_up_bias(load_ctx *c, const char *name, const char *param, int interleaved)
{
    int64_t i = c->cfg->intermediate_size, rows = c->cfg->gated ? 2 * i : i;
    const int64_t tail[1] = {rows};
    fmoe_tensor t;
    fmoe_status st = fused_tensor(c, name, 2, tail, &t);
    for (uint32_t e = 0; e < c->cfg->num_experts && st == FMOE_STATUS_OK; e++) {
        for (int half = 0; half < (c->cfg->gated ? 2 : 1) && st == FMOE_STATUS_OK; half++) {
            const int64_t shape[1] = {i}, strides[1] = {interleaved ? 2 : 1};
            fmoe_tensor v = view(&t, e, half ? (interleaved ? 1 : i) : 0, 1, shape, strides);
            st = load_into(c, name, param, (int32_t)e, half ? FMOE_SHARD_W3 : FMOE_SHARD_W1, &v);
        }
    }
    return st;
}

/* down of a fused [E, I, H] tensor (transposed) as [H, I] views. */
static fmoe_status load_fused_down(load_ctx *c, const char *name)
{
    int64_t h = c->cfg->hidden_size, i = c->cfg->intermediate_size;
    const int64_t tail[2] = {i, h};
    fmoe_tensor t;
    fmoe_status st = fused_tensor(c, name, 3, tail, &t);
    for (uint32_t e = 0; e < c->cfg->num_experts && st == FMOE_STATUS_OK; e++) {
        const int64_t shape[2] = {h, i}, strides[2] = {1, h};
        fmoe_tensor v = view(&t, e, 0, 2, shape, strides);
        st = load_into(c, name, "w2_weight", (int32_t)e, FMOE_SHARD_W2, &v);
    }
    return st;
}

static fmoe_status load_fused_down_bias(load_ctx *c, const char *name)
{
    int64_t h = c->cfg->hidden_size;
    const int64_t tail[1] = {h};
    fmoe_tensor t;
    fmoe_status st = fused_tensor(c, name, 2, tail, &t);
    for (uint32_t e = 0; e < c->cfg->num_experts && st == FMOE_STATUS_OK; e++) {
        const int64_t shape[1] = {h}, strides[1] = {1};
        fmoe_tensor v = view(&t, e, 0, 1, shape, strides);
        st = load_into(c, name, "w2_bias", (int32_t)e, FMOE_SHARD_W2, &v);
    }
    return st;
}

/* gpt-oss MXFP4: blocks [E, N, K/32, 16] u8 and scales [E, N, K/32] as
 * [N, K/2] / [N, K/32] rows, gate/up rows interleaved for w13. */
static fmoe_status load_mxfp4(load_ctx *c, const char *name, const char *param, int w13, int is_scale)
{
    int64_t h = c->cfg->hidden_size, i = c->cfg->intermediate_size;
    int64_t n = w13 ? (c->cfg->gated ? 2 * i : i) : h, k = w13 ? h : i;
    if (k % 32)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: MXFP4 needs K = %lld to be a multiple of 32", name,
                              (long long)k);
    const int64_t btail[3] = {n, k / 32, 16}, stail[2] = {n, k / 32};
    fmoe_tensor t;
    fmoe_status st = fused_tensor(c, name, is_scale ? 3 : 4, is_scale ? stail : btail, &t);
    int64_t row = is_scale ? k / 32 : k / 2; /* bytes per row */
    int halves = w13 && c->cfg->gated ? 2 : 1;
    for (uint32_t e = 0; e < c->cfg->num_experts && st == FMOE_STATUS_OK; e++) {
        for (int half = 0; half < halves && st == FMOE_STATUS_OK; half++) {
            const int64_t shape[2] = {n / halves, row}, strides[2] = {row * halves, 1};
            fmoe_tensor v = view(&t, e, half * row, 2, shape, strides);
            int32_t shard = !w13 ? FMOE_SHARD_W2 : half ? FMOE_SHARD_W3 : FMOE_SHARD_W1;
            st = load_into(c, name, param, (int32_t)e, shard, &v);
        }
    }
    return st;
}

static fmoe_status load_fused(load_ctx *c, const fmoe_model_names *n, int mxfp4)
{
    fmoe_status st;
    if (mxfp4) {
        /* compressed-tensors calls packed e2m1 "weight_packed"; take that
         * name when the method declares it. */
        int packed = declared(c->layer, "w13_weight_packed", NULL);
        st = load_mxfp4(c, n->mxfp4_gate_up_blocks, packed ? "w13_weight_packed" : "w13_weight", 1, 0);
        if (st == FMOE_STATUS_OK)
            st = load_mxfp4(c, n->mxfp4_gate_up_scales, "w13_weight_scale", 1, 1);
        if (st == FMOE_STATUS_OK)
            st = load_mxfp4(c, n->mxfp4_down_blocks, packed ? "w2_weight_packed" : "w2_weight", 0, 0);
        if (st == FMOE_STATUS_OK)
            st = load_mxfp4(c, n->mxfp4_down_scales, "w2_weight_scale", 0, 1);
    } else {
        st = load_fused_gate_up(c, n->fused_gate_up, "w13_weight", (int)n->fused_interleaved);
        if (st == FMOE_STATUS_OK)
            st = load_fused_down(c, n->fused_down);
    }
    if (st == FMOE_STATUS_OK && c->cfg->has_bias)
        st = load_fused_gate_up_bias(c, n->fused_gate_up_bias, "w13_bias", (int)n->fused_interleaved);
    if (st == FMOE_STATUS_OK && c->cfg->has_bias)
        st = load_fused_down_bias(c, n->fused_down_bias);
    return st;
}

/* ---- the layer --------------------------------------------------------------- */

static int has(const fmoe_checkpoint *ck, const char *name)
{
    return name && fmoe_checkpoint_find(ck, name) != (size_t)-1;
}

static int is_one_of(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}

/* In the fused forms every tensor under the prefix is one the form names
 * (biases only when the layer has them). */
static fmoe_status check_fused_names(load_ctx *c, const fmoe_model_names *n, int mxfp4, const char *name)
{
    const char *weights[4] = {mxfp4 ? n->mxfp4_gate_up_blocks : n->fused_gate_up,
                              mxfp4 ? n->mxfp4_gate_up_scales : n->fused_down, mxfp4 ? n->mxfp4_down_blocks : NULL,
                              mxfp4 ? n->mxfp4_down_scales : NULL};
    const char *biases[2] = {n->fused_gate_up_bias, n->fused_down_bias};
    if (is_one_of(name, weights, 4))
        return FMOE_STATUS_OK;
    if (is_one_of(name, biases, 2))
        return c->cfg->has_bias ? FMOE_STATUS_OK
                                : fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                                 "%s: the checkpoint has expert biases, but the layer config has none "
                                                 "(has_bias = 0)",
                                                 name);
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: not a tensor of this layer's fused %s experts", name,
                          mxfp4 ? "MXFP4" : "3-D");
}

static fmoe_status load_correction_bias(load_ctx *c, const fmoe_model_names *n)
{
    int in_ck = has(c->ck, n->correction_bias);
    if (!c->cfg->has_correction_bias) {
        if (in_ck)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s: the checkpoint has a routing correction bias, but the layer config has none",
                                  n->correction_bias);
        return FMOE_STATUS_OK;
    }
    if (!in_ck) /* finalize names the missing parameter too; this names the tensor */
        return fmoe_error_set(FMOE_STATUS_NOT_FOUND,
                              "%s: missing from the checkpoint (the layer routes with a "
                              "correction bias)",
                              n->correction_bias ? n->correction_bias : "e_score_correction_bias");
    fmoe_tensor t;
    fmoe_status st = fmoe_checkpoint_tensor(c->ck, fmoe_checkpoint_find(c->ck, n->correction_bias), &t);
    if (st != FMOE_STATUS_OK)
        return st;
    return load_into(c, n->correction_bias, "e_score_correction_bias", FMOE_ALL_LOCAL_EXPERTS, FMOE_SHARD_FULL, &t);
}

FMOE_API fmoe_status fmoe_model_load_layer(const fmoe_model *m, uint32_t index, const fmoe_checkpoint *ck,
                                           const fmoe_quant_config *qc, fmoe_layer *layer, fmoe_model_load_stats *stats)
{
    fmoe_error_clear();
    if (!m || !ck || !layer)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_model_load_layer: model, checkpoint and layer are "
                                                            "required");
    fmoe_model_names n = {.struct_size = sizeof n};
    fmoe_status st = fmoe_model_layer_names(m, index, &n);
    if (st != FMOE_STATUS_OK)
        return st;
    if (stats) {
        size_t size = stats->struct_size;
        memset(stats, 0, size < sizeof *stats ? size : sizeof *stats);
        stats->struct_size = size;
    }
    load_ctx c = {.layer = layer,
                  .ck = ck,
                  .cfg = fmoe_layer_get_config(layer),
                  .method = fmoe_quant_config_method(qc),
                  .stats = stats};
    c.gptq = strcmp(c.method, "gptq") == 0;
    c.modelopt = strcmp(c.method, "modelopt") == 0;
    fmoe_scheme scheme = {.struct_size = sizeof scheme};
    if (fmoe_scheme_parse(fmoe_selection_scheme_key(fmoe_layer_selection(layer)), &scheme) == FMOE_STATUS_OK)
        c.group_size = scheme.w_strategy == FMOE_QSTRATEGY_GROUP ? scheme.w_group_size : 0;
    int mxfp4 = has(ck, n.mxfp4_gate_up_blocks);
    int fused = mxfp4 || has(ck, n.fused_gate_up);
    if (fused && (st = load_fused(&c, &n, mxfp4)) != FMOE_STATUS_OK)
        return st;
    /* Every tensor under "<experts>." is loaded or accounted for. */
    size_t plen = strlen(n.experts), count = fmoe_checkpoint_tensor_count(ck), seen = 0;
    for (size_t i = 0; i < count && st == FMOE_STATUS_OK; i++) {
        const char *name = fmoe_checkpoint_tensor_name(ck, i);
        if (strncmp(name, n.experts, plen) != 0 || name[plen] != '.')
            continue;
        seen++;
        st = fused ? check_fused_names(&c, &n, mxfp4, name) : load_per_expert(&c, name, name + plen + 1, &n);
    }
    if (st == FMOE_STATUS_OK && seen == 0)
        st = fmoe_error_set(FMOE_STATUS_NOT_FOUND, "the checkpoint has no tensors under %s (layer %u)", n.experts,
                            index);
    if (st == FMOE_STATUS_OK)
        st = load_correction_bias(&c, &n);
    return st;
}
