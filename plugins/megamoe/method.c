/*
 * plugins/megamoe/method.c - the MegaMoE method (megamoe.h). What runs:
 *
 *   create    the layer check and the buffer plan (layout.c), the four
 *             parameters (vLLM DeepseekV4MegaMoEExperts names and shapes);
 *   finalize  the weights into the kernel's layout once (transform.c):
 *             L1 values interleaved, L1 and L2 scales packed MN-major in
 *             UTCCP order, into memory the instance owns; the loaded L1
 *             values and both scale tensors are not used after this (the
 *             L2 values are read in place, as vLLM keeps them aliased);
 *   apply     refused: the SM100 and SM90 kernels do not exist yet, and the
 *             query never hands this method out (docs/MEGAMOE.md).
 * A test drives it through the plugin table; no device is touched.
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
    if (mm_layer_supported(a->config, a->scheme, st->ring_tokens, &d, why, sizeof why) != 0)
        return h->error_set(a->err, FMOE_STATUS_UNSUPPORTED, "%s", why);
    mm_instance *in = h->alloc(h->ctx, sizeof *in, 0);
    if (!in)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(in, 0, sizeof *in);
    in->host = h;
    if (mm_layout_plan(&d, st->ring_tokens, &in->layout, why, sizeof why) != 0) {
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
    return FMOE_STATUS_OK;
}

static fmoe_status mm_apply(fmoe_apply_args *a)
{
    mm_instance *in = a->instance;
    char why[256];
    if (mm_check_tokens((uint64_t)a->x->shape[0], &in->layout, why, sizeof why) != 0)
        return in->host->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT, "%s", why);
    return in->host->error_set(a->err, FMOE_STATUS_UNSUPPORTED,
                               "MegaMoE forward: the SM100 and SM90 kernels are not implemented yet (host logic "
                               "only; docs/MEGAMOE.md)");
}

void mm_instance_weights(const void *instance, mm_weights *out)
{
    const mm_instance *in = instance;
    *out = (mm_weights){.layout = &in->layout, .l1 = in->l1, .l1_sf = in->l1_sf, .l2_sf = in->l2_sf, .l2 = in->l2};
}

static void mm_destroy(fmoe_destroy_args *a)
{
    if (a->instance)
        instance_free(a->instance);
}

const fmoe_method mm_method = {
    .struct_size = sizeof(fmoe_method),
    .name = "megamoe-fp8-fp4",
    .flags = FMOE_METHOD_EPLB,
    .create = mm_create,
    .declare_params = mm_declare,
    .finalize = mm_finalize,
    .apply = mm_apply,
    .destroy = mm_destroy,
};
