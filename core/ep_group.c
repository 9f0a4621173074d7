/*
 * core/ep_group.c - expert-parallel groups (fusedmoe.h, "Expert parallelism
 * across devices"; docs/EP.md): options, the unique id, which plugin serves
 * a group, and create/destroy/timing through the plugin's fmoe_ep_ops
 * (plugin ABI 1.3). The core moves no token itself: it checks what the
 * application asked for and hands it to the plugin, so it stays
 * vendor-neutral.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/glob.h"
#include "core/ep_group.h"

/* The unique id: a 64-byte header the host writes (so a rank handed an id
 * from another plugin, or random bytes, is told so) and the plugin's
 * payload. Byte order is fixed (little endian) so ids travel across hosts. */
#define ID_MAGIC        "fmoe-ep1"
#define ID_MAGIC_LEN    8
#define ID_NAME_OFFSET  8
#define ID_NAME_LEN     48
#define ID_LEN_OFFSET   56
#define ID_HEADER_BYTES 64

static const char *const mode_names[] = {"invalid", "low_latency", "high_throughput"};
static const char *const dispatch_names[] = {"invalid", "activation", "fp8_token", "fp8_block"};

const char *fmoe_ep_mode_name(int32_t mode)
{
    return mode > 0 && mode <= FMOE_EP_MODE_HIGH_THROUGHPUT ? mode_names[mode] : "unknown";
}

const char *fmoe_ep_dispatch_name(int32_t dispatch)
{
    return dispatch > 0 && dispatch <= FMOE_EP_DISPATCH_FP8_BLOCK ? dispatch_names[dispatch] : "unknown";
}

int32_t fmoe_ep_mode_from_name(const char *name)
{
    for (int32_t i = 1; name && i <= FMOE_EP_MODE_HIGH_THROUGHPUT; i++)
        if (strcmp(name, mode_names[i]) == 0)
            return i;
    return FMOE_EP_MODE_INVALID;
}

int32_t fmoe_ep_dispatch_from_name(const char *name)
{
    for (int32_t i = 1; name && i <= FMOE_EP_DISPATCH_FP8_BLOCK; i++)
        if (strcmp(name, dispatch_names[i]) == 0)
            return i;
    return FMOE_EP_DISPATCH_INVALID;
}

void fmoe_ep_group_options_init(fmoe_ep_group_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->device_kind = FMOE_DEVICE_ANY;
    opts->device_index = -1;
    opts->size = 1;
    opts->act_dtype = FMOE_DTYPE_BF16;
    opts->dispatch = FMOE_EP_DISPATCH_ACTIVATION;
    opts->mode = FMOE_EP_MODE_LOW_LATENCY;
}

/* The caller's options over the defaults (an older, smaller struct keeps
 * the defaults of the fields it lacks). */
static fmoe_status read_options(const fmoe_ep_group_options *in, fmoe_ep_group_options *o, const char *fn)
{
    fmoe_ep_group_options_init(o);
    if (!in)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: options are NULL", fn);
    if (in->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_ep_group_options, unique_id))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: fmoe_ep_group_options.struct_size %zu is too small",
                              fn, in->struct_size);
    memcpy(o, in, in->struct_size < sizeof *o ? in->struct_size : sizeof *o);
    o->struct_size = sizeof *o;
    return FMOE_STATUS_OK;
}

#define PREFIX "fmoe_ep_group_options: "

static fmoe_status validate(const fmoe_ep_group_options *o)
{
    if (o->size == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "size = 0, expected at least 1");
    if (o->rank >= o->size)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "rank = %u, expected 0..%u (size %u)", o->rank,
                              o->size - 1, o->size);
    if (o->max_tokens_per_rank == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "max_tokens_per_rank = 0, expected at least 1");
    if (o->hidden_size == 0 || o->top_k == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "%s = 0: set it to the layers' value",
                              o->hidden_size == 0 ? "hidden_size" : "top_k");
    if (o->num_experts < o->size)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "num_experts = %u, expected at least size = %u (every rank holds an expert)",
                              o->num_experts, o->size);
    if (o->top_k > o->num_experts)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "top_k = %u exceeds num_experts = %u", o->top_k,
                              o->num_experts);
    if (o->act_dtype != FMOE_DTYPE_F32 && o->act_dtype != FMOE_DTYPE_BF16 && o->act_dtype != FMOE_DTYPE_F16)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "act_dtype = %s, expected f32, bf16 or f16",
                              fmoe_dtype_name(o->act_dtype));
    if (o->mode != FMOE_EP_MODE_LOW_LATENCY && o->mode != FMOE_EP_MODE_HIGH_THROUGHPUT)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "mode = %d, expected FMOE_EP_MODE_LOW_LATENCY or _HIGH_THROUGHPUT", o->mode);
    if (o->dispatch < FMOE_EP_DISPATCH_ACTIVATION || o->dispatch > FMOE_EP_DISPATCH_FP8_BLOCK)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "dispatch = %d, expected FMOE_EP_DISPATCH_ACTIVATION, _FP8_TOKEN or _FP8_BLOCK",
                              o->dispatch);
    if (o->dispatch == FMOE_EP_DISPATCH_FP8_BLOCK && o->hidden_size % 128 != 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "dispatch fp8_block needs hidden_size a multiple of 128, got %u", o->hidden_size);
    if ((o->comm != NULL) == (o->unique_id != NULL))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "give exactly one of comm (the application's communicator) and unique_id "
                                     "(from fmoe_ep_unique_id_make), got %s",
                              o->comm ? "both" : "neither");
    return FMOE_STATUS_OK;
}

const fmoe_ep_ops *fmoe_ep_ops_of(const fmoe_plugin_record *p)
{
    const fmoe_plugin *t = p->table;
    if (p->state != FMOE_PLUGIN_STATE_LOADED || p->abi_minor < 3 || !t || !FMOE_HAS_FIELD(t, ep) || !t->ep)
        return NULL;
    const fmoe_ep_ops *e = t->ep;
    if (e->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_ep_ops, forward) || !e->unique_id || !e->group_create ||
        !e->group_destroy || !e->forward)
        return NULL;
    return e;
}

/* The plugin and device that serve `o`: among the loaded plugins the glob
 * allows, those with EP and an available device of the asked kind/index;
 * the highest device score, then the name. Else UNSUPPORTED listing why
 * each plugin was passed over. */
static fmoe_status pick(const fmoe_context *ctx, const fmoe_ep_group_options *o, const fmoe_plugin_record **rec_out,
                        const fmoe_device_report **dev_out)
{
    const fmoe_registry *reg = &ctx->registry;
    const fmoe_plugin_record *best = NULL;
    const fmoe_device_report *best_dev = NULL;
    char why[2048] = "";
    size_t len = 0;
    for (size_t i = 0; i < reg->n_plugins; i++) {
        const fmoe_plugin_record *p = &reg->plugins[i];
        if (!p->name || (o->backend && !fmoe_glob_match(o->backend, p->name)))
            continue;
        const char *reason = NULL;
        const fmoe_device_report *dev = NULL;
        if (p->state != FMOE_PLUGIN_STATE_LOADED)
            reason = "not loaded";
        else if (!fmoe_ep_ops_of(p))
            reason = p->abi_minor < 3 ? "no expert parallelism (negotiated ABI < 1.3)" : "no expert parallelism";
        else {
            for (uint32_t d = 0; d < p->n_devices && !dev; d++) {
                const fmoe_device_report *r = &p->devices[d];
                if (r->available && (o->device_kind == FMOE_DEVICE_ANY || r->kind == o->device_kind) &&
                    (o->device_index < 0 || r->index == o->device_index))
                    dev = r;
            }
            if (!dev)
                reason = "no available device of the kind and index asked for";
        }
        if (reason) {
            int n = snprintf(why + len, sizeof why - len, "\n  %s: %s", p->name, reason);
            if (n > 0 && (size_t)n < sizeof why - len)
                len += (size_t)n;
            continue;
        }
        if (!best || dev->score > best_dev->score ||
            (dev->score == best_dev->score && strcmp(p->name, best->name) < 0)) {
            best = p;
            best_dev = dev;
        }
    }
    if (!best)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "no plugin%s%s serves expert parallelism on %s:%d:%s",
                              o->backend ? " matching " : "", o->backend ? o->backend : "",
                              fmoe_device_kind_name(o->device_kind), o->device_index,
                              len ? why : " (no plugin loaded)");
    *rec_out = best;
    *dev_out = best_dev;
    return FMOE_STATUS_OK;
}

static fmoe_status plugin_failed(const fmoe_plugin_record *p, const char *call, fmoe_status st, const fmoe_error *err)
{
    return fmoe_error_set(st == FMOE_STATUS_OK ? FMOE_STATUS_PLUGIN_ERROR : st, "%s ep %s failed (%s): %s", p->name,
                          call, fmoe_status_name(st), fmoe_plugin_error_text(err, "no message"));
}

static void put_u32le(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32le(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

fmoe_status fmoe_ep_unique_id_make(fmoe_context *ctx, const fmoe_ep_group_options *opts, fmoe_ep_unique_id *out)
{
    fmoe_error_clear();
    if (!ctx || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_ep_unique_id_make: NULL argument");
    fmoe_ep_group_options o;
    fmoe_status st = read_options(opts, &o, "fmoe_ep_unique_id_make");
    const fmoe_plugin_record *p = NULL;
    const fmoe_device_report *dev = NULL;
    if (st == FMOE_STATUS_OK)
        st = pick(ctx, &o, &p, &dev);
    if (st != FMOE_STATUS_OK)
        return st;
    memset(out, 0, sizeof *out);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_ep_unique_id_args a = {.struct_size = sizeof a,
                                .err = &err,
                                .state = p->plugin_state,
                                .device_kind = dev->kind,
                                .device_index = dev->index,
                                .bytes = out->bytes + ID_HEADER_BYTES,
                                .capacity = FMOE_EP_ID_PAYLOAD_BYTES};
    st = fmoe_ep_ops_of(p)->unique_id(&a);
    if (st != FMOE_STATUS_OK)
        return plugin_failed(p, "unique_id", st, &err);
    if (a.length == 0 || a.length > FMOE_EP_ID_PAYLOAD_BYTES)
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR, "%s ep unique_id wrote %u bytes, expected 1..%d", p->name,
                              a.length, FMOE_EP_ID_PAYLOAD_BYTES);
    memcpy(out->bytes, ID_MAGIC, ID_MAGIC_LEN);
    snprintf((char *)out->bytes + ID_NAME_OFFSET, ID_NAME_LEN, "%s", p->name);
    put_u32le(out->bytes + ID_LEN_OFFSET, a.length);
    return FMOE_STATUS_OK;
}

/* The payload of `id` for plugin `p`, or INVALID_ARGUMENT saying what is
 * wrong with it. */
static fmoe_status id_payload(const fmoe_ep_unique_id *id, const fmoe_plugin_record *p, const uint8_t **payload,
                              uint32_t *length)
{
    if (memcmp(id->bytes, ID_MAGIC, ID_MAGIC_LEN) != 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "unique_id was not made by fmoe_ep_unique_id_make (bad magic)");
    char name[ID_NAME_LEN + 1];
    memcpy(name, id->bytes + ID_NAME_OFFSET, ID_NAME_LEN);
    name[ID_NAME_LEN] = '\0';
    if (strcmp(name, p->name) != 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              PREFIX "unique_id was made by plugin '%s', but this rank's group runs on '%s'", name,
                              p->name);
    uint32_t n = get_u32le(id->bytes + ID_LEN_OFFSET);
    if (n == 0 || n > FMOE_EP_ID_PAYLOAD_BYTES)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, PREFIX "unique_id payload length %u, expected 1..%d", n,
                              FMOE_EP_ID_PAYLOAD_BYTES);
    *payload = id->bytes + ID_HEADER_BYTES;
    *length = n;
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_ep_group_create(fmoe_context *ctx, const fmoe_ep_group_options *opts, fmoe_ep_group **out)
{
    fmoe_error_clear();
    if (!ctx || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_ep_group_create: NULL argument");
    *out = NULL;
    fmoe_ep_group_options o;
    fmoe_status st = read_options(opts, &o, "fmoe_ep_group_create");
    if (st == FMOE_STATUS_OK)
        st = validate(&o);
    const fmoe_plugin_record *p = NULL;
    const fmoe_device_report *dev = NULL;
    if (st == FMOE_STATUS_OK)
        st = pick(ctx, &o, &p, &dev);
    const uint8_t *payload = NULL;
    uint32_t payload_len = 0;
    if (st == FMOE_STATUS_OK && o.unique_id)
        st = id_payload(o.unique_id, p, &payload, &payload_len);
    if (st != FMOE_STATUS_OK)
        return st;
    fmoe_ep_group *g = calloc(1, sizeof *g);
    if (!g)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_ep_group_args a = {.struct_size = sizeof a,
                            .err = &err,
                            .state = p->plugin_state,
                            .device_kind = dev->kind,
                            .device_index = dev->index,
                            .rank = o.rank,
                            .size = o.size,
                            .max_tokens_per_rank = o.max_tokens_per_rank,
                            .hidden_size = o.hidden_size,
                            .top_k = o.top_k,
                            .num_experts = o.num_experts,
                            .act_dtype = o.act_dtype,
                            .dispatch = o.dispatch,
                            .mode = o.mode,
                            .timing = o.timing ? 1u : 0u,
                            .comm = o.comm,
                            .unique_id = payload,
                            .unique_id_length = payload_len};
    const fmoe_ep_ops *ops = fmoe_ep_ops_of(p);
    st = ops->group_create(&a);
    if (st != FMOE_STATUS_OK) {
        free(g);
        return plugin_failed(p, "group_create", st, &err);
    }
    if (!a.group || a.expert_capacity == 0 || a.expert_capacity > UINT32_MAX) {
        fmoe_ep_group_destroy_args d = {.struct_size = sizeof d, .state = p->plugin_state, .group = a.group};
        if (a.group)
            ops->group_destroy(&d);
        free(g);
        return fmoe_error_set(FMOE_STATUS_PLUGIN_ERROR,
                              "%s ep group_create returned OK with %s (expert_capacity %llu, expected 1..%u)", p->name,
                              a.group ? "a bad capacity" : "no group", (unsigned long long)a.expert_capacity,
                              UINT32_MAX);
    }
    g->ctx = ctx;
    g->plugin = p;
    g->ops = ops;
    g->group = a.group;
    g->expert_capacity = a.expert_capacity;
    g->opts = o;
    g->opts.device_kind = dev->kind;
    g->opts.device_index = dev->index;
    g->opts.backend = NULL;
    g->opts.comm = NULL;
    g->opts.unique_id = NULL;
    *out = g;
    return FMOE_STATUS_OK;
}

void fmoe_ep_group_destroy(fmoe_ep_group *group)
{
    if (!group)
        return;
    fmoe_ep_group_destroy_args d = {.struct_size = sizeof d,
                                    .state = group->plugin->plugin_state,
                                    .group = group->group};
    group->ops->group_destroy(&d);
    free(group);
}

uint32_t fmoe_ep_group_rank(const fmoe_ep_group *group)
{
    return group ? group->opts.rank : 0;
}

uint32_t fmoe_ep_group_size(const fmoe_ep_group *group)
{
    return group ? group->opts.size : 0;
}

const fmoe_ep_group_options *fmoe_ep_group_get_options(const fmoe_ep_group *group)
{
    return group ? &group->opts : NULL;
}

const char *fmoe_ep_group_plugin(const fmoe_ep_group *group)
{
    return group ? group->plugin->name : "";
}

fmoe_status fmoe_ep_group_timing(fmoe_ep_group *group, uint32_t reset, fmoe_ep_timing *out)
{
    fmoe_error_clear();
    if (!group || !out || out->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_ep_timing, combine_seconds))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_ep_group_timing: group and out (with struct_size set) are required");
    if (!group->opts.timing)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "fmoe_ep_group_timing: the group was created without timing (set "
                              "fmoe_ep_group_options.timing = 1)");
    if (!FMOE_HAS_FIELD(group->ops, timing) || !group->ops->timing)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "plugin %s does not measure its EP phases", group->plugin->name);
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_ep_timing_args a = {.struct_size = sizeof a,
                             .err = &err,
                             .state = group->plugin->plugin_state,
                             .group = group->group,
                             .reset = reset ? 1u : 0u};
    fmoe_status st = group->ops->timing(&a);
    if (st != FMOE_STATUS_OK)
        return plugin_failed(group->plugin, "timing", st, &err);
    out->forwards = a.forwards;
    out->dispatch_seconds = a.dispatch_seconds;
    out->experts_seconds = a.experts_seconds;
    out->combine_seconds = a.combine_seconds;
    return FMOE_STATUS_OK;
}
