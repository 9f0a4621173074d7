/*
 * cli/bench/bench_ep.c - `fusedmoe bench --gpus N`: the layer on an EP group
 * of N ranks (threads of this process, on N devices of the plugin, or on
 * the host for a host plugin; docs/EP.md). For each shape and token count M
 * (tokens per rank): every rank forwards --iters times (the forward is
 * collective, so all ranks run the same count) after one warm-up forward;
 * the table gives the slowest rank's median layer time and, where the
 * plugin measures them (plugin ABI 1.3 fmoe_ep_ops.timing), the dispatch,
 * experts and combine times per forward, averaged over the ranks.
 *
 * The layer time is a host clock around each forward and a device
 * synchronize: on a GPU it includes launch overhead that a CUDA-graph
 * replay would not (the plugin's phase split is its own events). Device
 * plugins then capture each rank's low-latency forward in a graph and
 * replay it (cli/ep_ranks.c): BENCH_EP_CHAIN forwards back to back in one
 * graph, so that the ranks run in step through the forwards' own waits (as
 * an engine's consecutive decode steps do) and the ranks' different start
 * times are paid once a replay, not once a forward. The graph column is
 * the slowest rank's median replay divided by the chain: the time a
 * forward takes in steady state, without launch overhead.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench/bench.h"
#include "cli/bench/bench_ep.h"
#include "cli/ep_ranks.h"
#include "cli/halfconv.h"
#include "cli/json_out.h"
#include "cli/rng.h"
#include "cli/run_weights.h"

enum { BENCH_EP_CHAIN = 8 };

/* The floor's two factors for one shape, from the layer that declares
 * every expert: the bytes an expert streams, and the device's rate (0 on a
 * host plugin or one that measures no rate). */
typedef struct ep_floor {
    double expert_bytes, rate;
} ep_floor;

/* One shape, one M: 0 and the point, or an exit code after reporting. */
static int one_point(fmoe_context *ctx, const bench_ep_opts *o, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                     const synth_ckpt *built, const ep_floor *fl, uint32_t m, int32_t kind, int32_t base,
                     bench_ep_point *p)
{
    uint32_t n = o->gpus, k = cfg->top_k, h = cfg->hidden_size;
    size_t total = (size_t)n * m;
    float *xf = malloc(total * h * sizeof *xf), *logits = malloc(total * cfg->num_experts * sizeof *logits);
    uint16_t *x = malloc(total * h * 2), *y = malloc(total * h * 2);
    float *w = malloc(total * k * sizeof *w);
    int32_t *ids = malloc(total * k * sizeof *ids);
    uint32_t *counts = malloc(n * sizeof *counts);
    ep_rank_result *res = calloc(n, sizeof *res);
    int rc = CLI_EXIT_OK;
    if (!xf || !logits || !x || !y || !w || !ids || !counts || !res) {
        cli_error("out of memory for %zu tokens", total);
        rc = CLI_EXIT_INTERNAL;
        goto done;
    }
    cli_rng_fill_normal(xf, total * h, 1.0f, o->seed, "bench_x", 0);
    cli_store_floats(FMOE_DTYPE_BF16, x, xf, total * h);
    cli_rng_fill_normal(logits, total * cfg->num_experts, 1.0f, o->seed, "bench_logits", m);
    fmoe_tensor tl, tw, ti;
    const int64_t ls[2] = {(int64_t)total, cfg->num_experts}, ks[2] = {(int64_t)total, k};
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, logits);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, ks, w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, ks, ids);
    fmoe_status st = fmoe_reference_route(cfg, &tl, NULL, &tw, &ti);
    if (st != FMOE_STATUS_OK) {
        rc = cli_fail(st, "routing");
        goto done;
    }
    for (uint32_t r = 0; r < n; r++)
        counts[r] = m;
    fmoe_ep_group_options io;
    fmoe_ep_group_options_init(&io);
    io.backend = o->backend;
    fmoe_ep_unique_id id;
    if ((st = fmoe_ep_unique_id_make(ctx, &io, &id)) != FMOE_STATUS_OK) {
        cli_error("EP unique id: %s", fmoe_last_error());
        rc = cli_exit_for_status(st);
        goto done;
    }
    ep_plan plan = {.ctx = ctx,
                    .cfg = cfg,
                    .scheme = scheme,
                    .backend = o->backend,
                    .size = n,
                    .first = 0,
                    .count = n,
                    .max_tokens = o->max_tokens ? o->max_tokens : m,
                    .m = counts,
                    .dispatch = o->dispatch,
                    .mode = o->mode,
                    .id = &id,
                    .device_kind = kind,
                    .device_base = base,
                    .built = built,
                    .x = x,
                    .topk_w = w,
                    .topk_ids = ids,
                    .out = y,
                    .timed = o->iters,
                    .replay_chain = BENCH_EP_CHAIN};
    if (ep_ranks_run(&plan, res) != 0) {
        for (uint32_t r = 0; r < n; r++)
            if (res[r].status != FMOE_STATUS_OK) {
                cli_error("rank %u: %s", r, res[r].error);
                if (rc == CLI_EXIT_OK)
                    rc = cli_exit_for_status(res[r].status);
            }
    } else {
        memset(p, 0, sizeof *p);
        p->m = m;
        p->slowest_rank_experts = bench_busiest_rank_experts(ids, total * k, cfg->num_experts, n);
        if (fl->rate > 0 && fl->expert_bytes > 0 && p->slowest_rank_experts) {
            p->have_floor = 1;
            p->floor_us = 1e6 * bench_floor_seconds(p->slowest_rank_experts * fl->expert_bytes, fl->rate, 0, 0);
        }
        p->have_split = 1;
        p->have_graph = 1;
        for (uint32_t r = 0; r < n; r++) {
            if (res[r].median_s * 1e6 > p->layer_us)
                p->layer_us = res[r].median_s * 1e6;
            if (!res[r].graphs)
                p->have_graph = 0;
            else if (res[r].graph_median_s * 1e6 > p->graph_us)
                p->graph_us = res[r].graph_median_s * 1e6;
            const fmoe_ep_timing *t = &res[r].timing;
            if (!res[r].have_timing || !t->forwards) {
                p->have_split = 0;
                continue;
            }
            p->dispatch_us += 1e6 * t->dispatch_seconds / (double)t->forwards / n;
            p->experts_us += 1e6 * t->experts_seconds / (double)t->forwards / n;
            p->combine_us += 1e6 * t->combine_seconds / (double)t->forwards / n;
        }
    }
    ep_ranks_free(res, n);
done:
    free(xf), free(logits), free(x), free(y), free(w), free(ids), free(counts), free(res);
    return rc;
}

int bench_ep_shape(fmoe_context *ctx, const bench_ep_opts *o, const bench_shape *shape, const fmoe_scheme *scheme,
                   bench_ep_point *pts, size_t *n_pts)
{
    uint32_t max_m = 0;
    for (size_t i = 0; i < o->n_tokens; i++)
        max_m = o->tokens[i] > max_m ? o->tokens[i] : max_m;
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = shape->experts;
    cfg.top_k = shape->top_k;
    cfg.hidden_size = shape->hidden;
    cfg.intermediate_size = shape->inter;
    cfg.act_dtype = FMOE_DTYPE_BF16;
    cfg.renormalize = 1;
    cfg.max_num_tokens = max_m * o->gpus;
    int32_t kind, base;
    char why[512];
    if (ep_devices_for(ctx, o->backend, o->gpus, &kind, &base, why, sizeof why) != 0) {
        cli_error("%s", why);
        return CLI_EXIT_NO_BACKEND;
    }
    /* The checkpoint of every expert, from a layer of the plugin on one
     * device that declares them all (never loaded). */
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = o->backend;
    fmoe_layer *probe = NULL;
    fmoe_status st = fmoe_layer_create(ctx, &cfg, scheme, &lo, &probe);
    if (st != FMOE_STATUS_OK) {
        cli_error("%s: %s", shape->name, fmoe_last_error());
        return cli_exit_for_status(st);
    }
    synth_ckpt *built = NULL;
    run_checkpoint ck = {.seed = o->seed, .cfg = &cfg, .scheme = scheme};
    int rc = run_build_checkpoint(probe, "selected", &ck, &built);
    ep_floor fl = {.expert_bytes = bench_expert_bytes(probe, scheme, 1)};
    const double copy = rc == CLI_EXIT_OK ? bench_device_copy_rate(probe) : 0;
    const double read = copy < 0 ? -1 : rc == CLI_EXIT_OK ? bench_device_read_rate(probe) : 0;
    if (copy < 0 || read < 0)
        rc = CLI_EXIT_INTERNAL; /* reported */
    fl.rate = bench_memory_rate(copy, read, NULL);
    fmoe_layer_destroy(probe);
    for (size_t t = 0; t < o->n_tokens && rc == CLI_EXIT_OK; t++) {
        bench_ep_point *p = &pts[*n_pts];
        rc = one_point(ctx, o, &cfg, scheme, built, &fl, o->tokens[t], kind, base, p);
        if (rc == CLI_EXIT_OK) {
            p->shape = *shape;
            (*n_pts)++;
        }
    }
    synth_free(built);
    return rc;
}

void bench_ep_print(const bench_ep_opts *o, const bench_ep_point *pts, size_t n)
{
    char cap[64] = "M/rank";
    if (o->max_tokens)
        snprintf(cap, sizeof cap, "%u", o->max_tokens);
    printf("ep:        %u ranks, dispatch %s, mode %s, max_tokens_per_rank %s; layer = slowest rank's median (host "
           "clock, device synchronized); graph = slowest rank's median replay of %d forwards in one graph, per "
           "forward; floor = the weights of the rank holding the most touched experts (E) / the device's rate; "
           "phases = the plugin's split, averaged over the ranks\n\n",
           o->gpus, fmoe_ep_dispatch_name(o->dispatch), fmoe_ep_mode_name(o->mode), cap, (int)BENCH_EP_CHAIN);
    printf("%-16s %8s %6s %11s %11s %11s %4s %12s %12s %12s\n", "shape", "experts", "M/rank", "layer us", "graph us",
           "floor us", "E", "dispatch us", "experts us", "combine us");
    for (size_t i = 0; i < n; i++) {
        const bench_ep_point *p = &pts[i];
        char graph[32] = "-", flr[32] = "-", d[32] = "-", e[32] = "-", c[32] = "-";
        if (p->have_graph)
            snprintf(graph, sizeof graph, "%.1f", p->graph_us);
        if (p->have_floor)
            snprintf(flr, sizeof flr, "%.1f", p->floor_us);
        if (p->have_split) {
            snprintf(d, sizeof d, "%.1f", p->dispatch_us);
            snprintf(e, sizeof e, "%.1f", p->experts_us);
            snprintf(c, sizeof c, "%.1f", p->combine_us);
        }
        printf("%-16s %8u %6u %11.1f %11s %11s %4u %12s %12s %12s\n", p->shape.name, p->shape.experts, p->m,
               p->layer_us, graph, flr, p->slowest_rank_experts, d, e, c);
    }
}

static json_t *us_or_null(int have, double us)
{
    return have ? json_real(us) : json_null();
}

int bench_ep_write_json(const char *path, const bench_ep_opts *o, const bench_ep_point *pts, size_t n,
                        const char *scheme_key, const char *command)
{
    json_t *root = bench_record_new(command, o->seed, scheme_key, o->backend), *ep = json_object(), *arr = json_array();
    cli_json_set(ep, "ranks", json_integer(o->gpus));
    cli_json_set(ep, "dispatch", cli_json_string(fmoe_ep_dispatch_name(o->dispatch)));
    cli_json_set(ep, "mode", cli_json_string(fmoe_ep_mode_name(o->mode)));
    /* null: each point's tokens a rank */
    cli_json_set(ep, "max_tokens_per_rank", o->max_tokens ? json_integer(o->max_tokens) : json_null());
    cli_json_set(ep, "forwards_per_graph", json_integer(BENCH_EP_CHAIN));
    cli_json_set(ep, "forwards_timed", json_integer(o->iters));
    cli_json_set(root, "ep", ep);
    for (size_t i = 0; i < n; i++) {
        const bench_ep_point *p = &pts[i];
        json_t *pt = json_object();
        cli_json_set(pt, "shape", cli_json_string(p->shape.name));
        cli_json_set(pt, "experts", json_integer(p->shape.experts));
        cli_json_set(pt, "top_k", json_integer(p->shape.top_k));
        cli_json_set(pt, "hidden", json_integer(p->shape.hidden));
        cli_json_set(pt, "intermediate", json_integer(p->shape.inter));
        cli_json_set(pt, "tokens_per_rank", json_integer(p->m));
        cli_json_set(pt, "layer_us", json_real(p->layer_us));
        cli_json_set(pt, "graph_us", us_or_null(p->have_graph, p->graph_us));
        cli_json_set(pt, "floor_us", us_or_null(p->have_floor, p->floor_us));
        cli_json_set(pt, "slowest_rank_experts", json_integer(p->slowest_rank_experts));
        cli_json_set(pt, "dispatch_us", us_or_null(p->have_split, p->dispatch_us));
        cli_json_set(pt, "experts_us", us_or_null(p->have_split, p->experts_us));
        cli_json_set(pt, "combine_us", us_or_null(p->have_split, p->combine_us));
        json_array_append_new(arr, pt);
    }
    cli_json_set(root, "points", arr);
    return bench_record_write(root, path);
}
