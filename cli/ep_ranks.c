/*
 * cli/ep_ranks.c - the ranks of an EP group as threads of this process
 * (ep_ranks.h), the devices they run on, and the unique-id file of the
 * multi-process form.
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/conform/layers.h"
#include "cli/ep_ranks.h"
#include "cli/halfconv.h"
#include "cli/run_device.h"
#include "fusedmoe/formats.h"

typedef struct rank_job {
    const ep_plan *plan;
    uint32_t rank;
    int64_t first_token;
    ep_rank_result *res;
} rank_job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fail(ep_rank_result *r, fmoe_status st, const char *what)
{
    r->status = st == FMOE_STATUS_OK ? FMOE_STATUS_INTERNAL : st;
    snprintf(r->error, sizeof r->error, "%s: %s", what, fmoe_last_error());
}

/* One forward of this rank's tokens on its device, into the plan's out. */
static fmoe_status forward(fmoe_layer *layer, const ep_plan *p, int64_t first, uint32_t m, int fetch, run_device_io *io,
                           int *open)
{
    size_t es = fmoe_dtype_size(p->cfg->act_dtype);
    uint32_t h = p->cfg->hidden_size, k = p->cfg->top_k;
    fmoe_tensor x, w, ids, y;
    const int64_t mh[2] = {m, h}, mk[2] = {m, k};
    fmoe_tensor_init(&x, p->cfg->act_dtype, 2, mh, (char *)p->x + (size_t)first * h * es);
    fmoe_tensor_init(&w, FMOE_DTYPE_F32, 2, mk, (float *)p->topk_w + (size_t)first * k);
    fmoe_tensor_init(&ids, FMOE_DTYPE_INT32, 2, mk, (int32_t *)p->topk_ids + (size_t)first * k);
    fmoe_tensor_init(&y, p->cfg->act_dtype, 2, mh, (char *)p->out + (size_t)first * h * es);
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &x, .topk_weights = &w, .topk_ids = &ids, .out = &y};
    fmoe_status st = FMOE_STATUS_OK;
    if (!*open) {
        if ((st = run_device_io_open(layer, &a, io)) != FMOE_STATUS_OK)
            return st;
        *open = 1;
    }
    if ((st = fmoe_layer_forward(layer, &io->args)) != FMOE_STATUS_OK)
        return st;
    return fetch ? run_device_io_fetch(layer, io, &a) : fmoe_layer_synchronize(layer, NULL);
}

/* The replays' forward: the device twins, on the capturing stream. The
 * first failure's text is kept (time_replays reports its own). */
typedef struct replay_ctx {
    fmoe_layer *layer;
    const run_device_io *io;
    uint32_t chain; /* forwards queued per call (ep_plan.replay_chain, at least 1) */
    char why[512];
} replay_ctx;

static int enqueue_forward(void *ctx, uint32_t index, void *stream)
{
    (void)index;
    replay_ctx *c = ctx;
    fmoe_forward_args a = c->io->args;
    a.stream = stream;
    for (uint32_t i = 0; i < c->chain; i++)
        if (fmoe_layer_forward(c->layer, &a) != FMOE_STATUS_OK) {
            if (!c->why[0])
                snprintf(c->why, sizeof c->why, "%s", fmoe_last_error());
            return -1;
        }
    return 0;
}

/* A high_throughput forward waits on the host for the rows it received:
 * capturing one must be refused, naming the mode. Every rank tries once
 * (after time_replays' eager forward, collective like any other) and is
 * refused before its forward queues any work, so no peer waits on it. */
static fmoe_status expect_capture_refused(fmoe_layer *layer, const run_device_io *io, ep_rank_result *r)
{
    replay_ctx c = {layer, io, 1, {0}};
    double secs[1];
    fmoe_status st = fmoe_layer_time_replays(layer, 1, 0, 1, enqueue_forward, &c, secs);
    if (st == FMOE_STATUS_UNSUPPORTED && !c.why[0])
        return FMOE_STATUS_OK; /* the plugin cannot replay at all */
    if (st == FMOE_STATUS_OK) {
        r->status = FMOE_STATUS_INTERNAL;
        snprintf(r->error, sizeof r->error,
                 "a high_throughput forward was captured in a CUDA graph; its host wait must refuse capture");
        return FMOE_STATUS_INTERNAL;
    }
    if (!strstr(c.why, "high_throughput")) {
        r->status = st;
        snprintf(r->error, sizeof r->error,
                 "graph capture of a high_throughput forward failed without naming the mode: %s",
                 c.why[0] ? c.why : fmoe_last_error());
        return st;
    }
    r->capture_refused = 1;
    snprintf(r->capture_why, sizeof r->capture_why, "%s", c.why);
    return FMOE_STATUS_OK;
}

/* Capture this rank's forward in a graph and replay it (collective: every
 * rank of a device group does the same number, in step). The device output
 * is first filled with NaN, so that only a replay that really ran can pass
 * the caller's comparison. UNSUPPORTED (not an error) on host layers. */
static fmoe_status replay(fmoe_layer *layer, const ep_plan *p, int64_t first, uint32_t m, run_device_io *io,
                          ep_rank_result *r)
{
    if (!io->remote)
        return FMOE_STATUS_OK;
    if (p->mode == FMOE_EP_MODE_HIGH_THROUGHPUT)
        return expect_capture_refused(layer, io, r);
    const uint32_t h = p->cfg->hidden_size;
    const size_t es = fmoe_dtype_size(p->cfg->act_dtype);
    fmoe_status st = FMOE_STATUS_OK;
    if (m > 0) {
        unsigned char *nan = malloc((size_t)m * h * es);
        if (!nan)
            return FMOE_STATUS_OUT_OF_MEMORY;
        memset(nan, 0xff, (size_t)m * h * es); /* all-ones: NaN in bf16, f16 and f32 */
        fmoe_tensor host;
        const int64_t mh[2] = {m, h};
        fmoe_tensor_init(&host, p->cfg->act_dtype, 2, mh, nan);
        st = fmoe_layer_tensor_copy(layer, &io->out, &host);
        free(nan);
        if (st != FMOE_STATUS_OK)
            return st;
    }
    enum { WARMUP = 2, REPS = 5 };
    double secs[REPS];
    replay_ctx c = {layer, io, p->replay_chain > 1 ? p->replay_chain : 1, {0}};
    st = fmoe_layer_time_replays(layer, 1, WARMUP, REPS, enqueue_forward, &c, secs);
    if (st == FMOE_STATUS_UNSUPPORTED)
        return FMOE_STATUS_OK;
    if (st != FMOE_STATUS_OK)
        return st;
    qsort(secs, REPS, sizeof secs[0], cmp_double);
    r->graphs = 1;
    r->graph_median_s = secs[REPS / 2] / c.chain;
    const size_t es_out = fmoe_dtype_size(p->cfg->act_dtype);
    fmoe_tensor y;
    const int64_t mh[2] = {m, h};
    fmoe_tensor_init(&y, p->cfg->act_dtype, 2, mh, (char *)p->out + (size_t)first * h * es_out);
    fmoe_forward_args a = {.struct_size = sizeof a, .out = &y};
    return m > 0 ? run_device_io_fetch(layer, io, &a) : fmoe_layer_synchronize(layer, NULL);
}

/* Read and reset the layer's load record into a new array (*out), or leave
 * it NULL and return why not. */
static fmoe_status read_load(fmoe_layer *layer, const ep_plan *p, uint64_t **out)
{
    const uint32_t g = fmoe_layer_config_global_experts(p->cfg);
    uint64_t *c = calloc(g, sizeof *c);
    if (!c)
        return FMOE_STATUS_OUT_OF_MEMORY;
    fmoe_status st = fmoe_layer_expert_load(layer, c, g, 1);
    if (st != FMOE_STATUS_OK) {
        free(c);
        c = NULL;
    }
    *out = c;
    return st;
}

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    const ep_plan *p = j->plan;
    ep_rank_result *r = j->res;
    fmoe_ep_group_options o;
    fmoe_ep_group_options_init(&o);
    o.backend = p->backend;
    o.device_kind = p->device_base < 0 ? FMOE_DEVICE_ANY : p->device_kind;
    o.device_index = p->device_base < 0 ? -1 : p->device_base + (int32_t)(j->rank - p->first_device_rank);
    o.rank = j->rank;
    o.size = p->size;
    o.max_tokens_per_rank = p->max_tokens;
    o.hidden_size = p->cfg->hidden_size;
    o.top_k = p->cfg->top_k;
    o.num_experts = fmoe_layer_config_global_experts(p->cfg);
    o.act_dtype = p->cfg->act_dtype;
    o.dispatch = p->dispatch;
    o.mode = p->mode;
    o.timing = 1;
    o.unique_id = p->id;
    fmoe_status st = fmoe_ep_group_create(p->ctx, &o, &r->group);
    if (st != FMOE_STATUS_OK) {
        fail(r, st, "joining the group");
        return NULL;
    }
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.ep_group = r->group;
    if ((st = fmoe_layer_create(p->ctx, p->cfg, p->scheme, &lo, &r->layer)) != FMOE_STATUS_OK) {
        fail(r, st, "creating the layer on the group");
        return NULL;
    }
    char why[512];
    if ((st = cf_load_built(r->layer, p->built, why, sizeof why)) != FMOE_STATUS_OK) {
        r->status = st;
        snprintf(r->error, sizeof r->error, "loading the layer: %s", why);
        return NULL;
    }
    run_device_io io;
    int open = 0;
    uint32_t m = p->m[j->rank];
    st = forward(r->layer, p, j->first_token, m, 1, &io, &open);
    if (st == FMOE_STATUS_OK)
        r->load_status = read_load(r->layer, p, &r->load);
    double *times = p->timed ? malloc(p->timed * sizeof *times) : NULL;
    if (st == FMOE_STATUS_OK && p->timed && !times)
        st = FMOE_STATUS_OUT_OF_MEMORY;
    /* Reset the phase sums so they cover the timed forwards only. */
    fmoe_ep_timing discard = {.struct_size = sizeof discard};
    if (st == FMOE_STATUS_OK)
        fmoe_ep_group_timing(r->group, 1, &discard);
    for (uint32_t i = 0; st == FMOE_STATUS_OK && i < p->timed; i++) {
        double t0 = now_s();
        st = forward(r->layer, p, j->first_token, m, 0, &io, &open);
        times[i] = now_s() - t0;
    }
    if (st != FMOE_STATUS_OK)
        fail(r, st, "forward");
    else if (p->timed) {
        qsort(times, p->timed, sizeof *times, cmp_double);
        r->median_s = times[p->timed / 2];
        r->timing.struct_size = sizeof r->timing;
        r->have_timing = fmoe_ep_group_timing(r->group, 0, &r->timing) == FMOE_STATUS_OK;
    }
    if (st == FMOE_STATUS_OK && open) {
        /* What the timed forwards added is of no interest: the replays'
         * record starts from zero. */
        uint64_t *discard_load = NULL;
        read_load(r->layer, p, &discard_load);
        free(discard_load);
        if ((st = replay(r->layer, p, j->first_token, m, &io, r)) != FMOE_STATUS_OK) {
            if (r->status == FMOE_STATUS_OK)
                fail(r, st, "graph replay");
        } else if (r->graphs)
            r->load_replayed_status = read_load(r->layer, p, &r->load_replayed);
    }
    free(times);
    if (open)
        run_device_io_close(r->layer, &io);
    return NULL;
}

uint32_t ep_ranks_run(const ep_plan *plan, ep_rank_result *res)
{
    rank_job jobs[EP_MAX_RANKS];
    pthread_t th[EP_MAX_RANKS];
    int started[EP_MAX_RANKS] = {0};
    int64_t first = 0;
    for (uint32_t r = 0; r < plan->first; r++)
        first += plan->m[r];
    for (uint32_t i = 0; i < plan->count; i++) {
        memset(&res[i], 0, sizeof res[i]);
        jobs[i] = (rank_job){.plan = plan, .rank = plan->first + i, .first_token = first, .res = &res[i]};
        first += plan->m[plan->first + i];
        started[i] = pthread_create(&th[i], NULL, rank_main, &jobs[i]) == 0;
        if (!started[i]) {
            res[i].status = FMOE_STATUS_INTERNAL;
            snprintf(res[i].error, sizeof res[i].error, "could not start the rank's thread");
        }
    }
    uint32_t failed = 0;
    for (uint32_t i = 0; i < plan->count; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        failed += res[i].status != FMOE_STATUS_OK;
    }
    return failed;
}

void ep_ranks_free(ep_rank_result *res, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        fmoe_layer_destroy(res[i].layer);
        fmoe_ep_group_destroy(res[i].group);
        free(res[i].load);
        free(res[i].load_replayed);
        res[i].layer = NULL;
        res[i].group = NULL;
        res[i].load = res[i].load_replayed = NULL;
    }
}

int ep_devices_for(fmoe_context *ctx, const char *backend, uint32_t size, int32_t *kind, int32_t *base, char *why,
                   size_t cap)
{
    uint32_t n = fmoe_context_device_count(ctx), accel = 0, host = 0;
    int32_t accel_kind = FMOE_DEVICE_ANY;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_device_info d = {.struct_size = sizeof d};
        if (fmoe_context_device(ctx, i, &d) != FMOE_STATUS_OK || !d.available ||
            (backend && fnmatch(backend, d.plugin, 0) != 0))
            continue;
        if (d.kind == FMOE_DEVICE_CPU) {
            host++;
        } else if (accel_kind == FMOE_DEVICE_ANY || d.kind == accel_kind) {
            accel_kind = d.kind;
            accel++;
        }
    }
    if (accel >= size) {
        *kind = accel_kind;
        *base = 0;
        return 0;
    }
    if (accel == 0 && host > 0) {
        *kind = FMOE_DEVICE_ANY;
        *base = -1;
        return 0;
    }
    snprintf(why, cap, "%u ranks need %u devices; %s %u available %s device(s)", size, size,
             backend ? "the matching plugins report" : "the plugins report", accel,
             accel ? fmoe_device_kind_name(accel_kind) : "accelerator");
    return -1;
}

int ep_id_file_write(const char *path, const fmoe_ep_unique_id *id, char *why, size_t cap)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(why, cap, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = fwrite(id->bytes, 1, sizeof id->bytes, f) != sizeof id->bytes;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(why, cap, "%s: cannot write the unique id: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int ep_id_file_read(const char *path, uint32_t wait_ms, fmoe_ep_unique_id *id, char *why, size_t cap)
{
    double deadline = now_s() + wait_ms / 1000.0;
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id->bytes, 1, sizeof id->bytes, f);
            int extra = fgetc(f) != EOF;
            fclose(f);
            if (n != sizeof id->bytes || extra) {
                snprintf(why, cap, "%s: %zu%s bytes, expected a unique id of %zu bytes (written by rank 0)", path, n,
                         extra ? "+" : "", sizeof id->bytes);
                return -1;
            }
            return 0;
        }
        if (errno != ENOENT) {
            snprintf(why, cap, "%s: cannot read: %s", path, strerror(errno));
            return -1;
        }
        if (now_s() >= deadline) {
            snprintf(why, cap, "%s: rank 0 did not write the unique id within %u ms (--ep-wait-ms)", path, wait_ms);
            return -1;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int ep_round_through_dispatch(fmoe_dtype act, int32_t dispatch, void *x, int64_t rows, uint32_t h)
{
    if (dispatch != FMOE_EP_DISPATCH_FP8_TOKEN && dispatch != FMOE_EP_DISPATCH_FP8_BLOCK)
        return 0;
    const fmoe_dtype fp8 = FMOE_DTYPE_FP8_E4M3FN;
    int64_t block = dispatch == FMOE_EP_DISPATCH_FP8_BLOCK ? 128 : h;
    size_t es = fmoe_dtype_size(act);
    float *row = malloc(h * sizeof *row), *scales = malloc(((size_t)h / (size_t)block + 1) * sizeof *scales);
    uint8_t *q = malloc(h);
    int rc = row && scales && q ? 0 : -1;
    for (int64_t t = 0; rc == 0 && t < rows; t++) {
        char *p = (char *)x + (size_t)t * h * es;
        cli_load_floats(act, row, p, h);
        if (fmoe_fp8_quantize_blocks(fp8, fmoe_fp8_max(fp8), FMOE_FP8_SCALE_F32, 1, h, 1, block, row, q, scales) !=
            FMOE_STATUS_OK) {
            rc = -1;
            break;
        }
        for (uint32_t c = 0; c < h; c++)
            row[c] = fmoe_fp8_decode(fp8, q[c]) * scales[c / block];
        cli_store_floats(act, p, row, h);
    }
    free(row);
    free(scales);
    free(q);
    return rc;
}
