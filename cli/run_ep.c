/*
 * cli/run_ep.c - `fusedmoe run` on an expert-parallel group (docs/EP.md):
 *
 *   --gpus N                              one process, N ranks (threads) on
 *                                         N devices of the plugin (a host
 *                                         plugin: N ranks on the host)
 *   --ep N --ep-rank R --ep-id-file PATH  this process is rank R of N; rank 0
 *                                         writes the group's unique id to
 *                                         PATH, the others wait for it
 *
 * Every rank gets --tokens M tokens; all N*M are drawn from the seed in
 * every process, so each rank checks its own rows against the reference
 * layer computed on one device over all of them: the N-rank output must
 * equal the single-device output within the scheme's tolerance. Then every
 * rank forwards the same fixed number of times (the forward is collective),
 * timed with the host clock; the plugin's own dispatch / experts / combine
 * split follows when it measures one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/layers.h"
#include "cli/ep_ranks.h"
#include "cli/halfconv.h"
#include "cli/run.h"
#include "cli/run_ep.h"
#include "cli/run_weights.h"
#include "cli/selection_out.h"

#define TIMED_FORWARDS 5

static int make_id(const run_opts *o, fmoe_context *ctx, uint32_t rank, fmoe_ep_unique_id *id)
{
    fmoe_ep_group_options io;
    fmoe_ep_group_options_init(&io);
    io.backend = o->backend;
    char why[1024];
    if (o->ep_id_file && rank != 0)
        return ep_id_file_read(o->ep_id_file, o->ep_wait_ms, id, why, sizeof why) == 0
                   ? CLI_EXIT_OK
                   : (cli_error("rank %u: %s", rank, why), CLI_EXIT_CONFIG);
    fmoe_status st = fmoe_ep_unique_id_make(ctx, &io, id);
    if (st != FMOE_STATUS_OK) {
        cli_error("making the EP group's unique id: %s", fmoe_last_error());
        return cli_exit_for_status(st);
    }
    if (o->ep_id_file && ep_id_file_write(o->ep_id_file, id, why, sizeof why) != 0) {
        cli_error("rank 0: %s", why);
        return CLI_EXIT_CONFIG;
    }
    return CLI_EXIT_OK;
}

static void print_ep_text(const run_opts *o, const ep_plan *p, const ep_rank_result *res, const char *plugin)
{
    printf("ep:         %u ranks (%s), dispatch %s, mode %s, on %s; this process ran rank%s %u", p->size,
           o->ep_id_file ? "one process each" : "threads of this process", fmoe_ep_dispatch_name(p->dispatch),
           fmoe_ep_mode_name(p->mode), plugin, p->count > 1 ? "s" : "", p->first);
    if (p->count > 1)
        printf("..%u", p->first + p->count - 1);
    printf("\n");
    for (uint32_t i = 0; i < p->count; i++) {
        const ep_rank_result *r = &res[i];
        printf("rank %-5u  median %.3f ms per forward", p->first + i, 1e3 * r->median_s);
        if (r->have_timing && r->timing.forwards)
            printf("; dispatch %.3f ms, experts %.3f ms, combine %.3f ms (the plugin's split)",
                   1e3 * r->timing.dispatch_seconds / (double)r->timing.forwards,
                   1e3 * r->timing.experts_seconds / (double)r->timing.forwards,
                   1e3 * r->timing.combine_seconds / (double)r->timing.forwards);
        printf("\n");
        if (r->graphs)
            printf("rank %-5u  graph: the forward captured and replayed, median %.3f ms (device events); the "
                   "result above is the replayed output\n",
                   p->first + i, 1e3 * r->graph_median_s);
        if (r->capture_refused)
            printf("rank %-5u  graph: capture refused, as a high_throughput forward must be: %s\n", p->first + i,
                   r->capture_why);
    }
}

/* The oracle: the reference layer on one device over every rank's tokens. */
static int oracle(fmoe_context *ctx, const run_opts *o, const fmoe_layer_config *cfg, const cf_inputs *in,
                  synth_ckpt **built, fmoe_layer **ref, float *expect)
{
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_status st = fmoe_layer_create(ctx, cfg, &o->scheme, &lo, ref);
    if (st != FMOE_STATUS_OK) {
        cli_error("the reference backend, which run compares against, cannot serve this layer: %s", fmoe_last_error());
        return cli_exit_for_status(st);
    }
    run_checkpoint ck = {.seed = o->seed, .cfg = cfg, .correction_bias = in->bias, .scheme = &o->scheme};
    int rc = run_build_checkpoint(*ref, "reference", &ck, built);
    if (rc == CLI_EXIT_OK)
        rc = run_load_built(*ref, "reference", *built);
    char why[1024];
    int guard = 1;
    if (rc == CLI_EXIT_OK && (st = cf_forward(*ref, cfg, in, 0, expect, &guard, why, sizeof why)) != FMOE_STATUS_OK) {
        cli_error("forward on the reference layer: %s", why);
        rc = cli_exit_for_status(st);
    }
    return rc;
}

int run_ep(const cli_globals *g, run_opts *o, fmoe_context *ctx)
{
    uint32_t size = o->gpus ? o->gpus : o->cfg.ep_size;
    uint32_t first = o->gpus ? 0 : o->cfg.ep_rank, count = o->gpus ? o->gpus : 1;
    fmoe_layer_config cfg = o->cfg;
    cfg.ep_size = 1;
    cfg.ep_rank = 0;
    uint64_t total = (uint64_t)size * o->tokens;
    if (total > cfg.max_num_tokens)
        cfg.max_num_tokens = (uint32_t)total; /* the oracle sees every rank's tokens */
    uint32_t *m = calloc(size, sizeof *m);
    cf_inputs in = {0};
    char why[1024];
    if (!m) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    for (uint32_t r = 0; r < size; r++)
        m[r] = o->tokens;
    if (cf_inputs_make(&cfg, (int64_t)total, o->seed, &in, why, sizeof why) != 0) {
        free(m);
        cli_error("%s", why);
        return CLI_EXIT_INTERNAL;
    }
    /* FP8 dispatch quantizes the tokens: the oracle sees them so too. */
    if (ep_round_through_dispatch(cfg.act_dtype, o->ep_dispatch, in.x, (int64_t)total, cfg.hidden_size) != 0) {
        free(m);
        cf_inputs_free(&in);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    size_t n = (size_t)total * cfg.hidden_size;
    float *expect = malloc(n * sizeof *expect), *got = malloc(n * sizeof *got);
    void *out = malloc(n * sizeof(float));
    synth_ckpt *built = NULL;
    fmoe_layer *ref = NULL;
    int rc = expect && got && out ? CLI_EXIT_OK : (cli_error("out of memory for the outputs"), CLI_EXIT_INTERNAL);
    if (rc == CLI_EXIT_OK)
        rc = oracle(ctx, o, &cfg, &in, &built, &ref, expect);
    fmoe_ep_unique_id id;
    if (rc == CLI_EXIT_OK)
        rc = make_id(o, ctx, first, &id);
    int32_t kind = FMOE_DEVICE_ANY, base = -1;
    if (rc == CLI_EXIT_OK && ep_devices_for(ctx, o->backend, o->gpus ? size : 1, &kind, &base, why, sizeof why) != 0) {
        cli_error("%s", why);
        rc = CLI_EXIT_NO_BACKEND;
    }
    /* One process per rank: with every device visible rank R takes device
     * R; with only its own visible (CUDA_VISIBLE_DEVICES), device 0. */
    uint32_t first_device_rank = 0;
    if (rc == CLI_EXIT_OK && !o->gpus && base >= 0) {
        int32_t all_kind = kind, all_base = -1;
        char all_why[256];
        if (ep_devices_for(ctx, o->backend, size, &all_kind, &all_base, all_why, sizeof all_why) != 0)
            first_device_rank = first;
    }
    ep_plan plan = {.ctx = ctx,
                    .cfg = &cfg,
                    .scheme = &o->scheme,
                    .backend = o->backend,
                    .size = size,
                    .first = first,
                    .count = count,
                    .max_tokens = o->tokens,
                    .m = m,
                    .dispatch = o->ep_dispatch,
                    .mode = o->ep_mode,
                    .id = &id,
                    .device_kind = kind,
                    .device_base = base,
                    .first_device_rank = first_device_rank,
                    .built = built,
                    .x = in.x,
                    .topk_w = in.topk_w,
                    .topk_ids = in.topk_ids,
                    .out = out,
                    .timed = TIMED_FORWARDS};
    ep_rank_result res[EP_MAX_RANKS];
    int ran = rc == CLI_EXIT_OK;
    if (ran && ep_ranks_run(&plan, res) != 0) {
        for (uint32_t i = 0; i < count; i++)
            if (res[i].status != FMOE_STATUS_OK)
                cli_error("rank %u: %s", first + i, res[i].error);
        for (uint32_t i = 0; i < count && rc == CLI_EXIT_OK; i++)
            if (res[i].status != FMOE_STATUS_OK)
                rc = cli_exit_for_status(res[i].status);
    }
    if (rc == CLI_EXIT_OK) {
        /* This process's ranks' rows against the oracle's same rows. */
        size_t row0 = (size_t)first * o->tokens, rows = (size_t)count * o->tokens;
        size_t off = row0 * cfg.hidden_size, len = rows * cfg.hidden_size;
        cli_load_floats(cfg.act_dtype, got + off, (char *)out + off * fmoe_dtype_size(cfg.act_dtype), len);
        char rerun[2048], extra[256];
        run_rerun_line(g, o, rerun, sizeof rerun);
        if (o->gpus)
            snprintf(extra, sizeof extra, " --gpus %u", o->gpus);
        else
            snprintf(extra, sizeof extra, " --ep-id-file %s", o->ep_id_file);
        size_t rl = strlen(rerun);
        snprintf(rerun + rl, sizeof rerun - rl, "%s --ep-dispatch %s --ep-mode %s", extra,
                 fmoe_ep_dispatch_name(o->ep_dispatch), fmoe_ep_mode_name(o->ep_mode));
        run_report r = {
            .o = o, .rerun = rerun, .sel = fmoe_layer_selection(res[0].layer), .out = got + off, .ref = expect + off};
        r.timing.runs = TIMED_FORWARDS;
        r.timing.median_s = res[0].median_s;
        r.tol = run_tolerance_for(cfg.act_dtype, &o->scheme);
        run_compare(got + off, expect + off, (int64_t)len, &r.tol, &r.err);
        cli_selection_chosen(r.sel, r.selected, sizeof r.selected);
        cli_selection_chosen(fmoe_layer_selection(ref), r.oracle, sizeof r.oracle);
        if (o->json) {
            rc = run_print_json(&r);
        } else {
            run_print_text(&r);
            print_ep_text(o, &plan, res, fmoe_ep_group_plugin(res[0].group));
        }
        if (rc == CLI_EXIT_OK)
            rc = run_passed(&r.err) ? CLI_EXIT_OK : CLI_EXIT_CHECK;
    }
    if (ran)
        ep_ranks_free(res, count);
    synth_free(built);
    fmoe_layer_destroy(ref);
    cf_inputs_free(&in);
    free(expect);
    free(got);
    free(out);
    free(m);
    return rc;
}
