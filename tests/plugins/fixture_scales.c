/*
 * tests/plugins/fixture_scales.c - a method that declares one parameter of
 * every layout the loader must fill (per-tensor scale pairs, scalars,
 * channel / group / block scales, a transposed WNA16-style scale, an
 * act-order scale loaded in full), so tests can check what the core wrote.
 * It is never run: apply reports that it is a loading fixture.
 */
#include <string.h>

#include "plugins/reference/reference.h"
#include "tests/plugins/fixture_scales.h"

typedef struct fs_instance {
    const fmoe_host *host;
    fmoe_param_desc d[FS_N_PARAMS];
    const fmoe_param_desc *p[FS_N_PARAMS];
} fs_instance;

static void desc(fmoe_param_desc *d, const char *name, int32_t proj, int32_t role, int32_t scale, uint32_t ndim,
                 int64_t e, int64_t a, int64_t b, int32_t axis, uint32_t flags)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->name = name;
    d->dtype = FMOE_DTYPE_F32;
    d->ndim = ndim;
    d->shape[0] = e;
    d->shape[1] = a;
    d->shape[2] = b;
    d->projection = proj;
    d->role = role;
    d->scale_kind = scale;
    d->shard_axis = axis;
    d->per_expert = 1;
    d->flags = flags;
}

static fmoe_status fs_create(fmoe_create_args *a)
{
    const ref_state *st = a->state;
    fs_instance *in = st->host->alloc(st->host->ctx, sizeof *in, 0);
    if (!in)
        return st->host->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = st->host;
    int64_t e = a->num_local_experts, h = a->hidden_size, i = a->intermediate_per_rank;
    int64_t i_full = a->config->intermediate_size;
    const int32_t W13 = FMOE_PROJ_W13, W2 = FMOE_PROJ_W2, S = FMOE_ROLE_WEIGHT_SCALE;
    desc(&in->d[FS_W13_TENSOR], "w13_tensor_scale", W13, S, FMOE_SCALE_TENSOR, 2, e, 2, 0, -1, 0);
    desc(&in->d[FS_W2_TENSOR], "w2_tensor_scale", W2, S, FMOE_SCALE_TENSOR, 1, e, 0, 0, -1, 0);
    desc(&in->d[FS_W13_CHANNEL], "w13_channel_scale", W13, S, FMOE_SCALE_CHANNEL, 3, e, 2 * i, 1, 0, 0);
    desc(&in->d[FS_W2_CHANNEL], "w2_channel_scale", W2, S, FMOE_SCALE_CHANNEL, 3, e, h, 1, -1, 0);
    desc(&in->d[FS_W13_GROUP], "w13_group_scale", W13, S, FMOE_SCALE_GROUP, 3, e, 2 * i, h / FS_GROUP, 0, 0);
    desc(&in->d[FS_W2_GROUP], "w2_group_scale", W2, S, FMOE_SCALE_GROUP, 3, e, h, i / FS_GROUP, 1, 0);
    desc(&in->d[FS_W13_TRANSPOSED], "w13_transposed_scale", W13, S, FMOE_SCALE_GROUP, 3, e, h / FS_GROUP, 2 * i, 1,
         FMOE_PARAM_TRANSPOSED);
    desc(&in->d[FS_W2_FULL], "w2_actorder_scale", W2, S, FMOE_SCALE_GROUP, 3, e, i_full / FS_GROUP, h, 0,
         FMOE_PARAM_LOAD_FULL);
    desc(&in->d[FS_W13_INPUT], "w13_input_scale", W13, FMOE_ROLE_INPUT_SCALE, FMOE_SCALE_TENSOR, 1, e, 0, 0, -1, 0);
    for (int k = 0; k < FS_N_PARAMS; k++)
        in->p[k] = &in->d[k];
    a->instance = in;
    return FMOE_STATUS_OK;
}

static fmoe_status fs_declare(fmoe_declare_params_args *a)
{
    fs_instance *in = a->instance;
    a->params = in->p;
    a->n_params = FS_N_PARAMS;
    return FMOE_STATUS_OK;
}

static fmoe_status fs_finalize(fmoe_finalize_args *a)
{
    (void)a;
    return FMOE_STATUS_OK;
}

static fmoe_status fs_apply(fmoe_apply_args *a)
{
    fs_instance *in = a->instance;
    return in->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "fixture_scales only tests loading");
}

static void fs_destroy(fmoe_destroy_args *a)
{
    fs_instance *in = a->instance;
    in->host->free(in->host->ctx, in);
}

const fmoe_method fixture_scales_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "scales",
    .create = fs_create,
    .declare_params = fs_declare,
    .finalize = fs_finalize,
    .apply = fs_apply,
    .destroy = fs_destroy,
};
