/*
 * cli/run_model.c - `fusedmoe run` on a checkpoint (the main job): read the
 * model's config.json and quantization_config, and for each MoE layer pick
 * a backend (TOML + probing), load the layer from the checkpoint on it and
 * on the reference backend, route real router logits, forward both,
 * compare, time, and print one row per layer.
 *
 * Every MoE layer gets the same input x: without the attention blocks in
 * between there is nothing else to feed it. x comes from --input, else from
 * the checkpoint directory's inputs.safetensors (the bundled model has
 * one), else from the seed.
 */
#include "cli/run_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/halfconv.h"
#include "cli/json_out.h"
#include "cli/rng.h"
#include "cli/run_compare.h"
#include "cli/run_device.h"
#include "cli/run_timing.h"
#include "cli/selection_out.h"
#include "cli/st_write.h"

#define DEFAULT_TOKENS 16

/* One layer's result row. */
typedef struct layer_row {
    uint32_t layer;
    char scheme[FMOE_SCHEME_KEY_MAX];
    char backend[256];
    char why[512];
    run_tolerance tol;
    run_errors err;
    run_timing timing;
} layer_row;

/* The inputs every layer shares. */
typedef struct model_inputs {
    int64_t m, h;
    float *x;            /* [M, H] f32 (rounded to the activation dtype) */
    float *logits_given; /* [M, E] from --input, or NULL */
    char *source;        /* where x came from, for the report (malloc'd) */
} model_inputs;

void run_model_help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] run [--model DIR] [--layer N] [--tokens M] [--seed N]\n"
          "                                     [--tp N --tp-rank R] [--ep N --ep-rank R] [--placement P]\n"
          "                                     [--redundant R] [--input FILE] [--output FILE]\n"
          "                                     [--backend GLOB] [--json]\n"
          "\n"
          "Runs the MoE layers of a Hugging Face checkpoint: reads config.json (model and\n"
          "quantization_config), and for each MoE layer picks a backend, loads the layer from the\n"
          "safetensors files on it and on the reference backend, routes router logits computed\n"
          "from the checkpoint's router weights, runs both on the same tokens and compares them;\n"
          "then times the selected backend. With no options it runs the bundled model.\n"
          "\n"
          "Options:\n"
          "  --model DIR            checkpoint directory (default: the bundled model,\n"
          "                         " FMOE_DEFAULT_MODEL_DIR ")\n"
          "  --layer N              only decoder layer N (default: every MoE layer; those no\n"
          "                         layer can serve, e.g. hash-routed, are listed as skipped)\n"
          "  --tokens M             tokens (default: all rows of the input, else 16)\n"
          "  --seed N               seed of random tokens when no input file is used\n"
          "  --tp N, --tp-rank R    tensor parallel size and this rank (default 1, 0)\n"
          "  --ep N, --ep-rank R    expert parallel size and this rank (default 1, 0)\n"
          "  --placement P          linear or round_robin (EP)\n"
          "  --redundant R          EPLB with R redundant experts\n"
          "  --input FILE           safetensors with x [M, H] and optionally router_logits [M, E]\n"
          "                         (default: DIR/inputs.safetensors if present, else random)\n"
          "  --output FILE          write the selected backend's y, topk_ids and topk_weights\n"
          "                         (one layer: y, ...; several: layers.<N>.y, ...)\n"
          "  --backend GLOB         only plugins whose name matches may serve (strict)\n"
          "  --json                 one JSON document instead of the table\n"
          "  --help                 this help\n"
          "\n"
          "Exit codes: 0 every layer PASS; 1 a layer differs from the reference; 2 usage;\n"
          "3 bad checkpoint, config or input; 4 no backend (or no reference) can serve a layer;\n"
          "5 plugin or internal error.\n",
          f);
}

static int parse_u32_opt(int argc, char **argv, int *i, const char *name, uint32_t *out, int *matched)
{
    const char *v = NULL;
    int r = cli_opt_value(argc, argv, i, name, &v);
    *matched = r != CLI_OPT_NO;
    if (r == CLI_OPT_NO)
        return -1;
    if (r == CLI_OPT_MISSING)
        return cli_usage("run", "%s needs a value", name);
    if (cli_parse_u32(v, out) != 0)
        return cli_usage("run", "%s: invalid value '%s' (expected a whole number)", name, v);
    return -1;
}

int run_model_parse(int argc, char **argv, run_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model_dir = FMOE_DEFAULT_MODEL_DIR;
    o->layer = -1;
    o->tp = o->ep = 1;
    o->placement = FMOE_PLACEMENT_LINEAR;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r, matched;
        uint32_t u = 0;
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            run_model_help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--json")) {
            o->json = 1;
            continue;
        }
        static const struct {
            const char *name;
            size_t off;
        } strs[] = {
            {"--model", offsetof(run_model_opts, model_dir)},
            {"--input", offsetof(run_model_opts, input)},
            {"--output", offsetof(run_model_opts, output)},
            {"--backend", offsetof(run_model_opts, backend)},
        };
        int done = 0;
        for (size_t k = 0; k < sizeof strs / sizeof strs[0] && !done; k++) {
            if ((r = cli_opt_value(argc, argv, &i, strs[k].name, &v)) == CLI_OPT_NO)
                continue;
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("run", "%s needs a value", strs[k].name);
            *(const char **)((char *)o + strs[k].off) = v;
            done = 1;
        }
        if (done)
            continue;
        if ((r = cli_opt_value(argc, argv, &i, "--placement", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("run", "--placement needs a value");
            if (strcmp(v, "linear") == 0)
                o->placement = FMOE_PLACEMENT_LINEAR;
            else if (strcmp(v, "round_robin") == 0)
                o->placement = FMOE_PLACEMENT_ROUND_ROBIN;
            else
                return cli_usage("run", "--placement: '%s' (expected linear or round_robin)", v);
            continue;
        }
        static const struct {
            const char *name;
            size_t off;
        } nums[] = {
            {"--tokens", offsetof(run_model_opts, tokens)},   {"--tp", offsetof(run_model_opts, tp)},
            {"--tp-rank", offsetof(run_model_opts, tp_rank)}, {"--ep", offsetof(run_model_opts, ep)},
            {"--ep-rank", offsetof(run_model_opts, ep_rank)}, {"--redundant", offsetof(run_model_opts, redundant)},
        };
        for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !done; k++) {
            if ((r = parse_u32_opt(argc, argv, &i, nums[k].name, &u, &matched)) >= 0)
                return r;
            if (matched && u == 0 && strcmp(nums[k].name, "--tokens") == 0)
                return cli_usage("run", "--tokens: expected a whole number from 1");
            if (matched) {
                *(uint32_t *)((char *)o + nums[k].off) = u;
                done = 1;
            }
        }
        if (done)
            continue;
        if ((r = parse_u32_opt(argc, argv, &i, "--layer", &u, &matched)) >= 0)
            return r;
        if (matched) {
            o->layer = (int64_t)u;
            continue;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--seed", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u64(v, &o->seed) != 0)
                return cli_usage("run", "--seed needs a whole number from 0 to 2^64-1");
            o->seed_given = 1;
            continue;
        }
        return cli_usage("run", "unknown option '%s' for a checkpoint run (--model)", argv[i]);
    }
    return -1;
}

/* ---- inputs ------------------------------------------------------------------ */

/* What a refusal found under a name: "found [16, 128] bf16", "found
 * [16] int32", or "not found", so every error says what was there. */
static void found_text(const fmoe_checkpoint *ck, size_t index, char *buf, size_t cap)
{
    fmoe_tensor t;
    if (index == (size_t)-1 || fmoe_checkpoint_tensor(ck, index, &t) != FMOE_STATUS_OK) {
        snprintf(buf, cap, "not found");
        return;
    }
    size_t len = (size_t)snprintf(buf, cap, "found [");
    for (uint32_t d = 0; d < t.ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)t.shape[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, "] %s", fmoe_dtype_name(t.dtype));
}

/* x (and router_logits) from a safetensors file, checked against the model.
 * `what` names where the file came from in errors: "--input" or "the
 * model's bundled inputs". */
static int read_input_file(const char *path, const char *what, int64_t h, int64_t e, model_inputs *in, uint32_t tokens)
{
    fmoe_checkpoint *ck = NULL;
    fmoe_status st = fmoe_checkpoint_open(path, &ck);
    if (st != FMOE_STATUS_OK)
        return cli_fail(st, what);
    int rc = CLI_EXIT_OK;
    fmoe_tensor x, lg;
    size_t ix = fmoe_checkpoint_find(ck, "x"), il = fmoe_checkpoint_find(ck, "router_logits");
    if (ix == (size_t)-1 || fmoe_checkpoint_tensor(ck, ix, &x) != FMOE_STATUS_OK || x.ndim != 2 || x.shape[1] != h ||
        !cli_is_float_storage(x.dtype) || x.shape[0] < 1) {
        char found[160];
        found_text(ck, ix, found, sizeof found);
        cli_error("%s (%s): expected a tensor 'x' [M, %lld] of f32, bf16 or f16 with M >= 1; %s", path, what,
                  (long long)h, found);
        rc = CLI_EXIT_CONFIG;
    }
    if (rc == CLI_EXIT_OK && il != (size_t)-1 &&
        (fmoe_checkpoint_tensor(ck, il, &lg) != FMOE_STATUS_OK || lg.ndim != 2 || lg.shape[0] != x.shape[0] ||
         lg.shape[1] != e || !cli_is_float_storage(lg.dtype))) {
        char found[160];
        found_text(ck, il, found, sizeof found);
        cli_error("%s (%s): 'router_logits' must be [%lld, %lld] (the rows of x, the experts) of f32, bf16 or f16; %s",
                  path, what, (long long)x.shape[0], (long long)e, found);
        rc = CLI_EXIT_CONFIG;
    }
    if (rc == CLI_EXIT_OK && tokens > x.shape[0]) {
        cli_error("--tokens %u, but %s has %lld rows", tokens, path, (long long)x.shape[0]);
        rc = CLI_EXIT_CONFIG;
    }
    if (rc == CLI_EXIT_OK) {
        in->m = tokens ? tokens : x.shape[0];
        in->x = malloc((size_t)(in->m * h) * sizeof(float));
        if (il != (size_t)-1)
            in->logits_given = malloc((size_t)(in->m * e) * sizeof(float));
        if (!in->x || (il != (size_t)-1 && !in->logits_given)) {
            cli_error("out of memory for the inputs");
            rc = CLI_EXIT_INTERNAL;
        }
    }
    if (rc == CLI_EXIT_OK) {
        cli_load_floats(x.dtype, in->x, x.data, (size_t)(in->m * h));
        if (in->logits_given)
            cli_load_floats(lg.dtype, in->logits_given, lg.data, (size_t)(in->m * e));
    }
    fmoe_checkpoint_close(ck);
    return rc;
}

/* "<dir>/<name>", allocated: a path is as long as it is (a fixed buffer
 * would cut a long one into the name of some other file). NULL: no memory. */
static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int make_inputs(const run_model_opts *o, int64_t h, int64_t e, fmoe_dtype act, model_inputs *in)
{
    char *bundled = path_in(o->model_dir, "inputs.safetensors");
    in->h = h;
    const char *file = o->input ? o->input : bundled && access(bundled, R_OK) == 0 ? bundled : NULL;
    int from_file = file != NULL;
    in->source = strdup(file ? file : "random N(0,1) from the seed");
    free(bundled); /* in->source holds the copy */
    if (!in->source) {
        cli_error("out of memory for the inputs");
        return CLI_EXIT_INTERNAL;
    }
    int rc = CLI_EXIT_OK;
    if (from_file) {
        rc = read_input_file(in->source, o->input ? "--input" : "the model's bundled inputs", h, e, in, o->tokens);
    } else {
        in->m = o->tokens ? o->tokens : DEFAULT_TOKENS;
        in->x = malloc((size_t)(in->m * h) * sizeof(float));
        if (!in->x) {
            cli_error("out of memory for the inputs");
            return CLI_EXIT_INTERNAL;
        }
        cli_rng_fill_normal(in->x, (size_t)(in->m * h), 1.0f, o->seed, "x", 0);
    }
    /* What the layers see is x in the activation dtype. */
    if (rc == CLI_EXIT_OK && act != FMOE_DTYPE_F32) {
        size_t n = (size_t)(in->m * h);
        void *tmp = malloc(n * sizeof(float));
        if (!tmp) {
            cli_error("out of memory for the inputs");
            return CLI_EXIT_INTERNAL;
        }
        cli_store_floats(act, tmp, in->x, n);
        cli_load_floats(act, in->x, tmp, n);
        free(tmp);
    }
    return rc;
}

/* logits[M, E] = x @ W^T (+ b), f32 accumulation, from the checkpoint's router. */
static int router_logits(const fmoe_checkpoint *ck, const fmoe_model_names *n, const model_inputs *in, int64_t e,
                         float *logits)
{
    fmoe_tensor w, b;
    size_t iw = fmoe_checkpoint_find(ck, n->router_weight);
    size_t ib = n->router_bias ? fmoe_checkpoint_find(ck, n->router_bias) : (size_t)-1;
    if (iw == (size_t)-1 || fmoe_checkpoint_tensor(ck, iw, &w) != FMOE_STATUS_OK || w.ndim != 2 || w.shape[0] != e ||
        w.shape[1] != in->h || !cli_is_float_storage(w.dtype)) {
        char found[160];
        found_text(ck, iw, found, sizeof found);
        cli_error("%s: expected the router weight [%lld, %lld] (experts, hidden) of f32, bf16 or f16 in the "
                  "checkpoint; %s",
                  n->router_weight, (long long)e, (long long)in->h, found);
        return CLI_EXIT_CONFIG;
    }
    if (ib != (size_t)-1 && (fmoe_checkpoint_tensor(ck, ib, &b) != FMOE_STATUS_OK || b.ndim != 1 || b.shape[0] != e ||
                             !cli_is_float_storage(b.dtype))) {
        char found[160];
        found_text(ck, ib, found, sizeof found);
        cli_error("%s: expected the router bias [%lld] of f32, bf16 or f16; %s", n->router_bias, (long long)e, found);
        return CLI_EXIT_CONFIG;
    }
    /* Sized by the model (up to base/limits.h's expert ceiling), never by a
     * guess. */
    float *wf = malloc((size_t)(e * in->h) * sizeof(float)), *bf = malloc((size_t)e * sizeof(float));
    if (!wf || !bf) {
        free(wf);
        free(bf);
        cli_error("out of memory for the router (%lld experts x %lld)", (long long)e, (long long)in->h);
        return CLI_EXIT_INTERNAL;
    }
    cli_load_floats(w.dtype, wf, w.data, (size_t)(e * in->h));
    if (ib != (size_t)-1)
        cli_load_floats(b.dtype, bf, b.data, (size_t)e);
    for (int64_t t = 0; t < in->m; t++)
        for (int64_t j = 0; j < e; j++) {
            double acc = ib != (size_t)-1 ? bf[j] : 0.0;
            for (int64_t k = 0; k < in->h; k++)
                acc += (double)in->x[t * in->h + k] * wf[j * in->h + k];
            logits[t * e + j] = (float)acc;
        }
    free(wf);
    free(bf);
    return CLI_EXIT_OK;
}

/* ---- one layer ----------------------------------------------------------------- */

typedef struct model_run {
    const cli_globals *g;
    const run_model_opts *o;
    fmoe_context *ctx;
    fmoe_model *model;
    fmoe_quant_config *qc;
    fmoe_checkpoint *ck;
    model_inputs in;
    st_out_tensor *outputs; /* for --output */
    size_t n_outputs;
    void **owned; /* buffers the outputs point into */
    size_t n_owned;
    /* MoE layers the run leaves out, with the model's reason (hash-routed
     * layers: their experts come from the token ids, not router logits). */
    uint32_t *skipped;
    char (*skipped_why)[512];
    size_t n_skipped;
} model_run;

static int create_and_load(model_run *r, uint32_t index, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                           const char *backend, const char *who, fmoe_layer **out)
{
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = backend;
    fmoe_status st = fmoe_layer_create(r->ctx, cfg, scheme, &lo, out);
    if (st == FMOE_STATUS_OK)
        st = fmoe_model_load_layer(r->model, index, r->ck, r->qc, *out, NULL);
    if (st == FMOE_STATUS_OK && (st = fmoe_layer_finalize(*out)) == FMOE_STATUS_BAD_STATE) {
        /* Loading went through, so what finalize misses is the checkpoint's. */
        cli_error("layer %u (%s backend): the checkpoint lacks tensors the layer needs: %s", index, who,
                  fmoe_last_error());
        return CLI_EXIT_CONFIG;
    }
    if (st == FMOE_STATUS_OK)
        return CLI_EXIT_OK;
    if (st == FMOE_STATUS_UNSUPPORTED && strcmp(who, "reference") == 0)
        cli_error("layer %u: the reference backend, which run compares against, cannot serve it: %s", index,
                  fmoe_last_error());
    else
        cli_error("layer %u (%s backend): %s", index, who, fmoe_last_error());
    return cli_exit_for_status(st);
}

static int keep_output(model_run *r, uint32_t index, int several, const char *what, fmoe_tensor *t)
{
    st_out_tensor *grown = realloc(r->outputs, (r->n_outputs + 1) * sizeof *grown);
    void **owned = realloc(r->owned, (r->n_owned + 2) * sizeof *owned);
    char *name = malloc(64);
    fmoe_tensor *copy = malloc(sizeof *copy);
    if (grown)
        r->outputs = grown;
    if (owned)
        r->owned = owned;
    if (!grown || !owned || !name || !copy) {
        free(name);
        free(copy);
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    if (several)
        snprintf(name, 64, "layers.%u.%s", index, what);
    else
        snprintf(name, 64, "%s", what);
    *copy = *t;
    r->owned[r->n_owned++] = name;
    r->owned[r->n_owned++] = copy;
    r->outputs[r->n_outputs++] = (st_out_tensor){name, copy};
    return CLI_EXIT_OK;
}

static int forward_pair(model_run *r, uint32_t index, const fmoe_layer_config *cfg, fmoe_layer *sel, fmoe_layer *ref,
                        const float *logits, int several, layer_row *row)
{
    int64_t m = r->in.m, h = cfg->hidden_size, k = cfg->top_k;
    size_t esize = fmoe_dtype_size(cfg->act_dtype);
    void *x = malloc((size_t)(m * h) * esize), *y_sel = malloc((size_t)(m * h) * esize);
    void *y_ref = malloc((size_t)(m * h) * esize);
    float *got = malloc((size_t)(m * h) * sizeof(float)), *want = malloc((size_t)(m * h) * sizeof(float));
    float *tw = malloc((size_t)(m * k) * sizeof(float));
    int32_t *ti = malloc((size_t)(m * k) * sizeof(int32_t));
    int rc = CLI_EXIT_OK;
    if (!x || !y_sel || !y_ref || !got || !want || !tw || !ti) {
        cli_error("out of memory for layer %u", index);
        rc = CLI_EXIT_INTERNAL;
    }
    fmoe_tensor tx, tl, ts, tr, ttw, tti;
    const int64_t xs[2] = {m, h}, ls[2] = {m, cfg->num_experts}, ks[2] = {m, k};
    if (rc == CLI_EXIT_OK) {
        cli_store_floats(cfg->act_dtype, x, r->in.x, (size_t)(m * h));
        fmoe_tensor_init(&tx, cfg->act_dtype, 2, xs, x);
        fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, (void *)logits);
        fmoe_tensor_init(&ts, cfg->act_dtype, 2, xs, y_sel);
        fmoe_tensor_init(&tr, cfg->act_dtype, 2, xs, y_ref);
        fmoe_tensor_init(&ttw, FMOE_DTYPE_F32, 2, ks, tw);
        fmoe_tensor_init(&tti, FMOE_DTYPE_INT32, 2, ks, ti);
        /* The reference first, on the host; its routing is what a modular
         * device method is handed (run_device.c). */
        fmoe_forward_args a = {.struct_size = sizeof a,
                               .x = &tx,
                               .router_logits = &tl,
                               .out = &tr,
                               .topk_weights_out = &ttw,
                               .topk_ids_out = &tti};
        fmoe_status st = fmoe_layer_forward(ref, &a);
        float *rw = malloc((size_t)(m * k) * sizeof(float));
        int32_t *ri = malloc((size_t)(m * k) * sizeof(int32_t));
        if (st == FMOE_STATUS_OK && (!rw || !ri)) {
            cli_error("out of memory for layer %u", index);
            rc = CLI_EXIT_INTERNAL;
        }
        if (st == FMOE_STATUS_OK && rc == CLI_EXIT_OK) {
            memcpy(rw, tw, (size_t)(m * k) * sizeof(float));
            memcpy(ri, ti, (size_t)(m * k) * sizeof(int32_t));
            /* The selected layer where it lives; its first forward is the
             * one compared, then it is timed. */
            st = run_device_forward(sel, cfg, &tx, &tl, rw, ri, &ts, &ttw, &tti, &row->timing);
        }
        free(rw);
        free(ri);
        if (st != FMOE_STATUS_OK && rc == CLI_EXIT_OK) {
            cli_error("layer %u: forward: %s", index, fmoe_last_error());
            rc = cli_exit_for_status(st);
        }
    }
    if (rc == CLI_EXIT_OK) {
        cli_load_floats(cfg->act_dtype, got, y_sel, (size_t)(m * h));
        cli_load_floats(cfg->act_dtype, want, y_ref, (size_t)(m * h));
        fmoe_scheme s;
        fmoe_scheme_parse(row->scheme, &s);
        row->tol = run_tolerance_for(cfg->act_dtype, &s);
        run_compare(got, want, m * h, &row->tol, &row->err);
    }
    if (rc == CLI_EXIT_OK && r->o->output) {
        rc = keep_output(r, index, several, "y", &ts);
        if (rc == CLI_EXIT_OK)
            rc = keep_output(r, index, several, "topk_ids", &tti);
        if (rc == CLI_EXIT_OK)
            rc = keep_output(r, index, several, "topk_weights", &ttw);
        if (rc == CLI_EXIT_OK) { /* the outputs own these now */
            void **owned = realloc(r->owned, (r->n_owned + 3) * sizeof *owned);
            if (owned) {
                r->owned = owned;
                r->owned[r->n_owned++] = y_sel;
                r->owned[r->n_owned++] = tw;
                r->owned[r->n_owned++] = ti;
                y_sel = NULL;
                tw = NULL;
                ti = NULL;
            }
        }
    }
    free(x);
    free(y_sel);
    free(y_ref);
    free(got);
    free(want);
    free(tw);
    free(ti);
    return rc;
}

static int run_layer(model_run *r, uint32_t index, int several, layer_row *row)
{
    const run_model_opts *o = r->o;
    row->layer = index;
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    fmoe_status st = fmoe_model_layer_config(r->model, index, &cfg);
    if (st != FMOE_STATUS_OK)
        return cli_fail(st, NULL);
    cfg.tp_size = o->tp;
    cfg.tp_rank = o->tp_rank;
    cfg.ep_size = o->ep;
    cfg.ep_rank = o->ep_rank;
    cfg.placement = o->placement;
    cfg.enable_eplb = o->redundant > 0;
    cfg.num_redundant_experts = o->redundant;
    cfg.max_num_tokens = (uint32_t)r->in.m;
    if ((st = fmoe_layer_config_validate(&cfg)) != FMOE_STATUS_OK)
        return cli_fail(st, "layer config");
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    fmoe_scheme scheme;
    st = fmoe_model_layer_expert_modules(r->model, index, &mods);
    if (st == FMOE_STATUS_OK)
        st = fmoe_quant_config_scheme(r->qc, &mods, &scheme);
    if (st != FMOE_STATUS_OK) {
        cli_error("layer %u: %s", index, fmoe_last_error());
        return CLI_EXIT_CONFIG;
    }
    fmoe_scheme_key(&scheme, row->scheme, sizeof row->scheme);
    fmoe_model_names names = {.struct_size = sizeof names};
    if ((st = fmoe_model_layer_names(r->model, index, &names)) != FMOE_STATUS_OK)
        return cli_fail(st, NULL);

    int64_t e = cfg.num_experts;
    float *logits = malloc((size_t)(r->in.m * e) * sizeof(float));
    if (!logits) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    int rc = r->in.logits_given
                 ? (memcpy(logits, r->in.logits_given, (size_t)(r->in.m * e) * sizeof(float)), CLI_EXIT_OK)
                 : router_logits(r->ck, &names, &r->in, e, logits);
    fmoe_layer *sel = NULL, *ref = NULL;
    if (rc == CLI_EXIT_OK)
        rc = create_and_load(r, index, &cfg, &scheme, o->backend, "selected", &sel);
    if (rc == CLI_EXIT_OK)
        rc = create_and_load(r, index, &cfg, &scheme, "reference", "reference", &ref);
    if (rc == CLI_EXIT_OK) {
        cli_selection_chosen(fmoe_layer_selection(sel), row->backend, sizeof row->backend);
        snprintf(row->why, sizeof row->why, "%s", fmoe_selection_summary(fmoe_layer_selection(sel)));
        rc = forward_pair(r, index, &cfg, sel, ref, logits, several, row);
    }
    fmoe_layer_destroy(sel);
    fmoe_layer_destroy(ref);
    free(logits);
    return rc;
}

/* ---- report ---------------------------------------------------------------------- */

static double tokens_per_s(const model_run *r, const layer_row *row)
{
    return row->timing.median_s > 0 ? (double)r->in.m / row->timing.median_s : 0.0;
}

static void print_table(const model_run *r, const layer_row *rows, size_t n)
{
    printf("model:   %s (%s, %s)\n", r->o->model_dir, fmoe_model_family(r->model), fmoe_quant_config_method(r->qc));
    printf("input:   %lld tokens from %s; every MoE layer gets the same x\n", (long long)r->in.m, r->in.source);
    printf("\n%-5s  %-44s  %-32s  %-9s  %-9s  %-10s  %s\n", "layer", "scheme", "backend", "max abs", "max rel",
           "tokens/s", "result");
    for (size_t i = 0; i < n; i++) {
        const layer_row *w = &rows[i];
        printf("%-5u  %-44s  %-32s  %-9.2e  %-9.2e  %-10.0f  %s\n", w->layer, w->scheme, w->backend, w->err.max_abs,
               w->err.max_rel, tokens_per_s(r, w), run_passed(&w->err) ? "PASS" : "FAIL");
    }
    printf("\nwhy:\n");
    for (size_t i = 0; i < n; i++)
        printf("  layer %u: %s\n", rows[i].layer, rows[i].why);
    for (size_t i = 0; i < r->n_skipped; i++)
        printf("skipped: layer %u: %s\n", r->skipped[i], r->skipped_why[i]);
    /* A FAIL says what was found and what was expected: a NaN output has a
     * max abs of 0 over the finite pairs, so the table alone would hide it. */
    for (size_t i = 0; i < n; i++) {
        if (run_passed(&rows[i].err))
            continue;
        char text[512];
        run_failure_text(&rows[i].err, &rows[i].tol, r->in.h, text, sizeof text);
        printf("fail:    layer %u: %s\n", rows[i].layer, text);
    }
}

static int print_json(const model_run *r, const layer_row *rows, size_t n)
{
    json_t *root = json_object(), *arr = json_array();
    cli_json_set(root, "model", cli_json_string(r->o->model_dir));
    cli_json_set(root, "family", cli_json_string(fmoe_model_family(r->model)));
    cli_json_set(root, "quant_method", cli_json_string(fmoe_quant_config_method(r->qc)));
    cli_json_set(root, "tokens", json_integer(r->in.m));
    cli_json_set(root, "input", cli_json_string(r->in.source));
    int all = 1;
    for (size_t i = 0; i < n; i++) {
        const layer_row *w = &rows[i];
        json_t *o = json_object();
        int pass = run_passed(&w->err);
        all &= pass;
        cli_json_set(o, "layer", json_integer(w->layer));
        cli_json_set(o, "scheme", cli_json_string(w->scheme));
        cli_json_set(o, "backend", cli_json_string(w->backend));
        cli_json_set(o, "why", cli_json_string(w->why));
        cli_json_set(o, "max_abs", json_real(w->err.max_abs));
        cli_json_set(o, "max_rel", json_real(w->err.max_rel));
        cli_json_set(o, "nmse", json_real(w->err.nmse));
        cli_json_set(o, "outside", json_integer(w->err.outside));
        cli_json_set(o, "nonfinite", json_integer(w->err.nonfinite));
        if (!pass) {
            char text[512];
            run_failure_text(&w->err, &w->tol, r->in.h, text, sizeof text);
            cli_json_set(o, "failure", cli_json_string(text));
        }
        cli_json_set(o, "tokens_per_s", json_real(tokens_per_s(r, w)));
        cli_json_set(o, "result", json_string(pass ? "PASS" : "FAIL"));
        json_array_append_new(arr, o);
    }
    cli_json_set(root, "layers", arr);
    json_t *skipped = json_array();
    for (size_t i = 0; i < r->n_skipped; i++) {
        json_t *o = json_object();
        cli_json_set(o, "layer", json_integer(r->skipped[i]));
        cli_json_set(o, "why", cli_json_string(r->skipped_why[i]));
        json_array_append_new(skipped, o);
    }
    cli_json_set(root, "skipped", skipped);
    cli_json_set(root, "result", json_string(all ? "PASS" : "FAIL"));
    return cli_json_print(root);
}

/* "[=====     ] layer 3/48" on stderr, only on a terminal. */
static void progress(size_t done, size_t total, uint32_t layer)
{
    if (!isatty(STDERR_FILENO))
        return;
    char bar[31];
    size_t fill = total ? done * 30 / total : 30;
    for (size_t i = 0; i < 30; i++)
        bar[i] = i < fill ? '=' : ' ';
    bar[30] = '\0';
    if (done < total)
        fprintf(stderr, "\r[%s] loading and running layer %u (%zu/%zu)", bar, layer, done + 1, total);
    else
        fprintf(stderr, "\r%*s\r", 80, "");
    fflush(stderr);
}

/* ---- the command ------------------------------------------------------------------ */

static int open_model(model_run *r)
{
    char *path = path_in(r->o->model_dir, "config.json");
    if (!path) {
        cli_error("out of memory");
        return CLI_EXIT_INTERNAL;
    }
    fmoe_status st = fmoe_model_config_load(path, &r->model);
    if (st == FMOE_STATUS_OK)
        st = fmoe_quant_config_load(path, &r->qc);
    free(path);
    if (st == FMOE_STATUS_OK)
        st = fmoe_checkpoint_open(r->o->model_dir, &r->ck);
    if (st != FMOE_STATUS_OK) {
        cli_error("%s", fmoe_last_error());
        return st == FMOE_STATUS_OUT_OF_MEMORY ? CLI_EXIT_INTERNAL : CLI_EXIT_CONFIG;
    }
    return CLI_EXIT_OK;
}

static void close_run(model_run *r)
{
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->outputs);
    free(r->in.x);
    free(r->in.logits_given);
    free(r->in.source);
    fmoe_checkpoint_close(r->ck);
    fmoe_quant_config_destroy(r->qc);
    fmoe_model_destroy(r->model);
    fmoe_context_destroy(r->ctx);
}

int cmd_run_model(const cli_globals *g, int argc, char **argv)
{
    run_model_opts o;
    int rc = run_model_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!o.seed_given)
        o.seed = cli_rng_fresh_seed();
    model_run r = {.g = g, .o = &o};
    /* The context first: a bad TOML file is reported before anything else. */
    rc = cli_open_context(g, &r.ctx);
    if (rc == CLI_EXIT_OK)
        rc = open_model(&r);
    uint32_t layers = rc == CLI_EXIT_OK ? fmoe_model_layer_count(r.model) : 0;
    uint32_t *moe = calloc(layers ? layers : 1, sizeof *moe);
    r.skipped = calloc(layers ? layers : 1, sizeof *r.skipped);
    r.skipped_why = calloc(layers ? layers : 1, sizeof *r.skipped_why);
    if (!moe || !r.skipped || !r.skipped_why) {
        cli_error("out of memory");
        rc = rc == CLI_EXIT_OK ? CLI_EXIT_INTERNAL : rc;
    }
    size_t n = 0;
    for (uint32_t l = 0; rc == CLI_EXIT_OK && l < layers; l++) {
        if (!fmoe_model_layer_is_moe(r.model, l) || (o.layer >= 0 && (int64_t)l != o.layer))
            continue;
        /* A layer the model says no layer object can serve (UNSUPPORTED:
         * hash-routed) is left out and listed, unless it is the one asked
         * for; any other error is the checkpoint's and stops the run. */
        fmoe_layer_config probe;
        fmoe_layer_config_init(&probe);
        fmoe_status st = fmoe_model_layer_config(r.model, l, &probe);
        if (st == FMOE_STATUS_UNSUPPORTED && o.layer < 0) {
            snprintf(r.skipped_why[r.n_skipped], sizeof r.skipped_why[0], "%s", fmoe_last_error());
            r.skipped[r.n_skipped++] = l;
        } else if (st != FMOE_STATUS_OK) {
            rc = cli_fail(st, NULL);
        } else {
            moe[n++] = l;
        }
    }
    if (rc == CLI_EXIT_OK && n == 0) {
        if (o.layer >= 0)
            cli_error("--layer %lld: not a MoE layer of %s (it has %u decoder layers)", (long long)o.layer, o.model_dir,
                      layers);
        else if (r.n_skipped)
            cli_error("%s: every MoE layer is left out; layer %u: %s", o.model_dir, r.skipped[0], r.skipped_why[0]);
        else
            cli_error("%s: the model has no MoE layers", o.model_dir);
        rc = r.n_skipped && o.layer < 0 ? CLI_EXIT_NO_BACKEND : CLI_EXIT_CONFIG;
    }
    fmoe_layer_config first;
    fmoe_layer_config_init(&first);
    if (rc == CLI_EXIT_OK && fmoe_model_layer_config(r.model, moe[0], &first) != FMOE_STATUS_OK)
        rc = cli_fail(FMOE_STATUS_INVALID_ARGUMENT, NULL);
    if (rc == CLI_EXIT_OK)
        rc = make_inputs(&o, first.hidden_size, first.num_experts, first.act_dtype, &r.in);
    layer_row *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows || !moe) {
        cli_error("out of memory");
        rc = CLI_EXIT_INTERNAL;
    }
    for (size_t i = 0; i < n && rc == CLI_EXIT_OK; i++) {
        progress(i, n, moe[i]);
        rc = run_layer(&r, moe[i], n > 1, &rows[i]);
    }
    progress(n, n, 0);
    int all = 1;
    for (size_t i = 0; i < n; i++)
        all &= run_passed(&rows[i].err);
    if (rc == CLI_EXIT_OK) {
        if (o.json)
            rc = print_json(&r, rows, n);
        else
            print_table(&r, rows, n);
    }
    if (rc == CLI_EXIT_OK && o.output && st_write_file(o.output, r.outputs, r.n_outputs) != 0)
        rc = CLI_EXIT_CONFIG;
    if (rc == CLI_EXIT_OK && !all)
        rc = CLI_EXIT_CHECK;
    free(rows);
    free(moe);
    free(r.skipped);
    free(r.skipped_why);
    close_run(&r);
    return rc;
}

int run_is_model_mode(int argc, char **argv)
{
    static const char *const only[] = {"--model", "--layer", "--input", "--output"};
    if (argc <= 1)
        return 1;
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof only / sizeof only[0]; k++) {
            size_t n = strlen(only[k]);
            if (strncmp(argv[i], only[k], n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '='))
                return 1;
        }
    return 0;
}
