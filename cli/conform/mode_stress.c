/*
 * cli/conform/mode_stress.c - `conform --mode stress`: the thread model of
 * include/fusedmoe/fusedmoe.h and docs/PLUGIN-ABI.md §7, exercised.
 *
 *  - threads:        4 threads create their own layer on one shared context
 *                    at the same time (query runs concurrently), load it,
 *                    then forward 8 times each, concurrently; every output
 *                    must match the reference and the thread's first
 *                    output bit for bit.
 *  - explain:        4 threads run the selection (the plugin's query) at once.
 *  - create-destroy: 20 layers created, loaded, run and destroyed in turn.
 *  - contexts:       3 contexts (init/shutdown of the plugin) in turn.
 *
 * Leaks and races are found by the sanitizers around it: CI runs the suite
 * under ASan (LeakSanitizer fails the process on exit); TSan works too
 * (docs/CONFORMANCE.md).
 */
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/conform/conform.h"
#include "cli/conform/layers.h"

int cf_plugin_claims_scheme(const cf_plugin *p, const char *key);

#define THREADS  4
#define FORWARDS 8
#define STRESS_M 32

typedef struct job {
    cf_run *r;
    const cf_scheme *cs;
    const fmoe_scheme *scheme;
    const fmoe_layer_config *cfg;
    const cf_inputs *in;
    const float *expect;
    int ok;
    char why[768];
} job;

static int one_layer(job *j, fmoe_context *ctx, int forwards)
{
    fmoe_layer *layer = NULL;
    fmoe_status st = cf_create(ctx, j->cfg, j->scheme, j->r->plugin->name, FMOE_DEVICE_ANY, -1, &layer);
    if (st != FMOE_STATUS_OK) {
        snprintf(j->why, sizeof j->why, "create: %s", fmoe_last_error());
        return 0;
    }
    cf_weights w = {
        .seed = j->r->o->seed, .cfg = j->cfg, .cs = j->cs, .correction_bias = j->in->bias, .dead_expert = -1};
    size_t n = (size_t)STRESS_M * j->cfg->hidden_size;
    float *first = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    int ok = first && got;
    if (!ok)
        snprintf(j->why, sizeof j->why, "out of memory");
    if (ok && cf_load(layer, &w, j->why, sizeof j->why) != FMOE_STATUS_OK)
        ok = 0;
    cf_tolerance tol = cf_tolerance_for(j->cs, j->cfg->act_dtype);
    for (int f = 0; ok && f < forwards; f++) {
        int guard = 1;
        char fwhy[512];
        st = cf_forward(layer, j->cfg, j->in, 0, f ? got : first, &guard, fwhy, sizeof fwhy);
        if (st != FMOE_STATUS_OK || !guard) {
            snprintf(j->why, sizeof j->why, "forward %d: %s", f, st != FMOE_STATUS_OK ? fwhy : "wrote past out");
            ok = 0;
        } else if (f == 0) {
            char why[512];
            if (!cf_compare(first, j->expect, STRESS_M, j->cfg->hidden_size, NULL, &tol, why, sizeof why)) {
                snprintf(j->why, sizeof j->why, "differs from the reference: %s", why);
                ok = 0;
            }
        } else if (memcmp(first, got, n * sizeof(float)) != 0) {
            snprintf(j->why, sizeof j->why, "forward %d gave different bytes than forward 0 on the same layer", f);
            ok = 0;
        }
    }
    free(first);
    free(got);
    fmoe_layer_destroy(layer);
    return ok;
}

static void *thread_main(void *arg)
{
    job *j = arg;
    j->ok = one_layer(j, j->r->ctx, FORWARDS);
    return NULL;
}

static void *explain_main(void *arg)
{
    job *j = arg;
    j->ok = 1;
    for (int i = 0; i < 20 && j->ok; i++) {
        fmoe_selection *sel = NULL;
        fmoe_status st = fmoe_context_explain(j->r->ctx, j->cfg, j->scheme, &sel);
        if (st != FMOE_STATUS_OK && st != FMOE_STATUS_UNSUPPORTED) {
            snprintf(j->why, sizeof j->why, "explain: %s", fmoe_last_error());
            j->ok = 0;
        }
        fmoe_selection_destroy(sel);
    }
    return NULL;
}

static void run_threads(cf_run *r, const char *id, job *proto, void *(*fn)(void *))
{
    if (!cf_begin(r, "%s/%s", proto->cs->key, id))
        return;
    job jobs[THREADS];
    pthread_t th[THREADS];
    int started[THREADS] = {0};
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = *proto;
        started[t] = pthread_create(&th[t], NULL, fn, &jobs[t]) == 0;
    }
    for (int t = 0; t < THREADS; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        if (!started[t] || !jobs[t].ok) {
            cf_end(r, CF_FAIL, "thread %d: %s", t, started[t] ? jobs[t].why : "could not start");
            return;
        }
    cf_end(r, CF_PASS, "%d threads", THREADS);
}

static void create_destroy(cf_run *r, job *proto)
{
    if (!cf_begin(r, "%s/create-destroy", proto->cs->key))
        return;
    job j = *proto;
    for (int i = 0; i < 20; i++)
        if (!one_layer(&j, r->ctx, 1)) {
            cf_end(r, CF_FAIL, "cycle %d: %s", i, j.why);
            return;
        }
    cf_end(r, CF_PASS, "20 cycles");
}

static void contexts(cf_run *r, job *proto)
{
    if (!cf_begin(r, "%s/contexts", proto->cs->key))
        return;
    const cli_globals *g = r->g;
    const char **files = calloc(g->n_plugin_files + 1, sizeof *files);
    if (!files) {
        cf_end(r, CF_FAIL, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < g->n_plugin_files; i++)
        files[i] = g->plugin_files[i];
    files[g->n_plugin_files] = r->plugin->manifest[0] ? r->plugin->manifest : r->plugin->path;
    for (int i = 0; i < 3; i++) {
        fmoe_context_options opts;
        fmoe_context_options_init(&opts);
        opts.config_path = g->config_path;
        opts.plugin_files = files;
        opts.n_plugin_files = g->n_plugin_files + 1;
        opts.log_spec = "error";
        opts.isolated = (uint32_t)g->isolated;
        fmoe_context *ctx = NULL;
        job j = *proto;
        if (fmoe_context_create(&opts, &ctx) != FMOE_STATUS_OK) {
            cf_end(r, CF_FAIL, "context %d: %s", i, fmoe_last_error());
            free(files);
            return;
        }
        int ok = one_layer(&j, ctx, 1);
        fmoe_context_destroy(ctx);
        if (!ok) {
            cf_end(r, CF_FAIL, "context %d: %s", i, j.why);
            free(files);
            return;
        }
    }
    free(files);
    cf_end(r, CF_PASS, "3 contexts");
}

void cf_mode_stress(cf_run *r)
{
    cf_progress_start(r, 4);
    for (size_t s = 0; s < cf_n_schemes; s++) {
        const cf_scheme *cs = &cf_schemes[s];
        if (!cs->store || !cf_plugin_claims_scheme(r->plugin, cs->key))
            continue;
        if (r->o->scheme_glob && fnmatch(r->o->scheme_glob, cs->key, 0) != 0)
            continue;
        fmoe_scheme scheme = {.struct_size = sizeof scheme};
        if (fmoe_scheme_parse(cs->key, &scheme) != FMOE_STATUS_OK)
            continue;
        fmoe_layer_config cfg;
        fmoe_layer_config_init(&cfg);
        cfg.num_experts = 8;
        cfg.top_k = 2;
        cfg.hidden_size = cs->h_align > 1 ? 2 * cs->h_align : 128;
        cfg.intermediate_size = cs->i_align > 1 ? cs->i_align : 64;
        cfg.act_dtype = cs->act_dtype;
        cfg.max_num_tokens = 64;
        /* Does the plugin take this layer at all? */
        fmoe_layer *probe = NULL;
        if (cf_create(r->ctx, &cfg, &scheme, r->plugin->name, FMOE_DEVICE_ANY, -1, &probe) != FMOE_STATUS_OK)
            continue;
        char why[512];
        int fed = cf_layer_fed(probe, why, sizeof why);
        fmoe_layer_destroy(probe);
        if (!fed) {
            if (cf_begin(r, "%s/device-memory", cs->key))
                cf_end(r, CF_UNSUPPORTED, "%s", why);
            return;
        }
        cf_inputs in;
        size_t n = (size_t)STRESS_M * cfg.hidden_size;
        float *expect = malloc(n * sizeof(float));
        fmoe_layer *ref = NULL;
        if (!expect || cf_inputs_make(&cfg, STRESS_M, r->o->seed, &in, why, sizeof why) != 0) {
            free(expect);
            return;
        }
        cf_weights w = {.seed = r->o->seed, .cfg = &cfg, .cs = cs, .correction_bias = in.bias, .dead_expert = -1};
        int guard = 1;
        fmoe_status st = cf_create(r->ctx, &cfg, &scheme, "reference", FMOE_DEVICE_ANY, -1, &ref);
        if (st != FMOE_STATUS_OK)
            snprintf(why, sizeof why, "%s", fmoe_last_error());
        if (st == FMOE_STATUS_OK)
            st = cf_load(ref, &w, why, sizeof why);
        if (st == FMOE_STATUS_OK)
            st = cf_forward(ref, &cfg, &in, 0, expect, &guard, why, sizeof why);
        if (st != FMOE_STATUS_OK) {
            if (cf_begin(r, "%s/oracle", cs->key))
                cf_end(r, CF_UNSUPPORTED, "the reference cannot run the stress layer: %s", why);
        } else {
            job proto = {.r = r, .cs = cs, .scheme = &scheme, .cfg = &cfg, .in = &in, .expect = expect};
            run_threads(r, "threads", &proto, thread_main);
            run_threads(r, "explain", &proto, explain_main);
            create_destroy(r, &proto);
            contexts(r, &proto);
        }
        fmoe_layer_destroy(ref);
        cf_inputs_free(&in);
        free(expect);
        return; /* one scheme is enough: the thread model does not depend on it */
    }
    if (cf_begin(r, "scheme"))
        cf_end(r, CF_UNSUPPORTED, "the plugin accepts no base layer of a scheme the suite can build");
}
