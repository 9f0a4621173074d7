/*
 * cli/cmd_run.c - `fusedmoe run`: build a random layer on the selected backend
 * and on the reference backend, feed both the same weights and tokens, and
 * compare the outputs; then time the selected backend.
 *
 * Everything random comes from one seed (cli/rng.h), printed with a command
 * line that reproduces the run exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/halfconv.h"
#include "cli/layer_flags.h"
#include "cli/rng.h"
#include "cli/run.h"
#include "cli/run_compare.h"
#include "cli/run_device.h"
#include "cli/run_ep.h"
#include "cli/run_model.h"
#include "cli/run_weights.h"
#include "cli/scheme_arg.h"
#include "cli/selection_out.h"

#define DEFAULT_TOKENS 64

/* The forward inputs, shared by both layers. */
typedef struct run_inputs {
    int64_t m;
    void *x;           /* [M, H] act dtype */
    float *logits;     /* [M, E] */
    float *bias;       /* [E], or NULL without a correction bias */
    float *topk_w;     /* [M, k] */
    int32_t *topk_ids; /* [M, k], global physical ids */
    fmoe_tensor tx, tlogits, tw, tids;
} run_inputs;

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] run [--scheme KEY|CONFIG] [layer flags] [--tokens M] [--seed N]\n"
          "                                     [--backend GLOB] [--logits] [--json]\n"
          "\n"
          "Builds a layer with random weights (N(0,1)/sqrt(fan_in); for a quantized scheme quantized\n"
          "into its checkpoint tensors, as a producer would) on the selected backend and the same\n"
          "layer on the reference backend, runs both on the same random tokens and\n"
          "routing, and compares them: max abs error, max relative error (max|out-ref| / max|ref|),\n"
          "NMSE and a per-element tolerance (bf16 2e-2 + 2e-2*|ref|, f16 1e-3 + 1e-3*|ref|,\n"
          "f32 1e-5 + 1e-5*|ref|; the coarsest of the activation and weight dtypes; NaN never\n"
          "passes). Then times the selected backend's forward (median, tokens/s).\n"
          "\n"
          "Options:\n"
          "  --scheme KEY           quantization scheme key (docs/SCHEMES.md; default bf16), or the\n"
          "                         path of a checkpoint's config.json (its quantization_config)\n"
          "  --modules P            expert module prefix in that config.json\n"
          "                         (default " CLI_SCHEME_DEFAULT_MODULES ")\n"
          "  --tokens M             tokens per forward (default 64)\n"
          "  --seed N               seed of every random value (default: a fresh one, printed)\n"
          "  --backend GLOB         only plugins whose name matches may serve (strict)\n"
          "  --logits               give both layers router logits instead of top-k routing\n"
          "                         (needed by backends that route themselves)\n"
          "  --json                 one JSON document instead of text\n"
          "  --help                 this help\n"
          "\n"
          "Expert parallelism on a real group (docs/EP.md); every rank takes --tokens M tokens and\n"
          "checks its rows against the reference on one device over all of them:\n"
          "  --gpus N               N ranks in this process (threads), on N devices of the plugin\n"
          "                         (a host plugin such as reference: N ranks on the host)\n"
          "  --ep-id-file PATH      with --ep N --ep-rank R: this process is rank R of N; rank 0\n"
          "                         writes the group's unique id to PATH, the others read it\n"
          "  --ep-wait-ms MS        how long ranks > 0 wait for PATH (default 60000)\n"
          "  --ep-dispatch D        activation (default), fp8_token or fp8_block\n"
          "  --ep-mode M            low_latency (default) or high_throughput\n"
          "  (--ep N --ep-rank R alone simulate one rank: its share of the experts, no\n"
          "  communication, compared with the reference's same share.)\n"
          "\n",
          f);
    layer_flags_help(f);
    fputs("\n"
          "Exit codes: 0 PASS; 1 FAIL (outputs differ); 2 usage; 3 bad configuration, layer or\n"
          "scheme; 4 no backend (or no reference) can serve the layer; 5 plugin or internal error.\n",
          f);
}

/* Parse the command line. Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, run_opts *o)
{
    o->scheme_key = "bf16";
    o->tokens = DEFAULT_TOKENS;
    o->ep_dispatch = FMOE_EP_DISPATCH_ACTIVATION;
    o->ep_mode = FMOE_EP_MODE_LOW_LATENCY;
    o->ep_wait_ms = 60000;
    layer_flags_defaults(&o->cfg);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--json")) {
            o->json = 1;
        } else if (cli_opt_flag(argv[i], "--logits")) {
            o->logits = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--scheme", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("run", "--scheme needs a key (e.g. bf16) or a config.json path");
            o->scheme_key = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--modules", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("run", "--modules needs a module prefix (e.g. model.layers.3.mlp.experts)");
            o->modules = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--tokens", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("run", "--tokens needs a value (M)");
            if (cli_parse_u32(v, &o->tokens) != 0 || o->tokens == 0)
                return cli_usage("run", "--tokens: invalid value '%s' (expected a whole number from 1)", v);
        } else if ((r = cli_opt_value(argc, argv, &i, "--seed", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("run", "--seed needs a value (N)");
            if (cli_parse_u64(v, &o->seed) != 0)
                return cli_usage("run", "--seed: invalid value '%s' (expected a whole number from 0 to 2^64-1)", v);
            o->seed_given = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--gpus", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u32(v, &o->gpus) != 0 || o->gpus == 0 || o->gpus > 64)
                return cli_usage("run", "--gpus: expected a number of ranks from 1 to 64");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-id-file", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("run", "--ep-id-file needs a path every rank can reach");
            o->ep_id_file = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-wait-ms", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u32(v, &o->ep_wait_ms) != 0)
                return cli_usage("run", "--ep-wait-ms: expected milliseconds");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-dispatch", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !(o->ep_dispatch = fmoe_ep_dispatch_from_name(v)))
                return cli_usage("run", "--ep-dispatch: expected activation, fp8_token or fp8_block");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-mode", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !(o->ep_mode = fmoe_ep_mode_from_name(v)))
                return cli_usage("run", "--ep-mode: expected low_latency or high_throughput");
        } else if ((r = cli_opt_value(argc, argv, &i, "--backend", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("run", "--backend needs a plugin-name glob");
            o->backend = v;
        } else if ((r = layer_flags_parse(&o->cfg, "run", argc, argv, &i)) != LAYER_FLAG_NOT_MINE) {
            if (r == LAYER_FLAG_BAD)
                return CLI_EXIT_USAGE;
        } else {
            return cli_usage("run", "unknown option '%s'", argv[i]);
        }
    }
    return -1;
}

static int create_layer(fmoe_context *ctx, const run_opts *o, const char *backend, const char *who, fmoe_layer **out)
{
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = backend;
    fmoe_status st = fmoe_layer_create(ctx, &o->cfg, &o->scheme, &lo, out);
    if (st == FMOE_STATUS_OK)
        return CLI_EXIT_OK;
    *out = NULL;
    if (st == FMOE_STATUS_UNSUPPORTED && strcmp(who, "reference") == 0)
        cli_error("the reference backend, which run compares against, cannot serve this layer: %s", fmoe_last_error());
    else if (st == FMOE_STATUS_UNSUPPORTED)
        cli_error("%s", fmoe_last_error()); /* says which backends refused and why */
    else
        cli_error("creating the %s layer: %s", who, fmoe_last_error());
    return cli_exit_for_status(st);
}

static void free_inputs(run_inputs *in)
{
    free(in->x);
    free(in->logits);
    free(in->bias);
    free(in->topk_w);
    free(in->topk_ids);
}

/* x ~ N(0,1), logits ~ N(0,1), correction bias ~ N(0,1)/10 (a nudge to the
 * selection, as trained biases are), all from the seed. */
static int make_inputs(const run_opts *o, run_inputs *in)
{
    const fmoe_layer_config *c = &o->cfg;
    size_t m = o->tokens, h = c->hidden_size, e = c->num_experts, k = c->top_k;
    in->m = (int64_t)m;
    in->x = malloc(m * h * sizeof(float));
    in->logits = malloc(m * e * sizeof(float));
    in->topk_w = malloc(m * k * sizeof(float));
    in->topk_ids = malloc(m * k * sizeof(int32_t));
    float *xf = malloc(m * h * sizeof(float));
    if (c->has_correction_bias)
        in->bias = malloc(e * sizeof(float));
    if (!in->x || !in->logits || !in->topk_w || !in->topk_ids || !xf || (c->has_correction_bias && !in->bias)) {
        free(xf);
        cli_error("out of memory for %zu tokens", m);
        return CLI_EXIT_INTERNAL;
    }
    cli_rng_fill_normal(xf, m * h, 1.0f, o->seed, "x", 0);
    cli_store_floats(c->act_dtype, in->x, xf, m * h);
    free(xf);
    cli_rng_fill_normal(in->logits, m * e, 1.0f, o->seed, "router_logits", 0);
    if (in->bias)
        cli_rng_fill_normal(in->bias, e, 0.1f, o->seed, "e_score_correction_bias", 0);
    const int64_t xs[2] = {in->m, (int64_t)h}, ls[2] = {in->m, (int64_t)e}, ks[2] = {in->m, (int64_t)k};
    fmoe_status st = fmoe_tensor_init(&in->tx, c->act_dtype, 2, xs, in->x);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tlogits, FMOE_DTYPE_F32, 2, ls, in->logits);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tw, FMOE_DTYPE_F32, 2, ks, in->topk_w);
    if (st == FMOE_STATUS_OK)
        st = fmoe_tensor_init(&in->tids, FMOE_DTYPE_INT32, 2, ks, in->topk_ids);
    return st == FMOE_STATUS_OK ? CLI_EXIT_OK : cli_fail(st, "describing the inputs");
}

/* Logical expert ids -> global physical ids under EPLB. Physical experts
 * 0..L-1 are the logical ones and the R redundant ones follow, L+j holding
 * logical j % L (vLLM's initial EPLB layout, which the loader fills); so
 * the replicas of l are l, l+L, l+2L, ... below L+R. Slot i takes replica
 * i % count so every replica sees traffic. Both layers hold the same
 * layout, so any valid choice compares like with like. */
static void map_to_replicas(const fmoe_layer_config *c, int32_t *ids, int64_t n)
{
    uint32_t l = c->num_experts, r = c->num_redundant_experts;
    for (int64_t i = 0; i < n; i++) {
        uint32_t id = (uint32_t)ids[i];
        uint32_t count = 1 + r / l + (id < r % l ? 1 : 0);
        ids[i] = (int32_t)(id + (uint32_t)(i % count) * l);
    }
}

static int route_inputs(const run_opts *o, run_inputs *in)
{
    fmoe_tensor tbias;
    const int64_t bs[1] = {o->cfg.num_experts};
    if (in->bias && fmoe_tensor_init(&tbias, FMOE_DTYPE_F32, 1, bs, in->bias) != FMOE_STATUS_OK)
        return cli_fail(FMOE_STATUS_INTERNAL, "describing the correction bias");
    fmoe_status st = fmoe_reference_route(&o->cfg, &in->tlogits, in->bias ? &tbias : NULL, &in->tw, &in->tids);
    if (st != FMOE_STATUS_OK)
        return cli_fail(st, "routing");
    if (o->cfg.enable_eplb && o->cfg.num_redundant_experts)
        map_to_replicas(&o->cfg, in->topk_ids, in->m * (int64_t)o->cfg.top_k);
    return CLI_EXIT_OK;
}

/* The forward's host tensors: x and the routing `o` asks for, into out. */
static fmoe_forward_args host_args(const run_opts *o, const run_inputs *in, fmoe_tensor *out)
{
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &in->tx, .out = out};
    if (o->logits) {
        a.router_logits = &in->tlogits;
    } else {
        a.topk_weights = &in->tw;
        a.topk_ids = &in->tids;
    }
    return a;
}

static int forward_failed(const char *who, const run_opts *o, fmoe_status st)
{
    cli_error("forward on the %s layer: %s", who, fmoe_last_error());
    if (!o->logits && st == FMOE_STATUS_INVALID_ARGUMENT)
        fprintf(stderr, "fusedmoe: hint: a backend that routes itself needs --logits\n");
    else if (o->logits && st == FMOE_STATUS_UNSUPPORTED && strstr(fmoe_last_error(), "modular"))
        fprintf(stderr, "fusedmoe: hint: this backend takes top-k routing on its device: drop --logits\n");
    return cli_exit_for_status(st);
}

/* Forward once where the layer lives (a device layer gets device copies of
 * the inputs, run_device.h) into `out_f32` (as f32); then, if `timing`,
 * time more forwards on the same tensors (the first one warmed it up). */
static int forward_once(fmoe_layer *layer, const char *who, const run_opts *o, const run_inputs *in, void *out_buf,
                        float *out_f32, run_timing *timing)
{
    const int64_t shape[2] = {in->m, o->cfg.hidden_size};
    fmoe_tensor out;
    fmoe_status st = fmoe_tensor_init(&out, o->cfg.act_dtype, 2, shape, out_buf);
    fmoe_forward_args a = host_args(o, in, &out);
    run_device_io io;
    if (st == FMOE_STATUS_OK)
        st = run_device_io_open(layer, &a, &io);
    if (st != FMOE_STATUS_OK) {
        cli_error("the %s layer's tensors on its device: %s", who, fmoe_last_error());
        return cli_exit_for_status(st);
    }
    st = fmoe_layer_forward(layer, &io.args);
    if (st == FMOE_STATUS_OK)
        st = run_device_io_fetch(layer, &io, &a);
    int rc = st == FMOE_STATUS_OK ? CLI_EXIT_OK : forward_failed(who, o, st);
    if (rc == CLI_EXIT_OK)
        cli_load_floats(o->cfg.act_dtype, out_f32, out_buf, (size_t)in->m * o->cfg.hidden_size);
    if (rc == CLI_EXIT_OK && timing && (st = run_time_forward(layer, &io.args, timing)) != FMOE_STATUS_OK)
        rc = cli_fail(st, "timed forward");
    run_device_io_close(layer, &io);
    return rc;
}

/* Load, forward and compare. Owns nothing; returns an exit code. */
static int check_and_time(const cli_globals *g, const run_opts *o, fmoe_layer *sel, fmoe_layer *ref, run_inputs *in)
{
    char rerun[2048];
    run_rerun_line(g, o, rerun, sizeof rerun);
    /* One checkpoint, quantized once: both layers load identical tensors. */
    run_checkpoint ck = {.seed = o->seed, .cfg = &o->cfg, .correction_bias = in->bias, .scheme = &o->scheme};
    synth_ckpt *built = NULL;
    int rc = run_build_checkpoint(ref, "reference", &ck, &built);
    if (rc == CLI_EXIT_OK)
        rc = run_load_built(sel, "selected", built);
    if (rc == CLI_EXIT_OK)
        rc = run_load_built(ref, "reference", built);
    synth_free(built);
    if (rc == CLI_EXIT_OK && !o->logits)
        rc = route_inputs(o, in);
    if (rc != CLI_EXIT_OK)
        return rc;
    size_t n = (size_t)in->m * o->cfg.hidden_size;
    void *buf = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float)), *expect = malloc(n * sizeof(float));
    run_report r = {.o = o, .rerun = rerun, .sel = fmoe_layer_selection(sel), .out = out, .ref = expect};
    if (!buf || !out || !expect) {
        cli_error("out of memory for the outputs");
        rc = CLI_EXIT_INTERNAL;
    }
    if (rc == CLI_EXIT_OK)
        rc = forward_once(sel, "selected", o, in, buf, out, &r.timing);
    if (rc == CLI_EXIT_OK)
        rc = forward_once(ref, "reference", o, in, buf, expect, NULL);
    if (rc == CLI_EXIT_OK) {
        r.tol = run_tolerance_for(o->cfg.act_dtype, &o->scheme);
        run_compare(out, expect, (int64_t)n, &r.tol, &r.err);
        cli_selection_chosen(r.sel, r.selected, sizeof r.selected);
        cli_selection_chosen(fmoe_layer_selection(ref), r.oracle, sizeof r.oracle);
        if (o->json)
            rc = run_print_json(&r);
        else
            run_print_text(&r);
        if (rc == CLI_EXIT_OK)
            rc = run_passed(&r.err) ? CLI_EXIT_OK : CLI_EXIT_CHECK;
    }
    free(buf);
    free(out);
    free(expect);
    return rc;
}

int cmd_run(const cli_globals *g, int argc, char **argv)
{
    if (run_is_model_mode(argc, argv))
        return cmd_run_model(g, argc, argv);
    run_opts o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if ((rc = layer_flags_validate(&o.cfg)) != CLI_EXIT_OK)
        return rc;
    if ((rc = cli_scheme_from_arg(o.scheme_key, o.modules, o.cfg.num_experts, &o.scheme)) != CLI_EXIT_OK)
        return rc;
    if (o.tokens > o.cfg.max_num_tokens) {
        cli_error("--tokens %u exceeds the layer's --max-tokens %u", o.tokens, o.cfg.max_num_tokens);
        return CLI_EXIT_CONFIG;
    }
    /* Each process of the multi-process form draws the layer and every
     * rank's tokens itself: with fresh seeds they would check different
     * layers against each other's rows, so the seed must be given. */
    if (o.ep_id_file && !o.seed_given)
        return cli_usage("run", "--ep-id-file: every process must draw the same layer and tokens; give all ranks "
                                "the same --seed N");
    if (!o.seed_given)
        o.seed = cli_rng_fresh_seed();
    int ep_group = o.gpus || o.ep_id_file;
    if (o.gpus && (o.ep_id_file || o.cfg.ep_size > 1))
        return cli_usage("run", "--gpus N runs every rank in this process; --ep N --ep-rank R --ep-id-file PATH "
                                "runs one: give one form");
    if (ep_group && o.logits)
        return cli_usage("run", "--logits: on an EP group run passes top-k routing (it travels with the tokens)");
    if (ep_group && o.cfg.tp_size > 1)
        return cli_usage("run", "--tp: a layer on an EP group holds whole experts");

    fmoe_context *ctx = NULL;
    if ((rc = cli_open_context(g, &ctx)) != CLI_EXIT_OK)
        return rc;
    if (ep_group) {
        rc = run_ep(g, &o, ctx);
        fmoe_context_destroy(ctx);
        return rc;
    }
    fmoe_layer *sel = NULL, *ref = NULL;
    run_inputs in = {0};
    rc = create_layer(ctx, &o, o.backend, "selected", &sel);
    if (rc == CLI_EXIT_OK)
        rc = create_layer(ctx, &o, "reference", "reference", &ref);
    if (rc == CLI_EXIT_OK)
        rc = make_inputs(&o, &in);
    if (rc == CLI_EXIT_OK)
        rc = check_and_time(g, &o, sel, ref, &in);
    free_inputs(&in);
    fmoe_layer_destroy(ref);
    fmoe_layer_destroy(sel);
    fmoe_context_destroy(ctx);
    return rc;
}
