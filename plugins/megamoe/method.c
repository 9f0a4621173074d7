/*
 * plugins/megamoe/method.c - the MegaMoE method (megamoe.h). What runs:
 *
 *   create    the path (serve.c: SM90 on a 9.0 device when the plugin
 *             has its device side; the SM100 kernel on 10.x with the
 *             option sm100_unverified; else the SM100 host logic) and the
 *             four parameters (vLLM DeepseekV4MegaMoEExperts names and
 *             shapes); the SM100 host logic plans the symmetric buffer
 *             (layout.c);
 *   finalize  SM90: the weights uploaded as loaded into device memory the
 *             instance owns, with the workspace (sm90_plan.h), once.
 *             SM100 host logic: the weights into that kernel's layout once
 *             (transform.c): L1 values interleaved, L1 and L2 scales packed
 *             MN-major in UTCCP order; the loaded L1 values and both scale
 *             tensors are not used after this (the L2 values are read in
 *             place, as vLLM keeps them aliased); with the SM100 kernel
 *             they and the buffer go to the device (sm100_forward.cu);
 *   apply     SM90 / SM100 kernel: the token check, the tensors checked,
 *             the forward queued on the caller's stream. The host logic
 *             alone: refused (docs/MEGAMOE.md).
 * tests/megamoe drives it through the table without a GPU (fake device
 * sides for the SM90 path).
 */
#include <string.h>

#include "plugins/megamoe/megamoe.h"

typedef struct mm_instance {
    const fmoe_host *host;
    mm_layout layout;
    uint32_t local, hidden, inter;
    fmoe_param_desc descs[4];
    const fmoe_param_desc *ptrs[4];
    uint8_t *l1;             /* [E_local, 2I, H/2] interleaved */
    uint32_t *l1_sf, *l2_sf; /* [E_local][K/128][mn] words */
    const uint8_t *l2;       /* the loaded w2 values, unchanged */
    /* the SM90 path */
    const mm_device_path *path; /* NULL: the SM100 host logic */
    int device;
    mm90_plan plan;
    mm90_layer *dev; /* after finalize */
    /* the SM100 kernel (path set, sm100 = 1): the layout above, the
     * transformed weights handed to the device at finalize */
    int sm100;
    mm100_layer *dev100;
    float swiglu_limit;
    int32_t expert_base; /* global id of local expert 0: ep_rank x local experts */
} mm_instance;

static void describe(fmoe_param_desc *d, const char *name, fmoe_dtype dt, int32_t proj, int32_t role, int32_t kind,
                     int32_t shard_axis, uint32_t E, int64_t d1, int64_t d2)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = dt;
    d->ndim = 3;
    d->shape[0] = E;
    d->shape[1] = d1;
    d->shape[2] = d2;
    d->projection = proj;
    d->role = role;
    d->scale_kind = kind;
    d->shard_axis = shard_axis;
    d->per_expert = 1;
}

static void instance_free(mm_instance *in)
{
    const fmoe_host *h = in->host;
    if (in->dev)
        in->path->destroy(in->dev);
    if (in->dev100)
        in->path->destroy100(in->dev100);
    h->free(h->ctx, in->l1);
    h->free(h->ctx, in->l1_sf);
    h->free(h->ctx, in->l2_sf);
    h->free(h->ctx, in);
}

static fmoe_status mm_create(fmoe_create_args *a)
{
    const mm_state *st = a->state;
    const fmoe_host *h = st->host;
    char why[256];
    mm_dims d;
    if (!st->path && mm_layer_supported(a->config, a->scheme, st->ring_tokens, &d, why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
    mm_instance *in = h->alloc(h->ctx, sizeof *in, 0);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    if (st->path) {
        /* the path the query chose, then the plan from the sizes create got */
        if (a->device_kind != FMOE_DEVICE_CUDA) {
            instance_free(in);
            return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "MegaMoE runs on CUDA devices only");
        }
        const int path = mm_choose_path(st, a->config, a->scheme, a->device_index, &in->plan, why, sizeof why);
        const int ok = path == MM_PATH_SM90 ? mm90_plan_make(a->num_local_experts, a->hidden_size,
                                                             a->intermediate_per_rank, a->config->top_k,
                                                             a->config->max_num_tokens, &in->plan, why, sizeof why) == 0
                       : path == MM_PATH_SM100
                           ? mm_layer_supported(a->config, a->scheme, st->ring_tokens, &d, why, sizeof why) == 0 &&
                                 mm_layout_plan(&d, st->ring_tokens, &in->layout, why, sizeof why) == 0
                           : 0;
        if (!ok) {
            instance_free(in);
            return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
        }
        in->sm100 = path == MM_PATH_SM100;
        in->path = st->path;
        in->device = a->device_index;
        in->swiglu_limit = a->config->swiglu_limit;
        in->expert_base = (int32_t)((a->config->ep_size > 1 ? a->config->ep_rank : 0) * a->num_local_experts);
        if (!in->sm100)
            in->layout.dims.max_tokens = a->config->max_num_tokens;
    } else if (mm_layout_plan(&d, st->ring_tokens, &in->layout, why, sizeof why) != 0) {
        instance_free(in);
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
    }
    in->local = a->num_local_experts;
    in->hidden = a->hidden_size;
    in->inter = a->intermediate_per_rank;
    uint32_t E = in->local, H = in->hidden, I = in->inter;
    describe(&in->descs[0], "w13_weight", FMOE_DTYPE_FP4_E2M1X2, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 0, E,
             2 * (int64_t)I, H / 2);
    describe(&in->descs[1], "w2_weight", FMOE_DTYPE_FP4_E2M1X2, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT, FMOE_SCALE_NONE, 1, E,
             H, I / 2);
    describe(&in->descs[2], "w13_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W13, FMOE_ROLE_WEIGHT_SCALE,
             FMOE_SCALE_GROUP, 0, E, 2 * (int64_t)I, H / MM_GROUP);
    describe(&in->descs[3], "w2_weight_scale", FMOE_DTYPE_UE8M0, FMOE_PROJ_W2, FMOE_ROLE_WEIGHT_SCALE, FMOE_SCALE_GROUP,
             1, E, H, I / MM_GROUP);
    for (int i = 0; i < 4; i++)
        in->ptrs[i] = &in->descs[i];
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status mm_declare(fmoe_declare_params_args *a)
{
    mm_instance *in = a->instance;
    a->params = in->ptrs;
    a->n_params = 4;
    return FMOE_STATUS_OK;
}

static fmoe_status mm_finalize(fmoe_finalize_args *a)
{
    mm_instance *in = a->instance;
    const fmoe_host *h = in->host;
    if (a->n_params != 4)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "finalize got %u params, declared 4", a->n_params);
    uint32_t E = in->local, H = in->hidden, I = in->inter;
    if (in->path && !in->sm100) {
        char why90[256];
        mm90_host_weights w = {a->params[0]->data, a->params[2]->data, a->params[1]->data, a->params[3]->data};
        if (in->dev)
            return h->error_set(a->err, FMOE_STATUS_INTERNAL, "MegaMoE: finalize called twice");
        if (in->path->create(in->device, &in->plan, &w, &in->dev, why90, sizeof why90) != 0)
            return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why90);
        return FMOE_STATUS_OK;
    }
    size_t l1_bytes = (size_t)E * 2 * I * (H / 2);
    in->l1 = h->alloc(h->ctx, l1_bytes ? l1_bytes : 1, 0);
    in->l1_sf = h->alloc(h->ctx, (size_t)mm_sf_words(E, 2 * I, H) * 4 + 4, 0);
    in->l2_sf = h->alloc(h->ctx, (size_t)mm_sf_words(E, H, I) * 4 + 4, 0);
    if (!in->l1 || !in->l1_sf || !in->l2_sf)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory for the transformed MegaMoE weights");
    char why[256];
    if (mm_transform_l1_weight(a->params[0]->data, in->l1, E, I, H, why, sizeof why) != 0 ||
        mm_transform_sf(a->params[2]->data, in->l1_sf, E, 2 * I, H, 1, why, sizeof why) != 0 ||
        mm_transform_sf(a->params[3]->data, in->l2_sf, E, H, I, 0, why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    in->l2 = a->params[1]->data;
    if (in->sm100) {
        if (in->dev100)
            return h->error_set(a->err, FMOE_STATUS_INTERNAL, "MegaMoE: finalize called twice");
        const mm100_host_weights w = {in->l1, in->l1_sf, in->l2, in->l2_sf};
        if (in->path->create100(in->device, &in->layout, &w, &in->dev100, why, sizeof why) != 0)
            return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    }
    return FMOE_STATUS_OK;
}

/* NULL if tensor t is a row-major [rows, cols] `dt` matrix with unit column
 * stride, else what is wrong. */
static const char *matrix_problem(const fmoe_tensor *t, fmoe_dtype dt, int64_t rows, int64_t cols)
{
    if (!t)
        return "missing";
    if (t->dtype != dt)
        return "wrong dtype";
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return "wrong shape";
    if (rows > 0 && (!t->data || t->strides[1] != 1 || t->strides[0] < cols))
        return "not row-major with unit column stride";
    return NULL;
}

/* The call's four tensors: [m, H] bf16 x and out, [m, topk] f32 weights
 * and int32 ids, row-major; else INVALID_ARGUMENT naming the tensor. */
static fmoe_status check_tensors(const mm_instance *in, fmoe_apply_args *a, int64_t k)
{
    const fmoe_host *h = in->host;
    int64_t m = a->x->shape[0];
    const struct {
        const char *name;
        const fmoe_tensor *t;
        fmoe_dtype dt;
        int64_t cols;
    } checks[4] = {{"x", a->x, FMOE_DTYPE_BF16, in->hidden},
                   {"topk_weights", a->topk_weights, FMOE_DTYPE_F32, k},
                   {"topk_ids", a->topk_ids, FMOE_DTYPE_INT32, k},
                   {"out", a->out, FMOE_DTYPE_BF16, in->hidden}};
    for (int i = 0; i < 4; i++) {
        const char *no = matrix_problem(checks[i].t, checks[i].dt, m, checks[i].cols);
        if (no)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "MegaMoE apply: tensor '%s' %s (expected [%lld, %lld] %s, row-major)", checks[i].name,
                                no, (long long)m, (long long)checks[i].cols,
                                i == 1   ? "f32"
                                : i == 2 ? "int32"
                                         : "bf16");
    }
    return FMOE_STATUS_OK;
}

mm_call mm_call_of(const fmoe_tensor *x, const fmoe_tensor *weights, const fmoe_tensor *ids, fmoe_tensor *out,
                   int32_t expert_base, float swiglu_limit, void *stream)
{
    return (mm_call){.x = x->data,
                     .x_ld = x->strides[0],
                     .weights = weights->data,
                     .weights_ld = weights->strides[0],
                     .ids = ids->data,
                     .ids_ld = ids->strides[0],
                     .out = out->data,
                     .out_ld = out->strides[0],
                     .m = (uint32_t)x->shape[0],
                     .expert_base = expert_base,
                     .swiglu_limit = swiglu_limit,
                     .stream = stream};
}

/* Both device paths: the tensors checked, then the call handed over. */
static fmoe_status device_apply(mm_instance *in, fmoe_apply_args *a)
{
    const fmoe_host *h = in->host;
    if (in->sm100 ? !in->dev100 : !in->dev)
        return h->error_set(a->err, FMOE_STATUS_INTERNAL, "MegaMoE: apply before finalize");
    fmoe_status st = check_tensors(in, a, in->sm100 ? in->layout.dims.topk : in->plan.topk);
    if (st != FMOE_STATUS_OK)
        return st;
    const mm_call c = mm_call_of(a->x, a->topk_weights, a->topk_ids, a->out, in->sm100 ? 0 : in->expert_base,
                                 in->swiglu_limit, a->stream);
    char why[256];
    if ((in->sm100 ? in->path->forward100(in->dev100, &c, why, sizeof why)
                   : in->path->forward(in->dev, &c, why, sizeof why)) != 0)
        return h->error_set(a->err, FMOE_STATUS_DEVICE_ERROR, "%s", why);
    return FMOE_STATUS_OK;
}

static fmoe_status mm_apply(fmoe_apply_args *a)
{
    mm_instance *in = a->instance;
    char why[256];
    if (in->sm100) {
        if (mm_check_tokens((uint64_t)a->x->shape[0], &in->layout, why, sizeof why) != 0)
            return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
        return device_apply(in, a);
    }
    if (in->path) {
        if (a->x->shape[0] > (int64_t)in->plan.max_tokens)
            return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                       "MegaMoE got %lld tokens, but the layer's workspace was sized for %u "
                                       "(max_num_tokens): refused, not truncated",
                                       (long long)a->x->shape[0], in->plan.max_tokens);
        return device_apply(in, a);
    }
    if (mm_check_tokens((uint64_t)a->x->shape[0], &in->layout, why, sizeof why) != 0)
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    return in->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED,
                               "MegaMoE forward: the SM100 kernel is not served yet (built, never run on an SM100 "
                               "device; this instance holds its host logic only; the SM90 path runs on compute "
                               "capability 9.0; docs/MEGAMOE.md)");
}

void mm_instance_weights(const void *instance, mm_weights *out)
{
    const mm_instance *in = instance;
    *out = (mm_weights){.sm90 = in->path != NULL && !in->sm100,
                        .layout = &in->layout,
                        .l1 = in->l1,
                        .l1_sf = in->l1_sf,
                        .l2_sf = in->l2_sf,
                        .l2 = in->l2};
}

int mm_instance_ep_view(const void *instance, mm_ep_view *out)
{
    const mm_instance *in = instance;
    if (!in || !in->path || in->sm100 || !in->dev || !in->path->ep_dispatch || !in->path->ep_experts ||
        !in->path->ep_combine)
        return -1;
    *out = (mm_ep_view){.path = in->path,
                        .dev = in->dev,
                        .expert_base = in->expert_base,
                        .local = in->local,
                        .max_rows = in->plan.max_tokens,
                        .swiglu_limit = in->swiglu_limit};
    return 0;
}

static void mm_destroy(fmoe_destroy_args *a)
{
    if (a->instance)
        instance_free(a->instance);
}

const fmoe_method mm_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "megamoe-fp8-fp4",
    .flags = FMOE_METHOD_EPLB | FMOE_METHOD_GRAPH_SAFE,
    .create = mm_create,
    .declare_params = mm_declare,
    .finalize = mm_finalize,
    .apply = mm_apply,
    .destroy = mm_destroy,
};
