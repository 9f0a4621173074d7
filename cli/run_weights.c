/* cli/run_weights.c - loading the synthetic checkpoint (see run_weights.h). */
#include "cli/run_weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/halfconv.h"
#include "cli/rng.h"

/* One checkpoint tensor kind of a per-expert parameter. */
typedef struct piece {
    const char *stream; /* rng stream name: "w1", "w2_bias", ... */
    int32_t shard;      /* FMOE_SHARD_* */
    uint32_t ndim;
    int64_t shape[2];
    uint32_t fan_in;
} piece;

/* Scratch for one checkpoint tensor: f32 values and their stored form. */
typedef struct scratch {
    float *values;
    void *stored;
    size_t cap; /* elements */
} scratch;

static int scratch_reserve(scratch *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    float *v = realloc(s->values, n * sizeof(float));
    if (!v)
        return -1;
    s->values = v;
    void *st = realloc(s->stored, n * sizeof(float));
    if (!st)
        return -1;
    s->stored = st;
    s->cap = n;
    return 0;
}

/* The checkpoint pieces making up a per-expert parameter, by what it is
 * (never by its name: backends name parameters as they like). */
static int pieces_of(const fmoe_param_info *p, const fmoe_layer_config *cfg, piece out[2])
{
    int64_t h = cfg->hidden_size, i = cfg->intermediate_size;
    if (p->projection == FMOE_PROJ_W13 && p->role == FMOE_ROLE_WEIGHT) {
        out[0] = (piece){"w1", FMOE_SHARD_W1, 2, {i, h}, cfg->hidden_size};
        out[1] = (piece){"w3", FMOE_SHARD_W3, 2, {i, h}, cfg->hidden_size};
        return cfg->gated ? 2 : 1;
    }
    if (p->projection == FMOE_PROJ_W13 && p->role == FMOE_ROLE_BIAS) {
        out[0] = (piece){"w1_bias", FMOE_SHARD_W1, 1, {i, 0}, cfg->hidden_size};
        out[1] = (piece){"w3_bias", FMOE_SHARD_W3, 1, {i, 0}, cfg->hidden_size};
        return cfg->gated ? 2 : 1;
    }
    if (p->projection == FMOE_PROJ_W2 && p->role == FMOE_ROLE_WEIGHT) {
        out[0] = (piece){"w2", FMOE_SHARD_W2, 2, {h, i}, cfg->intermediate_size};
        return 1;
    }
    if (p->projection == FMOE_PROJ_W2 && p->role == FMOE_ROLE_BIAS) {
        out[0] = (piece){"w2_bias", FMOE_SHARD_W2, 1, {h, 0}, cfg->intermediate_size};
        return 1;
    }
    return 0;
}

static int load_failed(fmoe_status st, const char *who, const char *param)
{
    cli_error("loading %s into the %s layer: %s", param, who, fmoe_last_error());
    return cli_exit_for_status(st);
}

/* Whether this rank holds expert e, from fmoe_layer_config_expert_map.
 * Only an optimisation - not drawing tensors the loader would not take - and
 * only used without redundant experts, where the map's global ids are the
 * logical ones. With EPLB every expert is offered and the loader decides. */
static int expert_is_local(const int32_t *map, uint32_t e)
{
    return !map || map[e] >= 0;
}

static int load_per_expert(fmoe_layer *layer, const char *who, const fmoe_param_info *p, const run_checkpoint *ck,
                           const int32_t *map, scratch *s)
{
    piece pieces[2];
    int n = pieces_of(p, ck->cfg, pieces);
    if (n == 0) {
        cli_error("the %s layer declares %s (projection %d, role %d), which run cannot synthesize: it generates "
                  "unquantized weights and biases only", who, p->name, p->projection, p->role);
        return CLI_EXIT_CONFIG;
    }
    /* A parameter indexed by global experts holds every expert. */
    if (p->shape[0] != (int64_t)fmoe_layer_config_local_experts(ck->cfg))
        map = NULL;
    for (int k = 0; k < n; k++) {
        const piece *pc = &pieces[k];
        size_t numel = (size_t)pc->shape[0] * (size_t)(pc->ndim == 2 ? pc->shape[1] : 1);
        if (scratch_reserve(s, numel) != 0) {
            cli_error("out of memory for %s", p->name);
            return CLI_EXIT_INTERNAL;
        }
        float scale = 1.0f / sqrtf((float)pc->fan_in);
        for (uint32_t e = 0; e < ck->cfg->num_experts; e++) {
            if (!expert_is_local(map, e))
                continue;
            cli_rng_fill_normal(s->values, numel, scale, ck->seed, pc->stream, e);
            cli_store_floats(p->dtype, s->stored, s->values, numel);
            fmoe_tensor t;
            fmoe_status st = fmoe_tensor_init(&t, p->dtype, pc->ndim, pc->shape, s->stored);
            /* An expert another EP rank owns is not taken; that is expected. */
            if (st == FMOE_STATUS_OK)
                st = fmoe_layer_load(layer, p->name, (int32_t)e, pc->shard, &t, NULL);
            if (st != FMOE_STATUS_OK)
                return load_failed(st, who, p->name);
        }
    }
    return CLI_EXIT_OK;
}

/* A parameter without an expert axis, loaded whole: the correction bias the
 * routing also uses, or whatever else a backend declares (random values,
 * keyed by its name so both layers get the same ones). */
static int load_whole(fmoe_layer *layer, const char *who, const fmoe_param_info *p, const run_checkpoint *ck,
                      scratch *s)
{
    fmoe_tensor t;
    fmoe_status st = fmoe_tensor_init(&t, p->dtype, p->ndim, p->shape, NULL);
    if (st != FMOE_STATUS_OK)
        return load_failed(st, who, p->name);
    int64_t numel = fmoe_tensor_numel(&t);
    if (numel < 0 || scratch_reserve(s, (size_t)numel) != 0) {
        cli_error("out of memory for %s", p->name);
        return CLI_EXIT_INTERNAL;
    }
    if (p->role == FMOE_ROLE_ROUTING_BIAS && ck->correction_bias && numel == (int64_t)ck->cfg->num_experts)
        memcpy(s->values, ck->correction_bias, (size_t)numel * sizeof(float));
    else
        cli_rng_fill_normal(s->values, (size_t)numel, 1.0f, ck->seed, p->name, 0);
    cli_store_floats(p->dtype, s->stored, s->values, (size_t)numel);
    t.data = s->stored;
    st = fmoe_layer_load(layer, p->name, FMOE_ALL_LOCAL_EXPERTS, FMOE_SHARD_FULL, &t, NULL);
    return st == FMOE_STATUS_OK ? CLI_EXIT_OK : load_failed(st, who, p->name);
}

int run_load_layer(fmoe_layer *layer, const char *who, const run_checkpoint *ck)
{
    scratch s = {0};
    int rc = CLI_EXIT_OK;
    uint32_t n = fmoe_layer_param_count(layer);
    /* NULL map (EPLB, out of memory, or the library would not give one):
     * offer every expert and let the loader decide. */
    uint32_t global = fmoe_layer_config_global_experts(ck->cfg);
    int32_t *map = NULL;
    if (global == ck->cfg->num_experts) {
        map = malloc((global ? global : 1) * sizeof *map);
        if (map && fmoe_layer_config_expert_map(ck->cfg, map, global) != FMOE_STATUS_OK) {
            free(map);
            map = NULL;
        }
    }
    for (uint32_t i = 0; i < n && rc == CLI_EXIT_OK; i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        fmoe_status st = fmoe_layer_param(layer, i, &p);
        if (st != FMOE_STATUS_OK) {
            rc = cli_fail(st, "reading the declared parameters");
            break;
        }
        if (!cli_is_float_storage(p.dtype)) {
            cli_error("the %s layer declares %s as %s, which run cannot synthesize: it generates f32, bf16 "
                      "and f16 parameters only", who, p.name, fmoe_dtype_name(p.dtype));
            rc = CLI_EXIT_CONFIG;
            break;
        }
        rc = p.per_expert ? load_per_expert(layer, who, &p, ck, map, &s) : load_whole(layer, who, &p, ck, &s);
    }
    free(map);
    free(s.values);
    free(s.stored);
    if (rc != CLI_EXIT_OK)
        return rc;
    fmoe_status st = fmoe_layer_finalize(layer);
    if (st != FMOE_STATUS_OK) {
        cli_error("finalizing the %s layer: %s", who, fmoe_last_error());
        /* Everything was loaded, so a refusal here is the backend's fault. */
        return st == FMOE_STATUS_OUT_OF_MEMORY || st == FMOE_STATUS_UNSUPPORTED ? cli_exit_for_status(st)
                                                                                 : CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}
